//! End to end with the real neighbours: Debian's Alertmanager, configured with the README's
//! receiver (`docs/alertmanager-receiver.yml`, bearer auth from a credentials file), delivers
//! staged incidents on the real API server to the daemon; in staging the daemon remediates
//! without a human, in production it waits, the test approves from the mail the real SMTP
//! server received, and the workflow runs; Alertmanager's resolved notification completes
//! verification. Debian's Prometheus evaluates a rule on a kube-state-metrics series served by
//! the test and sends to Alertmanager, which delivers to the daemon.
//!
//! Each test runs its own Alertmanager (and Prometheus) with the binary the test script found
//! (`KUBEMEDIC_TEST_ALERTMANAGER_BIN`, `KUBEMEDIC_TEST_PROMETHEUS_BIN`), pointed at its daemon.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::incident::{ALICE, is_terminal, kubelet, mails_for, production_incident};
use common::kube::Kube;
use kubemedic::secret::Secret;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The receiver the README shows, verbatim.
const RECEIVER: &str = include_str!("../docs/alertmanager-receiver.yml");
/// Where the example sends and where it reads the token: replaced by the test's.
const EXAMPLE_URL: &str = "http://kubemedic.kubemedic.svc:8080";
const EXAMPLE_TOKEN_FILE: &str = "/etc/alertmanager/secrets/kubemedic-webhook-token";
const PUBLIC: &str = "https://kubemedic.example.test";

