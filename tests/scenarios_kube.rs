//! The incident scenarios staged live on the real API server tier (kube-apiserver +
//! controller-manager, a fake kubelet for logs) and investigated by the offline investigator
//! through the live API: the same expectations as the snapshot replays.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::kube::{Kube, fake_kubelet};
use kubemedic::clock::{Clock, ManualClock};

async fn live(name: &str) {
    let scenario = common::scenarios::all()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    let Some(k) = Kube::new("live").await else {
        return;
    };
    let logs = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    let staged = (scenario.stage)(&k, &logs, port).await;
    let clock: Arc<dyn Clock> =
        Arc::new(ManualClock::new(chrono::Utc::now() + staged.clock_offset));
    let bad =
        common::scenarios::investigate_and_check(name, k.cluster().await, clock, &staged.alert)
            .await;
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

macro_rules! live {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                live($name).await;
            }
        )*
    };
}

common::scenarios::for_each_scenario!(live);

/// The daemon as `serve` assembles it, on the real API server: a bad rollout in a staging
/// namespace goes alert → enrichment → investigation → selection → auto-approved rollback →
/// verification → Completed with its score and a history entry, exactly once — also when a
/// second, Deployment-level alert about the same incident converges on the same root owner
/// (it is blocked, not executed twice); the same incident in production waits for a human. The test acts as the kubelet (binds the pods the
/// rollback creates and reports them running) and as Alertmanager (resolves the alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_bad_rollout_is_rolled_back_verified_and_remembered_exactly_once() {
    use serde_json::{Value, json};
    let Some(staging) = Kube::new("wstg").await else {
        return;
    };
    let Some(production) = Kube::new("wprod").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&staging, &production]).await;
    let (staged_staging, staged_production) = (&staged[0], &staged[1]);

    let kubeconfig = staging.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig.clone());
        a.gate.policy_dir = Some(policies.clone());
        a.verify.verification_window_seconds = Some(5);
    })
    .await;

    // The kubelet: every new checkout pod is scheduled and runs (the rolled-back image works).
    let kubelet = {
        let k = staging.clone_handle();
        let node = format!("{}-worker-1", staging.ns);
        tokio::spawn(async move {
            for _ in 0..1200 {
                common::scenarios::run_unscheduled(&k, "app=checkout", &node).await;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };

    let mut ids = Vec::new();
    for staged in [&staged_staging, &staged_production] {
        let v: Value = d
            .send_alertmanager(&staged.alert.to_string())
            .await
            .json()
            .await
            .unwrap();
        ids.push(v["outcomes"][0]["request_id"].as_str().unwrap().to_owned());
    }
    // A second alert about the same incident, from the Deployment's side: a different target
    // at ingest that converges on the same root owner in the investigation.
    let converging = common::scenarios::alert(
        "KubeDeploymentReplicasMismatch",
        "warning",
        &[("namespace", &staging.ns), ("deployment", "checkout")],
        &[(
            "summary",
            "Deployment has not matched the expected number of replicas",
        )],
        "",
    );
    let v: Value = d
        .send_alertmanager(&converging.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["outcomes"][0]["outcome"], "opened", "{v:#}");
    let converging_id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let terminal = |r: &Value| {
        r["phase"]
            .as_str()
            .and_then(kubemedic::domain::Phase::parse)
            .is_some_and(kubemedic::domain::Phase::is_terminal)
    };
    // Alertmanager resolves both staging alerts once the rollback has been made.
    let staging_ids = [ids[0].clone(), converging_id];
    let mut rolled_back = false;
    for _ in 0..900 {
        let mut done = 0;
        for id in &staging_ids {
            let r = d.api(&format!("/api/v1/requests/{id}")).await;
            rolled_back |= r["phase"] == "Verifying";
            done += usize::from(terminal(&r));
        }
        if rolled_back || done == staging_ids.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(rolled_back, "neither staging request reached Verifying");
    for alert in [&staged_staging.alert, &converging] {
        let mut resolved = alert.clone();
        resolved["status"] = json!("resolved");
        resolved["alerts"][0]["status"] = json!("resolved");
        resolved["alerts"][0]["endsAt"] = json!(chrono::Utc::now().to_rfc3339());
        assert_eq!(
            d.send_alertmanager(&resolved.to_string()).await.status(),
            200
        );
    }

    let mut staged_requests = Vec::new();
    for id in &staging_ids {
        staged_requests.push(
            d.eventually(&format!("/api/v1/requests/{id}"), 90, terminal)
                .await,
        );
    }
    let gated = d
        .eventually(&format!("/api/v1/requests/{}", ids[1]), 60, terminal)
        .await;
    // Whichever of the two staging alerts reached the root owner first executed.
    staged_requests.sort_by_key(|r| r["state"]["execution"].is_null());
    let [auto, second] = <[Value; 2]>::try_from(staged_requests).unwrap();
    kubelet.abort();

    // Staging: auto-approved, rolled back, verified effective.
    assert_eq!(
        auto["state"]["enrichment"]["environment"], "staging",
        "{auto:#}"
    );
    assert_eq!(
        auto["state"]["selection"]["selected"]["workflow_id"],
        "rollback-deployment-previous-revision"
    );
    assert_eq!(auto["state"]["gate"]["require_approval"], false, "{auto:#}");
    assert_eq!(auto["phase"], "Completed", "{auto:#}");
    assert!(
        auto["reason"].as_str().unwrap().starts_with("effective"),
        "{auto:#}"
    );
    let execution = &auto["state"]["execution"];
    assert_eq!(execution["outcome"], "succeeded", "{execution:#}");
    assert_eq!(execution["steps"][0]["action"], "rollout_undo");
    assert_eq!(execution["steps"][0]["status"], "applied");
    assert_eq!(
        execution["steps"][1]["detail"]["detail"]["available"], true,
        "{execution:#}"
    );
    assert!(
        execution["pre_spec_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_ne!(execution["pre_spec_hash"], execution["post_spec_hash"]);
    let assessment = &auto["state"]["assessment"];
    assert_eq!(assessment["health_score"], 1.0, "{assessment:#}");
    assert_eq!(assessment["alert_score"], 1.0, "{assessment:#}");
    assert_eq!(assessment["reason"], "full");

    // The Deployment runs the previous image again, stamped with the request that did it.
    let deployment = staging.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.1"
    );
    assert_eq!(
        deployment["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{}/1", auto["id"].as_str().unwrap())
    );
    // Exactly once: one undo (revision 2 → 3), one execution event, one history entry.
    assert_eq!(
        deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    let kinds: Vec<&str> = auto["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "execution").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "assessment").count(), 1);
    let target = kubemedic::domain::Target::new("Deployment", "checkout", Some(staging.ns.clone()));
    let history = d
        .store
        .history(
            &target.fingerprint(),
            chrono::Utc::now() - chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "{history:#?}");
    assert_eq!(history[0].workflow_type, "RollbackDeployment");
    assert_eq!(history[0].signal_resolved, Some(true));
    assert!(history[0].effectiveness_score.unwrap() >= 0.7);
    // Its configuration as the history compares it for an autoscaled target: the spec's hashes
    // without `replicas` before and after, beside the whole spec's.
    let (pre, post) = (
        history[0].pre_remediation_drift_hash.as_deref(),
        history[0].post_remediation_drift_hash.as_deref(),
    );
    assert!(
        pre.is_some_and(|h| h.starts_with("sha256:"))
            && post.is_some_and(|h| h.starts_with("sha256:"))
            && pre != post
            && pre != history[0].pre_remediation_spec_hash.as_deref(),
        "{history:#?}"
    );
    // Counted where an operator looks.
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "kubemedic_executions_total{outcome=\"succeeded\"} 1",
        "kubemedic_assessments_total{verdict=\"effective\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    // The same history over the API, with the tiers the next investigation reads.
    let served = d
        .api(&format!(
            "/api/v1/history?kind=Deployment&name=checkout&namespace={}",
            staging.ns
        ))
        .await;
    assert_eq!(served["total"], 1, "{served:#}");
    assert_eq!(served["items"][0]["remediationUid"], auto["id"]);
    assert_eq!(
        served["context"]["tier1"]["chain"][0]["hashMatch"],
        "postRemediation"
    );

    // The converging alert reached the same root owner and was stopped there: one execution.
    assert_eq!(
        second["state"]["analysis"]["root_owner"]["name"], "checkout",
        "{second:#}"
    );
    assert_eq!(second["phase"], "Blocked", "{second:#}");
    let why = second["reason"].as_str().unwrap();
    assert!(
        why.contains("ResourceBusy") || why.contains("RecentlyRemediated"),
        "{why}"
    );
    assert!(second["state"]["execution"].is_null(), "{second:#}");

    let transitions: Vec<String> = auto["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| e["payload"]["to"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        transitions,
        [
            "Enriching",
            "Investigating",
            "Selecting",
            "Gating",
            "Executing",
            "Verifying",
            "Completed"
        ]
    );

    // Production: the policy requires approval, for the reason it states; nothing ran there.
    assert_eq!(gated["state"]["enrichment"]["environment"], "production");
    assert_eq!(gated["state"]["gate"]["require_approval"], true);
    assert!(
        gated["state"]["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("production"),
        "{gated:#}"
    );
    assert_eq!(gated["reason"], "human approval not available");
    assert!(gated["state"]["execution"].is_null());
    let untouched = production.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        untouched["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.2"
    );
    d.stop().await;
}

/// The daemon on `k`'s cluster with the shipped policy, a short verification window and no
/// cooldown (the rounds of a feedback loop follow each other within seconds), and `tweak`.
async fn daemon_on(
    k: &Kube,
    tweak: impl FnOnce(&mut kubemedic::config::DaemonArgs),
) -> common::TestDaemon {
    let kubeconfig = k.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(3);
        a.execute.cooldown_seconds = Some(0);
        tweak(a);
    })
    .await
}

/// The kubelet of the OOM incident's node: every new `app=api` pod is scheduled and starts.
fn api_kubelet(k: &Kube) -> tokio::task::JoinHandle<()> {
    let k = k.clone_handle();
    let node = format!("{}-worker-1", k.ns);
    tokio::spawn(async move {
        loop {
            common::scenarios::run_unscheduled(&k, "app=api", &node).await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
}

fn is_terminal(r: &serde_json::Value) -> bool {
    r["phase"]
        .as_str()
        .and_then(kubemedic::domain::Phase::parse)
        .is_some_and(kubemedic::domain::Phase::is_terminal)
}

/// One round of a remedy that does not help: send `alert`; once the remediation has run (the
/// request verifies), the pods it started are OOMKilled again. Returns the finished request and
/// an alert about one of the killed pods — what Alertmanager sends next.
async fn round_that_does_not_help(
    d: &common::TestDaemon,
    k: &Kube,
    alert: &serde_json::Value,
) -> (serde_json::Value, serde_json::Value) {
    let answer: serde_json::Value = d
        .send_alertmanager(&alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["outcomes"][0]["outcome"], "opened", "{answer:#}");
    let id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/requests/{id}");
    let verifying = d
        .eventually(&path, 120, |r| r["phase"] == "Verifying" || is_terminal(r))
        .await;
    let mut killed = Vec::new();
    if verifying["phase"] == "Verifying" {
        killed = common::scenarios::oom_kill_running(k, "app=api").await;
    }
    let done = d.eventually(&path, 60, is_terminal).await;
    let next = common::scenarios::alert(
        "KubePodCrashLooping",
        "warning",
        &[
            ("namespace", &k.ns),
            ("pod", killed.first().map_or("api-gone", String::as_str)),
            ("container", "api"),
        ],
        &[("summary", "Pod is crash looping")],
        "",
    );
    (done, next)
}

fn memory_limit(d: &serde_json::Value) -> String {
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The feedback loop with the offline investigator, on the real API server: a memory raise
/// that does not help (the test keeps the pods OOMKilled) is scored ineffective and
/// remembered; the next incident on the target is investigated with that history in front of
/// it (raised once more — the chain that led here); after two raises that did not help, the
/// third investigation escalates to a human instead of raising again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ineffective_remedy_is_remembered_and_the_third_time_escalated() {
    let Some(k) = Kube::new("loop").await else {
        return;
    };
    let staged = common::scenarios::staged_in("oomkilled", &[&k]).await;
    let d = daemon_on(&k, |_| {}).await;
    let kubelet = api_kubelet(&k);

    let (first, alert) = round_that_does_not_help(&d, &k, &staged[0].alert).await;
    assert_eq!(first["phase"], "Completed", "{first:#}");
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .starts_with("not effective"),
        "{first:#}"
    );
    assert_eq!(
        first["state"]["execution"]["steps"][0]["action"],
        "set_resources"
    );
    assert_eq!(first["state"]["assessment"]["health_score"], 0.0);
    assert_eq!(
        memory_limit(&k.get("apps/v1", "Deployment", "api").await),
        "384Mi"
    );

    let (second, alert) = round_that_does_not_help(&d, &k, &alert).await;
    assert_eq!(second["phase"], "Completed", "{second:#}");
    let seen = &second["state"]["analysis"]["history"]["tier1"]["chain"];
    assert_eq!(seen.as_array().unwrap().len(), 1, "{second:#}");
    assert_eq!(seen[0]["remediationUid"], first["id"]);
    assert_eq!(seen[0]["hashMatch"], "postRemediation");
    assert_eq!(seen[0]["signalResolved"], false);
    assert_eq!(
        memory_limit(&k.get("apps/v1", "Deployment", "api").await),
        "576Mi"
    );

    let (third, _) = round_that_does_not_help(&d, &k, &alert).await;
    kubelet.abort();
    assert_eq!(third["phase"], "ManualReviewRequired", "{third:#}");
    let reason = third["reason"].as_str().unwrap();
    assert!(
        reason.contains("IncreaseMemoryLimits was already applied 2 times"),
        "{reason}"
    );
    assert!(third["state"]["execution"].is_null(), "{third:#}");
    // Two raises, no third: the Deployment keeps the last one.
    assert_eq!(
        memory_limit(&k.get("apps/v1", "Deployment", "api").await),
        "576Mi"
    );
    let served = d
        .api(&format!(
            "/api/v1/history?kind=Deployment&name=api&namespace={}",
            k.ns
        ))
        .await;
    assert_eq!(served["total"], 2, "{served:#}");
    d.stop().await;
}

/// The guardrail behind the investigator, on the real API server: a model that sees the
/// history of ineffective memory raises (and the `repeated_ineffective_remediation` warning)
/// but selects another raise every time gets three; the fourth is blocked (`IneffectiveChain`)
/// before anything is written, with an audit event and a metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_ignores_the_history_is_stopped_by_the_chain_guardrail() {
    use common::llm::{ScriptedLlm, calls};
    use serde_json::json;
    let Some(k) = Kube::new("chain").await else {
        return;
    };
    let staged = common::scenarios::staged_in("oomkilled", &[&k]).await;
    let target = json!({"kind": "Deployment", "name": "api", "namespace": k.ns});
    let mut script = Vec::new();
    for limit in ["384Mi", "512Mi", "768Mi", "1Gi"] {
        script.push(calls(&[(
            "get_namespaced_resource_context",
            target.clone(),
        )]));
        script.push(calls(&[(
            "submit_result",
            json!({
                "root_cause_analysis": {
                    "summary": "Container api of Deployment api is OOMKilled: its memory limit is too low",
                    "severity": "high",
                    "contributing_factors": ["exit code 137, reason OOMKilled"],
                    "remediation_target": target,
                    "investigation_analysis": "OOMKilled containers."
                },
                "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true
            }),
        )]));
        script.push(calls(&[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "increase-memory-limits", "confidence": 0.9,
                "rationale": "more memory", "parameters": {"CONTAINER": "api", "MEMORY_LIMIT": limit}},
                "alternative_workflows": []}),
        )]));
    }
    let model = ScriptedLlm::start(script).await;
    let base_url = format!("{}/v1", model.base_url);
    let d = daemon_on(&k, |a| {
        a.investigate.llm = Some(kubemedic::config::LlmMode::Openai);
        a.investigate.llm_base_url = Some(base_url);
        a.investigate.llm_api_key = Some(kubemedic::secret::Secret::new("sk-chain"));
        a.investigate.llm_model = Some("gpt-4o".into());
    })
    .await;
    let kubelet = api_kubelet(&k);

    let mut alert = staged[0].alert.clone();
    let mut rounds = Vec::new();
    for _ in 0..4 {
        let (done, next) = round_that_does_not_help(&d, &k, &alert).await;
        rounds.push(done);
        alert = next;
    }
    kubelet.abort();
    for r in &rounds[..3] {
        assert_eq!(r["phase"], "Completed", "{r:#}");
        assert!(r["reason"].as_str().unwrap().starts_with("not effective"));
    }
    let blocked = &rounds[3];
    assert_eq!(blocked["phase"], "Blocked", "{blocked:#}");
    let reason = blocked["reason"].as_str().unwrap();
    assert!(reason.contains("IneffectiveChain"), "{reason}");
    assert!(blocked["state"]["execution"].is_null(), "{blocked:#}");
    assert!(
        blocked["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "guardrail"),
        "{blocked:#}"
    );
    // Three raises reached the cluster; the fourth did not.
    assert_eq!(
        memory_limit(&k.get("apps/v1", "Deployment", "api").await),
        "768Mi"
    );

    // Each investigation had the history in front of it: the second saw the first raise, the
    // third also the warning that the same workflow keeps completing without resolving it.
    let requests = model.requests();
    assert_eq!(requests.len(), 12);
    let context = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let second = context(4);
    assert!(
        second.contains(rounds[0]["id"].as_str().unwrap()),
        "{second}"
    );
    let third = context(7);
    assert!(
        third.contains("repeated_ineffective_remediation"),
        "{third}"
    );
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kubemedic_guardrail_blocks_total{guardrail=\"IneffectiveChain\"} 1"),
        "{metrics}"
    );
    d.stop().await;
}
