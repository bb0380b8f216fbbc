//! Rules about a workload's pods and containers: OOM kills, configuration and image errors,
//! pods stuck terminating or creating, crash loops, failing readiness, one pod failing where
//! its siblings run, CPU throttling.

use super::*;

/// Out of memory: raise the limit by a bounded factor.
pub(super) fn oomkilled(f: &Facts) -> Option<Diagnosis> {
    let pod = f.first_failing()?;
    // The container killed for memory lately, as the memory proof counts kills
    // (`PodFacts::memory_killed`): the one whose termination the pod shows first, else another
    // (a sidecar listed before it may have ended for another reason).
    let t = pod.termination.as_ref();
    let container = t
        .map(|t| &t.container)
        .filter(|c| pod.memory_killed.contains(c))
        .or_else(|| pod.memory_killed.first())?;
    let exit_code = pod
        .observed
        .containers
        .iter()
        .find(|c| &c.name == container)
        .and_then(|c| c.terminated.as_ref())
        .map_or(observed::SIGKILL_EXIT, |(_, code, _)| *code);
    let mut d = Diagnosis::new(
        "OOMKilled",
        format!(
            "Container {container} of {} is killed for exceeding its memory limit (OOMKilled, exit code {exit_code})",
            f.target_text(),
        ),
    );
    d.factors = f.failure_descriptions();
    d.target = f.target.clone();
    d.severity = Severity::High;
    d.killed_for_memory = true;
    let limit = f.limit(container, "memory");
    match limit
        .as_deref()
        .and_then(|l| quantity::raised_memory(l, RAISE_FACTOR))
    {
        Some(new_limit) => {
            let old = limit.as_deref().unwrap_or("");
            d.factors.push(format!(
                "memory limit {old} → proposed {new_limit} (x1.5, bounded)"
            ));
            if let Some(problem) = f.raise_problem(
                LimitResource::Memory,
                container,
                limit.as_deref().unwrap_or("0"),
                &new_limit,
            ) {
                d.human = Some(format!(
                    "container {container} of {}: {problem}",
                    f.target_text()
                ));
                d.factors.push(problem);
                d.confidence = 0.8;
            } else {
                d.confidence = 0.85;
                d.proposal = proposal(
                    ActionType::IncreaseMemoryLimits,
                    ActionParams::limit(LimitResource::Memory, container, &new_limit),
                    format!("raise the memory limit of container {container} to {new_limit}"),
                );
            }
        }
        None => {
            d.human = Some(format!(
                "container {container} of {} has no memory limit to raise, so the node or its neighbours are short of memory: look at node {}",
                f.target_text(),
                f.first_failing()
                    .and_then(|p| p.node.as_deref())
                    .unwrap_or("(unknown)")
            ));
            d.confidence = 0.7;
        }
    }
    Some(d)
}

/// Missing configuration: a human must create it (Secrets are never read).
pub(super) fn create_container_config_error(f: &Facts) -> Option<Diagnosis> {
    let w = f.first_failing()?.waiting.as_ref()?;
    if w.reason != "CreateContainerConfigError" {
        return None;
    }
    let detail = f
        .failing_warnings()
        .map(|w| w.message.clone())
        .find(|m| m.contains("not found") || m.contains("couldn't find"))
        .unwrap_or_else(|| w.message.clone());
    let mut d = Diagnosis::new(
        "CreateContainerConfigError",
        format!("Pods of {} cannot start: {detail}", f.target_text()),
    );
    d.factors = f.failure_descriptions();
    d.factors.push(
        "kubemedic may not read Secrets, so it cannot tell whether the configuration was deleted, renamed, never created or lacks a key".into(),
    );
    // The failure is plain; its cause is not: what happened to the configuration is beyond
    // what kubemedic may see. Inconclusive, and a human decides.
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.6;
    d.target = f.target.clone();
    d.human = Some(format!(
        "pod {} of {} cannot start: missing configuration ({detail}); kubemedic neither reads nor creates Secrets or configuration — a human must provide it",
        f.first_failing().map_or("", |p| p.name.as_str()),
        f.target_text()
    ));
    Some(d)
}

