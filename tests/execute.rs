//! The Executing and Verifying stages on the real API server tier, driven directly: dry run
//! changes nothing; a step whose write reached the cluster before a crash is reconciled from
//! its stamp and not repeated; a second request on the same root owner is ResourceBusy; the
//! guardrails block a target whose history says the remediations do not help. The test plays
//! the kubelet where pods must run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;

use chrono::Utc;
use common::kube::Kube;
use kubemedic::catalog::Catalog;
use kubemedic::clock::SystemClock;
use kubemedic::cluster::ClusterWriter;
use kubemedic::domain::{
    HistoryRecord, Phase, ProofVerdict, RemediationRequest, Stage, StageOutcome, Target,
};
use kubemedic::execute::stamp::StampingWriter;
use kubemedic::execute::{ExecuteSettings, ExecutionStage};
use kubemedic::store::Store;
use kubemedic::verify::{VerificationStage, VerifySettings};
use serde_json::{Value, json};

/// A running two-replica Deployment `web` in the test namespace, on a node the test plays.
async fn web(k: &Kube) -> String {
    web_as(k, false).await
}

/// `web` with one of its pods running but wedged (not ready): a rolling restart is the right
/// action and its obligations hold.
async fn wedged_web(k: &Kube) -> String {
    web_as(k, true).await
}

async fn web_as(k: &Kube, wedge: bool) -> String {
    let node = format!("{}-node", k.ns);
    k.node(&node, 1, json!([])).await;
    k.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "shop/web:1"}]}}}
    }))
    .await;
    let pods = k.pods("app=web", 2).await;
    common::scenarios::run_unscheduled(k, "app=web", &node).await;
    if !wedge {
        return node;
    }
    let wedged = pods[0]["metadata"]["name"].as_str().unwrap().to_owned();
    let mut status = common::kube::status::running("web", "shop/web:1");
    status["conditions"][0]["status"] = json!("False");
    status["conditions"][1]["status"] = json!("False");
    status["containerStatuses"][0]["ready"] = json!(false);
    k.patch_status("v1", "Pod", &wedged, status).await;
    node
}

/// A request in `Executing` whose selection is `workflow` on Deployment `web`, proven against
/// the cluster as the selection stage proves it (the builtin catalog's obligations; a custom
/// action type is unverified).
async fn request(k: &Kube, workflow: &str, action_type: &str) -> RemediationRequest {
    let mut req = unproven(k, workflow, action_type);
    let proof = common::undo::prove_selection(&k.cluster().await, &req).await;
    assert_ne!(proof.verdict, ProofVerdict::Refuted, "{proof:#?}");
    req.state.proof = Some(proof);
    req
}