/// A server the test started; killed when dropped.
struct Service {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(bin: &str, args: &[String], dir: tempfile::TempDir, port: u16, what: &str) -> Service {
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{what} ({bin}): {e}"));
    Service {
        child,
        url: format!("http://127.0.0.1:{port}"),
        dir,
    }
}

async fn wait_ready(s: &mut Service, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(format!("{}/-/ready", s.url)).await
            && r.status().is_success()
        {
            return;
        }
        if let Ok(Some(status)) = s.child.try_wait() {
            panic!("{what} exited ({status}): {}", s.log());
        }
        assert!(Instant::now() < deadline, "{what} not ready: {}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The README's receiver as this test's Alertmanager runs it: the daemon's address and a file
/// holding its webhook token in place of the example's, and short grouping timers so a test
/// does not wait minutes (the example leaves Alertmanager's defaults).
fn receiver_config(daemon: &str, token_file: &Path) -> String {
    assert!(RECEIVER.contains(EXAMPLE_URL) && RECEIVER.contains(EXAMPLE_TOKEN_FILE));
    assert!(RECEIVER.contains("send_resolved: true"));
    assert!(RECEIVER.starts_with("route:\n"));
    RECEIVER
        .replace(EXAMPLE_URL, daemon)
        .replace(EXAMPLE_TOKEN_FILE, &token_file.display().to_string())
        .replacen(
            "route:\n",
            "route:\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n",
            1,
        )
}

/// A namespace on the real API server, when the Alertmanager and Prometheus binaries are there
/// too (else the loud skip, or the failure in CI).
async fn monitored_cluster(prefix: &str) -> Option<Kube> {
    let k = Kube::new(prefix).await?;
    common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)")?;
    common::component("KUBEMEDIC_TEST_PROMETHEUS_BIN", "Prometheus (binary)")?;
    Some(k)
}

/// An Alertmanager of its own, configured with the README's receiver pointed at `daemon`.
async fn alertmanager(daemon: &str) -> Option<Service> {
    alertmanager_with_token(daemon, common::WEBHOOK_TOKEN).await
}

async fn alertmanager_with_token(daemon: &str, token_text: &str) -> Option<Service> {
    let bin = common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)")?;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("kubemedic-webhook-token");
    // As `echo TOKEN > file` writes it: Alertmanager trims the newline.
    std::fs::write(&token, format!("{token_text}\n")).unwrap();
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(&config, receiver_config(daemon, &token)).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let port = free_port();
    let args = vec![
        format!("--config.file={}", config.display()),
        format!("--storage.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        "--cluster.listen-address=".to_owned(),
    ];
    let mut s = spawn(&bin, &args, dir, port, "alertmanager");
    wait_ready(&mut s, "alertmanager").await;
    Some(s)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Post the staged alert to Alertmanager's API v2 as Prometheus would: firing (no end), or
/// resolved (ending now).
async fn post_to_alertmanager(am: &Service, staged: &Value, resolved: bool) {
    let a = &staged["alerts"][0];
    let mut alert = json!({
        "labels": a["labels"],
        "annotations": a["annotations"],
        "startsAt": a["startsAt"],
        "generatorURL": a["generatorURL"],
    });
    if resolved {
        alert["endsAt"] = json!(rfc3339(Utc::now()));
    }
    let r = reqwest::Client::new()
        .post(format!("{}/api/v2/alerts", am.url))
        .json(&json!([alert]))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

/// The one request the daemon opened, once it has.
async fn the_request(d: &common::TestDaemon, am: &Service, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let all = d.api("/api/v1/requests").await;
        let items = all["items"].as_array().unwrap();
        if let Some(r) = items.first() {
            assert_eq!(items.len(), 1, "{all:#}");
            return d
                .api(&format!("/api/v1/requests/{}", r["id"].as_str().unwrap()))
                .await;
        }
        assert!(
            Instant::now() < deadline,
            "Alertmanager delivered nothing within {secs}s; its log:\n{}",
            am.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The webhook that opened `req` came from this Alertmanager (its external URL names its port).
fn assert_delivered_by(req: &Value, am: &Service) {
    let port = am.url.rsplit(':').next().unwrap();
    let external = req["signal"]["external_url"].as_str().unwrap_or("");
    assert!(
        external.ends_with(&format!(":{port}")),
        "delivered by this Alertmanager: {req:#}"
    );
}

/// Alertmanager's own count of webhook notifications (`alertmanager_notifications_total` or
/// `…_failed_total`).
async fn am_counter(am: &Service, name: &str) -> f64 {
    let text = reqwest::get(format!("{}/metrics", am.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains("integration=\"webhook\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Once the request verifies, the alert resolves: posted to Alertmanager, which sends the
/// resolved notification; the request ends.
async fn resolve_through_alertmanager(
    d: &common::TestDaemon,
    am: &Service,
    staged: &Value,
    id: &str,
) -> Value {
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    post_to_alertmanager(am, staged, true).await;
    d.eventually(&format!("/api/v1/requests/{id}"), 90, is_terminal)
        .await
}

/// The verdict rests on the resolved notification Alertmanager delivered (the daemon is not
/// given `--alertmanager-url`, so it cannot have asked).
fn assert_verified_by_the_notification(done: &Value) {
    assert_eq!(done["phase"], "Completed", "{done:#}");
    let a = &done["state"]["assessment"];
    assert_eq!(a["effective"], true, "{a:#}");
    assert_eq!(a["signal_resolved"], true, "{a:#}");
    assert!(
        a["details"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "alert: resolved after the remediation"),
        "{a:#}"
    );
}

/// The README shows the receiver the tests run, character for character.
#[test]
fn the_readme_shows_the_receiver_the_tests_run() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("```yaml\n{RECEIVER}```\n")),
        "README's \"Sending alerts from Alertmanager\" must show docs/alertmanager-receiver.yml verbatim"
    );
}

/// A receiver with the wrong token: the daemon refuses every delivery (401), opens nothing,
/// and Alertmanager counts the failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_with_the_wrong_token_delivers_nothing() {
    if common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)").is_none() {
        return;
    }
    let d = common::TestDaemon::start_with(|_| {}, common::stalled(), None).await;
    let am = alertmanager_with_token(&d.base, "not-the-token")
        .await
        .unwrap();
    let alert = common::scenarios::alert(
        "KubePodCrashLooping",
        "critical",
        &[("namespace", "shop"), ("pod", "checkout-1")],
        &[],
        "",
    );
    post_to_alertmanager(&am, &alert, false).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while am_counter(&am, "alertmanager_notifications_failed_total").await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no failed delivery: {}",
            am.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(am.log().contains("401"), "{}", am.log());
    assert_eq!(d.api("/api/v1/requests").await["items"], json!([]));
    d.stop().await;
}

/// Staging: Alertmanager delivers the staged CrashLoopBackOff with the README's receiver; the
/// daemon rolls the Deployment back with nobody deciding; Alertmanager's resolved notification
/// completes verification, effective.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_delivers_a_staging_crashloop_and_the_daemon_remediates_it_alone() {
    let Some(k) = Kube::new("e2es").await else {
        return;
    };
    if common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)").is_none() {
        return;
    }
    let staged = common::scenarios::staged_in("crashloop-rollout", &[&k])
        .await
        .remove(0)
        .alert;
    let kubeconfig = k.kubeconfig.clone();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(10);
        a.execute.cooldown_seconds = Some(0);
    })
    .await;
    let am = alertmanager(&d.base).await.unwrap();
    post_to_alertmanager(&am, &staged, false).await;
    let req = the_request(&d, &am, 30).await;
    let id = req["id"].as_str().unwrap().to_owned();
    assert_eq!(req["signal"]["name"], "KubePodCrashLooping", "{req:#}");
    assert_eq!(req["signal"]["source"], "alertmanager", "{req:#}");
    assert_delivered_by(&req, &am);

    let kubelet = kubelet(&k);
    let done = resolve_through_alertmanager(&d, &am, &staged, &id).await;
    kubelet.abort();
    assert_verified_by_the_notification(&done);
    assert!(done["state"]["approval"].is_null(), "no human: {done:#}");
    assert_eq!(
        done["state"]["execution"]["workflow_id"], "rollback-deployment-previous-revision",
        "{done:#}"
    );
    assert_eq!(done["state"]["execution"]["outcome"], "succeeded");
    let deployment = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3",
        "rolled back once"
    );
    // Every notification was accepted (the bearer token from the credentials file worked).
    assert!(am_counter(&am, "alertmanager_notifications_total").await >= 2.0);
    assert_eq!(
        am_counter(&am, "alertmanager_notifications_failed_total").await,
        0.0,
        "{}",
        am.log()
    );
    d.stop().await;
}

