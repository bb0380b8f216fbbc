//! Real alerts, real objects: every default alert of kube-prometheus-stack (and a few OpenShift,
//! common and application alerts), with its labels as they arrive in Alertmanager's webhook
//! (`tests/fixtures/kube-prometheus-stack/alerts.yaml` says where each label comes from), goes
//! through the webhook parser and must resolve to the object it is about — never to the
//! exporter that reported it — with the subject's container only. Alerts about the failed Job and
//! the stuck Deployment that used to be closed as "healthy again" (the kube-state-metrics pod was
//! taken for the subject) are investigated end to end on the snapshots of their scenarios, and an
//! alert that names no object ends honestly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::SnapshotCluster;
use kubemedic::domain::{
    Phase, RemediationRequest, Selection, SignalContext, Target, fingerprint_of,
};
use kubemedic::investigate::Investigator;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct Fixture {
    alerts: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    alertname: String,
    source: String,
    why: String,
    labels: BTreeMap<String, String>,
    expect: Expect,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Expect {
    Object(Object),
    /// `no-object` or `alerting-pipeline`.
    Nothing(String),
}

#[derive(Debug, Deserialize)]
struct Object {
    kind: String,
    name: String,
    namespace: Option<String>,
    container: Option<String>,
    #[serde(default)]
    also: Vec<Also>,
}

#[derive(Debug, Deserialize)]
struct Also {
    kind: String,
    name: String,
    namespace: Option<String>,
}

fn fixture() -> Fixture {
    serde_saphyr::from_str(&common::fixture("kube-prometheus-stack/alerts.yaml")).unwrap()
}

/// A firing webhook body (version 4) carrying one alert with exactly `labels`.
fn body(labels: &BTreeMap<String, String>, fingerprint: &str, starts_at: &str) -> Value {
    json!({
        "version": "4", "groupKey": "{}:{alertname=\"x\"}", "truncatedAlerts": 0,
        "status": "firing", "receiver": "kubemedic",
        "groupLabels": {"alertname": labels["alertname"]}, "commonLabels": labels,
        "commonAnnotations": {}, "externalURL": "http://alertmanager.test",
        "alerts": [{
            "status": "firing", "labels": labels, "annotations": {},
            "startsAt": starts_at, "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.test/graph", "fingerprint": fingerprint,
        }]
    })
}

#[test]
fn every_alert_resolves_to_the_object_it_is_about() {
    let fixture = fixture();
    assert!(fixture.alerts.len() >= 150, "{}", fixture.alerts.len());
    let mut bad = Vec::new();
    for (i, case) in fixture.alerts.iter().enumerate() {
        let fp = format!("{i:016x}");
        let raw = body(&case.labels, &fp, "2026-11-21T10:00:00Z").to_string();
        let signal = kubemedic::ingest::alertmanager::parse(raw.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", case.alertname))
            .remove(0);
        let context = SignalContext::from_signal(&signal, chrono::Utc::now());
        let what = format!("{} ({}; {})", case.alertname, case.source, case.why);
        let (want_target, want_container, want_aliases, pipeline) = match &case.expect {
            Expect::Object(o) => {
                let t = Target::new(&o.kind, &o.name, o.namespace.clone());
                // The fixture says the namespace exactly as kubemedic keeps it.
                assert_eq!(t.namespace, o.namespace, "{what}: fixture namespace");
                let mut aliases = vec![t.fingerprint()];
                aliases.extend(
                    o.also
                        .iter()
                        .map(|a| Target::new(&a.kind, &a.name, a.namespace.clone()).fingerprint()),
                );
                (Some(t), o.container.clone(), aliases, false)
            }
            Expect::Nothing(n) => {
                assert!(
                    n == "no-object" || n == "alerting-pipeline",
                    "{what}: unknown expectation {n}"
                );
                let own = fingerprint_of("", "Alert", &fp);
                (None, None, vec![own], n == "alerting-pipeline")
            }
        };
        if signal.target != want_target {
            bad.push(format!(
                "{what}: target {:?}, want {:?}",
                signal.target, want_target
            ));
        }
        if context.subject_container() != want_container {
            bad.push(format!(
                "{what}: container {:?}, want {:?}",
                context.subject_container(),
                want_container
            ));
        }
        if signal.target_aliases != want_aliases {
            bad.push(format!(
                "{what}: aliases {:?}, want {:?}",
                signal.target_aliases, want_aliases
            ));
        }
        if let Some(t) = &want_target {
            assert_eq!(signal.target_fingerprint, t.fingerprint(), "{what}");
        }
        if context.about_alerting_pipeline() != pipeline {
            bad.push(format!(
                "{what}: about the alerting pipeline: {}",
                !pipeline
            ));
        }
    }
    assert!(bad.is_empty(), "{} wrong:\n{}", bad.len(), bad.join("\n"));
}

/// The fixture covers every default alert of the chart it was read from (139 names).
#[test]
fn the_fixture_covers_the_default_alerts() {
    let fixture = fixture();
    let names: std::collections::BTreeSet<&str> = fixture
        .alerts
        .iter()
        .filter(|c| c.source.starts_with("kube-prometheus-stack/"))
        .map(|c| c.alertname.as_str())
        .collect();
    assert_eq!(names.len(), 139, "{names:?}");
    for must in [
        "KubeJobFailed",
        "KubeDeploymentReplicasMismatch",
        "KubeDeploymentRolloutStuck",
        "KubePersistentVolumeFillingUp",
        "KubeHpaMaxedOut",
        "KubePdbNotEnoughHealthyPods",
        "KubeNodeNotReady",
        "Watchdog",
        "InfoInhibitor",
        "KubeAPIErrorBudgetBurn",
        "TargetDown",
        "NodeFilesystemSpaceFillingUp",
    ] {
        assert!(names.contains(must), "{must}");
    }
    for source in ["openshift/", "application", "common additions"] {
        assert!(
            fixture.alerts.iter().any(|c| c.source.starts_with(source)),
            "{source}"
        );
    }
}

/// The labels of the fixture's `alertname` from `source`, with `overrides` (the scenario's
/// namespace and object name).
fn labels_of(
    alertname: &str,
    source: &str,
    overrides: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let fixture = fixture();
    let case = fixture
        .alerts
        .into_iter()
        .find(|c| c.alertname == alertname && c.source.starts_with(source))
        .unwrap();
    let mut labels = case.labels;
    for (k, v) in overrides {
        labels.insert((*k).to_owned(), (*v).to_owned());
    }
    labels
}

fn investigator(
    snapshot: &str,
) -> (
    kubemedic::investigate::offline::OfflineInvestigator,
    Arc<dyn Clock>,
) {
    let snap =
        SnapshotCluster::load(&common::scenarios::dir(snapshot).join("snapshot.yaml")).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snap.captured_at().unwrap()));
    let inv = common::scenarios::offline_investigator(Arc::new(snap), clock.clone());
    (inv, clock)
}

