//! Undoing a remediation that made its target worse, on the real API server tier
//! (docs/adr/0035-undo-what-made-it-worse.md): the Executing stage records the workload's pods
//! and spec before its first write; after the window the Verifying stage finds the target
//! worse and asks the policy's rule `undo`; the Executing stage proves the restore (nobody
//! changed the target since) and writes the recorded spec back exactly once; a person takes the
//! request over. The deployment controller makes the pods; the test plays the kubelet, and
//! lets the pods of the scale-up crash. The last test goes through the daemon, from the alert.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use common::undo;

use common::kube::{Kube, status};
use kubemedic::domain::{Phase, ProofPoint, ProofVerdict, RemediationRequest, Stage, StageOutcome};
use serde_json::json;

/// `web` declared with 3 replicas (its applied configuration) and scaled to 1 by hand: one pod,
/// running and ready. Scaling back to 3 is proven.
async fn scaled_down_web(k: &Kube) -> String {
    let node = format!("{}-node", k.ns);
    k.node(&node, 1, json!([])).await;
    let spec = json!({"containers": [{"name": "web", "image": "shop/web:1"}]});
    web_scaled_to_one(k, spec).await;
    k.pods("app=web", 1).await;
    common::scenarios::run_unscheduled(k, "app=web", &node).await;
    node
}

/// Deployment `web` with pod spec `spec`, declared with 3 replicas and scaled to 1 by hand.
async fn web_scaled_to_one(k: &Kube, spec: serde_json::Value) {
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": spec});
    let declared = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": k.ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    });
    k.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": declared.to_string()}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .await;
}

/// The gap the real node showed (tests/node_undo.rs's first version): pods that bind a host
/// port fit one to a node. Scaling such a workload up is refused while the nodes its pods may
/// run on already hold the port, and proven once one more node is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_needing_host_ports_no_node_has_free_is_refused() {
    let Some(k) = Kube::new("undoport").await else {
        return;
    };
    let (first, second) = (format!("{}-a", k.ns), format!("{}-b", k.ns));
    k.node(&first, 1, json!([])).await;
    pool(&k, &first).await;
    let spec = json!({"nodeSelector": {"pool": k.ns},
        "containers": [{"name": "web", "image": "shop/web:1",
            "ports": [{"containerPort": 8080, "hostPort": 8080}]}]});
    web_scaled_to_one(&k, spec).await;
    k.pods("app=web", 1).await;
    common::scenarios::run_unscheduled(&k, "app=web", &first).await;
    let c = k.cluster().await;
    let mut req = undo::scale_claim(&k.ns, "staging");
    req.state
        .selection
        .as_mut()
        .unwrap()
        .selected
        .as_mut()
        .unwrap()
        .parameters = serde_json::from_value(json!({"REPLICAS": 2})).unwrap();
    let proof = undo::prove_selection(&c, &req).await;
    let schedulable = proof
        .obligations
        .iter()
        .find(|o| o.id == "scale.schedulable")
        .unwrap();
    assert!(!schedulable.holds(), "{proof:#?}");
    assert!(
        schedulable
            .evidence
            .join(" ")
            .contains("8080/TCP: 0 schedulable node(s)"),
        "{schedulable:#?}"
    );
    // One more node of the pool: one new pod fits.
    k.node(&second, 1, json!([])).await;
    pool(&k, &second).await;
    let proof = undo::prove_selection(&c, &req).await;
    assert_eq!(proof.verdict, ProofVerdict::Proven, "{proof:#?}");
}

/// Label `node` into this test's pool (`pool=<namespace>`), which its pods select.
async fn pool(k: &Kube, node: &str) {
    k.patch(
        "v1",
        "Node",
        node,
        json!({"metadata": {"labels": {"pool": k.ns}}}),
    )
    .await;
}