/// The approve link in a mail's text, as a path on the test daemon.
fn approve_link(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with(&format!("{PUBLIC}/approvals/")) && w.contains("/approve?t="))
        .unwrap_or_else(|| panic!("no approve link in {text}"))
        .trim_start_matches(PUBLIC)
        .trim_end_matches(['>', ')', '.'])
        .to_owned()
}

/// Production: the same incident delivered by Alertmanager waits for a human; the approver
/// opens the mailed link (nothing decided) and confirms; the rollback runs; Alertmanager's
/// resolved notification completes verification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_delivers_a_production_crashloop_approved_from_the_mailed_link() {
    let (Some(smtp), Some(user), Some(pass), Some(mail_api)) = (
        common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)"),
    ) else {
        return;
    };
    if common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)").is_none() {
        return;
    }
    let Some(k) = Kube::new("e2ep").await else {
        return;
    };
    let (d, staged) = production_incident(&k, |a| {
        a.mail.smtp_url = Some(smtp);
        a.mail.smtp_username = Some(user);
        a.mail.smtp_password = Some(Secret::new(pass));
        a.mail.email_from = Some("kubemedic <kubemedic@example.test>".into());
        a.approvals.public_url = Some(PUBLIC.into());
        a.verify.verification_window_seconds = Some(10);
    })
    .await;
    let am = alertmanager(&d.base).await.unwrap();
    post_to_alertmanager(&am, &staged, false).await;
    let req = the_request(&d, &am, 30).await;
    assert_delivered_by(&req, &am);
    let id = req["id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 60, |r| {
            r["phase"] == "AwaitingApproval" || is_terminal(r)
        })
        .await;
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    let pending = d.api("/api/v1/approvals?status=pending").await;
    let approval = pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["request_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{pending:#}"))
        .clone();
    let aid = approval["id"].as_str().unwrap();

    let mails = mails_for(&mail_api, aid, 2).await;
    let to_alice = mails
        .iter()
        .find(|m| m["to"].to_string().contains(ALICE))
        .unwrap_or_else(|| panic!("no mail to {ALICE}: {mails:#?}"));
    let approve = approve_link(to_alice["text"].as_str().unwrap());
    // Opening the link decides nothing.
    let page = d.client.get(d.url(&approve)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        d.api(&format!("/api/v1/requests/{id}")).await["phase"],
        "AwaitingApproval"
    );
    // Confirming does.
    let kubelet = kubelet(&k);
    let (path, token) = approve.split_once("?t=").unwrap();
    let r = d
        .client
        .post(d.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        // The token is as the link carries it, already URL-encoded.
        .body(format!("t={token}&message=approved+from+the+mail"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    let done = resolve_through_alertmanager(&d, &am, &staged, &id).await;
    kubelet.abort();
    assert_verified_by_the_notification(&done);
    assert_eq!(done["state"]["approval"]["decided_by"], ALICE);
    assert_eq!(done["state"]["approval"]["decided_via"], "email");
    assert_eq!(done["state"]["execution"]["outcome"], "succeeded");
    assert_eq!(
        am_counter(&am, "alertmanager_notifications_failed_total").await,
        0.0,
        "{}",
        am.log()
    );
    d.stop().await;
}

/// A kube-state-metrics stand-in: one `kube_pod_container_status_waiting_reason` series for
/// the pod, its value `value` (1 while the pod crash-loops).
async fn kube_state_metrics(ns: String, pod: String, value: Arc<AtomicU8>) -> u16 {
    serve_metrics(move || {
        format!(
            "# TYPE kube_pod_container_status_waiting_reason gauge\n\
             kube_pod_container_status_waiting_reason{{namespace=\"{ns}\",pod=\"{pod}\",\
             container=\"checkout\",reason=\"CrashLoopBackOff\"}} {}\n",
            value.load(Ordering::SeqCst)
        )
    })
    .await
}

/// An exporter stand-in on a free port: every scrape answers with what `render` gives then.
async fn serve_metrics(render: impl Fn() -> String + Send + 'static) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = render();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    port
}

/// Seconds since `start`, frozen from the first call that finds `moving` at 0: a series that
/// moves while the flag is up, then holds.
fn moving_for(
    start: Instant,
    stopped_at: &std::sync::Mutex<Option<Duration>>,
    moving: &AtomicU8,
) -> Duration {
    let mut stopped = stopped_at.lock().unwrap();
    if moving.load(Ordering::SeqCst) == 0 && stopped.is_none() {
        *stopped = Some(start.elapsed());
    }
    stopped.unwrap_or_else(|| start.elapsed())
}

/// The kube-prometheus CrashLoopBackOff rule, evaluated every second.
const RULES: &str = r#"groups:
  - name: kubemedic-e2e
    interval: 1s
    rules:
      - alert: KubePodCrashLooping
        expr: kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff", job="kube-state-metrics"} >= 1
        labels:
          severity: critical
        annotations:
          summary: Pod is crash looping
          description: 'Pod {{ $labels.namespace }}/{{ $labels.pod }} ({{ $labels.container }}) is in waiting state (reason: CrashLoopBackOff).'
"#;

/// A Prometheus of its own: scrapes the kube-state-metrics stand-in, evaluates [`RULES`] and
/// sends to `am`.
async fn prometheus(am: &Service, ksm_port: u16) -> Option<Service> {
    prometheus_with(am, "kube-state-metrics", ksm_port, RULES).await
}

/// A Prometheus of its own: scrapes `job` at `port`, evaluates `rules_text`, sends to `am`.
async fn prometheus_with(am: &Service, job: &str, port: u16, rules_text: &str) -> Option<Service> {
    let ksm_port = port;
    let bin = common::component("KUBEMEDIC_TEST_PROMETHEUS_BIN", "Prometheus (binary)")?;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, rules_text).unwrap();
    let am_addr = am.url.trim_start_matches("http://");
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: ['{}']\n\
         alerting:\n  alertmanagers:\n    - static_configs: [{{targets: ['{am_addr}']}}]\n\
         scrape_configs:\n  - job_name: {job}\n    \
         static_configs: [{{targets: ['127.0.0.1:{ksm_port}']}}]\n",
        rules.display()
    );
    let file = dir.path().join("prometheus.yml");
    std::fs::write(&file, config).unwrap();
    let port = free_port();
    let args = vec![
        format!("--config.file={}", file.display()),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    let mut s = spawn(&bin, &args, dir, port, "prometheus");
    wait_ready(&mut s, "prometheus").await;
    Some(s)
}

/// Prometheus rule → Alertmanager → daemon: the rule fires on the crash-looping pod's series;
/// Alertmanager delivers it; the daemon opens a request for that pod and investigates it; in
/// staging it rolls back; the series clears, Prometheus resolves the alert, Alertmanager
/// notifies, and the alert's own expression (re-evaluated in Prometheus) no longer holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_rule_fires_through_alertmanager_into_the_daemon() {
    let Some(k) = monitored_cluster("e2ek").await else {
        return;
    };
    let staged = common::scenarios::staged_in("crashloop-rollout", &[&k])
        .await
        .remove(0)
        .alert;
    let pod = staged["alerts"][0]["labels"]["pod"]
        .as_str()
        .unwrap()
        .to_owned();
    let crashing = Arc::new(AtomicU8::new(1));
    let ksm = kube_state_metrics(k.ns.clone(), pod.clone(), crashing.clone()).await;

    let kubeconfig = k.kubeconfig.clone();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(15);
        a.execute.cooldown_seconds = Some(0);
    })
    .await;
    let am = alertmanager(&d.base).await.unwrap();
    let prom = prometheus(&am, ksm).await.unwrap();

    let req = the_request(&d, &am, 60).await;
    let id = req["id"].as_str().unwrap().to_owned();
    assert_delivered_by(&req, &am);
    let labels = &req["signal"]["labels"];
    assert_eq!(req["signal"]["name"], "KubePodCrashLooping", "{req:#}");
    assert_eq!(labels["namespace"], k.ns.as_str(), "{req:#}");
    assert_eq!(labels["pod"], pod.as_str(), "{req:#}");
    assert_eq!(labels["job"], "kube-state-metrics", "{req:#}");
    let port = prom.url.rsplit(':').next().unwrap();
    let generator = req["signal"]["generator_url"].as_str().unwrap_or("");
    assert!(
        generator.contains(&format!(
            ":{port}/graph?g0.expr=kube_pod_container_status_waiting_reason"
        )),
        "the alert comes from this Prometheus' rule: {req:#}"
    );
    assert_eq!(
        req["target"],
        json!({"kind": "Pod", "name": pod, "namespace": k.ns}),
        "{req:#}"
    );
    // Investigated, with the right target: the pod's Deployment.
    let investigated = d
        .eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
            !r["state"]["analysis"].is_null() || is_terminal(r)
        })
        .await;
    let inv = &investigated["state"]["analysis"];
    assert!(!inv.is_null(), "{investigated:#}");
    assert!(
        inv.to_string().contains("checkout"),
        "the investigation is about checkout: {inv:#}"
    );

    // The rollback runs; the pod no longer crash-loops; Prometheus resolves, Alertmanager says so.
    let kubelet = kubelet(&k);
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    crashing.store(0, Ordering::SeqCst);
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 90, is_terminal)
        .await;
    kubelet.abort();
    assert_verified_by_the_notification(&done);
    assert_eq!(done["state"]["execution"]["outcome"], "succeeded");
    assert_eq!(
        done["state"]["execution"]["target"],
        json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns}),
        "{done:#}"
    );
    drop(prom);
    d.stop().await;
}

