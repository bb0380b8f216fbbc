//! Real incidents on a real node (tests/node/, docs/real-node.md): a real kubelet, containerd
//! and runc run the pods (scripts/kube-tier/node.sh), a real fault breaks them, and nothing in
//! the test writes a status, an event or a log. Each incident's alert, labelled as
//! kube-prometheus-stack's rule labels it, goes through the real Alertmanager to the
//! `kubemedic serve` binary (offline investigator, SQLite), which investigates the live cluster.
//! Its decision is scored against the incident's expected.json (committed before the first run)
//! by scripts/score-unseen's rules and held to a ratchet; the namespace is captured as a
//! snapshot and `kubemedic investigate --snapshot` must decide what the live run decided. Where
//! an action was approved without a human, it runs for real: the harness resolves the alert
//! when its condition no longer holds on the cluster (as Prometheus would), and verification
//! scores the remediation from the cluster's real state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::node::{Incident, NodeTier, Played, incidents, still_holds};
use common::{API_TOKEN, WEBHOOK_TOKEN};
use kubemedic::domain::{Phase, StageState};
use serde_json::{Value, json};

/// Real-node incidents the offline investigator gets right (see docs/real-node.md).
const MIN_RIGHT: usize = 12;
/// Incidents where it does harm (a forbidden action, a live problem closed, an action
/// approved without a human where none is right).
const MAX_HARMFUL: usize = 0;
/// Incidents whose reason names the culprit the incident expects (recall, issue 38).
const MIN_NAMED: usize = 12;

const BIN: &str = env!("CARGO_BIN_EXE_kubemedic");