async fn investigate(
    snapshot: &str,
    labels: &BTreeMap<String, String>,
) -> (RemediationRequest, kubemedic::domain::Analysis, Selection) {
    let (inv, clock) = investigator(snapshot);
    let now = clock.now();
    let starts = (now - chrono::Duration::minutes(20)).to_rfc3339();
    let req = common::scenarios::request(&body(labels, "00c0ffee00c0ffee", &starts), now);
    let analysis = inv.analyse(&req).await.unwrap();
    let selection = inv.select(&req, &analysis).await.unwrap();
    (req, analysis, selection)
}

/// KubeJobFailed as a standard kube-prometheus-stack install sends it (kube-state-metrics' pod
/// and container beside `job_name`) reaches the failed Job, as the scenario's alert does.
#[tokio::test]
async fn kube_job_failed_with_the_exporters_labels_reaches_the_job() {
    common::init();
    let labels = labels_of(
        "KubeJobFailed",
        "kube-prometheus-stack/",
        &[
            ("namespace", "scn-job-failed"),
            ("job_name", "nightly-export"),
        ],
    );
    assert_eq!(
        labels["pod"],
        "kube-prometheus-stack-kube-state-metrics-7c9d5f8b6-k2x9p"
    );
    let (req, analysis, selection) = investigate("job-failed", &labels).await;
    assert_eq!(
        req.target,
        Some(Target::new(
            "Job",
            "nightly-export",
            Some("scn-job-failed".into())
        ))
    );
    let bad = common::scenarios::check(
        "job-failed",
        &common::scenarios::expected("job-failed"),
        &analysis,
        &selection,
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_ne!(
        selection.outcome.next_phase,
        Phase::NoActionRequired,
        "{selection:?}"
    );
    assert!(
        !selection.outcome.reason.contains("healthy again"),
        "{}",
        selection.outcome.reason
    );
}

/// KubeDeploymentReplicasMismatch and KubeDeploymentRolloutStuck with kube-state-metrics' labels
/// reach the Deployment whose pods cannot be scheduled (the pending-insufficient-resources
/// scenario), not the healthy exporter.
#[tokio::test]
async fn deployment_alerts_with_the_exporters_labels_reach_the_deployment() {
    common::init();
    for alertname in [
        "KubeDeploymentReplicasMismatch",
        "KubeDeploymentRolloutStuck",
    ] {
        let labels = labels_of(
            alertname,
            "kube-prometheus-stack/",
            &[
                ("namespace", "scn-pending-insufficient-resources"),
                ("deployment", "batch-worker"),
            ],
        );
        let (req, analysis, selection) =
            investigate("pending-insufficient-resources", &labels).await;
        assert_eq!(
            req.target,
            Some(Target::new(
                "Deployment",
                "batch-worker",
                Some("scn-pending-insufficient-resources".into())
            )),
            "{alertname}"
        );
        let bad = common::scenarios::check(
            "pending-insufficient-resources",
            &common::scenarios::expected("pending-insufficient-resources"),
            &analysis,
            &selection,
        );
        assert!(bad.is_empty(), "{alertname}: {}", bad.join("\n"));
        assert_ne!(
            selection.outcome.next_phase,
            Phase::NoActionRequired,
            "{alertname}: {selection:?}"
        );
    }
}

/// An alert about the alerting pipeline ends as no action, saying so; any other alert that names
/// no object goes to a person with the labels that identify it — never "healthy again", even on
/// a cluster where everything is healthy.
#[tokio::test]
async fn an_alert_that_names_no_object_ends_honestly() {
    common::init();
    for (alertname, source) in [
        ("Watchdog", "kube-prometheus-stack/"),
        ("InfoInhibitor", "kube-prometheus-stack/"),
    ] {
        let labels = labels_of(alertname, source, &[]);
        let (req, analysis, selection) = investigate("problem-resolved", &labels).await;
        assert_eq!(req.target, None, "{alertname}");
        assert_eq!(
            selection.outcome.next_phase,
            Phase::NoActionRequired,
            "{alertname}: {selection:?}"
        );
        let reason = &selection.outcome.reason;
        assert!(
            reason.contains("alerting pipeline"),
            "{alertname}: {reason}"
        );
        assert!(reason.contains("not about a Kubernetes object"), "{reason}");
        assert!(!reason.contains("healthy again"), "{reason}");
        assert!(
            analysis
                .rca
                .root_cause_analysis
                .remediation_target
                .is_none()
        );
        assert!(selection.selected.is_none());
    }
    for (alertname, source, shown) in [
        (
            "TargetDown",
            "kube-prometheus-stack/",
            &[
                "alertname=TargetDown",
                "namespace=shop",
                "service=checkout",
                "job=checkout",
            ][..],
        ),
        (
            "KubeAPIErrorBudgetBurn",
            "kube-prometheus-stack/",
            &["alertname=KubeAPIErrorBudgetBurn", "long=1h", "short=5m"][..],
        ),
        (
            "NodeFilesystemAlmostOutOfSpace",
            "kube-prometheus-stack/",
            &[
                "job=node-exporter",
                "instance=10.0.1.12:9100",
                "mountpoint=/",
            ][..],
        ),
        (
            "CheckoutLatencyHigh",
            "application",
            &["service=checkout", "job=checkout"][..],
        ),
    ] {
        let labels = labels_of(alertname, source, &[]);
        let (req, _, selection) = investigate("problem-resolved", &labels).await;
        assert_eq!(req.target, None, "{alertname}");
        assert_eq!(
            selection.outcome.next_phase,
            Phase::ManualReviewRequired,
            "{alertname}: {selection:?}"
        );
        let reason = &selection.outcome.reason;
        assert!(
            reason.contains("names no Kubernetes object"),
            "{alertname}: {reason}"
        );
        for s in shown {
            assert!(reason.contains(s), "{alertname}: {s} missing from {reason}");
        }
        assert!(!reason.contains("healthy again"), "{reason}");
        assert!(!reason.contains("severity="), "{reason}");
    }
}

/// `kubemedic investigate` with a Watchdog body: the command's JSON says no action, and why.
#[test]
fn the_investigate_command_says_watchdog_is_the_pipelines_heartbeat() {
    let labels = labels_of("Watchdog", "kube-prometheus-stack/", &[]);
    let dir = tempfile::tempdir().unwrap();
    let alert = dir.path().join("watchdog.json");
    std::fs::write(
        &alert,
        body(&labels, "0123456789abcdef", "2026-11-21T23:00:00Z").to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["investigate", "--alert"])
        .arg(&alert)
        .arg("--snapshot")
        .arg(common::scenarios::dir("problem-resolved").join("snapshot.yaml"))
        .env_remove("KUBEMEDIC_LLM")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["phase"], "NoActionRequired", "{record}");
    assert_eq!(
        record["rca"]["investigation_outcome"], "not_actionable",
        "{record}"
    );
    assert!(
        record["reason"]
            .as_str()
            .unwrap()
            .contains("alerting pipeline"),
        "{record}"
    );
}