/// A kubelet's volume stats stand-in: `kubelet_volume_stats_available_bytes` and
/// `…_capacity_bytes` for one claim, the free space falling 100 MiB a second while `filling`
/// (a volume filling up), then holding.
async fn kubelet_volume_stats(ns: String, pvc: String, filling: Arc<AtomicU8>) -> u16 {
    let capacity: u64 = 10 << 30;
    let start = Instant::now();
    let stopped_at = std::sync::Mutex::new(None::<Duration>);
    serve_metrics(move || {
        let elapsed = moving_for(start, &stopped_at, &filling);
        let used = (elapsed.as_millis() as u64 * (100 << 20) / 1000).min(capacity / 2);
        let labels = format!("namespace=\"{ns}\",persistentvolumeclaim=\"{pvc}\"");
        format!(
            "# TYPE kubelet_volume_stats_available_bytes gauge\n\
             kubelet_volume_stats_available_bytes{{{labels}}} {}\n\
             # TYPE kubelet_volume_stats_capacity_bytes gauge\n\
             kubelet_volume_stats_capacity_bytes{{{labels}}} {capacity}\n",
            capacity - (4 << 30) - used
        )
    })
    .await
}

/// The kube-prometheus `KubePersistentVolumeFillingUp` prediction, over a short window and
/// evaluated every second.
const PREDICTION_RULES: &str = r#"groups:
  - name: kubemedic-e2e-proactive
    interval: 1s
    rules:
      - alert: KubePersistentVolumeFillingUp
        expr: predict_linear(kubelet_volume_stats_available_bytes{job="kubelet"}[10s], 4 * 24 * 3600) < 0
        labels:
          severity: warning
        annotations:
          summary: PersistentVolume is filling up and is expected to fill within 4 days
