//! kubemedic's CustomResourceDefinitions (charts/kubemedic/crds) on the oldest Kubernetes the
//! chart supports — the kube tier's kube-apiserver 1.20 — and on a current one — the
//! apiextensions-apiserver of the current release, the code that serves CRDs inside every
//! kube-apiserver, built from Debian unstable by scripts/kube-tier/build-current.sh and started
//! beside the kube tier by scripts/kube-tier/current.sh. On each: every CRD passes a server-side
//! dry run and is then installed; a typical object of each kind passes a dry run; objects that
//! break the schema are refused with the field named; the printer columns are served.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::path::Path;

use common::kube::Kube;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const API: &str = "kubemedic.io/v1alpha1";

fn crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/kubemedic/crds");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "five kinds: {files:?}");
    files
        .iter()
        .map(|f| serde_saphyr::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

/// A typical object of each kind, as a platform team writes them.
fn samples() -> Vec<Value> {
    let workflow: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows/restart-deployment.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    vec![
        json!({"apiVersion": API, "kind": "RemediationWorkflow",
               "metadata": {"name": "restart-deployment"}, "spec": workflow}),
        json!({"apiVersion": API, "kind": "InvestigationPlaybook",
               "metadata": {"name": "queue-backlog"},
               "spec": {"description": "Consumers fall behind their queue.", "mode": "reactive",
                        "triggers": [{"alertname_regex": "QueueBacklog"}],
                        "investigation_steps": ["kubectl_get the consumers"],
                        "expected_evidence": ["consumers not ready"],
                        "recommended_action_types": ["RestartDeployment"]}}),
        json!({"apiVersion": API, "kind": "ClusterContext", "metadata": {"name": "pci"},
               "spec": {"content": "payments is PCI-scoped: never restart it in business hours"}}),
        json!({"apiVersion": API, "kind": "ApprovalPolicy", "metadata": {"name": "freeze"},
               "spec": {"modules": {"freeze.rego":
                   "package kubemedic.approval\n\nrisk_factors contains \"freeze\" if { input.target.namespace == \"payments\" }\n"}}}),
        json!({"apiVersion": API, "kind": "Remediation", "metadata": {"name": "r-0b9c"},
               "spec": {"requestId": "0b9c2f8e-5d47-4a7e-9a35-0f1f3c1d2e4a"}}),
    ]
}

/// Objects that break the schema, and the field the refusal must name.
fn broken() -> Vec<(Value, &'static str)> {
    vec![
        (
            json!({"apiVersion": API, "kind": "ClusterContext", "metadata": {"name": "typed"},
                   "spec": {"content": 42}}),
            "spec.content",
        ),
        (
            json!({"apiVersion": API, "kind": "RemediationWorkflow", "metadata": {"name": "empty"},
                   "spec": {"actionType": "RestartDeployment"}}),
            "spec.workflows",
        ),
        (
            json!({"apiVersion": API, "kind": "Remediation", "metadata": {"name": "anonymous"},
                   "spec": {}}),
            "spec.requestId",
        ),
    ]
}

fn resource(o: &Value) -> ApiResource {
    let (group, version) = o["apiVersion"].as_str().unwrap().split_once('/').unwrap();
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        group,
        version,
        o["kind"].as_str().unwrap(),
    ))
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        field_manager: None,
    }
}

/// Every check, on the server `client` talks to (`server` names it in failures).
async fn check(client: kube::Client, ns: &str, server: &str) {
    let crd_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )),
    );
    for crd in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        let obj: DynamicObject = serde_json::from_value(crd.clone()).unwrap();
        crd_api
            .patch(
                &name,
                &PatchParams::apply("kubemedic-tests").force().dry_run(),
                &Patch::Apply(&obj),
            )
            .await
            .unwrap_or_else(|e| panic!("{server}: dry run of the CRD {name}: {e}"));
        crd_api
            .patch(
                &name,
                &PatchParams::apply("kubemedic-tests").force(),
                &Patch::Apply(&obj),
            )
            .await
            .unwrap_or_else(|e| panic!("{server}: installing the CRD {name}: {e}"));
    }
    for crd in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let mut established = false;
        for _ in 0..60 {
            let got = crd_api.get(name).await.unwrap();
            let conditions = got.data["status"]["conditions"].clone();
            established = conditions.as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        assert!(established, "{server}: the CRD {name} is not Established");
    }
    for sample in samples() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource(&sample));
        let obj: DynamicObject = serde_json::from_value(sample.clone()).unwrap();
        let mut last = None;
        // A new CRD's REST endpoint can lag its Established condition by a moment.
        for _ in 0..20 {
            match api.create(&dry_run(), &obj).await {
                Ok(_) => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        assert!(
            last.is_none(),
            "{server}: a dry run of a typical {} was refused: {last:?}",
            sample["kind"]
        );
    }
    for (object, field) in broken() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource(&object));
        let obj: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        match api.create(&dry_run(), &obj).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{server}: {e:?}");
                assert!(
                    e.message.contains(field),
                    "{server}: the refusal of {object} must name {field}: {}",
                    e.message
                );
            }
            other => panic!("{server}: {object} must be refused naming {field}: {other:?}"),
        }
    }
    // The printer columns are what `kubectl get remediations` shows.
    let remediations = crd_api.get("remediations.kubemedic.io").await.unwrap();
    let columns: Vec<String> = remediations.data["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        columns.iter().any(|c| c == "Phase"),
        "{server}: printer columns {columns:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crds_pass_a_server_side_dry_run_on_the_oldest_and_a_current_kubernetes() {
    let Some(k) = Kube::new("crds").await else {
        return;
    };
    let version = k.client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "20"),
        "the kube tier is the oldest Kubernetes the chart supports"
    );
    check(k.client.clone(), &k.ns, "kube-apiserver 1.20").await;

    let Some(url) = common::component("KUBEMEDIC_TEST_CRD_SERVER", "the current CRD server") else {
        return;
    };
    // The kube tier's CA and admin token, pointed at the current server (it delegates
    // authentication and authorisation to the kube tier).
    let kubeconfig = kube::config::Kubeconfig::read_from(&k.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.cluster_url = url.parse().unwrap();
    let current = kube::Client::try_from(config).unwrap();
    let version = current.apiserver_version().await.unwrap();
    let minor: u32 = version.minor.trim_end_matches('+').parse().unwrap();
    assert!(
        minor >= 33,
        "a current Kubernetes, not {}",
        version.git_version
    );
    check(
        current,
        &k.ns,
        &format!("apiextensions-apiserver {}", version.git_version),
    )
    .await;
}
