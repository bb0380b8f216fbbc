//! The `kubemedic` binary as an operator runs it: crash safety under SIGKILL, clean SIGTERM,
//! start-up validation, and what reaches the log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{API_TOKEN, WEBHOOK_TOKEN, alert_body};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kubemedic");

/// Requests per phase, as the summary API counts them (the list pages by key, without a total).
async fn phase_counts(client: &reqwest::Client, server: &Server) -> HashMap<String, usize> {
    let summary: Value = client
        .get(format!("{}/api/v1/summary?period=all", server.base))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    summary["by_phase"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_u64().unwrap() as usize,
            )
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(data_dir: &Path, port: u16, database_url: Option<&str>, extra: &[&str]) -> Server {
        Self::start_in(None, data_dir, port, database_url, extra)
    }

    /// `start`, in working directory `cwd` (default: the test's, the source tree).
    fn start_in(
        cwd: Option<&Path>,
        data_dir: &Path,
        port: u16,
        database_url: Option<&str>,
        extra: &[&str],
    ) -> Server {
        let mut cmd = Command::new(BIN);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--lease-seconds")
            .arg("2")
            .args(extra)
            .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
            .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
            .env("KUBEMEDIC_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(url) = database_url {
            cmd.env("KUBEMEDIC_DATABASE_URL", url);
        }
        // Without a cluster, requests wait for one up to --max-wait-seconds (default 15
        // minutes); these tests want them to end in review quickly.
        if !extra.contains(&"--max-wait-seconds") {
            cmd.env("KUBEMEDIC_MAX_WAIT_SECONDS", "1");
        }
        let mut child = cmd.spawn().expect("spawn kubemedic");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(r) = ureq_get(&format!("{}/readyz", self.base))
                && r == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "server not ready; log:\n{}",
            self.log.lock().unwrap().join("\n")
        );
    }

    fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// The log lines at WARN or ERROR (the JSON log).
fn loud(lines: &[String]) -> Vec<&String> {
    lines
        .iter()
        .filter(|l| l.contains(r#""level":"ERROR""#) || l.contains(r#""level":"WARN""#))
        .collect()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tiny blocking GET for readiness polling (no runtime needed).
fn ureq_get(url: &str) -> std::io::Result<u16> {
    get_text(url).map(|(status, _)| status)
}

/// Status and body of a GET (`Connection: close`, so the body is the rest of the stream).
fn get_text(url: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad response"))?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Ok((status, body.unwrap_or_default()))
}

async fn all_signals(client: &reqwest::Client, base: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let page: Value = client
            .get(format!(
                "{base}/api/v1/signals?limit=500&offset={}",
                out.len()
            ))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let items = page["items"].as_array().unwrap().clone();
        if items.is_empty() {
            return out;
        }
        out.extend(items);
    }
}

/// Fire `total` distinct alerts from `senders` concurrent clients; SIGKILL the server once
/// `kill_after` have been acknowledged. Returns the fingerprints that got a 2xx.
async fn burst_and_kill(
    server: &mut Server,
    total: usize,
    senders: usize,
    kill_after: usize,
) -> HashSet<String> {
    burst_and_signal(server, total, senders, kill_after, "KILL")
        .await
        .0
}

/// A burst of distinct alerts from `senders` concurrent clients; once `after` are
/// acknowledged the server gets `signal`. Returns the acknowledged fingerprints and how the
/// server exited.
async fn burst_and_signal(
    server: &mut Server,
    total: usize,
    senders: usize,
    kill_after: usize,
    signal: &str,
) -> (HashSet<String>, std::process::ExitStatus) {
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..senders {
        let (acked, next, client, base) = (
            acked.clone(),
            next.clone(),
            client.clone(),
            server.base.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= total {
                    return;
                }
                let fp = format!("burst{i:05}");
                let pod = format!("worker-{i}");
                let body = alert_body(
                    "firing",
                    "PodCrash",
                    &[("namespace", "load"), ("pod", &pod)],
                    &fp,
                    "2026-02-01T00:00:00Z",
                );
                let sent = client
                    .post(format!("{base}/api/v1/alerts/alertmanager"))
                    .bearer_auth(WEBHOOK_TOKEN)
                    .body(body)
                    .send()
                    .await;
                if let Ok(r) = sent
                    && r.status().is_success()
                {
                    acked.lock().unwrap().insert(fp);
                }
            }
        }));
    }
    loop {
        if acked.lock().unwrap().len() >= kill_after {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let pid = server.child.id().to_string();
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal}");
    let status = server.child.wait().unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let guard = acked.lock().unwrap();
    (guard.clone(), status)
}