"#;

/// A `predict_linear` rule in Prometheus → Alertmanager → daemon: the prediction on a PVC's
/// falling free space opens a request labelled proactive (API and audit); the claim's
/// StorageClass allows expansion, so in staging the daemon expands the claim ahead of time with
/// nobody deciding; the fill stops, Prometheus resolves the prediction, the request completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predict_linear_rule_expands_a_filling_claim_ahead_of_time() {
    let Some(k) = monitored_cluster("e2ep").await else {
        return;
    };
    common::scenarios::staged_in("pvc-fill-predicted", &[&k]).await;
    let filling = Arc::new(AtomicU8::new(1));
    let kubelet_port =
        kubelet_volume_stats(k.ns.clone(), "data-postgres-0".into(), filling.clone()).await;

    let (d, am, prom) = predicting(&k, kubelet_port, PREDICTION_RULES).await;
    let req = the_request(&d, &am, 60).await;
    let id = req["id"].as_str().unwrap().to_owned();
    assert_delivered_by(&req, &am);
    assert_eq!(
        req["signal"]["name"], "KubePersistentVolumeFillingUp",
        "{req:#}"
    );
    let generator = req["signal"]["generator_url"].as_str().unwrap_or("");
    assert!(generator.contains("predict_linear"), "{req:#}");
    assert_proactive(&req);
    assert_eq!(
        req["target"],
        json!({"kind": "PersistentVolumeClaim", "name": "data-postgres-0", "namespace": k.ns}),
        "{req:#}"
    );

    // Expanded ahead of time, with no human: the claim asks for half as much again.
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    let pvc = k
        .get("v1", "PersistentVolumeClaim", "data-postgres-0")
        .await;
    assert_eq!(
        pvc["spec"]["resources"]["requests"]["storage"], "15Gi",
        "{pvc:#}"
    );
    // The volume stops filling; the prediction no longer holds; Prometheus resolves it.
    filling.store(0, Ordering::SeqCst);
    done_ahead_of_time(&d, &id, "expand-pvc").await;
    drop(prom);
    d.stop().await;
}

