//! kubemedic's configuration as custom resources (docs/kubernetes-resources.md), on the real API
//! server with the chart's CRDs: a `RemediationWorkflow`, an `InvestigationPlaybook`, a
//! `ClusterContext` and an `ApprovalPolicy` created, changed and broken in kubemedic's namespace
//! take effect (or are refused with `Ready=False`, the field named and an event) without a
//! restart — in the catalog listing, the pinned context, the next investigation and the gate's
//! decision — and an `ApprovalPolicy` in another namespace is ignored and reported. Two replicas
//! see one change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use common::incident::{awaiting, serving, wedged_pod};
use common::kube::Kube;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const API: &str = "kubemedic.io/v1alpha1";

/// The object's Ready condition once it says `status` for its current generation.
///
/// In the daemon's own namespace (`k` is not `elsewhere`), an `Ignored` condition is another
/// installation's (the chart's kubemedic on the same test cluster reports objects outside its
/// namespace): the daemon's own verdict replaces it, and that is what is waited for.
async fn ready(k: &Kube, kind: &str, name: &str, status: &str) -> Value {
    let own = !k.ns.starts_with("crs-other-");
    k.wait(&format!("{kind}/{name} Ready={status}"), 30, || async {
        let o = k.get(API, kind, name).await;
        let c = o["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (c["status"] == status
            && c["observedGeneration"] == o["metadata"]["generation"]
            && !(own && c["reason"] == "Ignored"))
            .then_some(c)
    })
    .await
}

/// The Warning events about an object (events.k8s.io, as `kubectl describe` shows them).
async fn warnings(k: &Kube, ns: &str, name: &str) -> Vec<String> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        k.client.clone(),
        ns,
        &kube::discovery::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "events.k8s.io",
            "v1",
            "Event",
        )),
    );
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["regarding"]["name"] == name && e["type"] == "Warning")
        .map(|e| format!("{}: {}", e["reason"], e["note"]))
        .collect()
}