/// Scale `web` to 3 and let the two new pods crash: the target is worse than before (more
/// failing pods, a failure its one pod did not show).
async fn scale_up_that_crashes(
    k: &Kube,
    node: &str,
    e: &undo::Env,
    req: &RemediationRequest,
) -> StageOutcome {
    let out = undo::executor(k.cluster().await, e.store.clone())
        .run(req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Verifying, "{:?}", out.reason);
    let execution = out.state.execution.as_ref().unwrap();
    let before = execution
        .before
        .as_ref()
        .expect("the pods before the first write");
    assert_eq!((before.pods, before.ready, before.failing.len()), (1, 1, 0));
    assert_eq!(
        k.get("apps/v1", "Deployment", "web").await["spec"]["replicas"],
        3
    );
    let pods = k.pods("app=web", 3).await;
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        if p["spec"]["nodeName"].is_string() {
            continue;
        }
        k.bind(name, node).await;
        k.patch_status(
            "v1",
            "Pod",
            name,
            status::crash_loop("web", "shop/web:1", 4, 1, "Error"),
        )
        .await;
    }
    out
}

/// `web` scaled down, a proven request to scale it back in `environment`, run, its new pods
/// crashing, and verified: the store, the request as verification left it, and what
/// verification decided.
async fn verified_worse(
    k: &Kube,
    environment: &str,
) -> (undo::Env, RemediationRequest, StageOutcome) {
    let node = scaled_down_web(k).await;
    let e = undo::env().await;
    let req = undo::scale_request(&k.cluster().await, &k.ns, environment).await;
    let out = scale_up_that_crashes(k, &node, &e, &req).await;
    let req = undo::moved(req, &out);
    let out = undo::verifier(k.cluster().await, e.store.clone())
        .run(&req)
        .await
        .unwrap();
    (e, req, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_that_made_things_worse_is_undone_once_and_handed_to_a_person() {
    let Some(k) = Kube::new("undo").await else {
        return;
    };
    // Verification: worse, and the policy (staging) says undo.
    let (e, req, out) = verified_worse(&k, "staging").await;
    assert_eq!(out.next, Phase::Executing, "{:?}", out.reason);
    let reason = out.reason.clone().unwrap();
    assert!(reason.contains("scale-replicas made"), "{reason}");
    assert!(reason.contains("Deployment/web worse"), "{reason}");
    assert!(reason.contains("undoing"), "{reason}");
    let undo = out.state.undo.clone().unwrap();
    assert!(undo.decided, "{undo:?}");
    assert!(
        undo.worse.iter().any(|w| w.contains("CrashLoopBackOff")),
        "the new failure is named: {undo:?}"
    );
    assert!(!out.state.assessment.as_ref().unwrap().effective);
    assert!(out.events.iter().any(|ev| ev.kind == "undo_decided"));
    let req = undo::moved(req, &out);

    // The executor restores the recorded spec, once.
    let out = undo::executor(k.cluster().await, e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::ManualReviewRequired, "{:?}", out.reason);
    let reason = out.reason.clone().unwrap();
    assert!(reason.contains("undone:"), "{reason}");
    assert!(reason.contains("a person must look"), "{reason}");
    let restore = out.state.undo.as_ref().unwrap().restore.clone().unwrap();
    assert!(restore.restored, "{restore:?}");
    let proof = restore.proof.clone().unwrap();
    assert_eq!(proof.verdict, ProofVerdict::Proven, "{proof:#?}");
    assert_eq!(proof.point, ProofPoint::BeforeUndo);
    for id in [
        "undo.worse-than-before",
        "undo.restored-by-spec",
        "undo.state-recorded",
        "undo.unchanged-since",
        "dry-run.accepted",
    ] {
        assert!(
            proof.obligations.iter().any(|o| o.id == id && o.holds()),
            "{id}: {proof:#?}"
        );
    }
    let kinds: Vec<&str> = out.events.iter().map(|ev| ev.kind.as_str()).collect();
    assert_eq!(kinds, ["proof", "undo"]);
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        d["spec"]["replicas"], 1,
        "the spec before the scale-up is back"
    );
    assert_eq!(
        d["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{}/undo", req.id)
    );
    let generation = d["metadata"]["generation"].clone();

    // A worker that crashed before the request moved on runs the stage again: the restore
    // is not repeated.
    let again = undo::executor(k.cluster().await, e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(again.next, Phase::ManualReviewRequired);
    let restore = again.state.undo.unwrap().restore.unwrap();
    assert!(
        restore.restored && restore.message.contains("not repeated"),
        "{restore:?}"
    );
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(d["metadata"]["generation"], generation, "written once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_production_a_new_failure_without_lost_ready_pods_goes_to_a_person_as_it_is() {
    let Some(k) = Kube::new("undo-prod").await else {
        return;
    };
    let (_e, _req, out) = verified_worse(&k, "production").await;
    assert_eq!(out.next, Phase::ManualReviewRequired, "{:?}", out.reason);
    let reason = out.reason.clone().unwrap();
    assert!(
        reason.contains("not undone: policy") && reason.contains("production"),
        "{reason}"
    );
    let undo = out.state.undo.unwrap();
    assert!(!undo.decided && undo.restore.is_none());
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(d["spec"]["replicas"], 3, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_somebody_changed_since_is_not_restored() {
    let Some(k) = Kube::new("undo-changed").await else {
        return;
    };
    let (e, req, out) = verified_worse(&k, "staging").await;
    assert_eq!(out.next, Phase::Executing, "{:?}", out.reason);
    let req = undo::moved(req, &out);

    // Somebody rolls out a new image before the executor gets to the undo.
    k.patch(
        "apps/v1",
        "Deployment",
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "shop/web:2"}]}}}}),
    )
    .await;
    let out = undo::executor(k.cluster().await, e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::ManualReviewRequired);
    let reason = out.reason.clone().unwrap();
    assert!(reason.contains("not undone"), "{reason}");
    let restore = out.state.undo.unwrap().restore.unwrap();
    assert!(!restore.restored);
    let proof = restore.proof.unwrap();
    assert!(
        proof
            .obligations
            .iter()
            .any(|o| o.id == "undo.unchanged-since" && !o.holds()),
        "{proof:#?}"
    );
    let d = k.get("apps/v1", "Deployment", "web").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/web:2"
    );
    assert_eq!(d["spec"]["replicas"], 3, "nothing was restored");
}

