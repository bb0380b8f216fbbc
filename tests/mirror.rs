//! Requests visible with kubectl (src/mirror), on the real API server tier with a real kubectl
//! (the one installed, or Debian's kubernetes-client: scripts/setup.sh): a staged bad rollout, auto-approved in staging, is followed with `kubectl get
//! remediations -A -o json` from Received to Completed — phase, target, workflow, decision,
//! approval, the verdict and the dashboard link in its status; `kubectl get` prints the
//! printer columns, `kubectl describe` the timeline and an Event per phase; the object is gone
//! once its retention is over, while the store keeps the request. A second replica's mirror
//! writes beside the daemon's: the same content, so writing again changes nothing (no new
//! version, no Event again), and both delete. A cluster that refuses the
//! mirror's writes (its role not granted) holds no request up; once the role is granted, the
//! objects appear.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::incident::{kubelet, resolve_and_finish, serving};
use common::kube::{Kube, chart_rules};
use kubemedic::clock::SystemClock;
use kubemedic::domain::Phase;
use kubemedic::mirror::{Mirror, MirrorSettings};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const PUBLIC_URL: &str = "https://kubemedic.example.com";

/// kubectl as the test cluster's admin: (succeeded, stdout, stderr).
async fn kubectl(k: &Kube, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .args(args)
        .output()
        .await
        .expect("run kubectl (scripts/setup.sh installs it)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The object named `id` as `kubectl get remediations -A -o json` lists it.
async fn listed(k: &Kube, id: &str) -> Option<Value> {
    let (ok, out, err) = kubectl(k, &["get", "remediations", "-A", "-o", "json"]).await;
    assert!(ok, "kubectl get remediations -A: {err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == id)
        .cloned()
}

async fn metrics(d: &common::TestDaemon) -> String {
    d.client
        .get(d.url("/metrics"))
        .bearer_auth(common::API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of one sample of `/metrics` (0 when absent).
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_incident_is_followed_with_kubectl_until_its_retention_ends() {
    let Some(k) = Kube::new("mirror").await else {
        return;
    };
    // As docs/operations.md says to after an upgrade (helm installs crds/ only once).
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/kubemedic/crds/");
    let (ok, _, err) = kubectl(
        &k,
        &["apply", "--server-side", "--force-conflicts", "-f", crds],
    )
    .await;
    assert!(ok, "{err}");
    k.kubemedic_crds().await;
    let staged = common::scenarios::bad_rollouts(&[&k]).await.remove(0);
    let d = serving(&k, |a| {
        a.mirror.mirror_remediations = true;
        a.mirror.mirror_retention_seconds = Some(10);
        a.approvals.public_url = Some(PUBLIC_URL.into());
    })
    .await;
    // Another replica's mirror on the same store: both write every change.
    let replica_metrics = Arc::new(kubemedic::telemetry::Metrics::new());
    let replica = Mirror::on_kube(
        k.client.clone(),
        d.store.clone(),
        &MirrorSettings {
            enabled: true,
            namespace: None,
            retention: Duration::from_secs(10),
            dashboard: Some(PUBLIC_URL.into()),
        },
        Arc::new(SystemClock),
        Some(replica_metrics.clone()),
    )
    .unwrap();
    let replica_stop = CancellationToken::new();
    tokio::spawn(replica.clone().run(replica_stop.clone()));
    let kubelet = kubelet(&k);
    let v: Value = d
        .send_alertmanager(&staged.alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();

    // kubectl, polled while the request runs: the phases it shows, in order.
    let watcher = {
        let k = k.clone_handle();
        let id = id.clone();
        tokio::spawn(async move {
            let mut seen: Vec<String> = Vec::new();
            for _ in 0..600 {
                if let Some(o) = listed(&k, &id).await
                    && let Some(phase) = o["status"]["phase"].as_str()
                {
                    if seen.last().map(String::as_str) != Some(phase) {
                        seen.push(phase.to_owned());
                    }
                    if Phase::parse(phase).is_some_and(Phase::is_terminal) {
                        return (seen, o);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            panic!("the object never reached a final phase; seen {seen:?}");
        })
    };
    let done = resolve_and_finish(&d, &staged.alert, &id).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    let (seen, o) = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("kubectl shows the final phase")
        .unwrap();

    // It progressed through the pipeline, as kubectl saw it, to Completed.
    let phases: Vec<Phase> = seen.iter().map(|p| Phase::parse(p).unwrap()).collect();
    assert!(
        phases.windows(2).all(|w| w[0] < w[1]),
        "phases in pipeline order: {seen:?}"
    );
    assert!(
        phases.contains(&Phase::Verifying) && phases.len() >= 2,
        "{seen:?}"
    );
    assert_eq!(phases.last(), Some(&Phase::Completed));

    // Where and what: in the target's namespace, the request's id, the status the dashboard
    // shows.
    let target = &done["target"];
    assert_eq!(o["metadata"]["namespace"], k.ns.as_str(), "{o:#}");
    assert_eq!(o["metadata"]["labels"]["kubemedic.io/phase"], "Completed");
    assert_eq!(
        o["metadata"]["labels"]["kubemedic.io/request-id"],
        id.as_str()
    );
    assert_eq!(o["spec"]["requestId"], id.as_str());
    assert_eq!(
        o["spec"]["signal"],
        staged.alert["alerts"][0]["labels"]["alertname"]
    );
    assert_eq!(o["spec"]["target"]["name"], target["name"]);
    let status = &o["status"];
    assert_eq!(
        status["target"],
        format!(
            "{}/{}",
            target["kind"].as_str().unwrap(),
            target["name"].as_str().unwrap()
        )
    );
    let workflow = done["state"]["selection"]["selected"]["workflow_id"].clone();
    assert_eq!(workflow, "rollback-deployment-previous-revision");
    assert_eq!(status["workflow"], workflow);
    assert_eq!(status["decision"], "AutoApproved");
    assert_eq!(status["approval"], "NotRequired");
    assert_eq!(status["effective"], true);
    assert_eq!(status["reason"], done["reason"]);
    assert_eq!(status["dashboard"], format!("{PUBLIC_URL}/requests/{id}"));
    let timeline = status["timeline"].as_array().unwrap();
    assert!(
        !timeline.is_empty() && timeline.len() <= 20,
        "{timeline:#?}"
    );
    assert_eq!(
        timeline.last().unwrap()["message"],
        done["timeline"].as_array().unwrap().last().unwrap()["message"],
        "the timeline ends where the store's does"
    );
    assert!(
        timeline
            .iter()
            .any(|e| e["kind"] == "transition"
                && e["message"].as_str().unwrap().contains("Completed")),
        "{timeline:#?}"
    );

    // Writing it again changes nothing: the same content, no new version, no Event again.
    let events_of = |described: &str| {
        described
            .split("Events:")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let (_, before, _) = kubectl(&k, &["describe", "remediation", &id, "-n", &k.ns]).await;
    let version =
        k.get("kubemedic.io/v1alpha1", "Remediation", &id).await["metadata"]["resourceVersion"]
            .clone();
    replica.mirror(id.parse().unwrap()).await.unwrap();
    let again = k.get("kubemedic.io/v1alpha1", "Remediation", &id).await;
    assert_eq!(again["metadata"]["resourceVersion"], version, "{again:#}");
    let (_, after, _) = kubectl(&k, &["describe", "remediation", &id, "-n", &k.ns]).await;
    assert_eq!(events_of(&after), events_of(&before), "{after}");

    // The printer columns.
    let (ok, all, err) = kubectl(&k, &["get", "remediations", "-A"]).await;
    assert!(ok, "{err}");
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE") && all.contains(&id),
        "{all}"
    );
    let (ok, table, err) = kubectl(&k, &["get", "remediations", "-n", &k.ns]).await;
    assert!(ok, "{err}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "PHASE", "TARGET", "WORKFLOW", "DECISION", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        [
            id.as_str(),
            "Completed",
            status["target"].as_str().unwrap(),
            "rollback-deployment-previous-revision",
            "AutoApproved"
        ],
        "{table}"
    );
    let (ok, wide, err) = kubectl(&k, &["get", "rem", "-A", "-o", "wide"]).await;
    assert!(ok, "{err}");
    assert!(
        wide.lines().next().unwrap().contains("SIGNAL")
            && wide.contains(
                staged.alert["alerts"][0]["labels"]["alertname"]
                    .as_str()
                    .unwrap()
            ),
        "{wide}"
    );

    // describe: the status with its timeline, and an Event per phase entered.
    let (ok, described, err) = kubectl(&k, &["describe", "remediation", &id, "-n", &k.ns]).await;
    assert!(ok, "{err}");
    assert!(described.contains("Timeline:"), "{described}");
    assert!(
        described.contains("Workflow:")
            && described.contains("rollback-deployment-previous-revision"),
        "{described}"
    );
    let events = described.split("Events:").nth(1).unwrap_or_default();
    assert!(
        events.contains("Completed") && events.contains("Verifying") && events.contains("Normal"),
        "{described}"
    );

    // Selected by phase.
    let (ok, completed, err) = kubectl(
        &k,
        &[
            "get",
            "remediations",
            "-A",
            "-l",
            "kubemedic.io/phase=Completed",
            "-o",
            "name",
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        completed.contains(&format!("remediation.kubemedic.io/{id}")),
        "{completed}"
    );

    // Both replicas write every change, but a write that finds the object already showing its
    // content is skipped: whichever came first wrote it, so the two count it between them.
    let written = r#"kubemedic_remediation_mirror_writes_total{op="write",result="ok"}"#;
    let m = metrics(&d).await;
    let theirs = replica_metrics.render();
    assert!(
        sample(&m, written) + sample(&theirs, written) >= 2.0,
        "{m}\n{theirs}"
    );

    // The retention: the finished request's object goes; the store keeps the request.
    k.wait("the object deleted after its retention", 90, || async {
        let (ok, _, err) = kubectl(&k, &["get", "remediation", &id, "-n", &k.ns]).await;
        (!ok && err.contains("NotFound")).then_some(())
    })
    .await;
    assert_eq!(
        d.api(&format!("/api/v1/requests/{id}")).await["phase"],
        "Completed"
    );
    replica_stop.cancel();
    // Whichever replica's sweep came first deleted it.
    let deleted = r#"kubemedic_remediation_mirror_writes_total{op="delete",result="ok"}"#;
    let m = metrics(&d).await;
    let theirs = replica_metrics.render();
    assert!(
        sample(&m, deleted) + sample(&theirs, deleted) >= 1.0,
        "{m}\n{theirs}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_refuses_the_mirror_holds_no_request_up() {
    let Some(k) = Kube::new("mirror-rbac").await else {
        return;
    };
    k.kubemedic_crds().await;
    let staged = common::scenarios::bad_rollouts(&[&k]).await.remove(0);
    // kubemedic as the chart installs it, minus the mirror's role.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = k
        .service_account(
            "kubemedic",
            chart_rules(&["reader", "writer", "job"]),
            dir.path(),
        )
        .await;
    let d = serving(&k, |a| {
        a.cluster.kubeconfig = Some(kubeconfig.clone());
        a.mirror.mirror_remediations = true;
    })
    .await;
    let kubelet = kubelet(&k);
    let v: Value = d
        .send_alertmanager(&staged.alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let done = resolve_and_finish(&d, &staged.alert, &id).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "the request went on: {done:#}");
    let m = metrics(&d).await;
    assert!(
        sample(
            &m,
            r#"kubemedic_remediation_mirror_writes_total{op="write",result="failed"}"#
        ) >= 1.0,
        "{m}"
    );
    assert!(listed(&k, &id).await.is_none(), "nothing was written");

    // The role granted: the failed write is retried (made due at once by the next write that
    // succeeds, a new request's here) and the finished request shows.
    let mirror_role = format!("kubemedic-mirror-{}", k.ns);
    k.grant("kubemedic", &mirror_role, chart_rules(&["mirror"]))
        .await;
    let other = common::scenarios::alert(
        "KubePodCrashLooping",
        "warning",
        &[("namespace", &k.ns), ("pod", "gone-0")],
        &[("summary", "a pod that no longer exists")],
        "",
    );
    let v: Value = d
        .send_alertmanager(&other.to_string())
        .await
        .json()
        .await
        .unwrap();
    let other_id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let o = k
        .wait("the finished request's object", 90, || async {
            listed(&k, &id)
                .await
                .filter(|o| o["status"]["phase"] == "Completed")
        })
        .await;
    assert_eq!(
        o["status"]["workflow"],
        "rollback-deployment-previous-revision"
    );
    assert!(listed(&k, &other_id).await.is_some());
    d.stop().await;
    k.drop_role(&mirror_role).await;
    k.drop_role(&format!("kubemedic-{}", k.ns)).await;
}
