//! Roll a Deployment or StatefulSet back to an earlier revision.

use super::findings::{RevisionHealth, UndoOnConfig};
use super::*;
use crate::cluster::observed::{self, Revision};

/// The Services of the target's namespace, without ready endpoints, whose selector matches the
/// pod labels of revision `before` but not those of revision `now`: one line each.
async fn orphaned_services(scene: &Scene, now: &Value, before: &Value) -> Read<Vec<String>> {
    let mut out = Vec::new();
    for svc in scene
        .list("Service", scene.ns(), &ListQuery::default())
        .await?
    {
        let service = observed::Service::parse(&svc);
        let labels = |t| at(t, &["metadata", "labels"]);
        if !service.selects(labels(before)) || service.selects(labels(now)) {
            continue;
        }
        let name = obj::name(&svc);
        let ready = match scene.get("Endpoints", scene.ns(), name).await {
            Ok(e) => observed::Endpoints::parse(Some(&e)).ready,
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => 0,
        };
        if ready > 0 {
            continue;
        }
        let selector: Vec<String> = service
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push(format!(
            "Service {name} selects {}, which the returned-to revision's pods carry and the current one's do not; it has no ready endpoints",
            selector.join(",")
        ));
    }
    Ok(out)
}

pub(in crate::prove) async fn rollback(
    scene: &Scene,
    wanted: Option<i64>,
) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let stateful = obj::kind(&w) == "StatefulSet";
    let revisions = scene.revisions(&w).await?;
    let current_number = observed::Workload::parse(&w)
        .current_revision_number(&revisions)
        .unwrap_or(0);
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    let mut out = Vec::new();

    let target = match revision_named(&revisions, current_number, wanted, stateful) {
        Ok((target, holds)) => {
            out.push(holds);
            target
        }
        Err(fails) => {
            out.push(fails);
            return Ok(out);
        }
    };
    let case = Case {
        current: revisions.iter().find(|r| r.number == current_number),
        current_number,
        target,
        // When the revision returned to was replaced: the next revision's appearance.
        replaced_at: target.replaced_at(&revisions),
        stalled: progress_deadline_exceeded(&w),
        pods: &pods,
        events: &events,
        alert_started: scene.signal.starts_at,
        created: observed::created(&w),
    };
    let orphaned = match case.current {
        Some(cur) if !stateful => orphaned_services(scene, &cur.template, &target.template).await?,
        _ => vec![],
    };
    out.push(case.target_revision_healthy());
    out.push(case.failures_began_after_revision(&orphaned));
    if let Some(o) = case.change_in_pod_template(scene, &orphaned).await? {
        out.push(o);
    }
    out.push(case.no_rollout_by_others(&w));
    out.push(case.not_blocked_by_older_pods(scene, &w).await?);
    Ok(out)
}

/// A revision, as its evidence lines name it: `revision 3 (api:1.2)`.
fn describe(r: &Revision) -> String {
    format!("revision {} ({})", r.number, r.images())
}

/// `rollback.revision-named`: the revision to return to is named, kept, and not the current
/// one. The revision when it holds; the failed obligation (which ends the proof) otherwise.
fn revision_named(
    revisions: &[Revision],
    current_number: i64,
    wanted: Option<i64>,
    stateful: bool,
) -> Result<(&Revision, Obligation), Obligation> {
    let named = &ob::rollback::REVISION_NAMED;
    let current = revisions.iter().find(|r| r.number == current_number);
    let target = wanted.and_then(|n| revisions.iter().find(|r| r.number == n));
    let Some(target) = target.filter(|t| t.number != current_number) else {
        let known: Vec<String> = revisions.iter().map(describe).collect();
        return Err(named.fails(vec![match wanted {
                None => "TO_REVISION is not given: a rollback never goes to \"the previous revision\" blindly".into(),
                Some(n) if n == current_number => format!("revision {n} is the current revision"),
                Some(n) => format!("revision {n} does not exist"),
            },
            format!("revisions kept: {}", if known.is_empty() { "none".into() } else { known.join("; ") })],
        ));
    };
    let holds = named.holds(vec![format!(
        "{} is kept as {} {}; the current one is {}",
        describe(target),
        if stateful {
            "ControllerRevision"
        } else {
            "ReplicaSet"
        },
        target.name,
        current
            .map(describe)
            .unwrap_or_else(|| format!("revision {current_number}"))
    )]);
    Ok((target, holds))
}