/// A kubelet's cAdvisor stand-in: `container_memory_working_set_bytes` of one container,
/// 300 MiB and rising 4 MiB a second while `growing`, then holding (at most 480 MiB).
async fn kubelet_memory(ns: String, pod: String, growing: Arc<AtomicU8>) -> u16 {
    let start = Instant::now();
    let stopped_at = std::sync::Mutex::new(None::<Duration>);
    serve_metrics(move || {
        let elapsed = moving_for(start, &stopped_at, &growing);
        let mib: u64 = 1 << 20;
        let used = (300 * mib + elapsed.as_millis() as u64 * 4 * mib / 1000).min(480 * mib);
        format!(
            "# TYPE container_memory_working_set_bytes gauge\n\
             container_memory_working_set_bytes{{namespace=\"{ns}\",pod=\"{pod}\",\
             container=\"recommender\"}} {used}\n"
        )
    })
    .await
}

/// A memory-exhaustion prediction: the working set, projected 4 hours ahead, passes the
/// container's 512Mi limit.
const MEMORY_PREDICTION_RULES: &str = r#"groups:
  - name: kubemedic-e2e-proactive-memory
    interval: 1s
    rules:
      - alert: PredictedMemoryExhaustion
        expr: predict_linear(container_memory_working_set_bytes{job="kubelet"}[10s], 4 * 3600) > 512 * 1024 * 1024
        labels:
          severity: warning
        annotations:
          summary: The container will reach its memory limit within 4h