/// Somebody scales the target by hand during the verification window (no autoscaler sets its
/// count): that is their change, not the remediation's effect. Verification calls it drift,
/// as the undo's `undo.unchanged-since` would, and nothing is undone or learned from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_somebody_set_by_hand_in_the_window_is_drift_not_an_effect() {
    let Some(k) = Kube::new("undo-scaled").await else {
        return;
    };
    let node = scaled_down_web(&k).await;
    let e = undo::env().await;
    let req = undo::scale_request(&k.cluster().await, &k.ns, "staging").await;
    let out = scale_up_that_crashes(&k, &node, &e, &req).await;
    let req = undo::moved(req, &out);
    k.patch(
        "apps/v1",
        "Deployment",
        "web",
        json!({"spec": {"replicas": 4}}),
    )
    .await;
    let out = undo::verifier(k.cluster().await, e.store.clone())
        .run(&req)
        .await
        .unwrap();
    let assessment = out.state.assessment.clone().unwrap();
    assert_eq!(
        assessment.reason,
        kubemedic::domain::AssessmentReason::SpecDrift,
        "{assessment:?}"
    );
    assert!(!assessment.effective);
    assert!(
        out.state.undo.as_ref().is_none_or(|u| !u.decided),
        "nothing is undone over somebody's change: {:?}",
        out.state.undo
    );
    assert_eq!(
        k.get("apps/v1", "Deployment", "web").await["spec"]["replicas"],
        4
    );
}