/// What the rollback's obligations after the first are judged on: the revision returned to,
/// the current one, the workload's pods and events.
struct Case<'a> {
    current: Option<&'a Revision>,
    current_number: i64,
    target: &'a Revision,
    replaced_at: Option<DateTime<Utc>>,
    /// The Deployment controller's word that the rollout is stuck.
    stalled: Option<String>,
    pods: &'a [Pod],
    events: &'a [Event],
    /// When the alert (or request) started: failures it reports began then at the latest.
    alert_started: DateTime<Utc>,
    /// When the workload was created.
    created: Option<DateTime<Utc>>,
}

impl Case<'_> {
    fn of_current(&self, p: &Pod) -> bool {
        self.current.is_some_and(|c| c.owns(p))
    }

    /// A pod of the current revision that runs but never became ready fails too, once the
    /// rollout's own deadline has passed (the controller says Progressing=False) or it has
    /// been unready longer than any start may take: a readiness probe that never passes.
    fn never_ready(&self, p: &Pod) -> bool {
        self.of_current(p) && p.never_ready_in_rollout(self.stalled.is_some())
    }

    fn failing_now(&self) -> Vec<&Pod> {
        self.pods
            .iter()
            .filter(|p| p.broken().is_some() || self.never_ready(p))
            .collect()
    }

    /// The revision returned to's pods.
    fn its_pods(&self) -> Vec<&Pod> {
        self.pods.iter().filter(|p| self.target.owns(p)).collect()
    }

    /// `rollback.target-revision-healthy`: the revision returned to served healthy and is not
    /// failing itself — by its pods now, else by what is recorded of them, else by how long it
    /// served before it was replaced.
    fn target_revision_healthy(&self) -> Obligation {
        let target = self.target;
        let healthy = &ob::rollback::TARGET_REVISION_HEALTHY;
        let health = findings::revision_health(target, self.pods, self.events, self.replaced_at);
        let proven = health.proven();
        let line = match health {
            RevisionHealth::Fails(p, f) => {
                format!("{} fails too: pod {} {}", describe(target), p.name, f.line)
            }
            RevisionHealth::Ready(n) => format!("{} has {n} ready pod(s) now", describe(target)),
            RevisionHealth::FailedBefore(e) => format!(
                "{} has no pods left, and its pods failed: {}",
                describe(target),
                e.line()
            ),
            RevisionHealth::Served(served) => format!(
                "{} has no pods left; it served {} before the next revision appeared, and nothing records a failure of it{}",
                describe(target),
                served.map_or("for an unknown time".into(), |s| format!("for {}", ago(s))),
                if proven {
                    String::new()
                } else {
                    format!(
                        " (at least {} needed to count as proven)",
                        ago(Duration::seconds(SERVED_MIN_SECONDS))
                    )
                }
            ),
        };
        healthy.check(proven, vec![line])
    }

    /// `rollback.failures-began-after-revision`: the failures began after the current revision
    /// appeared, and no older revision's pod fails too. A rollout can also break what depends
    /// on the pods while they run: a Service whose selector the revision's pod labels no
    /// longer match (`orphaned`) has had no endpoints since the new pods replaced the old.
    fn failures_began_after_revision(&self, orphaned: &[String]) -> Obligation {
        let after = &ob::rollback::FAILURES_BEGAN_AFTER_REVISION;
        let failing_now = self.failing_now();
        match (failing_now.is_empty(), self.current) {
            (true, Some(cur)) if !orphaned.is_empty() => after.holds(orphaned
                    .iter()
                    .map(|s| {
                        format!(
                            "no pod fails, but {s}: it lost its endpoints when {} (at {}) replaced revision {}",
                            describe(cur),
                            cur.created
                                .map(hhmm)
                                .unwrap_or_else(|| "an unknown time".into()),
                            self.target.number
                        )
                    })
                    .collect(),
            ),
            (true, _) => after.fails(vec!["no pod of the workload fails now: nothing for a rollback to fix".into()],
            ),
            (false, Some(cur)) => {
                let first = findings::failures_began(
                    failing_now.iter().copied().filter(|p| self.of_current(p)),
                    self.events,
                    Some(self.alert_started),
                    self.created,
                );
                let older_failing: Vec<&&Pod> = failing_now
                    .iter()
                    .filter(|p| !self.of_current(p))
                    .collect();
                let ok = older_failing.is_empty()
                    && match (first, cur.created) {
                        (Some(b), Some(c)) => !findings::predates(b.at(), c),
                        _ => false,
                    };
                let mut ev = vec![format!(
                    "{} appeared at {}",
                    describe(cur),
                    cur.created
                        .map(hhmm)
                        .unwrap_or_else(|| "an unknown time".into())
                )];
                match first {
                    Some(findings::Began::Pod(p, t)) => ev.push(format!(
                        "the first failure, of pod {}, at {}",
                        p.name,
                        hhmm(t)
                    )),
                    Some(findings::Began::Alert(t)) => ev.push(format!(
                        "the alert started at {}, before any pod failing now began to fail",
                        hhmm(t)
                    )),
                    None => {}
                }
                for p in older_failing.iter().take(2) {
                    ev.push(format!(
                        "pod {} of an older revision fails too: {}",
                        p.name,
                        p.broken().map(|f| f.line).unwrap_or_default()
                    ));
                }
                after.check(ok, ev)
            }
            (false, None) => after.fails(vec![format!("the current revision {} is not kept", self.current_number)],
            ),
        }
    }

    /// `rollback.change-in-pod-template`: what changed is inside the pod template (a ConfigMap
    /// rewritten in place is not undone by a rollout undo). Not stated when the current
    /// revision is not kept (the previous obligation fails then).
    async fn change_in_pod_template(
        &self,
        scene: &Scene,
        orphaned: &[String],
    ) -> Read<Option<Obligation>> {
        let change = &ob::rollback::CHANGE_IN_POD_TEMPLATE;
        let (Some(cur), target) = (self.current, self.target) else {
            return Ok(None);
        };
        let its_pods = self.its_pods();
        let mut ev = Vec::new();
        let material_change = findings::runs_differently(&cur.template, &target.template);
        if material_change {
            ev.push(format!(
                "the pod specs differ: {} → {}",
                cur.images(),
                target.images()
            ));
        } else {
            ev.push(format!(
                "revisions {} and {} run the same pod spec (only metadata differs)",
                cur.number, target.number
            ));
        }
        let mut rewritten = Vec::new();
        for name in configmaps(&cur.template) {
            match scene.get("ConfigMap", scene.ns(), &name).await {
                Ok(cm) => {
                    let Some(w) = last_written(&cm) else {
                        continue;
                    };
                    match findings::undo_on_config(target, &name, w, self.replaced_at, &its_pods) {
                        UndoOnConfig::Proven(line) => ev.push(line),
                        UndoOnConfig::Kept(line) => rewritten.push(line),
                        UndoOnConfig::RanOn => {}
                    }
                }
                Err(e) if e.is_unreachable() => return Err(e),
                Err(e) => ev.push(format!("ConfigMap {name}: {}", e.message)),
            }
        }
        let secrets = secrets(&cur.template);
        if !secrets.is_empty() {
            ev.push(format!(
                "Secrets referenced: {} (kubemedic does not read Secrets: an in-place change to them is not ruled out)",
                secrets.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        for s in orphaned {
            ev.push(format!("the pod labels differ where it matters: {s}"));
        }
        let failing: Vec<&Pod> = self
            .failing_now()
            .into_iter()
            .filter(|p| self.of_current(p))
            .collect();
        let not_it = findings::not_the_rollout(cur, target, &failing, self.events);
        let ok =
            (material_change || !orphaned.is_empty()) && rewritten.is_empty() && not_it.is_none();
        ev.extend(rewritten);
        ev.extend(not_it);
        Ok(Some(change.check(ok, ev)))
    }

    /// `rollback.no-rollout-by-others`: nobody else's rollout or rollback is in progress — the
    /// rollout is not paused, and it is the current revision that fails, not one still
    /// starting or one the workload has moved on from.
    fn no_rollout_by_others(&self, w: &Value) -> Obligation {
        let others = &ob::rollback::NO_ROLLOUT_BY_OTHERS;
        let paused = Workload::parse(w).paused;
        let pods: Vec<&Pod> = self.pods.iter().collect();
        match findings::rollout_by_others(
            paused,
            self.current,
            self.current_number,
            &pods,
            self.stalled.is_some(),
        ) {
            Ok(line) => others.holds(vec![line]),
            Err(line) => others.fails(vec![line]),
        }
    }

    /// `rollback.not-blocked-by-older-pods`: the current revision's pods are not kept from
    /// starting by what an older revision's pods hold. A ReadWriteOnce volume still attached
    /// to an old pod on another node blocks every new pod whatever the revision changed: the
    /// rollout strategy is what fails, and a rollback only abandons the attempt (the next
    /// rollout stops the same way).
    async fn not_blocked_by_older_pods(&self, scene: &Scene, w: &Value) -> Read<Obligation> {
        let held = &ob::rollback::NOT_BLOCKED_BY_OLDER_PODS;
        let current_number = self.current_number;
        let mut blocked = Vec::new();
        let pods: Vec<&Pod> = self.pods.iter().collect();
        let found = match self.current {
            Some(current) => findings::held_by_older(current, &pods, self.events),
            None => vec![],
        };
        let strategy = observed::Workload::parse(w)
            .strategy
            .unwrap_or_else(|| "RollingUpdate".to_owned());
        for h in found {
            let claim = claim_of_volume(scene, h.pod, &h.volume).await?;
            blocked.push(format!(
                "pod {} of revision {current_number} cannot attach volume {}{}: it is still attached to pod {} of an older revision{}, which keeps running; with the {strategy} strategy the new pod waits for it forever — the strategy (Recreate, or maxUnavailable ≥ 1) is the fix, not a rollback",
                h.pod.name,
                h.volume,
                claim
                    .map(|c| format!(" (PersistentVolumeClaim {c})"))
                    .unwrap_or_default(),
                h.holder.name,
                h.holder
                    .node
                    .as_deref()
                    .map(|n| format!(" on node {n}"))
                    .unwrap_or_default(),
            ));
        }
        Ok(if blocked.is_empty() {
            held.holds(vec![
                "no pod of the current revision waits for a volume an older pod holds".into(),
            ])
        } else {
            held.fails(blocked)
        })
    }
}

/// The claim of `pod` bound to the PersistentVolume `volume`, if the pod mounts one.
async fn claim_of_volume(scene: &Scene, pod: &Pod, volume: &str) -> Read<Option<String>> {
    let claims = crate::cluster::observed::PodSpec::of_pod(&pod.raw).claims_of(Some(&pod.name));
    for claim in claims {
        match scene.get("PersistentVolumeClaim", scene.ns(), &claim).await {
            Ok(pvc) if str_at(&pvc, &["spec", "volumeName"]) == Some(volume) => {
                return Ok(Some(claim));
            }
            Ok(_) => {}
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn at(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap() + Duration::minutes(min)
    }

    /// Deployment `shop/api` at revision 2 (`api:2`, crash-looping since 10:05) with two pods
    /// of revision 1 (`api:1`) still serving; both revisions read ConfigMap `api-config` at
    /// their start, and it was last written at 10:00. The second pod of revision 1 started at
    /// `second_started`, and `extra` objects are there too. Judged at 10:15, for an alert that
    /// started then: obligation `id`.
    async fn rollback_over_a_written_configmap(
        second_started: &str,
        extra: Vec<Value>,
        id: &str,
    ) -> Obligation {
        rollback_alerted_at(at(15), second_started, extra, id).await
    }

    /// As [`rollback_over_a_written_configmap`], for an alert that started at `alert_started`.
    async fn rollback_alerted_at(
        alert_started: DateTime<Utc>,
        second_started: &str,
        extra: Vec<Value>,
        id: &str,
    ) -> Obligation {
        use std::sync::Arc;

        use crate::catalog::Catalog;
        use crate::clock::ManualClock;
        use crate::cluster::SnapshotCluster;
        use crate::domain::{ActionType, ProofPoint, Proposer, Target};
        use crate::live::Live;
        use crate::prove::{Claim, Prover};

        let t = |hm: &str| format!("2026-11-29T{hm}:00Z");
        let template = |image: &str, hash: &str| {
            json!({"metadata": {"labels": {"app": "api", "pod-template-hash": hash}},
                "spec": {"containers": [{"name": "api", "image": image,
                    "envFrom": [{"configMapRef": {"name": "api-config"}}]}]}})
        };
        let owner = |kind: &str, name: &str, uid: &str| json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}]);
        let rs = |hash: &str,
                  revision: &str,
                  image: &str,
                  created: &str,
                  ready: i64,
                  replicas: i64| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("api-{hash}"), "namespace": "shop", "uid": format!("rs-{hash}"),
                    "creationTimestamp": t(created),
                    "labels": {"app": "api", "pod-template-hash": hash},
                    "annotations": {"deployment.kubernetes.io/revision": revision},
                    "ownerReferences": owner("Deployment", "api", "dep-api")},
                "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {"app": "api", "pod-template-hash": hash}},
                    "template": template(image, hash)},
                "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready}})
        };
        let serving = |name: &str, started: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "shop", "creationTimestamp": started,
                    "labels": {"app": "api", "pod-template-hash": "6b7c"},
                    "ownerReferences": owner("ReplicaSet", "api-6b7c", "rs-6b7c")},
                "spec": {"nodeName": "worker-1", "containers": template("api:1", "6b7c")["spec"]["containers"]},
                "status": {"phase": "Running", "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}],
                    "containerStatuses": [{"name": "api", "image": "api:1", "ready": true, "restartCount": 0,
                        "state": {"running": {"startedAt": started}}}]}})
        };
        let objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "api-config", "namespace": "shop", "creationTimestamp": t("07:00"),
                    "managedFields": [{"manager": "kubectl", "operation": "Update", "time": t("10:00")}]},
                "data": {"MODE": "fast"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "api", "namespace": "shop", "uid": "dep-api", "generation": 2,
                    "creationTimestamp": t("08:00"),
                    "annotations": {"deployment.kubernetes.io/revision": "2"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                    "template": template("api:2", "8d9e")},
                "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1,
                    "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1}}),
            rs("6b7c", "1", "api:1", "08:00", 2, 2),
            rs("8d9e", "2", "api:2", "10:05", 0, 1),
            serving("api-6b7c-a", &t("08:01")),
            serving("api-6b7c-b", second_started),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "api-8d9e-a", "namespace": "shop", "creationTimestamp": t("10:05"),
                    "labels": {"app": "api", "pod-template-hash": "8d9e"},
                    "ownerReferences": owner("ReplicaSet", "api-8d9e", "rs-8d9e")},
                "spec": {"nodeName": "worker-1", "containers": template("api:2", "8d9e")["spec"]["containers"]},
                "status": {"phase": "Running", "startTime": t("10:05"),
                    "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": t("10:05")}],
                    "containerStatuses": [{"name": "api", "image": "api:2", "ready": false, "restartCount": 5,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 1,
                            "startedAt": t("10:13"), "finishedAt": t("10:14")}}}]}}),
        ]
        .into_iter()
        .chain(extra)
        .collect::<Vec<_>>();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let now = at(15);
        let prover = Prover::new(
            Arc::new(snap),
            None,
            Live::new(Catalog::builtin().unwrap_or_else(|e| panic!("{e}"))),
            Arc::new(ManualClock::new(now)),
        );
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let mut signal = crate::prove::scene::test_signal("KubePodCrashLooping", now);
        signal.starts_at = alert_started;
        let parameters = json!({"TO_REVISION": 1});
        let proof = prover
            .prove(
                &Claim {
                    action_type: &ActionType::RollbackDeployment,
                    workflow_id: "rollback-deployment",
                    parameters: parameters.as_object().unwrap_or_else(|| panic!("object")),
                    target: &target,
                    proposer: Proposer::Offline,
                    signal: &signal,
                    bound_to: None,
                },
                ProofPoint::Selection,
            )
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        proof
            .obligations
            .iter()
            .find(|o| o.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {:#?}", proof.obligations))
    }

    /// A pod that failed with exit 1 at 10:03, carrying the Deployment's labels (and the
    /// template hash of a ReplicaSet `api-<hash>` that makes it), made by controller `owner`
    /// (kind, name).
    fn failed_pod_of(name: &str, owner: (&str, &str)) -> Value {
        let mut labels = json!({"app": "api"});
        if let Some(hash) = owner
            .1
            .strip_prefix("api-")
            .filter(|_| owner.0 == "ReplicaSet")
        {
            labels["pod-template-hash"] = json!(hash);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop",
                "creationTimestamp": "2026-11-29T10:02:00Z",
                "labels": labels,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": owner.0, "name": owner.1,
                    "uid": "other", "controller": true}]},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "migrate", "image": "api:1"}]},
            "status": {"phase": "Failed", "startTime": "2026-11-29T10:02:00Z",
                "containerStatuses": [{"name": "migrate", "image": "api:1", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"reason": "Error", "exitCode": 1,
                        "startedAt": "2026-11-29T10:02:00Z", "finishedAt": "2026-11-29T10:03:00Z"}}}]}})
    }

    /// Issue 43: the pods a workload's selector matches are its own only when no other
    /// controller made them. A CronJob's failed run carrying the Deployment's labels is not
    /// a pod of an older revision that fails too; the same failure in a pod of the
    /// Deployment's older ReplicaSet still is.
    #[tokio::test]
    async fn a_failed_pod_another_controller_made_with_the_same_labels_is_not_the_workloads() {
        let id = ob::rollback::FAILURES_BEGAN_AFTER_REVISION.id;
        let cronjob_run = failed_pod_of(
            "api-migrate-28934520-zq8wc",
            ("Job", "api-migrate-28934520"),
        );
        let o =
            rollback_over_a_written_configmap("2026-11-29T10:02:00Z", vec![cronjob_run], id).await;
        assert!(o.holds(), "{o:?}");
        let older_revisions = failed_pod_of("api-6b7c-zq8wc", ("ReplicaSet", "api-6b7c"));
        let o =
            rollback_over_a_written_configmap("2026-11-29T10:02:00Z", vec![older_revisions], id)
                .await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e.contains("pod api-6b7c-zq8wc of an older revision fails too")),
            "{o:?}"
        );
    }

    /// Issue 38: a ConfigMap written shortly before the bad revision does not refuse the
    /// rollback when a pod of the revision returned to started after the write and is ready:
    /// it shows the old revision works with the content as it is. Without such a pod, the
    /// revision (reading the ConfigMap only at start) never ran on it, and the rollback is
    /// refused: it would keep the new content.
    #[tokio::test]
    async fn pods_of_the_old_revision_started_after_a_write_prove_it_works_with_it() {
        let id = ob::rollback::CHANGE_IN_POD_TEMPLATE.id;
        let o = rollback_over_a_written_configmap("2026-11-29T10:02:00Z", vec![], id).await;
        assert!(o.holds(), "{o:?}");
        assert!(
            o.evidence.iter().any(|e| e.contains(
                "ConfigMap api-config was written at 10:00:00; pod(s) api-6b7c-b of revision 1 started after that and are ready"
            )),
            "{o:?}"
        );
        let o = rollback_over_a_written_configmap("2026-11-29T09:30:00Z", vec![], id).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence.iter().any(|e| e.contains(
                "ConfigMap api-config was written at 10:00:00, after revision 1 appeared, whose pods read it only when they start"
            )),
            "{o:?}"
        );
    }

    /// Issue 43: when the failures began is one finding for the rollout rule and this proof
    /// (`findings::failures_began`): an alert that started before the revision appeared says
    /// the failures predate it, though the pods that failed then are gone; one that started
    /// after it does not.
    #[tokio::test]
    async fn an_alert_that_started_before_the_revision_appeared_refuses_its_rollback() {
        let id = ob::rollback::FAILURES_BEGAN_AFTER_REVISION.id;
        let o = rollback_alerted_at(at(-10), "2026-11-29T10:02:00Z", vec![], id).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e
                    == "the alert started at 09:50:00, before any pod failing now began to fail"),
            "{o:?}"
        );
        let o = rollback_alerted_at(at(8), "2026-11-29T10:02:00Z", vec![], id).await;
        assert!(o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e == "the first failure, of pod api-8d9e-a, at 10:05:00"),
            "{o:?}"
        );
    }
}
