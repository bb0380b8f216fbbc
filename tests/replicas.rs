//! Several replicas (issue 15, item 5): two real `kubemedic serve` processes on one Postgres
//! database and one API server. Whatever reaches which replica, every request is investigated,
//! notified and executed once, no target is changed twice, and a replica killed in the middle
//! of a write leaves the request to the other, which finishes it without writing again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::Kube;
use common::{API_TOKEN, WEBHOOK_TOKEN};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubemedic");
/// Both replicas sign the one audit chain with this key, as the chart gives them one Secret.
const AUDIT_KEY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";
const APPROVERS: [&str; 2] = ["alice@example.com", "bob@example.com"];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `kubemedic serve` process: its own port, data directory and host name (so its worker id
/// differs), the shared database.
struct Replica {
    name: String,
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
    _data: tempfile::TempDir,
}

impl Replica {
    /// Spawn without waiting for it to be ready (so two can start on an empty database at once).
    fn spawn(name: &str, database_url: &str, audit_key: Option<&str>, args: &[String]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data.path())
            .arg("--lease-seconds")
            .arg("2")
            .args(args)
            .env("HOSTNAME", name)
            .env("KUBEMEDIC_DATABASE_URL", database_url)
            .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
            .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
            .env("KUBEMEDIC_LOG_FORMAT", "json")
            .env_remove("KUBEMEDIC_AUDIT_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(key) = audit_key {
            cmd.env("KUBEMEDIC_AUDIT_KEY", key);
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
        Self {
            name: name.to_owned(),
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            _data: data,
        }
    }

    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await
                && r.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("{} exited ({status}):\n{}", self.name, self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The prefix of its worker id, which the audit trail names as the actor of each phase
    /// change and `claimed_by` holds: its host name.
    fn actor_prefix(&self) -> String {
        format!("{}-", self.name)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas started at the same moment on `database_url` (empty: both run the migrations
/// at once), each ready.
async fn two_replicas(database_url: &str, args: &[String]) -> [Replica; 2] {
    let mut a = Replica::spawn("replica-a", database_url, Some(AUDIT_KEY), args);
    let mut b = Replica::spawn("replica-b", database_url, Some(AUDIT_KEY), args);
    a.wait_ready().await;
    b.wait_ready().await;
    [a, b]
}

/// What both replicas run with: the test cluster, the shipped policies, a short verification.
fn cluster_args(kubeconfig: &Path) -> Vec<String> {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--verification-window-seconds",
        "3",
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn get(client: &reqwest::Client, url: &str) -> Value {
    let r = client.get(url).bearer_auth(API_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {url}");
    r.json().await.unwrap()
}

/// POST an Alertmanager body; the request ids it was recorded under.
async fn post_alert(client: &reqwest::Client, base: &str, body: &Value) -> Vec<Option<String>> {
    let r = client
        .post(format!("{base}/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "POST alert to {base}");
    let v: Value = r.json().await.unwrap();
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["request_id"].as_str().map(str::to_owned))
        .collect()
}

fn resolved(alert: &Value) -> Value {
    let mut r = alert.clone();
    r["status"] = json!("resolved");
    r["alerts"][0]["status"] = json!("resolved");
    r["alerts"][0]["endsAt"] = json!(chrono::Utc::now().to_rfc3339());
    r
}

/// The same pod, seen by a second alert rule (another fingerprint, the same target).
fn second_rule(alert: &Value) -> Value {
    let mut a = alert.clone();
    a["alerts"][0]["labels"]["alertname"] = json!("KubePodNotReady");
    a["commonLabels"]["alertname"] = json!("KubePodNotReady");
    a["groupLabels"]["alertname"] = json!("KubePodNotReady");
    a["alerts"][0]["fingerprint"] = json!(format!("{:016x}", rand_u64()));
    a
}

/// An alert about the Deployment itself (no pod label): another target, the same root owner.
fn deployment_rule(alert: &Value) -> Value {
    let mut a = alert.clone();
    let namespace = a["alerts"][0]["labels"]["namespace"].clone();
    let labels = json!({
        "alertname": "KubeDeploymentReplicasMismatch",
        "severity": "warning",
        "namespace": namespace,
        "deployment": "checkout",
    });
    a["alerts"][0]["labels"] = labels.clone();
    a["commonLabels"] = labels;
    a["groupLabels"] = json!({"alertname": "KubeDeploymentReplicasMismatch"});
    a["alerts"][0]["fingerprint"] = json!(format!("{:016x}", rand_u64()));
    a
}

/// Whether a request's execution changed anything (a step applied, now or by an earlier try).
fn wrote_a_step(request: &Value) -> bool {
    request["state"]["execution"]["steps"]
        .as_array()
        .is_some_and(|steps| {
            steps
                .iter()
                .any(|s| s["status"] == "applied" || s["status"] == "already_applied")
        })
}

fn rand_u64() -> u64 {
    u64::from_str_radix(&uuid::Uuid::new_v4().simple().to_string()[..16], 16).unwrap()
}

fn events_of_kind<'a>(request: &'a Value, kind: &str) -> Vec<&'a Value> {
    request["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// Who moved a request through the phases the workers run (every transition but a human's
/// decision out of AwaitingApproval): the worker ids (`<host name>-<suffix>`) of the replicas.
fn worker_actors(request: &Value) -> BTreeSet<String> {
    events_of_kind(request, "transition")
        .into_iter()
        .filter(|e| e["payload"]["from"] != "AwaitingApproval")
        .map(|e| e["actor"].as_str().unwrap().to_owned())
        .collect()
}

/// The kubelet of every namespace: new checkout pods are scheduled and run.
fn kubelets(namespaces: &[Kube]) -> Vec<tokio::task::JoinHandle<()>> {
    namespaces.iter().map(common::incident::kubelet).collect()
}

/// The rollback the execution made, its history and its single write, checked on the cluster.
async fn executed_once(client: &reqwest::Client, base: &str, k: &Kube, done: &Value) {
    assert_eq!(done["phase"], "Completed", "{}: {done:#}", k.ns);
    let executions = events_of_kind(done, "execution");
    assert_eq!(
        executions.len(),
        1,
        "{}: one execution: {executions:#?}",
        k.ns
    );
    let steps = &done["state"]["execution"]["steps"];
    assert_eq!(steps[0]["action"], "rollout_undo", "{steps:#}");
    assert!(
        steps[0]["status"] == "applied" || steps[0]["status"] == "already_applied",
        "{steps:#}"
    );
    let deployment = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3",
        "{}: exactly one rollback (two would make revision 4)",
        k.ns
    );
    assert_eq!(
        deployment["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{}/1", done["id"].as_str().unwrap()),
        "{}: the write carries this request's stamp",
        k.ns
    );
    let history = get(
        client,
        &format!(
            "{base}/api/v1/history?kind=Deployment&name=checkout&namespace={}",
            k.ns
        ),
    )
    .await;
    assert_eq!(history["total"], 1, "{}: {history:#}", k.ns);
}

/// `kubemedic audit verify` on the shared database: one chain, intact, whoever wrote it.
fn audit_chain_intact(database_url: &str) {
    let out = Command::new(BIN)
        .args(["audit", "verify", "--audit-key", AUDIT_KEY])
        .env("KUBEMEDIC_DATABASE_URL", database_url)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("audit chain intact"), "{text}");
}

/// Every mail maildev holds about `approval` (its id is in the links).
async fn mails_about(api: &str, approval: &str) -> Vec<Value> {
    let all: Vec<Value> = reqwest::get(format!("{api}/email"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    all.into_iter()
        .filter(|m| m["text"].as_str().unwrap_or("").contains(approval))
        .collect()
}

struct Mail {
    smtp: String,
    user: String,
    pass: String,
    api: String,
}

fn maildev() -> Option<Mail> {
    Some(Mail {
        smtp: common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)")?,
        user: common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)")?,
        pass: common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)")?,
        api: common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)")?,
    })
}

/// A burst of alerts for five bad rollouts — three in a staging namespace (auto-approved),
/// two in production (mailed to two approvers) — each alert from two rules, plus one about the
/// first Deployment itself, each delivered to both replicas twice, all at once, as two
/// Alertmanagers in HA with retries would. Both replicas start together on the empty database
/// (their migrations race). Exactly one request per target, and of the two requests on one
/// Deployment only one writes; each rollback written once (revision, one execution event, one
/// history entry); each approval mailed once per approver, its outcome once per approver; the
/// audit trail one intact chain; and every pipeline step done by one of the two replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_under_a_burst_investigate_notify_and_execute_each_request_once() {
    common::init();
    let Some(mail) = maildev() else { return };
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let mut namespaces = Vec::new();
    for _ in 0..5 {
        let Some(k) = Kube::new("rpl").await else {
            return;
        };
        namespaces.push(k);
    }
    let refs: Vec<&Kube> = namespaces.iter().collect();
    let staged = common::scenarios::bad_rollouts(&refs).await;
    let production = 3..5;
    for (i, k) in namespaces.iter().enumerate() {
        let environment = if production.contains(&i) {
            "production"
        } else {
            "staging"
        };
        k.patch(
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": environment}}}),
        )
        .await;
    }

    let mut args = cluster_args(&namespaces[0].kubeconfig);
    args.extend(
        [
            "--approvers",
            &APPROVERS.join(","),
            "--smtp-url",
            &mail.smtp,
            "--smtp-username",
            &mail.user,
            "--smtp-password",
            &mail.pass,
            "--email-from",
            "kubemedic <kubemedic@example.test>",
            "--public-url",
            "https://kubemedic.example.test",
        ]
        .map(str::to_owned),
    );
    let replicas = two_replicas(&database_url, &args).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // The burst: every alert (two rules per pod, and one rule about the first Deployment
    // itself) to both replicas, twice, concurrently. Key `i < 5`: the pod in namespace `i`; key
    // 5: the Deployment in namespace 0 — another request, on the same root owner.
    let deployment_key = namespaces.len();
    let ns_of = |key: usize| if key == deployment_key { 0 } else { key };
    let mut alerts: Vec<(usize, Value)> = staged
        .iter()
        .enumerate()
        .flat_map(|(i, s)| [(i, s.alert.clone()), (i, second_rule(&s.alert))])
        .collect();
    alerts.push((deployment_key, deployment_rule(&staged[0].alert)));
    let mut sends = Vec::new();
    for _ in 0..2 {
        for (key, alert) in &alerts {
            for r in &replicas {
                let (client, base, alert, key) =
                    (client.clone(), r.base.clone(), alert.clone(), *key);
                sends.push(tokio::spawn(async move {
                    (key, post_alert(&client, &base, &alert).await)
                }));
            }
        }
    }
    let mut ids_per_key: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for s in sends {
        let (key, ids) = s.await.unwrap();
        for id in ids {
            ids_per_key
                .entry(key)
                .or_default()
                .insert(id.expect("a firing alert is recorded on a request"));
        }
    }
    let keys = deployment_key + 1;
    let mut requests: Vec<String> = Vec::new();
    for key in 0..keys {
        let ids = &ids_per_key[&key];
        assert_eq!(
            ids.len(),
            1,
            "{} (key {key}): one request per target, whichever replica and rule: {ids:?}",
            namespaces[ns_of(key)].ns
        );
        requests.push(ids.iter().next().unwrap().clone());
    }
    assert_eq!(
        requests.iter().collect::<BTreeSet<_>>().len(),
        keys,
        "distinct targets, distinct requests"
    );

    // Carry each request to its end: production ones are approved through the API of the
    // replica that did not necessarily send the mail, and every alert resolves once its
    // rollback is made (delivered to both replicas, as both Alertmanagers would).
    let kubelets = kubelets(&namespaces);
    let mut approvals: HashMap<usize, String> = HashMap::new();
    let mut resolved_sent = vec![false; keys];
    let mut done: Vec<Option<Value>> = vec![None; keys];
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut poll = 0usize;
    while done.iter().any(Option::is_none) {
        for key in 0..keys {
            if done[key].is_some() {
                continue;
            }
            poll += 1;
            let reader = &replicas[poll % 2];
            let r = get(
                &client,
                &format!("{}/api/v1/requests/{}", reader.base, requests[key]),
            )
            .await;
            if common::incident::is_terminal(&r) {
                done[key] = Some(r);
                continue;
            }
            if r["phase"] == "AwaitingApproval" && !approvals.contains_key(&key) {
                assert!(
                    production.contains(&ns_of(key)),
                    "staging waits for nobody: {r:#}"
                );
                let pending = get(
                    &client,
                    &format!("{}/api/v1/approvals?status=pending", reader.base),
                )
                .await;
                let Some(a) = pending["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["request_id"] == requests[key].as_str())
                else {
                    continue;
                };
                let aid = a["id"].as_str().unwrap().to_owned();
                // The offer reaches each approver before anyone decides.
                common::incident::mails_for(&mail.api, &aid, APPROVERS.len()).await;
                let decided = client
                    .post(format!(
                        "{}/api/v1/approvals/{aid}/decision",
                        replicas[1].base
                    ))
                    .bearer_auth(API_TOKEN)
                    .json(&json!({"decision": "approve", "message": "from replica b"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
                approvals.insert(key, aid);
            }
            if r["phase"] == "Verifying" && !resolved_sent[key] {
                for alert in alerts.iter().filter(|(k, _)| *k == key).map(|(_, a)| a) {
                    for rep in &replicas {
                        post_alert(&client, &rep.base, &resolved(alert)).await;
                    }
                }
                resolved_sent[key] = true;
            }
        }
        assert!(
            Instant::now() < deadline,
            "not finished: {:?}\nreplica a:\n{}\nreplica b:\n{}",
            done.iter().map(Option::is_some).collect::<Vec<_>>(),
            replicas[0].log_text(),
            replicas[1].log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for k in kubelets {
        k.abort();
    }

    // Executed once each. In namespace 0 two requests met on one Deployment: one of them
    // rolled it back, the other wrote nothing (the target's execution lock, or its cooldown).
    let done: Vec<Value> = done.into_iter().map(Option::unwrap).collect();
    for (i, k) in namespaces.iter().enumerate().skip(1) {
        executed_once(&client, &replicas[i % 2].base, k, &done[i]).await;
    }
    let (wrote, other): (Vec<&Value>, Vec<&Value>) = [&done[0], &done[deployment_key]]
        .into_iter()
        .partition(|r| wrote_a_step(r));
    assert_eq!(
        wrote.len(),
        1,
        "{}: one of the two requests on the Deployment wrote: {:#}",
        namespaces[0].ns,
        json!([&done[0]["state"], &done[deployment_key]["state"]])
    );
    executed_once(&client, &replicas[0].base, &namespaces[0], wrote[0]).await;
    eprintln!(
        "the other request on {}'s Deployment ended {} ({})",
        namespaces[0].ns, other[0]["phase"], other[0]["reason"]
    );
    assert_eq!(approvals.len(), production.len(), "{approvals:?}");

    // Notified once each: per approval, one offer and one outcome per approver, delivered,
    // and no more mails than that — a second replica sending too would double them.
    for (key, aid) in &approvals {
        let i = &ns_of(*key);
        common::incident::mails_for(&mail.api, aid, 2 * APPROVERS.len()).await;
        let a = get(
            &client,
            &format!("{}/api/v1/approvals/{aid}", replicas[0].base),
        )
        .await;
        let mut sent: BTreeMap<(String, String), usize> = BTreeMap::new();
        for n in a["notifications"].as_array().unwrap() {
            assert_eq!(n["status"], "delivered", "{}: {n:#}", namespaces[*i].ns);
            assert_eq!(n["attempts"], 1, "{}: {n:#}", namespaces[*i].ns);
            *sent
                .entry((
                    n["kind"].as_str().unwrap().to_owned(),
                    n["recipient"].as_str().unwrap().to_owned(),
                ))
                .or_default() += 1;
        }
        let want: BTreeMap<(String, String), usize> = ["offer", "outcome"]
            .iter()
            .flat_map(|kind| {
                APPROVERS
                    .iter()
                    .map(move |to| ((kind.to_string(), to.to_string()), 1))
            })
            .collect();
        assert_eq!(sent, want, "{}: {a:#}", namespaces[*i].ns);
        assert_eq!(
            done[*i]["state"]["approval"]["decision"], "approved",
            "{:#}",
            done[*i]
        );
    }
    // Mails are counted once more after the dispatchers of both replicas have polled the
    // outbox again and again (every second): a duplicate would be there by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (key, aid) in &approvals {
        let i = &ns_of(*key);
        let mails = mails_about(&mail.api, aid).await;
        assert_eq!(
            mails.len(),
            2 * APPROVERS.len(),
            "{}: an offer and an outcome to each approver, once: {:#?}",
            namespaces[*i].ns,
            mails
                .iter()
                .map(|m| (&m["to"], &m["subject"]))
                .collect::<Vec<_>>()
        );
        for to in APPROVERS {
            assert_eq!(
                mails
                    .iter()
                    .filter(|m| m["to"].to_string().contains(to))
                    .count(),
                2,
                "{to}"
            );
        }
    }

    // Investigated once each: one investigation per request, and every step was done by one
    // of the two replicas' workers.
    let mut by_replica: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in done.iter().enumerate() {
        // Investigated once; left Executing at most once (the request the lock or the
        // cooldown stopped may never have got that far).
        for (stage, at_most) in [("Investigating", 1..=1), ("Executing", 0..=1)] {
            let left = events_of_kind(r, "transition")
                .into_iter()
                .filter(|e| e["payload"]["from"] == stage)
                .count();
            assert!(
                at_most.contains(&left),
                "{}: left {stage} {left} times: {:#}",
                namespaces[ns_of(i)].ns,
                r["timeline"]
            );
        }
        let actors = worker_actors(r);
        assert!(
            !actors.is_empty(),
            "{}: the audit trail names the replica that moved it: {:#}",
            namespaces[ns_of(i)].ns,
            r["timeline"]
        );
        for actor in actors {
            let who = replicas
                .iter()
                .find(|rep| actor.starts_with(&rep.actor_prefix()))
                .unwrap_or_else(|| panic!("{actor} is neither replica"));
            *by_replica.entry(who.name.clone()).or_default() += 1;
        }
    }
    eprintln!("requests stepped per replica: {by_replica:?}");
    audit_chain_intact(&database_url);
}

/// The claim on `request` in the shared database: the worker that holds it.
async fn holder(database_url: &str, request: &str) -> Option<String> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(database_url)
        .await
        .unwrap();
    let (by,): (Option<String>,) = sqlx::query_as(
        "SELECT claimed_by FROM remediation_requests WHERE id = $1 AND lease_until > now()",
    )
    .bind(uuid::Uuid::parse_str(request).unwrap())
    .fetch_one(&mut conn)
    .await
    .unwrap();
    by
}

/// Once the rollback of request `id` is on `k`'s Deployment (stamped with its first step), the
/// index of the replica that holds the request.
async fn holder_once_written(
    k: &Kube,
    database_url: &str,
    replicas: &[Replica; 2],
    id: &str,
) -> usize {
    let deployments = k.api("apps/v1", "Deployment");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = deployments.get("checkout").await.unwrap();
        let stamp = d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubemedic.io/remediation"))
            .cloned();
        if let Some(stamp) = stamp {
            assert_eq!(stamp, format!("{id}/1"));
            break;
        }
        assert!(Instant::now() < deadline, "the rollback was never written");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let worker = holder(database_url, id)
        .await
        .expect("the executing replica holds the request while its rollout is waited for");
    replicas
        .iter()
        .position(|r| worker.starts_with(&r.actor_prefix()))
        .unwrap_or_else(|| panic!("{worker} is neither replica"))
}

/// Follow request `id` on `replica` to its end, resolving `alert` (as Alertmanager would once
/// the rollback works) when it is verifying.
async fn finish_on(client: &reqwest::Client, replica: &Replica, alert: &Value, id: &str) -> Value {
    let url = format!("{}/api/v1/requests/{id}", replica.base);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut resolved_sent = false;
    loop {
        let r = get(client, &url).await;
        if r["phase"] == "Verifying" && !resolved_sent {
            post_alert(client, &replica.base, &resolved(alert)).await;
            resolved_sent = true;
        }
        if common::incident::is_terminal(&r) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "not finished: {r:#}\n{}:\n{}",
            replica.name,
            replica.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two replicas; the alert reaches both; the rollback is written by one of them, which is
/// SIGKILLed while its execution waits for the rollout. The other takes the request over once
/// the claim's lease lapses and finishes it without writing again: one revision more, one
/// execution event, one history entry, the steps applied or found already applied. A third
/// daemon with its own audit key is refused on that database instead of breaking its chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_execution_leaves_the_request_to_the_other_which_finishes_it_once() {
    common::init();
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let Some(k) = Kube::new("rplkill").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&k]).await.remove(0);
    let args = cluster_args(&k.kubeconfig);
    let mut replicas = two_replicas(&database_url, &args).await;
    let client = reqwest::Client::new();
    let (first, second) = tokio::join!(
        post_alert(&client, &replicas[0].base, &staged.alert),
        post_alert(&client, &replicas[1].base, &staged.alert),
    );
    assert_eq!(first, second, "one request, whichever replica is told");
    let id = first[0].clone().unwrap();

    // The rollback is on the Deployment; nobody runs its new pods, so the execution is waiting
    // for the rollout. Kill the replica that holds it.
    let killed = holder_once_written(&k, &database_url, &replicas, &id).await;
    replicas[killed].child.kill().unwrap();
    replicas[killed].child.wait().unwrap();
    let survivor = &replicas[1 - killed];
    eprintln!("killed {} holding {id}", replicas[killed].name);

    // Now the kubelet runs the rolled-back pods; Alertmanager resolves once it is verifying.
    let kubelet = common::incident::kubelet(&k);
    let done = finish_on(&client, survivor, &staged.alert, &id).await;
    kubelet.abort();
    executed_once(&client, &survivor.base, &k, &done).await;
    // The survivor finished it: the last pipeline step in the audit trail is its worker's.
    let last_worker = events_of_kind(&done, "transition")
        .last()
        .map(|e| e["actor"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(
        last_worker.starts_with(&survivor.actor_prefix()),
        "{last_worker} finished it, not {}",
        survivor.name
    );
    audit_chain_intact(&database_url);

    // A replica left to make its own audit key (the default, a file in its data directory)
    // would sign events no other replica's key verifies: it is refused, naming the setting.
    let mut stray = Replica::spawn("replica-c", &database_url, None, &args);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = stray.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "a replica with another audit key started:\n{}",
            stray.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(200)).await; // the log reader catches up
    assert!(!status.success(), "{}", stray.log_text());
    assert!(
        stray.log_text().contains("--audit-key"),
        "{}",
        stray.log_text()
    );
    audit_chain_intact(&database_url);
}

/// A replica frozen (SIGSTOP: a paused VM, a node cut off) while it holds a request that waits
/// for its rollout is, to the other replica, a dead one: the other takes the request over once
/// the lease lapses and finishes it. When the frozen replica wakes, its stage finishes too, but
/// its claim is gone: nothing it does reaches the request (the trail and state stay as the other
/// left them) or the cluster (no second rollback).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_paused_mid_execution_wakes_to_find_the_request_finished_and_changes_nothing() {
    common::init();
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let Some(k) = Kube::new("rplstop").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&k]).await.remove(0);
    let args = cluster_args(&k.kubeconfig);
    let replicas = two_replicas(&database_url, &args).await;
    let client = reqwest::Client::new();
    let (first, second) = tokio::join!(
        post_alert(&client, &replicas[0].base, &staged.alert),
        post_alert(&client, &replicas[1].base, &staged.alert),
    );
    assert_eq!(first, second, "one request, whichever replica is told");
    let id = first[0].clone().unwrap();

    let frozen = holder_once_written(&k, &database_url, &replicas, &id).await;
    let signal = |sig: &str| {
        let pid = replicas[frozen].child.id().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    let other = &replicas[1 - frozen];
    eprintln!("froze {} holding {id}", replicas[frozen].name);
    let kubelet = common::incident::kubelet(&k);
    let done = finish_on(&client, other, &staged.alert, &id).await;
    executed_once(&client, &other.base, &k, &done).await;

    // Wake it. Its next lease renewal finds the claim gone and abandons the step ("claim
    // taken over … abandoning the step"), or, if its rollout wait ends first, its commit is
    // refused ("lost the claim"), or, if it was frozen inside a transaction, Postgres ended
    // that session meanwhile (the idle-in-transaction timeout) and the commit fails with the
    // store unavailable ("cannot commit step"); any way the request is as the other left it.
    let frozen = &replicas[frozen];
    let before = frozen.log.lock().unwrap().len();
    signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let woke = frozen.log.lock().unwrap()[before..]
            .iter()
            .find(|l| {
                (l.contains(r#""level":"WARN""#)
                    && (l.contains("lost the claim") || l.contains("abandoning the step")))
                    || (l.contains(r#""level":"ERROR""#)
                        && l.contains("cannot commit step")
                        && l.contains("idle-in-transaction timeout"))
            })
            .cloned();
        if let Some(line) = woke {
            eprintln!("{} woke: {line}", frozen.name);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the woken replica never noticed it lost the claim:\n{}",
            frozen.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its step has ended without a commit: read the request through the woken replica's own
    // API and compare.
    let after = finish_on(&client, frozen, &staged.alert, &id).await;
    kubelet.abort();
    assert_eq!(after["phase"], "Completed", "{after:#}");
    assert_eq!(
        after["timeline"].as_array().unwrap().len(),
        done["timeline"].as_array().unwrap().len(),
        "nothing added to the trail: {:#}",
        after["timeline"]
    );
    assert_eq!(after["state"], done["state"]);
    executed_once(&client, &frozen.base, &k, &after).await;
    audit_chain_intact(&database_url);
}

/// The window the leases cannot close: a replica stalls (longer than its lease) after recording
/// its rollback's intent and before reading the Deployment; the other replica takes the request
/// over and rolls back, stamped with the same request and step. When the stalled one goes on,
/// the Deployment it reads already carries its step's stamp, and it does not undo again — which
/// would roll the bad revision forward.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_does_not_undo_a_rollback_its_step_already_made() {
    use kubemedic::cluster::ClusterWriter;
    use kubemedic::execute::stamp::StampingWriter;
    let Some(k) = Kube::new("rplundo").await else {
        return;
    };
    common::scenarios::bad_rollouts(&[&k]).await;
    let cluster = k.cluster().await;
    let step = StampingWriter::new(
        cluster.clone() as Arc<dyn ClusterWriter>,
        format!("{}/1", uuid::Uuid::new_v4()),
        "kubemedic: rollback".into(),
    );
    let bad = k.get("apps/v1", "Deployment", "checkout").await;
    let image = |d: &Value| d["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(image(&bad), "shop/checkout:1.4.2");

    // The replica that took the request over rolls back; the controller records revision 3.
    kubemedic::actions::writes::rollout_undo(
        cluster.as_ref(),
        &step,
        &k.ns,
        "checkout",
        None,
        false,
    )
    .await
    .unwrap();
    let undone = k
        .wait("revision 3", 30, || async {
            let d = k.get("apps/v1", "Deployment", "checkout").await;
            (d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3").then_some(d)
        })
        .await;
    assert_eq!(image(&undone), "shop/checkout:1.4.1");

    // The stalled replica wakes and runs the same step.
    kubemedic::actions::writes::rollout_undo(
        cluster.as_ref(),
        &step,
        &k.ns,
        "checkout",
        None,
        false,
    )
    .await
    .unwrap();
    let after = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        image(&after),
        "shop/checkout:1.4.1",
        "the bad revision was rolled forward again"
    );
    assert_eq!(
        after["metadata"]["generation"], undone["metadata"]["generation"],
        "a second write"
    );
}