/// Through the daemon `serve` assembles, on the real API server, from the alert: a memory
/// raise in staging whose new pod no node can take (the test's kubelet reports it
/// unschedulable) stops at its rollout's wait; the change is on the cluster, so it is verified
/// all the same, found worse than before (a pod more failing, a failure none showed), and
/// undone once: the limit is back, stamped by the undo, the request with a person, every step
/// in its audit trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_raise_no_node_can_take_is_undone_through_the_daemon() {
    let Some(k) = Kube::new("undo-e2e").await else {
        return;
    };
    let staged = common::scenarios::staged_in("oomkilled", &[&k]).await;
    let before = k.get("apps/v1", "Deployment", "api").await;
    let limit = |d: &serde_json::Value| {
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"].clone()
    };
    let kubeconfig = k.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(2);
        a.execute.cooldown_seconds = Some(0);
    })
    .await;
    // The kubelet: a new pod of the raised template fits on no node.
    let kubelet = {
        let k = k.clone_handle();
        tokio::spawn(async move {
            loop {
                unschedulable(&k, "app=api").await;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    let answer: serde_json::Value = d
        .send_alertmanager(&staged[0].alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 120, |r| {
            r["phase"]
                .as_str()
                .and_then(Phase::parse)
                .is_some_and(Phase::is_terminal)
        })
        .await;
    kubelet.abort();
    assert_eq!(done["phase"], "ManualReviewRequired", "{done:#}");
    let reason = done["reason"].as_str().unwrap();
    assert!(reason.contains("undone:"), "{reason}");
    let execution = &done["state"]["execution"];
    assert_eq!(
        execution["steps"][0]["action"], "set_resources",
        "{execution:#}"
    );
    let undo = &done["state"]["undo"];
    assert_eq!(undo["decided"], true, "{undo:#}");
    assert_eq!(undo["restore"]["restored"], true, "{undo:#}");
    assert!(
        undo["worse"].to_string().contains("unschedulable"),
        "the new failure is named: {undo:#}"
    );
    let kinds: Vec<&str> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["execution", "assessment", "undo_decided", "undo"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let phases: Vec<String> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| e["message"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        phases
            .iter()
            .any(|m| m.starts_with("Verifying -> Executing")),
        "{phases:?}"
    );
    let after = k.get("apps/v1", "Deployment", "api").await;
    assert_eq!(
        limit(&after),
        limit(&before),
        "the limit before the raise is back"
    );
    assert_eq!(
        after["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{id}/undo")
    );
    // The request page shows what was worse, the decision and the restore with its proof.
    let page = reqwest::Client::new()
        .get(d.url(&format!("/requests/{id}")))
        .bearer_auth(common::API_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    let section = html
        .split("<section id=\"undo\">")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .unwrap_or_else(|| panic!("no undo section on the request page: {html}"));
    for shown in [
        "Made worse",
        "id=\"undo-worse\"",
        "unschedulable",
        "id=\"undo-decision\"",
        "<strong>Undone</strong>",
        "undo.unchanged-since",
    ] {
        assert!(section.contains(shown), "{shown} in {section}");
    }
    d.stop().await;
}

/// Play a kubelet on a node without room: every pod of `selector` that has no node yet is
/// reported unschedulable for lack of memory.
async fn unschedulable(k: &Kube, selector: &str) {
    let api = k.api("v1", "Pod");
    let Ok(list) = api
        .list(&kube::api::ListParams::default().labels(selector))
        .await
    else {
        return;
    };
    for p in list.items {
        let p = serde_json::to_value(p).unwrap();
        if p["spec"]["nodeName"].is_string()
            || p["metadata"]["deletionTimestamp"].is_string()
            || p["status"]["conditions"].is_array()
        {
            continue;
        }
        let name = p["metadata"]["name"].as_str().unwrap().to_owned();
        k.patch_status(
            "v1",
            "Pod",
            &name,
            status::unschedulable("0/1 nodes are available: 1 Insufficient memory."),
        )
        .await;
    }
}