fn unproven(k: &Kube, workflow: &str, action_type: &str) -> RemediationRequest {
    let body = common::alert_body(
        "firing",
        "KubePodCrashLooping",
        &[("namespace", k.ns.as_str()), ("deployment", "web")],
        &format!("fp-{}", uuid::Uuid::new_v4().simple()),
        "2026-01-01T00:00:00Z",
    );
    let signals = kubemedic::ingest::alertmanager::parse(body.as_bytes()).unwrap();
    let mut req = RemediationRequest::for_signal(&signals[0], Phase::Executing, Utc::now());
    let target = Target::new("Deployment", "web", Some(k.ns.clone()));
    let rca = json!({"root_cause_analysis": {"summary": "s", "severity": "high"},
        "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true});
    req.state.analysis = Some(
        serde_json::from_value(json!({"rca": rca, "root_owner": target, "investigator": "test"}))
            .unwrap(),
    );
    req.state.selection = Some(
        serde_json::from_value(json!({
            "selected": {"workflow_id": workflow, "action_type": action_type,
                "version": "1.0.0", "confidence": 0.9, "parameters": {}},
            "merged": rca,
            "outcome": {"kind": "workflow_selected", "next_phase": "Gating", "reason": "r"},
        }))
        .unwrap(),
    );
    req
}

use common::undo::env;

fn stage(
    k_cluster: Arc<kubemedic::cluster::KubeCluster>,
    store: Arc<dyn Store>,
    dry_run: bool,
) -> ExecutionStage {
    ExecutionStage::new(
        k_cluster.clone(),
        k_cluster,
        store,
        kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        Arc::new(SystemClock),
        ExecuteSettings {
            dry_run,
            ..Default::default()
        },
    )
}

/// Play the kubelet for `app=web` until the task is aborted.
fn kubelet(k: &Kube, node: &str) -> tokio::task::JoinHandle<()> {
    let k = k.clone_handle();
    let node = node.to_owned();
    tokio::spawn(async move {
        loop {
            common::scenarios::run_unscheduled(&k, "app=web", &node).await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
}

fn moved(o: &StageOutcome) -> (Phase, String) {
    (o.next, o.reason.clone().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_records_what_would_run_and_changes_nothing() {
    let Some(k) = Kube::new("dry").await else {
        return;
    };
    wedged_web(&k).await;
    let before = k.get("apps/v1", "Deployment", "web").await;
    let e = env().await;
    let req = request(&k, "restart-rolling", "RestartDeployment").await;
    let out = stage(k.cluster().await, e.store.clone(), true)
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Verifying);
    let execution = out.state.execution.clone().unwrap();
    assert_eq!(serde_json::to_value(execution.outcome).unwrap(), "dry_run");
    assert!(execution.dry_run);
    assert_eq!(execution.steps[0].action.name(), "rollout_restart");
    assert_eq!(
        serde_json::to_value(execution.steps[0].status).unwrap(),
        "dry_run"
    );
    // The API server accepted the change and kept nothing of it.
    let after = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        after["metadata"]["generation"],
        before["metadata"]["generation"]
    );
    assert!(after["metadata"]["annotations"]["kubemedic.io/remediation"].is_null());
    assert!(after["spec"]["template"]["metadata"]["annotations"].is_null());

    // Verification completes it without assessing or remembering anything.
    let mut req = req;
    req.phase = Phase::Verifying;
    req.state = out.state;
    let verified = VerificationStage::new(
        k.cluster().await,
        e.store.clone(),
        Arc::new(SystemClock),
        VerifySettings::default(),
    )
    .run(&req)
    .await
    .unwrap();
    let (phase, reason) = moved(&verified);
    assert_eq!(phase, Phase::Completed);
    assert!(reason.starts_with("dry run:"), "{reason}");
    let target = Target::new("Deployment", "web", Some(k.ns.clone()));
    let history = e
        .store
        .history(
            &target.fingerprint(),
            Utc::now() - chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert!(
        history.is_empty(),
        "a dry run is no remediation: {history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_reached_the_cluster_before_a_crash_is_not_repeated() {
    let Some(k) = Kube::new("crash").await else {
        return;
    };
    let node = wedged_web(&k).await;
    let e = env().await;
    let req = request(&k, "restart-rolling", "RestartDeployment").await;
    let cluster = k.cluster().await;

    // The first attempt: intents committed, the stamped restart written, then the process
    // died before it could settle the intent.
    e.store
        .begin_intent(
            req.id,
            0,
            "prepare",
            &json!({"pre_spec_hash": "sha256:before"}),
        )
        .await
        .unwrap();
    e.store
        .begin_intent(req.id, 1, "rollout_restart", &json!({}))
        .await
        .unwrap();
    let stamped = StampingWriter::new(
        cluster.clone() as Arc<dyn ClusterWriter>,
        format!("{}/1", req.id),
        "crashed attempt".into(),
    );
    kubemedic::actions::writes::rollout_restart(
        cluster.as_ref(),
        &stamped,
        "Deployment",
        &k.ns,
        "web",
        Utc::now() - chrono::Duration::minutes(1),
        false,
    )
    .await
    .unwrap();
    let first = k.get("apps/v1", "Deployment", "web").await;
    let restarted_at =
        first["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .clone();
    assert!(restarted_at.is_string());

    // The restarted worker runs the stage again.
    let pods = kubelet(&k, &node);
    let out = stage(cluster, e.store.clone(), false)
        .run(&req)
        .await
        .unwrap();
    pods.abort();
    assert_eq!(out.next, Phase::Verifying, "{:?}", out.reason);
    let execution = out.state.execution.unwrap();
    assert_eq!(
        serde_json::to_value(execution.steps[0].status).unwrap(),
        "already_applied",
        "{:#?}",
        execution.steps
    );
    assert_eq!(
        execution.pre_spec_hash.as_deref(),
        Some("sha256:before"),
        "the spec hash captured before the first write is kept"
    );
    // One restart, not two: the template still carries the first attempt's stamp time.
    let after = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        after["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        restarted_at
    );
    assert_eq!(
        after["metadata"]["generation"],
        first["metadata"]["generation"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_on_the_same_root_owner_is_resource_busy() {
    let Some(k) = Kube::new("busy").await else {
        return;
    };
    wedged_web(&k).await;
    let e = env().await;
    let first = request(&k, "restart-rolling", "RestartDeployment").await;
    let second = request(&k, "restart-rolling", "RestartDeployment").await;
    let target = Target::new("Deployment", "web", Some(k.ns.clone()));
    e.store
        .acquire_execution_lock(&target.fingerprint(), Some(&k.ns), first.id)
        .await
        .unwrap();
    let before = k.get("apps/v1", "Deployment", "web").await;
    let out = stage(k.cluster().await, e.store.clone(), false)
        .run(&second)
        .await
        .unwrap();
    let (phase, reason) = moved(&out);
    assert_eq!(phase, Phase::Blocked);
    assert!(reason.starts_with("ResourceBusy:"), "{reason}");
    assert!(reason.contains(&first.id.to_string()), "{reason}");
    let after = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        after["metadata"]["generation"],
        before["metadata"]["generation"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_ineffective_remediations_block_the_fourth_and_an_opt_out_blocks_all() {
    let Some(k) = Kube::new("chain").await else {
        return;
    };
    wedged_web(&k).await;
    let e = env().await;
    let target = Target::new("Deployment", "web", Some(k.ns.clone()));
    for minutes in [90, 60, 30] {
        let record: HistoryRecord = serde_json::from_value(json!({
            "remediationUid": uuid::Uuid::new_v4().to_string(),
            "target": target,
            "completedAt": Utc::now() - chrono::Duration::minutes(minutes),
            "signalName": "KubePodCrashLooping",
            "workflowType": "RestartDeployment",
            "workflowId": "restart-rolling",
            "outcome": "completed",
            "effectivenessScore": 0.2,
            "signalResolved": false,
            "assessmentReason": "Full",
        }))
        .unwrap();
        e.store.record_history(&record).await.unwrap();
    }
    let out = stage(k.cluster().await, e.store.clone(), false)
        .run(&request(&k, "restart-rolling", "RestartDeployment").await)
        .await
        .unwrap();
    let (phase, reason) = moved(&out);
    assert_eq!(phase, Phase::Blocked);
    assert!(reason.starts_with("IneffectiveChain:"), "{reason}");
    assert!(out.events.iter().any(|ev| ev.kind == "guardrail"));

    // The opt-out annotation wins over everything, on a fresh store.
    let e = env().await;
    let d = k
        .patch(
            "apps/v1",
            "Deployment",
            "web",
            json!({"metadata": {"annotations": {"kubemedic.io/remediate": "false"}}}),
        )
        .await;
    // A Deployment's annotations are part of what its generation counts: wait for the
    // controller to observe it, or the proof sees a rollout in progress.
    let generation = d["metadata"]["generation"].as_i64();
    k.wait(
        "the controller observes the annotated Deployment",
        60,
        || async {
            let d: Value = k.get("apps/v1", "Deployment", "web").await;
            (d["status"]["observedGeneration"].as_i64() == generation).then_some(())
        },
    )
    .await;
    let out = stage(k.cluster().await, e.store.clone(), false)
        .run(&request(&k, "restart-rolling", "RestartDeployment").await)
        .await
        .unwrap();
    let (phase, reason) = moved(&out);
    assert_eq!(phase, Phase::Blocked);
    assert!(reason.starts_with("UnmanagedResource:"), "{reason}");
    let _: Value = k.get("apps/v1", "Deployment", "web").await;
}

fn args(pairs: &[(&str, Value)]) -> kubemedic::actions::Args {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// One builtin step as the executor runs it (no dry run), on `c`.
async fn act(
    c: &kubemedic::cluster::KubeCluster,
    action: &str,
    a: &[(&str, Value)],
    target: &Target,
) -> Result<kubemedic::cluster::WriteOutcome, kubemedic::cluster::ClusterError> {
    kubemedic::actions::run(c, c, action, &args(a), target, Utc::now(), false).await
}

/// The builtin actions the other tiers do not cover, each against a staged object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_actions_change_exactly_what_they_name() {
    let Some(k) = Kube::new("acts").await else {
        return;
    };
    let node = web(&k).await;
    let c = k.cluster().await;
    let web_target = Target::new("Deployment", "web", Some(k.ns.clone()));

    // Limits land on the named container, and only a container that exists.
    k.patch(
        "apps/v1",
        "Deployment",
        "web",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "shop/web:1"},
            {"name": "sidecar", "image": "shop/proxy:1"}]}}}}),
    )
    .await;
    act(
        &c,
        "set_resources",
        &[
            ("container", json!("sidecar")),
            ("memoryLimit", json!("256Mi")),
        ],
        &web_target,
    )
    .await
    .unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let by_name = |n: &str| containers.iter().find(|c| c["name"] == n).unwrap().clone();
    assert_eq!(by_name("sidecar")["resources"]["limits"]["memory"], "256Mi");
    assert!(by_name("web")["resources"]["limits"].is_null(), "{d:#}");
    let refused = act(
        &c,
        "set_resources",
        &[("container", json!("nope")), ("memoryLimit", json!("1Gi"))],
        &web_target,
    )
    .await
    .unwrap_err();
    assert!(refused.message.contains("no container `nope`"), "{refused}");
    // An init container killed for memory is raised where it is declared, as its proof's
    // `memory.container-in-template` finds it; its app containers are left as they are.
    k.patch(
        "apps/v1",
        "Deployment",
        "web",
        json!({"spec": {"template": {"spec": {"initContainers": [
            {"name": "migrate", "image": "shop/migrate:1"}]}}}}),
    )
    .await;
    act(
        &c,
        "set_resources",
        &[
            ("container", json!("migrate")),
            ("memoryLimit", json!("512Mi")),
        ],
        &web_target,
    )
    .await
    .unwrap();
    let d = k.get("apps/v1", "Deployment", "web").await;
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(
        spec["initContainers"][0]["resources"]["limits"]["memory"], "512Mi",
        "{d:#}"
    );
    assert!(
        spec["containers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "migrate"),
        "no app container named migrate was added: {d:#}"
    );

    // An HPA's maximum.
    k.apply(
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3}}),
    )
    .await;
    act(
        &c,
        "patch_hpa_max",
        &[("hpa", json!("web")), ("maxReplicas", json!("6"))],
        &web_target,
    )
    .await
    .unwrap();
    let hpa = k
        .get("autoscaling/v1", "HorizontalPodAutoscaler", "web")
        .await;
    assert_eq!(hpa["spec"]["maxReplicas"], 6);

    // Delete one pod; its siblings stay. (The template patches above started a rollout whose
    // surge pod nobody runs, so count the bound pods, not all of them.)
    let bound = || async {
        let list = k
            .api("v1", "Pod")
            .list(&kube::api::ListParams::default().labels("app=web"))
            .await
            .unwrap();
        list.items
            .into_iter()
            .map(|p| serde_json::to_value(p).unwrap())
            .filter(|p| {
                p["spec"]["nodeName"].is_string() && !p["metadata"]["deletionTimestamp"].is_string()
            })
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
            .collect::<Vec<String>>()
    };
    let before = bound().await;
    assert!(!before.is_empty(), "the running pods of web");
    let victim = before[0].clone();
    act(&c, "delete_pod", &[("pod", json!(victim))], &web_target)
        .await
        .unwrap();
    let gone = k.get("v1", "Pod", &victim).await;
    assert!(
        gone["metadata"]["deletionTimestamp"].is_string(),
        "the bound pod is being deleted: {gone:#}"
    );
    let after = bound().await;
    assert_eq!(
        after.len(),
        before.len() - 1,
        "only {victim} goes: {after:?}"
    );

    // A PVC whose StorageClass does not allow expansion is refused, with the reason.
    k.apply(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": format!("{}-fixed", k.ns)}, "provisioner": "example.com/none",
        "allowVolumeExpansion": false}),
    )
    .await;
    k.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"storageClassName": format!("{}-fixed", k.ns), "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    let refused = act(
        &c,
        "expand_pvc",
        &[("pvc", json!("data")), ("size", json!("2Gi"))],
        &web_target,
    )
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("does not allow volume expansion"),
        "{refused}"
    );
    let pvc = k.get("v1", "PersistentVolumeClaim", "data").await;
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "1Gi");

    // A StatefulSet mid-update goes back to the revision its older pods run.
    k.apply(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "shop/db:1"}]}}}}))
        .await;
    k.pods("app=db", 1).await;
    common::scenarios::run_unscheduled(&k, "app=db", &node).await;
    k.patch(
        "apps/v1",
        "StatefulSet",
        "db",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "shop/db:2"}]}}}}),
    )
    .await;
    k.wait("the update revision", 30, || async {
        let s = k.get("apps/v1", "StatefulSet", "db").await;
        let (u, cur) = (
            &s["status"]["updateRevision"],
            &s["status"]["currentRevision"],
        );
        (u.is_string() && cur.is_string() && u != cur).then_some(())
    })
    .await;
    let sts_target = Target::new("StatefulSet", "db", Some(k.ns.clone()));
    let done = act(
        &c,
        "rollback_statefulset",
        &[("toRevision", json!(1))],
        &sts_target,
    )
    .await
    .unwrap();
    let s = k.get("apps/v1", "StatefulSet", "db").await;
    assert_eq!(
        s["spec"]["template"]["spec"]["containers"][0]["image"], "shop/db:1",
        "{done:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_concurrency_cap_a_request_waits_with_one_audit_event() {
    let Some(k) = Kube::new("cap").await else {
        return;
    };
    wedged_web(&k).await;
    let e = env().await;
    let other = Target::new("Deployment", "elsewhere", Some(k.ns.clone()));
    e.store
        .acquire_execution_lock(&other.fingerprint(), Some(&k.ns), uuid::Uuid::new_v4())
        .await
        .unwrap();
    let stage = ExecutionStage::new(
        k.cluster().await,
        k.cluster().await,
        e.store.clone(),
        kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        Arc::new(SystemClock),
        ExecuteSettings {
            max_concurrent_per_namespace: 1,
            ..Default::default()
        },
    );
    let mut req = request(&k, "restart-rolling", "RestartDeployment").await;
    let first = stage.run(&req).await.unwrap();
    assert_eq!(first.next, Phase::Executing);
    assert!(first.not_before.is_some());
    assert_eq!(first.events.len(), 1);
    assert_eq!(first.events[0].kind, "execution_waiting");
    let waiting = first.state.waiting.clone().unwrap();
    assert_eq!(waiting.dependency, "execution slot");
    // The retry still waits, silently, counting from the first wait.
    req.state = first.state;
    let again = stage.run(&req).await.unwrap();
    assert_eq!(again.next, Phase::Executing);
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.state.waiting.unwrap().since, waiting.since);
    let untouched = k.get("apps/v1", "Deployment", "web").await;
    assert!(untouched["metadata"]["annotations"]["kubemedic.io/remediation"].is_null());
}