#[test]
fn every_node_incident_is_complete() {
    let all = incidents();
    assert!(all.len() >= 12, "{} incidents in tests/node", all.len());
    for i in &all {
        for key in common::unseen::EXPECTED_KEYS {
            assert!(
                i.expected.get(key).is_some(),
                "{}/expected.json lacks {key}",
                i.name
            );
        }
        assert!(
            i.spec.alert.labels.contains_key("alertname"),
            "{}: the alert has no alertname",
            i.name
        );
        assert!(
            !i.spec.objects.contains("status:"),
            "{}: objects write a status; a real node writes those",
            i.name
        );
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process the test started; killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn spawn(cmd: &mut Command, log: PathBuf) -> Proc {
        let f = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        Proc { child, log }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

async fn wait_http(url: &str, p: &mut Proc, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(url).await
            && r.status().is_success()
        {
            return;
        }
        if let Ok(Some(s)) = p.child.try_wait() {
            panic!("{what} exited ({s}):\n{}", p.tail());
        }
        assert!(Instant::now() < deadline, "{what} not ready:\n{}", p.tail());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// kubemedic serve and the Alertmanager that delivers to it.
struct Loop {
    /// The `kubemedic serve` process (None: kubemedic runs in the cluster).
    daemon: Option<Proc>,
    alertmanager: Proc,
    base: String,
    am: String,
    dir: tempfile::TempDir,
    client: reqwest::Client,
}

impl Loop {
    /// `kubemedic serve` on this machine against the node tier, and its Alertmanager.
    async fn start(tier: &NodeTier, am_bin: &str) -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let dport = free_port();
        let base = format!("http://127.0.0.1:{dport}");
        let aport = free_port();
        let am = format!("http://127.0.0.1:{aport}");
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let mut daemon = Proc::spawn(
            Command::new(BIN)
                .args(["serve", "--listen", &format!("127.0.0.1:{dport}")])
                .arg("--data-dir")
                .arg(dir.path().join("data"))
                .arg("--kubeconfig")
                .arg(&tier.kubeconfig)
                .args(["--alertmanager-url", &am])
                .args(["--verification-window-seconds", "15"])
                .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
                .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
                .env_remove("KUBEMEDIC_LLM")
                .env("KUBEMEDIC_LOG_FORMAT", "json"),
            dir.path().join("kubemedic.log"),
        );
        wait_http(&format!("{base}/readyz"), &mut daemon, "kubemedic serve").await;
        let alertmanager = alertmanager(am_bin, &dir, aport, &base).await;
        Loop {
            daemon: Some(daemon),
            alertmanager,
            base,
            am,
            dir,
            client: reqwest::Client::new(),
        }
    }

    /// An Alertmanager delivering to kubemedic at `base` (its Service, in the cluster).
    async fn to(am_bin: &str, base: &str) -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let aport = free_port();
        let alertmanager = alertmanager(am_bin, &dir, aport, base).await;
        Loop {
            daemon: None,
            alertmanager,
            base: base.to_owned(),
            am: format!("http://127.0.0.1:{aport}"),
            dir,
            client: reqwest::Client::new(),
        }
    }

    fn daemon_log(&self) -> String {
        self.daemon.as_ref().map(Proc::tail).unwrap_or_default()
    }

    async fn api(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    /// Post the alert to Alertmanager as Prometheus would: firing, or resolved now.
    async fn post(&self, alert: &Value, resolved: bool) {
        let mut a = alert.clone();
        if resolved {
            a["endsAt"] =
                json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        }
        let r = self
            .client
            .post(format!("{}/api/v2/alerts", self.am))
            .json(&json!([a]))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    /// The request opened for `played`, once its investigation has decided.
    async fn decided(&self, played: &Played, not: &[&str]) -> Result<Value, String> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some(id) = self.request_id(played, not).await {
                let r = self.api(&format!("/api/v1/requests/{id}")).await;
                let phase = r["phase"].as_str().and_then(Phase::parse);
                let decided = r["state"]["selection"].is_object()
                    || phase.is_some_and(|p| {
                        p.is_terminal()
                            || matches!(
                                p,
                                Phase::Gating
                                    | Phase::AwaitingApproval
                                    | Phase::Executing
                                    | Phase::Verifying
                            )
                    });
                if decided {
                    return Ok(r);
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no decided request for {} within 180 s; kubemedic:\n{}\nalertmanager:\n{}",
                    played.ns,
                    self.daemon_log(),
                    self.alertmanager.tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The request opened for `played`'s alert, other than those in `not`.
    async fn request_id(&self, played: &Played, not: &[&str]) -> Option<String> {
        let all = self.api("/api/v1/requests?limit=200").await;
        let alertname = played.alert["labels"]["alertname"].as_str().unwrap_or("");
        all["items"].as_array()?.iter().find_map(|r| {
            let ns = r["target"]["namespace"].as_str();
            let ours = if played.incident.node_level() {
                r["target"]["kind"] == "Node" || ns == Some(played.ns.as_str())
            } else {
                ns == Some(played.ns.as_str())
            };
            let id = r["id"].as_str().unwrap();
            (ours && r["signal_name"] == alertname && !not.contains(&id)).then(|| id.to_owned())
        })
    }

    /// Follow request `id`, whose action runs without a human, to its end: when it verifies
    /// and the alert's condition no longer holds on the cluster, resolve the alert as
    /// Prometheus would. The request as it ended (or as it was after 210 s).
    async fn follow(&self, tier: &NodeTier, played: &Played, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(150);
        let mut resolved = false;
        while Instant::now() < deadline {
            let r = self.get(&format!("/api/v1/requests/{id}")).await;
            let phase = r
                .as_ref()
                .and_then(|r| r["phase"].as_str())
                .and_then(Phase::parse);
            if phase.is_some_and(Phase::is_terminal) {
                break;
            }
            if phase == Some(Phase::Verifying) && !resolved && !still_holds(tier, played).await {
                self.post(&played.alert, true).await;
                resolved = true;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        self.until_terminal(id, 60).await
    }

    /// GET `path` of the API; None while kubemedic does not answer (its pod restarting).
    async fn get(&self, path: &str) -> Option<Value> {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(API_TOKEN)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        r.status().is_success().then_some(())?;
        r.json().await.ok()
    }

    async fn until_terminal(&self, id: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut last = Value::Null;
        loop {
            if let Some(r) = self.get(&format!("/api/v1/requests/{id}")).await {
                if r["phase"]
                    .as_str()
                    .and_then(Phase::parse)
                    .is_some_and(Phase::is_terminal)
                {
                    return r;
                }
                last = r;
            }
            if Instant::now() > deadline {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Alertmanager on `port` with the README's receiver pointed at kubemedic at `daemon`, with
/// short grouping timers; its files in `dir`.
async fn alertmanager(am_bin: &str, dir: &tempfile::TempDir, port: u16, daemon: &str) -> Proc {
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{WEBHOOK_TOKEN}\n")).unwrap();
    let receiver = include_str!("../docs/alertmanager-receiver.yml")
        .replace("http://kubemedic.kubemedic.svc:8080", daemon)
        .replace(
            "/etc/alertmanager/secrets/kubemedic-webhook-token",
            &token.display().to_string(),
        )
        .replacen(
            "route:\n",
            "route:\n  group_by: [alertname, namespace]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n",
            1,
        );
    std::fs::write(dir.path().join("alertmanager.yml"), receiver).unwrap();
    std::fs::create_dir_all(dir.path().join("am-data")).unwrap();
    let mut p = Proc::spawn(
        Command::new(am_bin)
            .arg(format!(
                "--config.file={}",
                dir.path().join("alertmanager.yml").display()
            ))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("am-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address="),
        dir.path().join("alertmanager.log"),
    );
    wait_http(
        &format!("http://127.0.0.1:{port}/-/ready"),
        &mut p,
        "alertmanager",
    )
    .await;
    p
}

/// The record `kubemedic investigate` prints, built from a `serve` request's API body.
fn record(req: &Value) -> Value {
    let phase = req["phase"].as_str().and_then(Phase::parse).unwrap();
    let state: StageState = serde_json::from_value(req["state"].clone()).unwrap();
    kubemedic::cli::investigate::record_of(phase, req["reason"].as_str(), &state)
}

/// scripts/score-unseen --judge: the verdict on `record` against the incident's expected.json.
fn judge(incident: &Incident, record: &Value, dir: &Path) -> Value {
    let file = dir.join(format!("{}.record.json", incident.name));
    std::fs::write(&file, record.to_string()).unwrap();
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/score-unseen"))
        .arg("--judge")
        .arg(incident.dir.join("expected.json"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The webhook body Alertmanager would have sent for `played` alone.
fn webhook_body(played: &Played) -> Value {
    let labels = &played.alert["labels"];
    json!({
        "version": "4",
        "status": "firing",
        "receiver": "kubemedic",
        "groupKey": format!("{{}}:{{alertname=\"{}\", namespace=\"{}\"}}", labels["alertname"].as_str().unwrap_or(""), played.ns),
        "truncatedAlerts": 0,
        "groupLabels": {"alertname": labels["alertname"], "namespace": played.ns},
        "commonLabels": labels,
        "commonAnnotations": played.alert["annotations"],
        "externalURL": "http://alertmanager-kube-prometheus-alertmanager.monitoring:9093",
        "alerts": [{
            "status": "firing",
            "labels": labels,
            "annotations": played.alert["annotations"],
            "startsAt": played.alert["startsAt"],
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": played.alert["generatorURL"],
            "fingerprint": "0000000000000000",
        }],
    })
}

/// Capture the incident's namespace as the alert fires (before kubemedic can change it), with
/// the webhook body beside it.
fn capture(tier: &NodeTier, played: &Played, dir: &Path) -> Result<(), String> {
    let snap = dir.join(format!("{}.snapshot.yaml", played.incident.name));
    let alert = dir.join(format!("{}.alert.json", played.incident.name));
    std::fs::write(
        &alert,
        serde_json::to_string_pretty(&webhook_body(played)).unwrap(),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["snapshot", "--namespace", &played.ns, "--output"])
        .arg(&snap)
        .arg("--kubeconfig")
        .arg(&tier.kubeconfig)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "snapshot: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Replay the alert offline on the captured snapshot; the replay's record.
fn replay(played: &Played, dir: &Path) -> Result<Value, String> {
    let snap = dir.join(format!("{}.snapshot.yaml", played.incident.name));
    let alert = dir.join(format!("{}.alert.json", played.incident.name));
    let out = Command::new(BIN)
        .args(["investigate", "--alert"])
        .arg(&alert)
        .arg("--snapshot")
        .arg(&snap)
        .env_remove("KUBEMEDIC_LLM")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "investigate: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("investigate printed {line:?}: {e}"))
}

/// The decision a record makes, for comparing the live run and the replay.
fn decision(record: &Value) -> String {
    let sel = &record["selection"];
    let phase = if sel.is_object() {
        "Gating"
    } else {
        record["phase"].as_str().unwrap_or("?")
    };
    let t = &record["rca"]["remediation_target"];
    format!(
        "{phase} {} {}/{}",
        sel["workflow_id"].as_str().unwrap_or("-"),
        t["kind"].as_str().unwrap_or("-"),
        t["name"].as_str().unwrap_or("-")
    )
}

/// What happened to one incident.
#[derive(Debug)]
struct Outcome {
    name: String,
    verdict: String,
    problems: Vec<String>,
    live: String,
    replay: String,
    reason: String,
    /// For an action approved without a human: the request's end (phase, effective).
    ran: Option<String>,
    /// Where a workflow is expected: `proven`, `refused by …`, `not proposed`.
    action: Option<String>,
    /// Whether the reason names the expected culprit.
    named: bool,
}

async fn run_one(tier: &NodeTier, lp: &Loop, incident: &Incident) -> Result<Outcome, String> {
    let played = incident.play(tier).await?;
    let captured = capture(tier, &played, lp.dir.path());
    lp.post(&played.alert, false).await;
    let req = lp.decided(&played, &[]).await?;
    let id = req["id"].as_str().unwrap().to_owned();
    let rec = record(&req);
    let verdict = judge(incident, &rec, lp.dir.path());
    let replayed = captured.and_then(|()| replay(&played, lp.dir.path()));
    let replay = match &replayed {
        Ok(r) => decision(r),
        Err(e) => format!("error: {e}"),
    };
    // An action approved without a human runs for real; the alert resolves when its condition
    // no longer holds on the cluster.
    let mut ran = None;
    if rec["gate"]["require_approval"] == false && rec["selection"].is_object() {
        let done = lp.follow(tier, &played, &id).await;
        ran = Some(format!(
            "{} effective={} ({})",
            done["phase"].as_str().unwrap_or("?"),
            done["state"]["assessment"]["effective"],
            done["reason"].as_str().unwrap_or("")
        ));
        if done["state"]["assessment"]["effective"] == false && still_holds(tier, &played).await {
            match chain_stops(lp, tier, &played, &id).await {
                Ok(again) => ran = ran.map(|r| format!("{r}; fired again: {again}")),
                Err(e) => {
                    let _ =
                        tier.kubectl(&["delete", "namespace", &played.ns, "--wait=false"], None);
                    return Err(e);
                }
            }
        }
    }
    if played.incident.node_level() {
        tier.node_sh("kubelet-start");
    }
    let _ = tier.kubectl(&["delete", "namespace", &played.ns, "--wait=false"], None);
    Ok(Outcome {
        name: incident.name.clone(),
        verdict: verdict["verdict"].as_str().unwrap().to_owned(),
        action: verdict["action"].as_str().map(str::to_owned),
        named: verdict["culprit"] == "named",
        problems: verdict["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect(),
        live: decision(&rec),
        replay,
        reason: rec["reason"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(300)
            .collect(),
        ran,
    })
}

/// After a remediation verified not effective the alert fires again (a new pod crash-looping is
/// a new alert). The guardrails must stop the chain: the new request may go to a person or
/// end, but nothing runs again on its own. What the new request came to, or why the chain
/// did not stop.
async fn chain_stops(
    lp: &Loop,
    tier: &NodeTier,
    played: &Played,
    first: &str,
) -> Result<String, String> {
    let Some(again) = played.refire(tier).await? else {
        return Ok("the same alert, still firing".into());
    };
    lp.post(&again.alert, false).await;
    let req = lp.decided(&again, &[first]).await?;
    let id = req["id"].as_str().unwrap().to_owned();
    // Decided: wait until it ends or waits for a person; a run would show as an execution.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut r = req;
    loop {
        let phase = r["phase"].as_str().and_then(Phase::parse);
        let ran = r["state"]["execution"].is_object();
        if ran {
            return Err(format!(
                "{}: the second request {id} ran {} after the first was verified not effective: \
                 the guardrails did not stop the chain ({})",
                played.incident.name,
                r["state"]["selection"]["workflow_id"],
                r["reason"].as_str().unwrap_or("")
            ));
        }
        if phase.is_some_and(|p| p.is_terminal() || p == Phase::AwaitingApproval)
            || Instant::now() > deadline
        {
            return Ok(format!(
                "{} ({})",
                r["phase"].as_str().unwrap_or("?"),
                r["reason"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        r = lp.get(&format!("/api/v1/requests/{id}")).await.unwrap_or(r);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::absurd_extreme_comparisons)] // a ratchet at 0 harmful is the goal, not a mistake
async fn real_incidents_on_a_real_node_are_decided_and_scored() {
    let Some(tier) = NodeTier::from_env().await else {
        return;
    };
    let Some(am_bin) =
        common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)")
    else {
        return;
    };
    let lp = Loop::start(&tier, &am_bin).await;
    let all = incidents();
    let only: Option<Vec<String>> = std::env::var("KUBEMEDIC_NODE_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    let chosen: Vec<&Incident> = all
        .iter()
        .filter(|i| only.as_ref().is_none_or(|o| o.contains(&i.name)))
        .collect();
    // The pod-level incidents side by side (each in its own namespace), the node-level ones
    // (a stopped kubelet) alone afterwards.
    let (node_level, pod_level): (Vec<&Incident>, Vec<&Incident>) =
        chosen.iter().partition(|i| i.node_level());
    let mut results: Vec<Result<Outcome, String>> = Vec::new();
    {
        use futures::StreamExt;
        let mut s = futures::stream::iter(pod_level.iter().map(|i| run_one(&tier, &lp, i)))
            .buffer_unordered(4);
        while let Some(r) = s.next().await {
            results.push(r);
        }
    }
    for i in node_level {
        results.push(run_one(&tier, &lp, i).await);
    }

    let mut report = String::new();
    let mut failures = Vec::new();
    let (mut right, mut harmful, mut differ) = (0, 0, Vec::new());
    let mut outcomes: Vec<&Outcome> = Vec::new();
    for r in &results {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => failures.push(e.clone()),
        }
    }
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));
    for o in &outcomes {
        right += usize::from(o.verdict == "right");
        harmful += usize::from(o.verdict == "HARMFUL");
        if o.live != o.replay {
            differ.push(format!("{}: live {} / replay {}", o.name, o.live, o.replay));
        }
        report.push_str(&format!(
            "{:<7} {:<30} {}{}{}\n",
            o.verdict,
            o.name,
            o.live,
            if o.problems.is_empty() {
                String::new()
            } else {
                format!(" — {}", o.problems.join("; "))
            },
            o.ran
                .as_ref()
                .map(|r| format!(" [ran: {r}]"))
                .unwrap_or_default()
        ));
        if o.verdict != "right" {
            report.push_str(&format!("        reason: {}\n", o.reason));
        }
    }
    let actions: Vec<&&Outcome> = outcomes.iter().filter(|o| o.action.is_some()).collect();
    let proven = actions
        .iter()
        .filter(|o| o.action.as_deref() == Some("proven"))
        .count();
    let named = outcomes.iter().filter(|o| o.named).count();
    report.push_str(&format!(
        "\nright {right}/{}, harmful {harmful}; replay differs on {}\n\
         recall: right action proven {proven}/{}; culprit named {named}/{}\n",
        outcomes.len(),
        differ.len(),
        actions.len(),
        outcomes.len()
    ));
    for o in actions
        .iter()
        .filter(|o| o.action.as_deref() != Some("proven"))
    {
        report.push_str(&format!(
            "  {}: right action {}\n",
            o.name,
            o.action.as_deref().unwrap_or("")
        ));
    }
    for d in &differ {
        report.push_str(&format!("  {d}\n"));
    }
    let artifacts = common::browser::artifacts_dir();
    let _ = std::fs::create_dir_all(&artifacts);
    let _ = std::fs::write(artifacts.join("node-incidents.txt"), &report);
    // Keep the captures and the daemon's log beside the report.
    for f in std::fs::read_dir(lp.dir.path()).unwrap().flatten() {
        let _ = std::fs::copy(
            f.path(),
            artifacts.join(format!("node-{}", f.file_name().to_string_lossy())),
        );
    }
    eprintln!("{report}");
    assert!(
        failures.is_empty(),
        "incidents that could not be played:\n{}",
        failures.join("\n\n")
    );
    if only.is_none() {
        assert!(
            right >= MIN_RIGHT,
            "right {right} < MIN_RIGHT {MIN_RIGHT}\n{report}"
        );
        assert!(
            harmful <= MAX_HARMFUL,
            "harmful {harmful} > MAX_HARMFUL {MAX_HARMFUL}\n{report}"
        );
        assert!(
            named >= MIN_NAMED,
            "culprit named {named} < MIN_NAMED {MIN_NAMED}\n{report}"
        );
    }
}

/// Run a program; its stdout, or a panic naming it with its stderr.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The uid and the root mount of the process running `kubemedic serve` in the pod, read on this
/// machine (the node): what the container really runs as.
fn kubemedic_process() -> Option<(String, String)> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmd.starts_with("/usr/local/bin/kubemedic serve") {
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let uid = status
                .lines()
                .find(|l| l.starts_with("Uid:"))?
                .split_whitespace()
                .nth(1)?
                .to_owned();
            let mounts = std::fs::read_to_string(entry.path().join("mounts")).ok()?;
            let root = mounts
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some("/"))?
                .to_owned();
            return Some((uid, root));
        }
    }
    None
}

/// kubemedic in the cluster it heals: `helm install` of charts/kubemedic on the real node with
/// the image built here (localhost/kubemedic:dev). The pod runs non-root on a read-only root and
/// becomes ready; Alertmanager reaches it through its Service; its ServiceAccount may not read
/// a Secret but rolls back a bad rollout; its pod deleted mid-incident loses nothing (SQLite on
/// the chart's volume); `kubectl get remediations` shows the incident Completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubemedic_installed_by_the_chart_heals_a_bad_rollout_in_its_own_cluster() {
    let Some(tier) = NodeTier::from_env().await else {
        return;
    };
    let Some(am_bin) =
        common::component("KUBEMEDIC_TEST_ALERTMANAGER_BIN", "Alertmanager (binary)")
    else {
        return;
    };
    // The image carries the release build scripts/test made of the same source (a full run
    // makes one beside the tests and runs this test last), or this build's binary without one
    // (a subset, or KUBEMEDIC_TEST_RELEASE=0).
    let release = std::env::var("KUBEMEDIC_TEST_RELEASE_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| BIN.to_owned());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    run(Command::new("bash")
        .arg(root.join("scripts/kube-tier/kubemedic-image.sh"))
        .arg(&release)
        .arg(&tier.containerd));
    // The chart's volume: a local PersistentVolume on the node (no provisioner here).
    let volume = tier.state.join(format!(
        "volumes/kubemedic-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&volume).unwrap();
    let pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume.file_name().unwrap().to_string_lossy()},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "kubemedic-local",
            "local": {"path": volume.display().to_string()},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [tier.node]}]}]}},
        },
    });
    tier.kubectl(&["apply", "-f", "-"], Some(&pv.to_string()))
        .unwrap();
    let helm = run(Command::new("bash")
        .current_dir(root)
        .arg("-c")
        .arg("source scripts/lib/helm.sh && ensure_helm"))
    .trim()
    .to_owned();
    let ns = "kubemedic";
    // A release left by an earlier run on this tier goes first, with its volume's claim.
    let _ = Command::new(&helm)
        .args([
            "uninstall",
            "kubemedic",
            "--namespace",
            ns,
            "--wait",
            "--kubeconfig",
        ])
        .arg(&tier.kubeconfig)
        .output();
    let _ = tier.kubectl(
        &["delete", "namespace", ns, "--wait=true", "--timeout=120s"],
        None,
    );
    let incident_ns = format!(
        "kmn-in-cluster-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    run(Command::new(&helm)
        .current_dir(root)
        .args(["upgrade", "--install", "kubemedic", "charts/kubemedic"])
        .args(["--namespace", ns, "--create-namespace"])
        .arg("--kubeconfig")
        .arg(&tier.kubeconfig)
        .args([
            "--set",
            "image.repository=localhost/kubemedic",
            "--set",
            "image.tag=dev",
            "--set",
            "image.pullPolicy=Never",
            "--set",
            "persistence.storageClassName=kubemedic-local",
            "--set",
            &format!("secrets.values.webhookToken={WEBHOOK_TOKEN}"),
            "--set",
            &format!("secrets.values.apiToken={API_TOKEN}"),
            // Verification after 20 s, not the default 5 minutes.
            "--set",
            "config.extraEnv[0].name=KUBEMEDIC_VERIFICATION_WINDOW_SECONDS",
            "--set-string",
            "config.extraEnv[0].value=20",
        ]));
    let ready = |what: &str| {
        tier.kubectl(
            &[
                "-n",
                ns,
                "rollout",
                "status",
                "deployment/kubemedic",
                "--timeout=180s",
            ],
            None,
        )
        .unwrap_or_else(|e| {
            panic!(
                "{what}: {e}\n{}",
                tier.kubectl(&["-n", ns, "describe", "pods"], None)
                    .unwrap_or_default()
            )
        })
    };
    ready("the chart's pod");

    // Non-root, read-only root, as the node runs it.
    let (uid, root_mount) = kubemedic_process().expect("the kubemedic process on the node");
    assert_eq!(
        uid, "65532",
        "runs as the image's and chart's non-root user"
    );
    assert!(
        root_mount
            .split_whitespace()
            .nth(3)
            .is_some_and(|o| o.split(',').any(|f| f == "ro")),
        "the root filesystem is read-only: {root_mount}"
    );
    // Its ServiceAccount: what a remediation needs, and no Secret.
    let sa = "system:serviceaccount:kubemedic:kubemedic";
    // `kubectl auth can-i` answers yes or no on stdout (and exits 1 for no).
    let can = |verb: &str, what: &str| {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&tier.kubeconfig)
            .args(["auth", "can-i", verb, what, "-A", "--as", sa])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(can("get", "secrets"), "no");
    assert_eq!(can("list", "secrets"), "no");
    assert_eq!(can("patch", "deployments.apps"), "yes");

    // Alertmanager delivers to the Service's address (kube-proxy routes it to the pod).
    let ip = tier
        .kubectl(
            &[
                "-n",
                ns,
                "get",
                "service",
                "kubemedic",
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
            None,
        )
        .unwrap();
    let port = tier
        .kubectl(
            &[
                "-n",
                ns,
                "get",
                "service",
                "kubemedic",
                "-o",
                "jsonpath={.spec.ports[0].port}",
            ],
            None,
        )
        .unwrap();
    let lp = Loop::to(&am_bin, &format!("http://{ip}:{port}")).await;

    // A bad rollout in a staging namespace: kubemedic rolls it back through its ServiceAccount.
    let incident = common::node::load("rollout-bad-command");
    let played = incident
        .play_in(&tier, &incident_ns)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    lp.post(&played.alert, false).await;
    let id = {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(id) = lp.request_id(&played, &[]).await {
                break id;
            }
            assert!(
                Instant::now() < deadline,
                "no request for the alert; alertmanager:\n{}\nkubemedic:\n{}",
                lp.alertmanager.tail(),
                tier.kubectl(
                    &["-n", ns, "logs", "deployment/kubemedic", "--tail=40"],
                    None
                )
                .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    // The pod is deleted mid-incident; its replacement, on the same volume, carries on.
    tier.kubectl(
        &[
            "-n",
            ns,
            "delete",
            "pod",
            "-l",
            "app.kubernetes.io/name=kubemedic",
            "--wait=false",
        ],
        None,
    )
    .unwrap();
    ready("the replacement pod");
    let done = lp.follow(&tier, &played, &id).await;
    let logs = tier
        .kubectl(
            &["-n", ns, "logs", "deployment/kubemedic", "--tail=60"],
            None,
        )
        .unwrap_or_default();
    assert_eq!(done["phase"], "Completed", "{done:#}\n{logs}");
    assert_eq!(
        done["state"]["selection"]["selected"]["action_type"], "RollbackDeployment",
        "{done:#}"
    );
    assert_eq!(done["state"]["assessment"]["effective"], true, "{done:#}");
    let all = lp.api("/api/v1/requests?limit=200").await;
    assert_eq!(
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["target"]["namespace"] == incident_ns.as_str())
            .count(),
        1,
        "one request, kept across the restart: {all:#}"
    );
    // The pods really are the old revision's, and ready.
    tier.kubectl(
        &[
            "-n",
            &incident_ns,
            "rollout",
            "status",
            "deployment/checkout-api",
            "--timeout=60s",
        ],
        None,
    )
    .unwrap();
    // And kubectl shows it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = tier
            .kubectl(&["get", "remediations", "-A"], None)
            .unwrap_or_default();
        if shown
            .lines()
            .any(|l| l.contains(&incident_ns) && l.contains("Completed"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl get remediations -A:\n{shown}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let _ = tier.kubectl(&["delete", "namespace", &incident_ns, "--wait=false"], None);
    let _ = Command::new(&helm)
        .args(["uninstall", "kubemedic", "--namespace", ns, "--kubeconfig"])
        .arg(&tier.kubeconfig)
        .output();
}