/// Every acknowledged alert is stored exactly once, and no alert twice; returns the signals.
async fn stored_exactly_once(
    client: &reqwest::Client,
    server: &Server,
    acked: &HashSet<String>,
) -> Vec<Value> {
    let signals = all_signals(client, &server.base).await;
    let mut count: HashMap<String, usize> = HashMap::new();
    for s in &signals {
        *count
            .entry(s["fingerprint"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    for fp in acked {
        assert_eq!(
            count.get(fp),
            Some(&1),
            "acknowledged alert {fp} must be stored exactly once"
        );
    }
    assert!(count.values().all(|n| *n == 1), "no alert stored twice");
    signals
}

async fn crash_keeps_every_acknowledged_alert(database_url: Option<String>) {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = Server::start(dir.path(), port, database_url.as_deref(), &[]);
    let acked = burst_and_kill(&mut server, 3000, 24, 600).await;
    assert!(acked.len() >= 600, "{}", acked.len());
    assert!(acked.len() < 3000, "the kill landed mid-burst");
    drop(server);

    let server = Server::start(dir.path(), port, database_url.as_deref(), &[]);
    let client = reqwest::Client::new();
    let signals = stored_exactly_once(&client, &server, &acked).await;
    // Every stored signal has its request, and the restarted worker finishes them all,
    // including those claimed by the killed process.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let counts = phase_counts(&client, &server).await;
        let count = |p: &str| counts.get(p).copied().unwrap_or(0);
        if count("Received") == 0 && count("Enriching") == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "requests left unprocessed after restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let counts = phase_counts(&client, &server).await;
    assert_eq!(
        counts.get("ManualReviewRequired").copied().unwrap_or(0),
        signals.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_burst_loses_no_acknowledged_alert_sqlite() {
    crash_keeps_every_acknowledged_alert(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_burst_loses_no_acknowledged_alert_postgres() {
    common::init();
    if let Some(url) = common::fresh_postgres().await {
        crash_keeps_every_acknowledged_alert(Some(url)).await;
    }
}

/// SIGTERM in the middle of a burst: the server stops accepting, answers what it already
/// took in only once it is committed, and exits 0; after a restart every acknowledged alert is
/// there exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_mid_burst_commits_what_it_acknowledged_and_exits_zero() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = Server::start(dir.path(), port, None, &[]);
    let (acked, status) = burst_and_signal(&mut server, 3000, 24, 600, "TERM").await;
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    assert!(acked.len() >= 600 && acked.len() < 3000, "{}", acked.len());
    tokio::time::sleep(Duration::from_millis(200)).await; // the log reader catches up
    let log = server.log_lines().join("\n");
    assert!(log.contains("SIGTERM"), "{log}");
    drop(server);

    let server = Server::start(dir.path(), port, None, &[]);
    stored_exactly_once(&reqwest::Client::new(), &server, &acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_and_logs_carry_request_ids_but_no_secrets() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        dir.path(),
        free_port(),
        None,
        &["--webhook-basic-auth", "am:hunter2-basic"],
    );
    let client = reqwest::Client::new();
    for i in 0..5 {
        let body = alert_body(
            "firing",
            "PodCrash",
            &[("namespace", "shop"), ("pod", &format!("p{i}"))],
            &format!("t{i}"),
            "2026-02-01T00:00:00Z",
        );
        let r = client
            .post(format!("{}/api/v1/alerts/alertmanager", server.base))
            .bearer_auth(WEBHOOK_TOKEN)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counts = phase_counts(&client, &server).await;
        if counts.get("ManualReviewRequired") == Some(&5) {
            break;
        }
        assert!(Instant::now() < deadline, "worker did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = server.child.id() as i32;
    let rc = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    std::thread::sleep(Duration::from_millis(200));
    let lines = server.log_lines();
    let all = lines.join("\n");
    assert!(
        !all.contains(WEBHOOK_TOKEN),
        "webhook token leaked into the log"
    );
    assert!(!all.contains(API_TOKEN), "API token leaked into the log");
    assert!(
        !all.contains("hunter2-basic"),
        "basic-auth password leaked into the log"
    );
    let mut committed = 0;
    let mut transitions = 0;
    for line in &lines {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        match v["message"].as_str() {
            Some("signals committed") => {
                committed += 1;
                assert!(v["span"]["request_id"].is_string(), "{line}");
            }
            Some("phase changed") => {
                transitions += 1;
                assert!(v["span"]["request_id"].is_string(), "{line}");
            }
            _ => {}
        }
    }
    assert_eq!(committed, 5, "{all}");
    assert_eq!(transitions, 10, "{all}");
    assert!(all.contains("SIGTERM"), "{all}");
}

#[test]
fn bad_configuration_is_refused_before_serving_and_names_the_setting() {
    let out = Command::new(BIN)
        .args(["serve", "--listen", "localhost-ish", "--webhook-token", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen") && err.contains("KUBEMEDIC_LISTEN"),
        "{err}"
    );

    // Approvals configured to be mailed, but no address for their links; a Slack token with
    // nobody to press its buttons; a malformed approver: each names the flag, and no secret.
    for (args, names) in [
        (
            vec![
                "--approvers",
                "ops@example.com",
                "--smtp-url",
                "smtp://mail:25",
                "--email-from",
                "km@example.com",
                "--smtp-password",
                "mailpw-hunter2",
                "--smtp-username",
                "km",
            ],
            "--public-url",
        ),
        (
            vec![
                "--public-url",
                "https://km.example.com",
                "--slack-bot-token",
                "xoxb-1-hunter2",
                "--slack-channel",
                "ops",
                "--approvers",
                "ops@example.com",
            ],
            "--slack-approvers",
        ),
        (vec!["--approvers", "not-an-address"], "--approvers"),
        (
            vec![
                "--approvers",
                "ops@example.com",
                "--public-url",
                "https://km.example.com",
                "--smtp-url",
                "pop3://mail",
                "--email-from",
                "km@example.com",
            ],
            "--smtp-url",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--webhook-token", "t"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("KUBEMEDIC_WEBHOOK_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no webhook authentication configured"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args([
            "serve",
            "--database-url",
            "mysql://u:topsecret@db/x",
            "--webhook-token",
            "t",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--database-url") && !err.contains("topsecret"),
        "{err}"
    );

    // The HTTP limits cannot be turned off: 0 is refused, naming the flag.
    let out = Command::new(BIN)
        .args([
            "serve",
            "--http-header-timeout-seconds",
            "0",
            "--webhook-token",
            "t",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--http-header-timeout-seconds")
            && err.contains("KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args([
            "serve",
            "--alertmanager-url",
            "alertmanager:topsecret@am:9093",
            "--webhook-token",
            "t",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--alertmanager-url") && !err.contains("topsecret"),
        "{err}"
    );

    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .env("KUBEMEDIC_WEBHOOK_TOKEN", "leaky-token-value")
        .env("KUBEMEDIC_API_TOKEN", "leaky-api-value")
        .env(
            "KUBEMEDIC_ALERTMANAGER_URL",
            "http://am:leaky-am-pass@am:9093",
        )
        .env(
            "KUBEMEDIC_PROMETHEUS_URL",
            "http://prom:leaky-prom-pass@prom:9090",
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("--webhook-token") && !text.contains("leaky"),
        "{text}"
    );
}

#[test]
fn a_flag_wins_over_the_environment_which_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubemedic.yaml");
    std::fs::write(&file, "listen: from-the-file\nwebhook-token: t\n").unwrap();
    let refused = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let serve = || {
        let mut c = Command::new(BIN);
        c.args(["serve", "--config"])
            .arg(&file)
            .env_remove("KUBEMEDIC_LISTEN")
            .env_remove("KUBEMEDIC_WEBHOOK_TOKEN");
        c
    };
    let err = refused(&mut serve());
    assert!(err.contains("`from-the-file`"), "{err}");
    let err = refused(serve().env("KUBEMEDIC_LISTEN", "from-the-env"));
    assert!(err.contains("`from-the-env`"), "{err}");
    let err = refused(
        serve()
            .env("KUBEMEDIC_LISTEN", "from-the-env")
            .args(["--listen", "from-the-flag"]),
    );
    assert!(
        err.contains("`from-the-flag`") && err.contains("--listen"),
        "{err}"
    );

    std::fs::write(&file, "listne: 127.0.0.1:0\n").unwrap();
    let err = refused(&mut serve());
    assert!(err.contains("unknown key `listne`"), "{err}");
}

#[test]
fn config_reference_lists_every_flag_of_serve() {
    let out = Command::new(BIN)
        .args(["config", "reference"])
        .env("KUBEMEDIC_WEBHOOK_TOKEN", "leaky-token-value")
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!table.contains("leaky"), "{table}");
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .map(|l| l.split([' ', '<']).next().unwrap_or(""))
        .filter(|f| *f != "help")
        .collect();
    assert!(flags.len() > 80, "{help}");
    for flag in flags {
        assert!(
            table.contains(&format!("| `--{flag}")),
            "--{flag} is missing from `kubemedic config reference`"
        );
    }
}

#[test]
fn migrate_prepares_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["migrate", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let counts = regex::Regex::new(r"(\d+) of (\d+) migrations applied").unwrap();
    let caps = counts.captures(&text).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(caps[1], caps[2], "{text}");
    assert!(dir.path().join("kubemedic.db").exists());
}

#[test]
fn catalog_validate_names_the_file_and_field_of_every_problem() {
    let ok = Command::new(BIN)
        .args(["catalog", "validate"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/workflows"))
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("13 action types"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("scale.yaml"),
        "actionType: {name: ScaleReplicas, what: a, whenToUse: b, whenNotToUse: c}\nworkflows:\n  - id: scale\n    version: 1.0\n    description: d\n    labels: {requires: [hpaEnbled]}\n    parameters: {type: object, properties: {N: {type: integer, minimum: 5, maximum: 1}}, required: [M]}\n    engine: {type: builtin, steps: [{action: scale, with: {replicas: '${REPLICAS}'}}]}\n",
    )
    .unwrap();
    let bad = Command::new(BIN)
        .args(["catalog", "validate"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    for needle in [
        "scale.yaml: workflows[0].version",
        "scale.yaml: workflows[0].labels.requires: unknown detected label `hpaEnbled`",
        "scale.yaml: workflows[0].parameters.required: `M` is required but not a property",
        "scale.yaml: workflows[0].parameters.properties.N.minimum",
        "scale.yaml: workflows[0].engine.steps[0].with.replicas: references `${REPLICAS}`",
        "scale.yaml: workflows[0].parameters.properties.REPLICAS: action type ScaleReplicas needs `REPLICAS`",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
}

#[test]
fn investigate_rejects_a_broken_alert_or_snapshot_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let alert = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/alertmanager/kubernaut-invalid-payload.json"
    );
    let out = Command::new(BIN)
        .args(["investigate", "--alert", alert, "--snapshot"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/clusters/shop-rollout.yaml"
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid JSON"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let snap = dir.path().join("snap.yaml");
    std::fs::write(&snap, "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n").unwrap();
    let good_alert = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/alertmanager/captured-from-alertmanager-0.25.json"
    );
    let out = Command::new(BIN)
        .args(["investigate", "--alert", good_alert, "--snapshot"])
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("snapshot document 1") && err.contains("metadata.name"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["investigate", "--alert", good_alert, "--snapshot"])
        .arg(&snap)
        .args(["--llm", "openai"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--llm-model"));
}

#[test]
fn the_demo_runs_the_whole_loop_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--exit", "--listen", "127.0.0.1:0"])
        .env_remove("KUBEMEDIC_LLM")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "rollback-deployment-previous-revision (RollbackDeployment)",
        "approval required — production environment",
        "AwaitingApproval",
        "The dashboard: http://127.0.0.1:",
        "viewer key    km_",
        "approver key  km_",
        "auto-approved: staging environment",
        "increase-memory-limits (IncreaseMemoryLimits) CONTAINER=api MEMORY_LIMIT=384Mi",
        "expand-pvc (ExpandPVC) NEW_SIZE=15Gi",
        "NoActionRequired — problem self-resolved",
        // The crash loop follows what it depends on: the database scaled to zero.
        "Service ledger/ledger-db has no ready endpoints: Deployment ledger-db is scaled to 0 replicas",
        "Scaled down replica set",
        "secret \"payment-keys\" not found",
        "400  rejected: alerts[0].labels",
        "redelivery",
        "/api/v1/requests",
        // Auto-approved remediations run against the simulated cluster and are verified.
        "cluster    simulated",
        "executed     on the simulated cluster: set_resources applied, wait_rollout applied",
        "executed     on the simulated cluster: expand_pvc applied",
        "simulated Alertmanager: KubePodCrashLooping resolved",
        "Completed — effective (score 1.00; health: all 2 pods ready",
        "Completed — effective (score 1.00; health: PVC Bound",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Its temporary data directory goes with it.
    assert!(
        text.contains("(temporary: removed when the demo stops"),
        "{text}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Installed without a policy directory (a container, a package), the daemon gates with the
/// policy built into it and says so on /readyz; a configured directory that is missing is not
/// papered over: the gate fails closed and /readyz says that instead.
#[test]
fn without_a_policy_directory_the_built_in_policy_decides() {
    let cwd = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start_in(Some(cwd.path()), data.path(), port, None, &[]);
    let (status, body) = get_text(&format!("{}/readyz", server.base)).unwrap();
    assert_eq!(status, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["checks"]["policy"]["ok"], true, "{ready}");
    let detail = ready["checks"]["policy"]["detail"].as_str().unwrap();
    assert!(detail.contains("built into kubemedic"), "{detail}");
    assert!(detail.contains("approval.rego"), "{detail}");
    drop(server);

    let missing = cwd.path().join("no-such-policies");
    let port = free_port();
    let server = Server::start_in(
        Some(cwd.path()),
        data.path(),
        port,
        None,
        &["--policy-dir", missing.to_str().unwrap()],
    );
    let (_, body) = get_text(&format!("{}/readyz", server.base)).unwrap();
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["checks"]["policy"]["ok"], false, "{ready}");
    let detail = ready["checks"]["policy"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("every remediation requires approval")
            && detail.contains("no-such-policies"),
        "{detail}"
    );
}

/// SIGKILL as soon as the rollback is on the Deployment — usually while the execution is still
/// running, sometimes just after it committed (the rolled-back revision's pods may already be
/// available, so the race is real) — then a restart on the same database: whichever it was, the
/// rollback is not written again (one revision more, one execution record, one history entry)
/// and the request is verified. The deterministic version of the crash (a write that landed
/// before the intent was settled) is in tests/execute.rs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_execution_finishes_it_once_after_a_restart() {
    use common::kube::Kube;
    use serde_json::json;
    let Some(k) = Kube::new("kill").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&k]).await.remove(0);

    let dir = tempfile::tempdir().unwrap();
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let kubeconfig = k.kubeconfig.display().to_string();
    let args = [
        "--kubeconfig",
        kubeconfig.as_str(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--verification-window-seconds",
        "3",
    ];
    let client = reqwest::Client::new();
    let mut server = Server::start(dir.path(), free_port(), None, &args);
    let accepted: Value = client
        .post(format!("{}/api/v1/alerts/alertmanager", server.base))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(staged.alert.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = accepted["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The rollback is on the Deployment; nobody runs its new pods, so the workflow's
    // wait_rollout step is waiting. Kill the daemon there.
    let deployments = k.api("apps/v1", "Deployment");
    let deadline = Instant::now() + Duration::from_secs(60);
    let stamp = loop {
        let d = deployments.get("checkout").await.unwrap();
        let stamp = d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubemedic.io/remediation"))
            .cloned();
        if let Some(s) = stamp {
            break s;
        }
        assert!(Instant::now() < deadline, "the rollback was never written");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    server.child.kill().unwrap();
    assert_eq!(stamp, format!("{id}/1"));
    server.child.wait().unwrap();
    drop(server);

    // Restart on the same data directory; now the kubelet runs the rolled-back pods.
    let server = Server::start(dir.path(), free_port(), None, &args);
    let kubelet = {
        let k = k.clone_handle();
        let node = format!("{}-worker-1", k.ns);
        tokio::spawn(async move {
            loop {
                common::scenarios::run_unscheduled(&k, "app=checkout", &node).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let get = |path: String| {
        let client = client.clone();
        async move {
            client
                .get(path)
                .bearer_auth(API_TOKEN)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let url = format!("{}/api/v1/requests/{id}", server.base);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut resolved_sent = false;
    let done = loop {
        let r = get(url.clone()).await;
        if r["phase"] == "Verifying" && !resolved_sent {
            let mut resolved = staged.alert.clone();
            resolved["status"] = json!("resolved");
            resolved["alerts"][0]["status"] = json!("resolved");
            resolved["alerts"][0]["endsAt"] = json!(chrono::Utc::now().to_rfc3339());
            let status = client
                .post(format!("{}/api/v1/alerts/alertmanager", server.base))
                .bearer_auth(WEBHOOK_TOKEN)
                .body(resolved.to_string())
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, 200);
            resolved_sent = true;
        }
        let terminal = r["phase"]
            .as_str()
            .and_then(kubemedic::domain::Phase::parse)
            .is_some_and(kubemedic::domain::Phase::is_terminal);
        if terminal {
            break r;
        }
        assert!(Instant::now() < deadline, "not finished: {r:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    kubelet.abort();

    assert_eq!(done["phase"], "Completed", "{done:#}");
    let steps = &done["state"]["execution"]["steps"];
    assert_eq!(steps[0]["action"], "rollout_undo");
    assert!(
        steps[0]["status"] == "already_applied" || steps[0]["status"] == "applied",
        "{steps:#}"
    );
    let deployment = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3",
        "exactly one rollback"
    );
    let executions = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "execution")
        .count();
    assert_eq!(executions, 1);
    let history = get(format!(
        "{}/api/v1/history?kind=Deployment&name=checkout&namespace={}",
        server.base, k.ns
    ))
    .await;
    assert_eq!(history["total"], 1, "{history:#}");
}

/// Issue 13, item 5: while the API server cannot be reached, the log says so once (and would
/// summarise every minute), not once per failed call — kube-rs alone wrote an ERROR line for
/// every call of every waiting request, hundreds a second under load.
#[tokio::test]
async fn an_unreachable_cluster_is_logged_once_not_per_failed_call() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("dead.kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\ncurrent-context: dead\nusers:\n- name: u\n  user:\n    token: not-a-real-token\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start(
        &data,
        free_port(),
        None,
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--max-wait-seconds",
            "600",
        ],
    );
    let client = reqwest::Client::new();
    for i in 0..30 {
        let body = alert_body(
            "firing",
            "KubePodCrashLooping",
            &[("namespace", "shop"), ("pod", &format!("web-{i}"))],
            &format!("dead-{i}"),
            "2026-02-01T00:00:00Z",
        );
        let r = client
            .post(format!("{}/api/v1/alerts/alertmanager", server.base))
            .bearer_auth(WEBHOOK_TOKEN)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        // /readyz probes the API server too.
        assert_eq!(ureq_get(&format!("{}/readyz", server.base)).unwrap(), 200);
    }
    // Every request tried and waiting for the cluster, then long enough for the retries after
    // the first back-offs (2 s, 4 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: Value = client
            .get(format!(
                "{}/api/v1/requests?phase=Enriching&limit=100",
                server.base
            ))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let all_waiting = waiting["items"].as_array().is_some_and(|items| {
            items.len() == 30
                && items
                    .iter()
                    .all(|r| r["waiting"]["dependency"] == "cluster")
        });
        if all_waiting {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "requests not waiting: {waiting:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    let lines = server.log_lines();
    let loud = loud(&lines);
    let outage: Vec<&&String> = loud
        .iter()
        .filter(|l| l.contains("Kubernetes API server unreachable"))
        .collect();
    assert_eq!(outage.len(), 1, "{loud:#?}");
    assert!(loud.len() <= 2, "{} loud lines: {loud:#?}", loud.len());
    assert!(
        !lines.iter().any(|l| l.contains("kube_client")),
        "kube-rs's per-call errors are logged"
    );
}

/// A daemon whose ServiceAccount may read the cluster but not list kubemedic's custom resources
/// (a chart installed without the config role, or CRDs missing) says so once, for all the
/// kinds, while its watches retry; kube-rs's own warning for each refused retry is not logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_kubemedic_may_not_list_are_reported_once_not_per_retry() {
    use common::kube::{Kube, chart_rules};
    let Some(k) = Kube::new("crd-refused").await else {
        return;
    };
    k.kubemedic_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = k
        .service_account("kubemedic", chart_rules(&["reader"]), dir.path())
        .await;
    let data = dir.path().join("data");
    let server = Server::start(
        &data,
        free_port(),
        None,
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    );
    assert_eq!(ureq_get(&format!("{}/readyz", server.base)).unwrap(), 200);
    // Long enough for several retries of each of the four watches (back-off from 0.8 s).
    tokio::time::sleep(Duration::from_secs(12)).await;
    let lines = server.log_lines();
    let loud = loud(&lines);
    let refused: Vec<&&String> = loud
        .iter()
        .filter(|l| l.contains("cannot watch kubemedic's custom resources"))
        .collect();
    assert_eq!(refused.len(), 1, "{loud:#?}");
    assert!(
        refused[0].contains("forbidden"),
        "the warning names the refusal: {}",
        refused[0]
    );
    assert_eq!(loud.len(), 1, "{loud:#?}");
    drop(server);
    k.drop_role(&format!("kubemedic-{}", k.ns)).await;
}

fn kubemedic(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("KUBEMEDIC_API_TOKEN")
        .output()
        .expect("run kubemedic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An operator manages keys and checks the audit trail from the command line, on the same
/// data directory `serve` uses; an edited audit row is named by `audit verify`.
#[tokio::test]
async fn keys_are_managed_and_an_edited_audit_row_is_found_from_the_command_line() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (code, key, err) = kubemedic(&[
        "apikey",
        "create",
        "--role",
        "approver",
        "--name",
        "alice",
        "--data-dir",
        data,
    ]);
    assert_eq!(code, 0, "{err}");
    let key = key.trim().to_owned();
    assert!(key.starts_with("km_") && key.len() > 40, "{key}");
    assert!(err.contains("only time it is shown"), "{err}");
    let (code, _, err) = kubemedic(&[
        "apikey",
        "create",
        "--role",
        "viewer",
        "--name",
        "alice",
        "--data-dir",
        data,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("already named `alice`"), "{err}");
    let (code, _, err) = kubemedic(&[
        "apikey",
        "create",
        "--role",
        "root",
        "--name",
        "x",
        "--data-dir",
        data,
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, list, _) = kubemedic(&["apikey", "list", "--data-dir", data]);
    assert_eq!(code, 0);
    assert!(
        list.contains("alice") && list.contains("approver") && list.contains("active"),
        "{list}"
    );
    assert!(!list.contains(&key), "a list never shows a key");

    // The key works against `serve` on the same data directory.
    let port = free_port();
    let server = Server::start(dir.path(), port, None, &[]);
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/approvals", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(server);

    let (code, out, err) = kubemedic(&["audit", "verify", "--data-dir", data]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit chain intact"), "{out}");

    let (code, out, _) = kubemedic(&["apikey", "revoke", "alice", "--data-dir", data]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = kubemedic(&["apikey", "revoke", "alice", "--data-dir", data]);
    assert_eq!(code, 1);
    assert!(err.contains("no active key"), "{err}");

    // Someone with write access to the database edits the first event.
    let db = dir.path().join("kubemedic.db");
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        db.display()
    ))
    .await
    .unwrap();
    sqlx::query("DROP TRIGGER audit_events_no_update")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("UPDATE audit_events SET actor = 'cli:nobody' WHERE id = 1")
        .execute(&mut conn)
        .await
        .unwrap();
    let (code, out, _) = kubemedic(&["audit", "verify", "--data-dir", data]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("BROKEN at event 1") && out.contains("edited"),
        "{out}"
    );

    // Verified with another key, the chain says so instead of calling every row forged.
    let (code, out, _) = kubemedic(&[
        "audit",
        "verify",
        "--data-dir",
        data,
        "--audit-key",
        &"ab".repeat(32),
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("another key"), "{out}");
}

/// One firing alert for pod `pod` to `base`; the HTTP status.
async fn post_pod_alert(base: &str, pod: &str) -> u16 {
    let body = alert_body(
        "firing",
        "PodCrash",
        &[("namespace", "shop"), ("pod", pod)],
        pod,
        "2026-02-01T00:00:00Z",
    );
    reqwest::Client::new()
        .post(format!("{base}/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The default setup (a key file in the data directory): `audit rotate-key` puts a fresh key
/// in front of the file's, and the old key signs the hand-over. `serve` goes on with the file;
/// the trail checks with the keyring, not with either key alone; a daemon given only the
/// retired key is refused at start.
#[tokio::test]
async fn the_audit_key_is_rotated_from_the_command_line() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let key_file = dir.path().join("audit.key");
    let server = Server::start(dir.path(), free_port(), None, &[]);
    assert_eq!(post_pod_alert(&server.base, "before").await, 200);
    drop(server);
    let old = std::fs::read_to_string(&key_file)
        .unwrap()
        .trim()
        .to_owned();

    let (code, out, err) = kubemedic(&["audit", "rotate-key", "--data-dir", data]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit key rotated"), "{out}");
    let ring = std::fs::read_to_string(&key_file).unwrap();
    let keys: Vec<&str> = ring.lines().collect();
    assert_eq!(keys.len(), 2, "{ring}");
    assert_eq!(keys[1], old, "the retired key stays behind the new one");
    assert!(
        !out.contains(keys[0]) && !err.contains(keys[0]),
        "a key is never printed"
    );

    let server = Server::start(dir.path(), free_port(), None, &[]);
    assert_eq!(post_pod_alert(&server.base, "after").await, 200);
    drop(server);
    let (code, out, err) = kubemedic(&["audit", "verify", "--data-dir", data]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = kubemedic(&[
        "audit",
        "verify",
        "--data-dir",
        data,
        "--audit-key",
        keys[0],
    ]);
    assert_eq!(
        code, 1,
        "the new key alone cannot check what the old one signed: {out}"
    );

    // A replica left with the retired key does not start.
    let port = free_port().to_string();
    let (code, _, err) = kubemedic(&[
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
        data,
        "--webhook-token",
        WEBHOOK_TOKEN,
        "--audit-key",
        &old,
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--audit-key") && err.contains("rotation"),
        "{err}"
    );
    assert!(!err.contains(&old), "the key is not printed");
}

/// The Kubernetes way (a Secret): replicas share a database and `KUBEMEDIC_AUDIT_KEY`; the
/// Secret becomes `NEW,OLD` and the pods restart. The first new pod hands the trail over as it
/// starts; an old pod still running is not ready from then on and answers 503 (Alertmanager
/// retries, and reaches a new pod), and nothing it does reaches the trail.
#[tokio::test]
async fn a_replica_started_with_a_new_keyring_hands_the_trail_over_and_the_old_one_stops_writing() {
    common::init();
    let Some(url) = common::fresh_postgres().await else {
        return;
    };
    let (old, new) = (
        kubemedic::store::AuditKey::generate(),
        kubemedic::store::AuditKey::generate(),
    );
    let hex = |k: &kubemedic::store::AuditKey| k.to_file_text().trim().to_owned();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start(
        dir_a.path(),
        free_port(),
        Some(&url),
        &["--audit-key", &hex(&old)],
    );
    assert_eq!(post_pod_alert(&a.base, "a1").await, 200);

    let ring = format!("{},{}", hex(&new), hex(&old));
    let b = Server::start(
        dir_b.path(),
        free_port(),
        Some(&url),
        &["--audit-key", &ring],
    );
    let (code, body) = get_text(&format!("{}/readyz", a.base)).unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("audit_key") && body.contains(new.id()),
        "{body}"
    );
    assert_eq!(post_pod_alert(&a.base, "a2").await, 503);
    assert_eq!(post_pod_alert(&b.base, "a2").await, 200);
    drop((a, b));

    let (code, out, err) = kubemedic(&[
        "audit",
        "verify",
        "--database-url",
        &url,
        "--audit-key",
        &ring,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit chain intact"), "{out}");
}

/// `kubemedic demo` leaves the dashboard up with its requests: the printed viewer key reads
/// them, the printed approver key approves what waits, and the approved rollback runs on the
/// simulated cluster.
#[tokio::test]
async fn the_demo_leaves_its_dashboard_up_for_a_viewer_and_an_approver() {
    common::init();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .env_remove("KUBEMEDIC_LLM")
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut base, mut viewer, mut approver) = (None, None, None);
    let deadline = Instant::now() + Duration::from_secs(90);
    while approver.is_none() && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        if let Some(url) = line.strip_prefix("The dashboard: ") {
            base = Some(url.trim().trim_end_matches('/').to_owned());
        } else if let Some(k) = line.trim().strip_prefix("viewer key") {
            viewer = Some(k.trim().to_owned());
        } else if let Some(k) = line.trim().strip_prefix("approver key") {
            approver = Some(k.split_whitespace().next().unwrap().to_owned());
        }
    }
    let (base, viewer, approver) = (base.unwrap(), viewer.unwrap(), approver.unwrap());
    let client = reqwest::Client::new();
    let page = client
        .get(format!("{base}/requests?phase=AwaitingApproval"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("shop/Deployment/checkout")
    );
    let read = |path: String| {
        let (client, viewer) = (client.clone(), viewer.clone());
        async move {
            let r = client.get(path).bearer_auth(viewer).send().await.unwrap();
            r.json::<Value>().await.unwrap()
        }
    };
    // The predicted PVC fill is labelled proactive in the list.
    let list = client
        .get(format!("{base}/requests"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(list.contains("class=\"badge proactive\""), "{list}");
    let pending = read(format!("{base}/api/v1/approvals?status=pending")).await;
    let approval = &pending["items"][0];
    let decide = |key: &str| {
        client
            .post(format!(
                "{base}/api/v1/approvals/{}/decision",
                approval["id"].as_str().unwrap()
            ))
            .bearer_auth(key.to_owned())
            .header("content-type", "application/json")
            .body(r#"{"decision":"approve","message":"demo"}"#)
            .send()
    };
    assert_eq!(decide(&viewer).await.unwrap().status(), 403);
    let decided = decide(&approver).await.unwrap();
    assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
    let rid = approval["request_id"].as_str().unwrap();
    let mut phase = Value::Null;
    for _ in 0..100 {
        phase = read(format!("{base}/api/v1/requests/{rid}")).await["phase"].clone();
        if phase == "Verifying" || phase == "Completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(phase == "Verifying" || phase == "Completed", "{phase}");
    unsafe_sigterm(&child);
    assert!(child.wait().unwrap().success());
}

fn unsafe_sigterm(child: &Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
}