/// The job engine on the real API server: one Job named after the request and step, from the
/// workflow's image, under its service account, the parameters (the verified target's
/// `TARGET_RESOURCE_*` among them) as env, awaited; its log, with the credential it printed
/// redacted, in the step. The test plays the kubelet: the Job's pod runs and succeeds. Run
/// again (a crash before the transition was committed), the step finds its Job and creates
/// no second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_workflow_runs_one_job_and_keeps_its_sanitised_log() {
    let Some(k) = Kube::new("job").await else {
        return;
    };
    wedged_web(&k).await;
    let logs: common::kube::LogStore = Default::default();
    let port = common::kube::fake_kubelet(logs.clone()).await;
    let node = format!("{}-jobs", k.ns);
    k.node(&node, port, json!([])).await;
    k.apply(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kubemedic-cleanup"}}))
        .await;

    let mut sources: Vec<(std::path::PathBuf, String)> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/workflows"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let text = std::fs::read_to_string(&p).unwrap();
                (p, text)
            })
            .collect();
    sources.push((
        "cleanup-cache.yaml".into(),
        r#"
actionType:
  name: CleanupCache
  what: Remove stale cache files from a workload's volume with a maintenance Job.
  whenToUse: The cache volume fills with stale entries.
  whenNotToUse: The volume holds data that is not a cache.
workflows:
  - id: cleanup-cache
    version: 1.2.0
    description: Run the cache cleaner against the target.
    labels:
      targetKinds: [Deployment]
    parameters:
      type: object
      properties:
        TARGET_RESOURCE_KIND: {type: string}
        TARGET_RESOURCE_NAME: {type: string}
        TARGET_RESOURCE_NAMESPACE: {type: string}
        MAX_AGE_DAYS: {type: string}
      required: [TARGET_RESOURCE_KIND, TARGET_RESOURCE_NAME, TARGET_RESOURCE_NAMESPACE, MAX_AGE_DAYS]
    engine:
      type: job
      image: registry.example/cache-cleaner:1.2
      command: [/bin/clean]
      serviceAccount: kubemedic-cleanup
      timeoutSeconds: 60
"#
        .to_owned(),
    ));
    let catalog = kubemedic::live::Live::new(Catalog::from_sources(&sources).unwrap());

    // The kubelet: the Job's pod runs on the node whose logs the fake kubelet serves.
    let kubelet = {
        let k = k.clone_handle();
        let node = node.clone();
        let logs = logs.clone();
        tokio::spawn(async move {
            loop {
                let api = k.api("v1", "Pod");
                let list = api
                    .list(
                        &kube::api::ListParams::default()
                            .labels("app.kubernetes.io/managed-by=kubemedic"),
                    )
                    .await
                    .unwrap();
                for p in list.items {
                    let p = serde_json::to_value(p).unwrap();
                    let name = p["metadata"]["name"].as_str().unwrap().to_owned();
                    if p["spec"]["nodeName"].is_string() {
                        continue;
                    }
                    logs.lock().unwrap().insert(
                        (k.ns.clone(), name.clone(), "remediation".into(), false),
                        "scanning /cache\nconnecting with password=hunter2-cache\nremoved 12 stale entries\n".into(),
                    );
                    k.bind(&name, &node).await;
                    k.patch_status(
                        "v1",
                        "Pod",
                        &name,
                        common::kube::status::succeeded("remediation"),
                    )
                    .await;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };

    let e = env().await;
    let c = k.cluster().await;
    let stage = ExecutionStage::new(
        c.clone(),
        c,
        e.store.clone(),
        catalog,
        Arc::new(SystemClock),
        ExecuteSettings::default(),
    );
    let mut req = request(&k, "cleanup-cache", "CleanupCache").await;
    let selected = req
        .state
        .selection
        .as_mut()
        .unwrap()
        .selected
        .as_mut()
        .unwrap();
    selected.version = "1.2.0".into();
    selected.parameters = serde_json::from_value(json!({"TARGET_RESOURCE_KIND": "Deployment",
        "TARGET_RESOURCE_NAME": "web", "TARGET_RESOURCE_NAMESPACE": k.ns, "MAX_AGE_DAYS": "7"}))
    .unwrap();
    let out = stage.run(&req).await.unwrap();
    let execution = out.state.execution.clone().unwrap();
    assert_eq!(moved(&out).0, Phase::Verifying, "{execution:#?}");
    let step = &execution.steps[0];
    assert_eq!(step.action, kubemedic::domain::StepDone::Job);
    assert_eq!(step.detail["result"], "Succeeded", "{:#}", step.detail);
    let log = step.detail["logs"].as_str().unwrap();
    assert!(log.contains("removed 12 stale entries"), "{log}");
    assert!(
        !log.contains("hunter2"),
        "the credential reached the audit trail: {log}"
    );

    let jobs = k
        .api("batch/v1", "Job")
        .list(&kube::api::ListParams::default().labels(&format!("kubemedic.io/request={}", req.id)))
        .await
        .unwrap();
    assert_eq!(jobs.items.len(), 1);
    let job = serde_json::to_value(&jobs.items[0]).unwrap();
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "kubemedic-cleanup");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example/cache-cleaner:1.2"
    );
    assert_eq!(pod["containers"][0]["command"], json!(["/bin/clean"]));
    let env_of = |n: &str| {
        pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .map(|e| e["value"].clone())
    };
    assert_eq!(env_of("MAX_AGE_DAYS"), Some(json!("7")));
    assert_eq!(env_of("TARGET_RESOURCE_NAME"), Some(json!("web")));
    assert_eq!(env_of("TARGET_RESOURCE_NAMESPACE"), Some(json!(k.ns)));

    // The same request again, as after a crash before its transition was committed.
    let again = stage.run(&req).await.unwrap();
    kubelet.abort();
    assert_eq!(moved(&again).0, Phase::Verifying, "{:?}", again.reason);
    assert_eq!(
        again.state.execution.unwrap().steps[0].status,
        kubemedic::domain::StepStatus::AlreadyApplied
    );
    let jobs = k
        .api("batch/v1", "Job")
        .list(&kube::api::ListParams::default().labels(&format!("kubemedic.io/request={}", req.id)))
        .await
        .unwrap();
    assert_eq!(jobs.items.len(), 1, "a second Job was created");
}

/// As `kubectl drain`: a pod its disruption budget keeps now is asked again, and goes once the
/// first pod's replacement runs ready on another node (the test's kubelet runs it there; the
/// real disruption controller frees the budget). The drain then succeeds with both evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_asks_again_once_an_evicted_pods_replacement_is_ready() {
    let Some(k) = Kube::new("drain-retry").await else {
        return;
    };
    let node = web(&k).await;
    let other = format!("{}-other", k.ns);
    k.node(&other, 1, json!([])).await;
    k.apply(
        json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    k.wait("the budget allows one disruption", 30, || async {
        let pdb = k.get("policy/v1beta1", "PodDisruptionBudget", "web").await;
        (pdb["status"]["disruptionsAllowed"] == 1).then_some(())
    })
    .await;
    // The kubelet of the other node: runs what the ReplicaSet makes again.
    let kubelet = {
        let k = k.clone_handle();
        let other = other.clone();
        tokio::spawn(async move {
            loop {
                common::scenarios::run_unscheduled(&k, "app=web", &other).await;
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
        })
    };
    let c = k.cluster().await;
    let drained = act(
        &c,
        "drain",
        &[("timeoutSeconds", json!(60))],
        &Target::new("Node", &node, None),
    )
    .await;
    kubelet.abort();
    let drained = drained.unwrap();
    assert_eq!(
        drained.detail["evicted"].as_array().map(Vec::len),
        Some(2),
        "{drained:?}"
    );
}

/// Cordon and drain as the executor runs them: the node is cordoned, its pods are evicted
/// through the eviction API, and a PodDisruptionBudget that allows one disruption keeps the
/// second pod (the error names the budget) instead of taking the service down: asked again
/// until the step's timeout, while the first pod's replacement has no node to run on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_cordons_and_stops_where_the_disruption_budget_says() {
    let Some(k) = Kube::new("drain").await else {
        return;
    };
    let node = web(&k).await;
    k.apply(
        json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    k.wait("the budget allows one disruption", 30, || async {
        let pdb = k.get("policy/v1beta1", "PodDisruptionBudget", "web").await;
        (pdb["status"]["disruptionsAllowed"] == 1).then_some(())
    })
    .await;
    let c = k.cluster().await;
    let target = Target::new("Node", &node, None);

    act(&c, "cordon", &[], &target).await.unwrap();
    let refused = act(&c, "drain", &[("timeoutSeconds", json!(6))], &target)
        .await
        .unwrap_err();
    assert!(refused.message.contains("disruption budget"), "{refused}");
    assert!(
        refused.message.contains("still refused after 6s"),
        "{refused}"
    );
    let n = k.get("v1", "Node", &node).await;
    assert_eq!(n["spec"]["unschedulable"], true);
    let pods = k
        .api("v1", "Pod")
        .list(&kube::api::ListParams::default().labels("app=web"))
        .await
        .unwrap();
    let pods: Vec<Value> = pods
        .items
        .into_iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .filter(|p| p["spec"]["nodeName"] == node.as_str())
        .collect();
    let evicted = pods
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        .count();
    assert_eq!(
        evicted, 1,
        "one pod evicted, the budget kept the other: {pods:#?}"
    );
    assert_eq!(pods.len(), 2);
}