fn workflow_object(name: &str, canary_version: &str) -> Value {
    // The shipped RestartDeployment file, as a team would copy it into Git, with one more
    // workflow.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/restart-deployment.yaml"),
    )
    .unwrap();
    let mut spec: Value = serde_saphyr::from_str(&text).unwrap();
    let mut canary = spec["workflows"][0].clone();
    canary["id"] = json!("restart-canary");
    canary["version"] = json!(canary_version);
    canary["description"] = json!("A rolling restart, as the platform team reviewed it in Git.");
    spec["workflows"].as_array_mut().unwrap().push(canary);
    json!({"apiVersion": API, "kind": "RemediationWorkflow",
           "metadata": {"name": name}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_objects_take_effect_without_a_restart_and_bad_ones_are_reported() {
    let Some(k) = Kube::new("crs").await else {
        return;
    };
    let elsewhere = Kube::new("crs-other").await.unwrap();
    k.kubemedic_crds().await;
    let ns = k.ns.clone();
    let d = serving(&k, |a| a.cluster.own_namespace = Some(ns.clone())).await;
    // A second replica on the same cluster and namespace (its own store: what it sees of the
    // objects is the point).
    let ns2 = k.ns.clone();
    let replica = serving(&k, |a| a.cluster.own_namespace = Some(ns2)).await;
    let get = |d: &common::TestDaemon, path: &str| {
        let req = d.client.get(d.url(path)).bearer_auth(common::API_TOKEN);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let source_of = |catalog: &Value, id: &str| {
        catalog["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["id"] == id)
            .map(|w| w["source"].as_str().unwrap().to_owned())
    };

    // A RemediationWorkflow: in force at once, in both replicas, the file it overrides named.
    k.apply(workflow_object("restart", "1.0.0")).await;
    let c = ready(&k, "RemediationWorkflow", "restart", "True").await;
    assert_eq!(c["reason"], "Loaded");
    assert!(
        c["message"].as_str().unwrap().contains("restart-canary")
            && c["message"]
                .as_str()
                .unwrap()
                .contains("restart-deployment.yaml"),
        "{c:#}"
    );
    let from = format!("RemediationWorkflow/{}/restart", k.ns);
    for replica in [&d, &replica] {
        // Each replica's own watch brings the change.
        let catalog = replica
            .eventually("/api/v1/catalog", 30, |c| {
                source_of(c, "restart-canary").is_some()
            })
            .await;
        assert_eq!(source_of(&catalog, "restart-canary"), Some(from.clone()));
        assert_eq!(source_of(&catalog, "restart-rolling"), Some(from.clone()));
        assert_eq!(
            source_of(&catalog, "delete-pod").unwrap(),
            "workflows/delete-pod.yaml"
        );
    }
    let page = d
        .client
        .get(d.url("/catalog"))
        .bearer_auth(common::API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&from), "the catalog page names the object");
    // `kubemedic catalog list` says the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .args([
            "catalog",
            "list",
            "--url",
            &d.url(""),
            "--api-key",
            common::API_TOKEN,
        ])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("restart-canary") && l.ends_with(&from)),
        "{listed}"
    );

    // Broken: refused with the field named and a Warning event; the last good version stays.
    k.patch(
        API,
        "RemediationWorkflow",
        "restart",
        json!({"spec": workflow_object("restart", "one-point-oh")["spec"]}),
    )
    .await;
    let c = ready(&k, "RemediationWorkflow", "restart", "False").await;
    let message = c["message"].as_str().unwrap();
    assert_eq!(c["reason"], "Invalid");
    assert!(
        message.contains("workflows[3].version") || message.contains("version"),
        "the message names the field: {message}"
    );
    assert!(
        message.contains("last good version stays in force"),
        "{message}"
    );
    // The daemon's own Warning (another kubemedic on the test cluster may have reported the
    // object Ignored first: that is its Warning, not this one).
    let seen = k
        .wait("an Invalid Warning event on the workflow", 30, || async {
            let w = warnings(&k, &k.ns, "restart").await;
            w.iter().any(|w| w.contains("Invalid")).then_some(w)
        })
        .await;
    assert!(seen.iter().any(|w| w.contains("Invalid")), "{seen:?}");
    let catalog = get(&d, "/api/v1/catalog").await;
    assert_eq!(
        source_of(&catalog, "restart-canary"),
        Some(from.clone()),
        "the last good version is still in force"
    );

    // An InvestigationPlaybook: listed with the catalog's playbooks.
    k.apply(json!({"apiVersion": API, "kind": "InvestigationPlaybook",
        "metadata": {"name": "queue-backlog"},
        "spec": {"description": "Consumers fall behind their queue.", "mode": "reactive",
                 "triggers": [{"alertname_regex": "QueueBacklog"}],
                 "investigation_steps": ["kubectl_get the consumers"],
                 "expected_evidence": ["consumers not ready"],
                 "recommended_action_types": ["RestartDeployment"]}}))
        .await;
    ready(&k, "InvestigationPlaybook", "queue-backlog", "True").await;
    d.eventually("/api/v1/catalog", 30, |c| {
        c["playbooks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "queue-backlog")
    })
    .await;

    // A ClusterContext: the cluster-wide pinned context, which the API then refuses to change.
    k.apply(json!({"apiVersion": API, "kind": "ClusterContext",
        "metadata": {"name": "pci"},
        "spec": {"content": "payments is PCI-scoped: never restart it during business hours"}}))
        .await;
    ready(&k, "ClusterContext", "pci", "True").await;
    let memory = d
        .eventually("/api/v1/memory", 30, |m| {
            m["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["scope"] == "cluster")
        })
        .await;
    let note = memory["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["scope"] == "cluster")
        .cloned()
        .unwrap_or_else(|| panic!("{memory:#}"));
    assert!(note["content"].as_str().unwrap().contains("PCI-scoped"));
    assert!(
        note["updated_by"]
            .as_str()
            .unwrap()
            .starts_with("ClusterContext/")
    );
    let r = d
        .client
        .put(d.url("/api/v1/memory"))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"scope": "cluster", "content": "something else"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert!(r.text().await.unwrap().contains("ClusterContext"));

    // An ApprovalPolicy in another namespace: ignored and reported.
    elsewhere
        .apply(json!({"apiVersion": API, "kind": "ApprovalPolicy",
            "metadata": {"name": "approve-everything"},
            "spec": {"modules": {"approval.rego": "package kubemedic.approval\n\ndecision := {\"require_approval\": false, \"risk_factors\": [], \"reason\": \"yes\"}\n"}}}))
        .await;
    let c = ready(&elsewhere, "ApprovalPolicy", "approve-everything", "False").await;
    assert_eq!(c["reason"], "Ignored", "{c:#}");
    // Reported once, by whichever kubemedic on the cluster saw it first (each names its own
    // namespace; none rewrites another's report).
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("objects only from its own namespace"),
        "{c:#}"
    );
    let policy = get(&d, "/api/v1/policy").await;
    assert!(
        !policy["origin"]
            .as_str()
            .unwrap()
            .contains("ApprovalPolicy"),
        "{policy:#}"
    );

    // An ApprovalPolicy here, whose test fails: refused, naming the case.
    let freeze = "package kubemedic.approval\n\nrisk_factors contains {\"score\": 95, \"reason\": \"change freeze: the platform team's ApprovalPolicy\"}\n";
    let case = |want_reason: &str| {
        json!({"name": "staging is frozen too",
               "input": {"environment": "staging",
                         "remediation_target": {"kind": "Deployment", "name": "web", "namespace": "shop"},
                         "proof": {"verdict": "proven"}},
               "want": {"require_approval": true, "reason_contains": want_reason}})
    };
    k.apply(json!({"apiVersion": API, "kind": "ApprovalPolicy",
        "metadata": {"name": "freeze"},
        "spec": {"modules": {"freeze.rego": freeze}, "tests": [case("holiday")]}}))
        .await;
    let c = ready(&k, "ApprovalPolicy", "freeze", "False").await;
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("staging is frozen too"),
        "{c:#}"
    );
    // Fixed: in force, and the next gate decision says so.
    k.patch(
        API,
        "ApprovalPolicy",
        "freeze",
        json!({"spec": {"tests": [case("change freeze")]}}),
    )
    .await;
    let c = ready(&k, "ApprovalPolicy", "freeze", "True").await;
    let revision = c["message"].as_str().unwrap().to_owned();
    let origin = format!("ApprovalPolicy {}/freeze", k.ns);
    let policy = d
        .eventually("/api/v1/policy", 30, |p| {
            p["origin"].as_str().unwrap().contains(&origin)
        })
        .await;
    assert!(revision.contains(policy["revision"].as_str().unwrap()));
    let (_, alert) = wedged_pod(&k).await;
    let (req, _) = awaiting(&d, &alert).await;
    assert!(
        req["state"]["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("change freeze"),
        "{:#}",
        req["state"]["gate"]
    );
    // The playbook and context were in the investigation.
    assert!(
        req["state"]["enrichment"]["pinned"]
            .to_string()
            .contains("PCI-scoped"),
        "{:#}",
        req["state"]["enrichment"]
    );

    // Broken Rego: refused; the policy in force is unchanged.
    k.patch(
        API,
        "ApprovalPolicy",
        "freeze",
        json!({"spec": {"modules": {"freeze.rego": "package kubemedic.approval\n\nrisk_factors contains {"}}}),
    )
    .await;
    let c = ready(&k, "ApprovalPolicy", "freeze", "False").await;
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("policy in force is unchanged"),
        "{c:#}"
    );
    assert_eq!(
        get(&d, "/api/v1/policy").await["revision"],
        policy["revision"]
    );

    // Every change is audited once (one replica), with the object's UID, generation and writer.
    let uid = k.get(API, "ApprovalPolicy", "freeze").await["metadata"]["uid"].clone();
    let mine = k
        .wait("the three ApprovalPolicy changes audited", 30, || async {
            let events = d.store.audit_of_kind("config_object", 200).await.unwrap();
            let mine: Vec<_> = events
                .into_iter()
                .filter(|e| e.payload["uid"] == uid)
                .collect();
            (mine.len() >= 3).then_some(mine)
        })
        .await;
    for e in &mine {
        assert!(e.payload["generation"].as_i64().unwrap() >= 1);
        assert!(!e.payload["writer"].as_str().unwrap().is_empty());
    }
    replica.stop().await;
    d.stop().await;
}