/// The image cannot be pulled, and no rollout to undo.
pub(super) fn imagepullbackoff(f: &Facts) -> Option<Diagnosis> {
    let w = f.first_failing()?.waiting.as_ref()?;
    if !matches!(
        w.reason.as_str(),
        "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName"
    ) {
        return None;
    }
    let detail = f
        .failing_warnings()
        .map(|w| w.message.clone())
        .find(|m| m.to_ascii_lowercase().contains("pull"))
        .unwrap_or_else(|| w.message.clone());
    let mut d = Diagnosis::new(
        "ImagePullBackOff",
        format!(
            "The image of {} cannot be pulled: {}",
            f.target_text(),
            detail.chars().take(200).collect::<String>()
        ),
    );
    d.factors = f.failure_descriptions();
    d.confidence = 0.8;
    d.target = f.target.clone();
    // The registry refused the credentials: the pull Secrets the pods name are the suspects
    // (kubemedic never reads a Secret, so it names them and says what to check).
    let refused = refused_credentials(&detail);
    let secrets: Vec<&str> = f
        .failing_pods()
        .flat_map(|p| p.pull_secrets.iter().map(String::as_str))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let credentials = match (refused, secrets.is_empty()) {
        (true, false) => {
            let named = secrets.join(", ");
            d.factors.push(format!(
                "the registry refuses the pull credentials; the pods pull with Secret(s) {named}"
            ));
            format!(
                "the registry refuses the pull credentials of imagePullSecrets {named} (rotated or expired?): a human must renew them",
            )
        }
        (true, true) => "the registry refuses the pull: the pods name no imagePullSecrets (their service account's, or none, are used): a human must give them credentials".into(),
        (false, false) => format!(
            "a human must fix the image reference, the registry or the pull credentials (imagePullSecrets {})",
            secrets.join(", ")
        ),
        (false, true) => {
            "a human must fix the image reference, the registry or the pull credentials".into()
        }
    };
    d.human = Some(format!(
        "the image of {} ({}) cannot be pulled and no recent rollout can be undone: {credentials}",
        f.target_text(),
        f.failing_pods()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Some(d)
}

/// Whether a pull failure says the registry refused who asked (not a missing image).
fn refused_credentials(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "401",
        "403",
        "unauthorized",
        "authentication required",
        "no basic auth credentials",
        "access denied",
        "denied:",
        "forbidden",
        "authorization failed",
    ]
    .iter()
    .any(|k| m.contains(k))
}

/// Stuck terminating: on its node, whose kubelet is not there to stop it
/// ([`observed::Node::kubelet_away`], what the graph and the drain's proof ask by
/// `findings::cannot_finish_terminating`), or on the finalizers it still lists; or, with
/// neither, on a kubelet that has not confirmed it stopped.
pub(super) fn terminating_stuck(f: &Facts) -> Option<Diagnosis> {
    let p = f.pods.iter().find(|p| {
        p.deleting_for
            .is_some_and(|a| a > Duration::seconds(observed::TERMINATING_ALLOWANCE))
    })?;
    let finalizers = p.finalizers.join(", ");
    let node = p.observed.node.as_deref();
    let away = node
        .and_then(|n| f.nodes.iter().find(|x| x.name == n))
        .filter(|n| n.observed.kubelet_away());
    let mut d = Diagnosis::new(
        "TerminatingStuck",
        format!(
            "Pod {} has been terminating for over {} minutes (finalizers: {})",
            p.name,
            observed::TERMINATING_ALLOWANCE / 60,
            if finalizers.is_empty() {
                "none"
            } else {
                &finalizers
            }
        ),
    );
    d.confidence = 0.85;
    d.target = f.target.clone();
    d.human = Some(match away {
        Some(n) => format!(
            "pod {} cannot finish terminating: its node {} is {} and its kubelet is not there to stop it; a human confirms the node is gone before force-deleting the pod",
            p.name,
            n.name,
            n.observed.state()
        ),
        None if !finalizers.is_empty() => format!(
            "pod {} waits on the finalizer(s) {finalizers}: check the controller that owns them; removing them by force can leak external resources",
            p.name
        ),
        None => format!(
            "pod {} lists no finalizer, yet the kubelet{} has not confirmed it stopped: check the kubelet and the container runtime there",
            p.name,
            node.map(|n| format!(" of node {n}")).unwrap_or_default()
        ),
    });
    Some(d)
}

/// One pod stuck creating while its siblings run: replace it.
pub(super) fn containercreating_stuck(f: &Facts) -> Option<Diagnosis> {
    // Stuck as the model reads it (`Pod::stuck_creating`: containers or init containers being
    // created, or placed with none reported), not by the status text a listing shows, and
    // worth replacing as the deletion's proof asks (`Pod::unready`: past the kubelet's retries).
    let p = f
        .pods
        .iter()
        .find(|p| p.observed.stuck_creating.is_some() && p.observed.unready(f.now).past_startup)?;
    let mount_problem = p
        .warnings
        .first()
        .map(|w| format!("{}: {}", w.reason, w.message))
        .unwrap_or_default();
    let others_ok = f.pods.iter().any(|o| o.name != p.name && o.healthy);
    let mut d = Diagnosis::new(
        "ContainerCreatingStuck",
        format!(
            "Pod {} is stuck in ContainerCreating ({mount_problem})",
            p.name
        ),
    );
    d.target = f.target.clone();
    // A bare pod has no controller to recreate it.
    if others_ok && f.kind() != "Pod" {
        d.confidence = 0.75;
        // Asked what the deletion's proof asks by `vet` (`replace_pod`).
        d.proposal = proposal(ActionType::DeletePod, ActionParams::delete_pod(&p.name), "");
    } else {
        d.confidence = 0.6;
        d.human = Some(format!(
            "pod {} of {} is stuck in ContainerCreating with no healthy sibling to fall back on ({mount_problem}); the storage or node needs a human",
            p.name,
            f.target_text()
        ));
    }
    Some(d)
}

/// A crash loop with no recent change: the evidence does not say why. Do not guess.
pub(super) fn crashloopbackoff(f: &Facts) -> Option<Diagnosis> {
    let p = f.first_failing()?;
    let t = p.termination.as_ref()?;
    let mut d = Diagnosis::new(
        "CrashLoopBackOff",
        format!(
            "Container {} of {} exits ({}, exit code {}) and restarts; no recent change explains it — look at the previous log of pod {}{}",
            t.container,
            f.target_text(),
            t.reason,
            t.exit_code,
            p.name,
            f.first_error_line
                .as_deref()
                .map(|l| format!(" (last error: {l})"))
                .unwrap_or_default()
        ),
    );
    d.factors = f.failure_descriptions();
    if let Some(line) = &f.first_error_line {
        d.factors.push(format!("last error in the logs: {line}"));
    }
    if let Some(why) = &f.rollout_rejected {
        d.factors.push(format!("not the last rollout: {why}"));
    }
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.4;
    d.target = f.target.clone();
    d.analysis = "The spec has not changed recently and the container is not killed for memory: a restart or a rollback would not address an application failure whose cause the evidence does not determine.".into();
    Some(d)
}

/// Probes failing on running containers.
pub(super) fn readiness_probe_failing(f: &Facts) -> Option<Diagnosis> {
    let unhealthy = |reason: &str| reason == "Unhealthy";
    if !f
        .failing_warnings()
        .any(|w| unhealthy(&w.reason) && w.message.to_ascii_lowercase().contains("probe"))
    {
        return None;
    }
    let mut d = Diagnosis::new(
        "ReadinessProbeFailing",
        format!("Pods of {} run but fail their probes", f.target_text()),
    );
    d.factors = f
        .failing_warnings()
        .filter(|w| unhealthy(&w.reason))
        .map(|w| w.message.clone())
        .take(3)
        .collect();
    d.outcome = InvestigationOutcome::Inconclusive;
    d.confidence = 0.5;
    d.target = f.target.clone();
    Some(d)
}

/// CPU throttling at the limit, when the alert is about it.
pub(super) fn cpu_throttling(f: &Facts) -> Option<Diagnosis> {
    let names: Vec<&str> = f.spec.containers.iter().map(|c| c.name.as_str()).collect();
    let Some(container) =
        findings::throttling_alert_about(&f.alert.name, f.alert.container.as_deref(), &names)
    else {
        if !findings::is_throttling_alert(&f.alert.name) {
            return None;
        }
        // Throttled, but which of its containers the alert does not say.
        let mut d = Diagnosis::new(
            "CPUThrottling",
            format!(
                "A container of {} is CPU-throttled, and the alert names none of its {} containers ({})",
                f.target_text(),
                names.len(),
                listed(&names)
            ),
        );
        d.target = f.target.clone();
        d.human = Some(format!(
            "alert {} names no container, and the pods of {} run {}: which one to give more CPU is not known",
            f.alert.name,
            f.target_text(),
            listed(&names)
        ));
        d.confidence = 0.5;
        return Some(d);
    };
    let container = container.to_owned();
    let limit = f.limit(&container, "cpu");
    let mut d = Diagnosis::new(
        "CPUThrottling",
        format!(
            "Container {container} of {} is CPU-throttled at its limit {}",
            f.target_text(),
            limit.as_deref().unwrap_or("(none)")
        ),
    );
    d.target = f.target.clone();
    match limit
        .as_deref()
        .and_then(|l| quantity::raised_cpu(l, RAISE_FACTOR))
    {
        Some(new_limit)
            if let Some(problem) = f.raise_problem(
                LimitResource::Cpu,
                &container,
                limit.as_deref().unwrap_or("0"),
                &new_limit,
            ) =>
        {
            d.confidence = 0.7;
            d.severity = Severity::Medium;
            d.human = Some(format!(
                "container {container} of {}: {problem}",
                f.target_text()
            ));
            d.factors.push(problem);
        }
        Some(new_limit) => {
            d.confidence = 0.72;
            d.severity = Severity::Medium;
            d.proposal = proposal(
                ActionType::IncreaseCPULimits,
                ActionParams::limit(LimitResource::Cpu, &container, &new_limit),
                format!("raise the CPU limit of {container} to {new_limit}"),
            );
        }
        None => {
            d.outcome = InvestigationOutcome::NotActionable;
            d.confidence = 0.7;
        }
    }
    Some(d)
}

/// The only pod of a workload ran ready, and every start since fails on its own (an error exit,
/// not a kill) on state its emptyDir keeps across container restarts (a lock, pid or socket
/// file, a half-written cache): the error the last start ended on names a path in it
/// ([`observed::KeptState`]), or the kubelet killed it once for a failed probe and the starts
/// since fail. A new pod starts with an empty one; the template is not the cause, and neither is
/// configuration that changed before (its failing starts read that already).
pub(super) fn state_kept_across_restarts(f: &Facts) -> Option<Diagnosis> {
    if !matches!(f.kind(), "Deployment" | "StatefulSet") || f.rollout.is_some() {
        return None;
    }
    let w = f.workload.as_ref()?;
    // The only replica: a pod on its way out or a record its node ended
    // (`observed::Pod::outlived`) is not one.
    let replicas: Vec<_> = f
        .pods
        .iter()
        .filter(|p| !p.observed.deleting && !p.observed.outlived())
        .collect();
    let [p] = replicas.as_slice() else {
        return None;
    };
    if w.replicas != Some(1) || !p.failing || p.observed.phase != "Running" {
        return None;
    }
    let kept = p.kept.as_ref()?;
    let summary = match (&kept.named, kept.killed) {
        (Some(k), _) => format!(
            "The only pod {} of {} ran ready, and every start since ends on state kept in its emptyDir volume {} across container restarts: the error names {}",
            p.name,
            f.target_text(),
            k.volume,
            k.path
        ),
        (None, killed) => format!(
            "The only pod {} of {} fails every start since the kubelet killed it{} for a failed probe: what the killed process left in its emptyDir survives container restarts",
            p.name,
            f.target_text(),
            killed
                .map(|(t, _)| format!(" {} ago", observed::ago(f.now - t)))
                .unwrap_or_default(),
        ),
    };
    let mut d = Diagnosis::new("StateKeptAcrossRestarts", summary);
    d.factors.push(p.description.clone());
    d.factors.extend(kept.evidence.iter().skip(1).cloned());
    if kept.named.is_none()
        && let Some(line) = &f.first_error_line
    {
        d.factors.push(format!("last error in the logs: {line}"));
    }
    d.confidence = 0.7;
    d.severity = Severity::High;
    d.target = f.target.clone();
    // Asked what the deletion's proof asks by `vet` (`replace_pod`).
    d.proposal = proposal(ActionType::DeletePod, ActionParams::delete_pod(&p.name), "");
    d.analysis = "Container restarts keep the pod's emptyDir volumes: state an earlier process left there (a lock, pid or socket file) keeps every new start from running. A new pod gets empty volumes; it is the only replica, so deleting it takes nothing away that serves.".into();
    Some(d)
}

/// One pod fails while its siblings of the same revision run: node-local or ephemeral state.
/// Replacing that pod is proportionate; nothing in the spec is wrong.
pub(super) fn lone_pod_failure(f: &Facts) -> Option<Diagnosis> {
    let l = f.lone_failure.as_ref()?;
    if f.kind() == "Pod" {
        return None;
    }
    let mut d = Diagnosis::new(
        "LonePodFailure",
        format!(
            "Pod {} of {} fails while its {} sibling(s) of the same revision run healthy",
            l.pod,
            f.target_text(),
            l.siblings
        ),
    );
    d.factors.push(l.description.clone());
    if let Some(node) = &l.node {
        let elsewhere = !l.sibling_nodes.iter().any(|n| n == node);
        d.factors.push(format!(
            "it runs on node {node}; its healthy siblings on {}{}",
            listed(&l.sibling_nodes),
            if elsewhere { " (other nodes)" } else { "" }
        ));
    }
    if let Some(line) = &f.first_error_line {
        d.factors.push(format!("last error in the logs: {line}"));
    }
    d.confidence = if l.siblings >= 2 { 0.75 } else { 0.7 };
    d.severity = Severity::Medium;
    d.target = f.target.clone();
    // The same revision, another image: a replacement pulls the re-pushed tag again.
    if let Some(moved) = &l.moved_image {
        d.mode = "MovedImageTag";
        d.factors.push(moved.clone());
        d.human = Some(format!(
            "{moved}; a replacement pod pulls the same image again. A human must pin the image by digest (or fix the tag) — deleting or restarting pods spreads the new build"
        ));
        d.analysis = "The failing pod and its healthy siblings come from one template but run different image digests: the tag moved after the siblings pulled it. The change is in the registry, not the cluster; every new pod would pull it.".into();
        return Some(d);
    }
    // Asked what the deletion's proof asks by `vet` (`replace_pod`).
    d.proposal = proposal(ActionType::DeletePod, ActionParams::delete_pod(&l.pod), "");
    d.analysis = "The same spec runs healthy in its siblings, so the spec is not the cause; the failure is local to this pod (its node or its ephemeral state), and a replacement pod starts clean.".into();
    Some(d)
}