"#;

/// A `predict_linear` memory rule in Prometheus → Alertmanager → daemon: the prediction on a
/// pod's rising working set opens a proactive request; the Deployment's pods were already
/// OOMKilled, so in staging the daemon raises the memory limit ahead of time (512Mi → 768Mi);
/// the growth stops, Prometheus resolves the prediction, the request completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predict_linear_memory_rule_raises_the_limit_ahead_of_time() {
    let Some(k) = monitored_cluster("e2em").await else {
        return;
    };
    common::scenarios::staged_in("memory-exhaustion-predicted", &[&k]).await;
    let pods = k.pods("app=recommender", 2).await;
    let pod = pods[0]["metadata"]["name"].as_str().unwrap().to_owned();
    let growing = Arc::new(AtomicU8::new(1));
    let kubelet_port = kubelet_memory(k.ns.clone(), pod.clone(), growing.clone()).await;

    let (d, am, prom) = predicting(&k, kubelet_port, MEMORY_PREDICTION_RULES).await;
    let req = the_request(&d, &am, 60).await;
    let id = req["id"].as_str().unwrap().to_owned();
    assert_delivered_by(&req, &am);
    assert_eq!(
        req["signal"]["name"], "PredictedMemoryExhaustion",
        "{req:#}"
    );
    assert_proactive(&req);

    let node = format!("{}-worker-1", k.ns);
    let kk = k.clone_handle();
    let kubelet = tokio::spawn(async move {
        loop {
            common::scenarios::run_unscheduled(&kk, "app=recommender", &node).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    let deployment = k.get("apps/v1", "Deployment", "recommender").await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "768Mi",
        "{deployment:#}"
    );
    growing.store(0, Ordering::SeqCst);
    done_ahead_of_time(&d, &id, "increase-memory-limits").await;
    kubelet.abort();
    drop(prom);
    d.stop().await;
}

/// The daemon on `k` (the shipped policy, a short verification window), an Alertmanager
/// delivering to it, and a Prometheus scraping the stand-in exporter on `port` as job
/// `kubelet` with the prediction `rules`.
async fn predicting(k: &Kube, port: u16, rules: &str) -> (common::TestDaemon, Service, Service) {
    let kubeconfig = k.kubeconfig.clone();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(15);
        a.execute.cooldown_seconds = Some(0);
    })
    .await;
    let am = alertmanager(&d.base).await.unwrap();
    let prom = prometheus_with(&am, "kubelet", port, rules).await.unwrap();
    (d, am, prom)
}

/// Labelled proactive: in the API and in the audit's `received` event.
fn assert_proactive(req: &Value) {
    assert_eq!(req["signal_mode"], "proactive", "{req:#}");
    assert_eq!(req["signal"]["mode"], "proactive", "{req:#}");
    assert!(
        req["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "received"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("(proactive)"))),
        "{req:#}"
    );
}

/// The prediction resolved in Prometheus, the request completes, verified by the resolved
/// notification, with no human, `workflow` having succeeded.
async fn done_ahead_of_time(d: &common::TestDaemon, id: &str, workflow: &str) {
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 120, is_terminal)
        .await;
    assert_verified_by_the_notification(&done);
    assert!(done["state"]["approval"].is_null(), "no human: {done:#}");
    assert_eq!(
        done["state"]["execution"]["workflow_id"], workflow,
        "{done:#}"
    );
    assert_eq!(done["state"]["execution"]["outcome"], "succeeded");
}
