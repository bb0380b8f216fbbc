//! Each adapter of the neighbourhood (src/prove/graph) on the real API server: a small
//! incident staged live in a fresh namespace, then `graph::build` against the live cluster.
//!
//! The real controllers do what they do wherever the tier runs them: ResourceQuota and
//! LimitRange admission refuse pods and the ReplicaSet controller reports it, a real validating
//! webhook whose Service has no endpoints refuses pod creation, the PersistentVolume controller
//! binds claims and reports a missing StorageClass, the Deployment controller scales and stays
//! paused, the endpoints controller empties a Service. The test plays only what the tier does
//! not run (ADR/README of scripts/kube-tier): the kubelet (bindings, container statuses, its
//! events, logs through a fake kubelet), the scheduler's complaint, node-problem-detector's
//! conditions and the HPA controller (disabled on the tier: its status is written in the shape
//! the real v1.20.2 controller writes).
//!
//! Each test asserts the culprit (object, kind, what is wrong with it, the explanation) and that
//! the neighbourhood read only what the failure points to. Cluster-scoped objects (nodes,
//! volumes, webhook configurations) get unique names and are deleted when the test ends, also
//! when it fails; the only other namespace touched is kube-system, for cluster DNS, and only
//! objects absent before are created there.
//!
//! Also here, end to end through the offline investigator and the selection stage with its
//! prover: the issue's harmful example, a workload down to half its replicas because its pods
//! could not be created (a full ResourceQuota, a webhook that refuses them), must not be
//! declared healthy again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use common::kube::{Kube, LogStore, fake_kubelet, status};
use common::scenarios::{ago, deployment, name};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kubemedic::cluster::{
    ClusterReader, KubeCluster, ListQuery, LogQuery, MemoReader, ResourceInfo, SnapshotCluster,
};
use kubemedic::domain::{DepKind, Dependency, Neighbourhood, OnNode, Target};
use kubemedic::prove::graph;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// What the neighbourhood read.

/// One call that reached the API server.
#[derive(Debug, Clone)]
struct Call {
    verb: &'static str,
    kind: String,
    namespace: Option<String>,
    what: String,
}

/// A reader that notes every call reaching the live cluster (behind the investigation's
/// memoizing reader, so each question counts once, as in production).
struct Recording {
    inner: Arc<KubeCluster>,
    calls: Mutex<Vec<Call>>,
}

impl Recording {
    fn note(&self, verb: &'static str, kind: &str, namespace: Option<&str>, what: String) {
        self.calls.lock().unwrap().push(Call {
            verb,
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            what,
        });
    }
}

#[async_trait::async_trait]
impl ClusterReader for Recording {
    async fn resource(&self, kind: &str) -> kubemedic::cluster::Result<ResourceInfo> {
        self.inner.resource(kind).await
    }
    async fn get(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> kubemedic::cluster::Result<Value> {
        self.note("get", &res.kind, namespace, name.to_owned());
        self.inner.get(res, namespace, name).await
    }
    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> kubemedic::cluster::Result<Vec<Value>> {
        let what = [&query.label_selector, &query.field_selector]
            .iter()
            .filter_map(|s| s.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
        self.note("list", &res.kind, namespace, what);
        self.inner.list(res, namespace, query).await
    }
    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> kubemedic::cluster::Result<String> {
        self.note(
            "logs",
            "Pod",
            Some(namespace),
            format!("{pod} {:?}", query.container),
        );
        self.inner.logs(namespace, pod, query).await
    }
    async fn server_version(&self) -> kubemedic::cluster::Result<String> {
        self.inner.server_version().await
    }
}

/// The neighbourhood of a target and the calls it took.
struct Seen {
    n: Neighbourhood,
    calls: Vec<Call>,
}

/// ADR 0021: an investigation stays within 30 API calls; the neighbourhood is part of it.
const CALL_BUDGET: usize = 30;

async fn neighbourhood(k: &Kube, kind: &str, name: &str, now: DateTime<Utc>) -> Seen {
    let rec = Arc::new(Recording {
        inner: k.cluster().await,
        calls: Mutex::default(),
    });
    let reader: Arc<dyn ClusterReader> = Arc::new(MemoReader::new(rec.clone()));
    let target = Target::new(kind, name, Some(k.ns.clone()));
    let n = graph::build(reader, &target, now)
        .await
        .expect("the neighbourhood of a live target");
    let calls = rec.calls.lock().unwrap().clone();
    let seen = Seen { n, calls };
    eprintln!("{}", seen.describe());
    seen
}

impl Seen {
    fn describe(&self) -> String {
        let calls: Vec<String> = self
            .calls
            .iter()
            .map(|c| {
                format!(
                    "  {} {} {} {}",
                    c.verb,
                    c.kind,
                    c.namespace.as_deref().unwrap_or("(cluster)"),
                    c.what
                )
            })
            .collect();
        format!(
            "neighbourhood of {} (onset {:?}):\n{}culprit: {:?}\n{} calls:\n{}",
            self.n.target,
            self.n.onset,
            self.n.compact(12),
            self.n.explain(),
            self.calls.len(),
            calls.join("\n")
        )
    }

    fn culprit(&self) -> &Dependency {
        self.n
            .culprit()
            .unwrap_or_else(|| panic!("no culprit:\n{}", self.describe()))
    }

    fn explain(&self) -> String {
        self.n.explain().unwrap_or_default()
    }

    /// The dependency on `object`, culprit or not.
    fn dependency(&self, object: &str) -> &Dependency {
        self.n
            .dependencies
            .iter()
            .find(|d| d.object == object)
            .unwrap_or_else(|| panic!("no dependency {object}:\n{}", self.describe()))
    }

    /// The culprit is `object` of `kind`, what is wrong with it says `unhealthy`, and the
    /// explanation a human reads says `explains`.
    fn blames(&self, kind: DepKind, object: &str, unhealthy: &[&str], explains: &[&str]) {
        let c = self.culprit();
        assert_eq!(c.kind, kind, "{}", self.describe());
        assert_eq!(c.object, object, "{}", self.describe());
        let u = c.unhealthy.as_deref().unwrap_or_default();
        for w in unhealthy {
            assert!(
                u.contains(w),
                "unhealthy lacks {w:?}: {u:?}\n{}",
                self.describe()
            );
        }
        let e = self.explain();
        for w in explains {
            assert!(
                e.contains(w),
                "explain() lacks {w:?}: {e:?}\n{}",
                self.describe()
            );
        }
    }

    /// The neighbourhood read only these kinds, in these namespaces (cluster-scoped reads
    /// aside), within the investigation's budget.
    fn read_only(&self, kinds: &[&str], namespaces: &[&str]) {
        let read: BTreeSet<&str> = self.calls.iter().map(|c| c.kind.as_str()).collect();
        let extra: Vec<&&str> = read.iter().filter(|k| !kinds.contains(k)).collect();
        assert!(
            extra.is_empty(),
            "read {extra:?}, which this failure does not point to\n{}",
            self.describe()
        );
        let elsewhere: Vec<&Call> = self
            .calls
            .iter()
            .filter(|c| {
                c.namespace
                    .as_deref()
                    .is_some_and(|ns| !namespaces.contains(&ns))
            })
            .collect();
        assert!(
            elsewhere.is_empty(),
            "read outside {namespaces:?}: {elsewhere:?}\n{}",
            self.describe()
        );
        assert!(
            self.calls.len() <= CALL_BUDGET,
            "{} calls\n{}",
            self.calls.len(),
            self.describe()
        );
    }

    /// Whether the neighbourhood asked for container logs at all.
    fn read_logs(&self) -> bool {
        self.calls.iter().any(|c| c.verb == "logs")
    }
}

// ---------------------------------------------------------------------------------------------
// Staging.

fn ar(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// An object by API version, kind, namespace (None: cluster-scoped) and name.
type ObjectRef = (String, String, Option<String>, String);

/// Objects outside the test namespace (cluster-scoped, or in kube-system) to delete when the
/// test ends — also when it fails: other tests share the tier. The test namespace's workloads
/// and pods go first: on the tier's fake nodes nothing would ever finish those pods, and the
/// attach/detach controller would keep attaching their volumes.
struct Outside {
    kubeconfig: PathBuf,
    namespace: String,
    objects: Mutex<Vec<ObjectRef>>,
}

impl Outside {
    fn new(k: &Kube) -> Self {
        Self {
            kubeconfig: k.kubeconfig.clone(),
            namespace: k.ns.clone(),
            objects: Mutex::default(),
        }
    }

    fn add(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
        self.objects.lock().unwrap().push((
            api_version.to_owned(),
            kind.to_owned(),
            namespace.map(str::to_owned),
            name.to_owned(),
        ));
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let objects = std::mem::take(&mut *self.objects.lock().unwrap_or_else(|e| e.into_inner()));
        if objects.is_empty() {
            return;
        }
        let kubeconfig = self.kubeconfig.clone();
        let namespace = self.namespace.clone();
        // A runtime of its own: Drop may run while the test's runtime unwinds a panic.
        let cleaned = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(clean_up(&kubeconfig, &namespace, &objects))
        })
        .join();
        match cleaned {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("*** cleanup left objects behind: {e}"),
            Err(_) => eprintln!("*** cleanup panicked"),
        }
    }
}

async fn clean_up(
    kubeconfig: &std::path::Path,
    namespace: &str,
    objects: &[ObjectRef],
) -> Result<(), String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    for (api_version, kind) in [("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")] {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &ar(api_version, kind));
        let _ = api
            .delete_collection(&DeleteParams::background(), &Default::default())
            .await;
    }
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ar("v1", "Pod"));
    for _ in 0..50 {
        let Ok(list) = pods.list(&Default::default()).await else {
            break;
        };
        if list.items.is_empty() {
            break;
        }
        for p in list.items {
            if let Some(n) = p.metadata.name {
                let _ = pods
                    .delete(
                        &n,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        },
                    )
                    .await;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let mut left = Vec::new();
    for (api_version, kind, ns, name) in objects.iter().rev() {
        let res = ar(api_version, kind);
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &res),
            None => Api::all_with(client.clone(), &res),
        };
        let mut gone = false;
        for _ in 0..3 {
            match api.delete(name, &DeleteParams::background()).await {
                Ok(_) => {
                    gone = true;
                    break;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    gone = true;
                    break;
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(300)).await,
            }
        }
        if !gone {
            left.push(format!("{kind} {name}"));
        }
        // A volume keeps its protection finalizer while its claim lives; nothing uses it once
        // deleted.
        let _ = api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(left.join(", "))
    }
}

async fn kubelet() -> (LogStore, u16) {
    let logs: LogStore = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    (logs, port)
}

fn log(logs: &LogStore, k: &Kube, pod: &str, container: &str, previous: bool, text: &str) {
    logs.lock().unwrap().insert(
        (k.ns.clone(), pod.to_owned(), container.to_owned(), previous),
        text.to_owned(),
    );
}

/// A Ready node `<ns>-<suffix>` served by the fake kubelet, with `labels` and (besides Ready)
/// `conditions`; deleted when the test ends.
async fn node(
    k: &Kube,
    outside: &Outside,
    port: u16,
    suffix: &str,
    labels: Value,
    conditions: Value,
) -> String {
    let n = format!("{}-{suffix}", k.ns);
    outside.add("v1", "Node", None, &n);
    k.node(&n, port, json!([])).await;
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        k.patch("v1", "Node", &n, json!({"metadata": {"labels": labels}}))
            .await;
    }
    if let Some(extra) = conditions.as_array().filter(|c| !c.is_empty()) {
        let mut all = vec![
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(86_400)}),
        ];
        all.extend(extra.iter().cloned());
        k.patch_status("v1", "Node", &n, json!({"conditions": all}))
            .await;
    }
    n
}

/// An event about a node, in the test namespace: a real node-problem-detector or kubelet writes
/// it to `default`, which this test does not touch; the adapters find node events by the
/// involved object's kind and name in any namespace.
async fn node_event(k: &Kube, node: &str, type_: &str, reason: &str, message: &str, ago_secs: i64) {
    let t = ago(ago_secs);
    let e = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{node}.{}", uuid::Uuid::new_v4().simple()), "namespace": k.ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node, "namespace": k.ns},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "firstTimestamp": t, "lastTimestamp": t,
        "source": {"component": "kernel-monitor", "host": node}
    });
    k.apply(e).await;
}

/// Schedule `pod` on `node` and report it running and ready at `ip` (so the endpoints
/// controller lists it).
async fn run(k: &Kube, pod: &Value, node: &str, container: &str, image: &str, ip: &str) -> Value {
    k.bind(&name(pod), node).await;
    let mut st = status::running(container, image);
    st["podIP"] = json!(ip);
    st["podIPs"] = json!([{"ip": ip}]);
    k.patch_status("v1", "Pod", &name(pod), st).await
}

/// Schedule `pod` on `node` and report `container` crash-looping after `restarts` restarts.
async fn crash(
    k: &Kube,
    pod: &Value,
    node: &str,
    (container, image): (&str, &str),
    restarts: i64,
    exit_code: i64,
) -> Value {
    k.bind(&name(pod), node).await;
    let mut st = status::crash_loop(container, image, restarts, exit_code, "Error");
    st["containerStatuses"][0]["lastState"]["terminated"]["startedAt"] = json!(ago(70));
    st["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] = json!(ago(60));
    k.patch_status("v1", "Pod", &name(pod), st).await
}

/// Schedule `pod` on `node` and report `container` waiting (`reason`, `message`), with the
/// kubelet's `Failed` event saying why.
async fn waiting(
    k: &Kube,
    pod: &Value,
    node: &str,
    (container, image): (&str, &str),
    reason: &str,
    message: &str,
) -> Value {
    k.bind(&name(pod), node).await;
    let p = k
        .patch_status(
            "v1",
            "Pod",
            &name(pod),
            status::waiting(container, image, reason, message),
        )
        .await;
    k.event(&p, "Warning", "Failed", &format!("Error: {message}"), 6, 15)
        .await;
    p
}

/// Play the scheduler: `pod` cannot be placed, for `why`.
async fn unschedulable(k: &Kube, pod: &Value, why: &str) -> Value {
    let p = k
        .patch_status("v1", "Pod", &name(pod), status::unschedulable(why))
        .await;
    k.event(&p, "Warning", "FailedScheduling", why, 9, 10).await;
    p
}

fn service(name: &str, app: &str, port: i64, target: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": port, "targetPort": target}]}})
}

/// Ready addresses of a Service's endpoints.
async fn ready_endpoints(k: &Kube, svc: &str) -> usize {
    match k.api("v1", "Endpoints").get(svc).await {
        Ok(e) => serde_json::to_value(e).unwrap()["subsets"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|x| x["addresses"].as_array().map_or(0, Vec::len))
                    .sum()
            })
            .unwrap_or(0),
        Err(_) => 0,
    }
}

async fn wait_endpoints(k: &Kube, svc: &str, n: usize) {
    k.wait(&format!("{n} ready endpoints of {svc}"), 30, || async {
        (ready_endpoints(k, svc).await == n).then_some(())
    })
    .await;
}

/// A warning event whose message contains `text`, once a real controller has recorded it.
async fn wait_event(k: &Kube, reason: &str, text: &str) -> Value {
    k.wait(&format!("a {reason} event saying {text:?}"), 30, || async {
        let list = k.api("v1", "Event").list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .find(|e| {
                e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.contains(text))
            })
    })
    .await
}

/// Wait until the Deployment controller has seen the latest spec of `deploy`.
async fn observed(k: &Kube, deploy: &str) -> Value {
    k.wait(&format!("{deploy} observed"), 30, || async {
        let d = k.get("apps/v1", "Deployment", deploy).await;
        (d["status"]["observedGeneration"] == d["metadata"]["generation"]).then_some(d)
    })
    .await
}

/// A patch as `manager` (the field manager the API server records: who changed it).
async fn patch_as(k: &Kube, manager: &str, api_version: &str, kind: &str, name: &str, p: Value) {
    let pp = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..Default::default()
    };
    k.api(api_version, kind)
        .patch(name, &pp, &Patch::Merge(&p))
        .await
        .unwrap_or_else(|e| panic!("patch {kind}/{name}: {e}"));
}

fn ns_of(k: &Kube, rest: &str) -> String {
    format!("{}/{rest}", k.ns)
}

// ---------------------------------------------------------------------------------------------
// hosts: Services named in the failures, their endpoints, the workload behind them.

/// ledger-db (`db` replicas, each running with an address of its own) behind its Service, and
/// ledger, whose one pod reads it as `ledger-db:5432`: the kubelet's logs, the node, ledger's
/// pod.
async fn ledger_and_its_db(k: &Kube, outside: &Outside, db: usize) -> (LogStore, String, Value) {
    let (logs, port) = kubelet().await;
    let n = node(k, outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(deployment(
        "ledger-db",
        "postgres:15.4",
        db as i64,
        "1Gi",
        json!({"ports": [{"containerPort": 5432, "name": "postgres"}]}),
        json!({}),
    ))
    .await;
    k.apply(service("ledger-db", "ledger-db", 5432, json!("postgres")))
        .await;
    for (i, p) in k.pods("app=ledger-db", db).await.iter().enumerate() {
        let ip = format!("10.244.1.{}", 10 + i);
        run(k, p, &n, "ledger-db", "postgres:15.4", &ip).await;
    }
    wait_endpoints(k, "ledger-db", db).await;
    k.apply(deployment(
        "ledger",
        "shop/ledger:9.1",
        1,
        "512Mi",
        json!({"env": [{"name": "DATABASE_URL", "value": "postgres://ledger-db:5432/ledger"}]}),
        json!({}),
    ))
    .await;
    let app = k.pods("app=ledger", 1).await.remove(0);
    (logs, n, app)
}

/// ledger's pod crash-loops, logging "connection refused" to ledger-db:5432.
async fn ledger_cannot_connect(k: &Kube, logs: &LogStore, app: &Value, n: &str) {
    let p = crash(k, app, n, ("ledger", "shop/ledger:9.1"), 7, 2).await;
    k.event(
        &p,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        12,
        20,
    )
    .await;
    log(
        logs,
        k,
        &name(&p),
        "ledger",
        true,
        "ledger 9.1 starting\nfatal: cannot connect to database ledger-db:5432: connection refused\n",
    );
}

/// ledger crash-loops on "connection refused" to ledger-db:5432; ledger-db's Deployment was
/// scaled to zero (the real controllers scale its ReplicaSet down and empty the endpoints).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_a_named_service_whose_deployment_was_scaled_to_zero() {
    let Some(k) = Kube::new("graph-hosts").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, n, app) = ledger_and_its_db(&k, &outside, 1).await;
    k.patch(
        "apps/v1",
        "Deployment",
        "ledger-db",
        json!({"spec": {"replicas": 0}}),
    )
    .await;
    k.wait("ledger-db's pod terminating", 30, || async {
        common::scenarios::reap_terminating(&k, "app=ledger-db").await;
        let left = k
            .api("v1", "Pod")
            .list(&kube::api::ListParams::default().labels("app=ledger-db"))
            .await
            .ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    wait_endpoints(&k, "ledger-db", 0).await;
    ledger_cannot_connect(&k, &logs, &app, &n).await;

    let seen = neighbourhood(&k, "Deployment", "ledger", Utc::now()).await;
    seen.blames(
        DepKind::Host,
        &format!("Service {}", ns_of(&k, "ledger-db")),
        &[
            "has no ready endpoints",
            "Deployment ledger-db is scaled to 0 replicas",
        ],
        &["ledger-db:5432", "Scaled down replica set ledger-db-"],
    );
    // "connection refused" points at NetworkPolicies too; nothing else is read.
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Endpoints",
            "Node",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// ledger crash-loops on "connection refused" to ledger-db:5432 while ledger-db rolls out a new
/// image: both its old pods are still ready, its surge pod waits for a node. Every replica it
/// wants is ready, yet its pods are changing under its clients: the Service's backend is named
/// as rolling out, not as healthy and merely changed (which would ask for a restart of ledger
/// while its connections still move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_a_named_service_whose_backend_is_rolling_out() {
    let Some(k) = Kube::new("graph-rolling").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, n, app) = ledger_and_its_db(&k, &outside, 2).await;
    roll_out_ledger_db(&k).await;
    ledger_cannot_connect(&k, &logs, &app, &n).await;

    blames_ledger_db_rolling_out(&k).await;
}

/// ledger's neighbourhood names ledger-db's Service, its backend rolling out, as the culprit.
async fn blames_ledger_db_rolling_out(k: &Kube) {
    let seen = neighbourhood(k, "Deployment", "ledger", Utc::now()).await;
    seen.blames(
        DepKind::Host,
        &format!("Service {}", ns_of(k, "ledger-db")),
        &["Deployment ledger-db is rolling out: 1 of 2 pods updated, 3 pods in all"],
        &["ledger-db:5432"],
    );
}

/// The new image for ledger-db: the deployment controller adds a surge pod of the new revision
/// and keeps both old ones until it is ready (no kubelet runs it here).
async fn roll_out_ledger_db(k: &Kube) {
    k.patch(
        "apps/v1",
        "Deployment",
        "ledger-db",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "ledger-db", "image": "postgres:15.5"}]}}}}),
    )
    .await;
    k.wait(
        "ledger-db rolling out with both old pods ready",
        30,
        || async {
            let d = k.get("apps/v1", "Deployment", "ledger-db").await;
            let st = &d["status"];
            (st["updatedReplicas"] == 1 && st["readyReplicas"] == 2 && st["replicas"] == 3)
                .then_some(())
        },
    )
    .await;
}

/// The same rollout, behind a Service that selects the primary by a label the database puts on
/// its pod at run time (Patroni's `role`), which no pod template carries: the workload behind
/// the Service is found through the pod that carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_a_service_selecting_a_label_set_at_run_time() {
    let Some(k) = Kube::new("graph-role").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, n, app) = ledger_and_its_db(&k, &outside, 2).await;
    k.patch(
        "v1",
        "Service",
        "ledger-db",
        json!({"spec": {"selector": {"app": "ledger-db", "role": "primary"}}}),
    )
    .await;
    let primary = name(&k.pods("app=ledger-db", 2).await[0]);
    k.patch(
        "v1",
        "Pod",
        &primary,
        json!({"metadata": {"labels": {"role": "primary"}}}),
    )
    .await;
    wait_endpoints(&k, "ledger-db", 1).await;
    roll_out_ledger_db(&k).await;
    ledger_cannot_connect(&k, &logs, &app, &n).await;

    blames_ledger_db_rolling_out(&k).await;
}

/// web cannot warm up: the catalog Service it names sends port 80 to targetPort 8080, but
/// catalog listens on 8000. The endpoints controller lists catalog's pod as ready (it does not
/// check ports): only the ports tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_a_service_whose_target_port_no_backend_declares() {
    let Some(k) = Kube::new("graph-port").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(deployment(
        "catalog",
        "shop/catalog:3.2",
        1,
        "256Mi",
        json!({"ports": [{"containerPort": 8000, "name": "http"}]}),
        json!({}),
    ))
    .await;
    k.apply(service("catalog", "catalog", 80, json!(8080)))
        .await;
    let backend = k.pods("app=catalog", 1).await;
    run(
        &k,
        &backend[0],
        &n,
        "catalog",
        "shop/catalog:3.2",
        "10.244.1.21",
    )
    .await;
    wait_endpoints(&k, "catalog", 1).await;
    k.apply(deployment(
        "web",
        "shop/web:5.0",
        1,
        "256Mi",
        json!({"readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}}}),
        json!({}),
    ))
    .await;
    let w = k.pods("app=web", 1).await.remove(0);
    k.bind(&name(&w), &n).await;
    let mut st = status::not_ready("web", "shop/web:5.0");
    st["podIP"] = json!("10.244.1.22");
    let w = k.patch_status("v1", "Pod", &name(&w), st).await;
    k.event(
        &w,
        "Warning",
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        40,
        10,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&w),
        "web",
        false,
        "web 5.0 starting\nwarming product cache from http://catalog/api/items\nGet \"http://catalog/api/items\": dial tcp 10.96.14.3:80: connect: connection refused\ncache not warm, not ready\n",
    );

    let seen = neighbourhood(&k, "Deployment", "web", Utc::now()).await;
    seen.blames(
        DepKind::Host,
        &format!("Service {}", ns_of(&k, "catalog")),
        &[
            "sends port 80 to targetPort 8080",
            "no container of its pods declares (they declare 8000)",
        ],
        &["http://catalog/api/items"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Endpoints",
            "Node",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// Cluster DNS is down (its Deployment scaled to zero in kube-system): notifier's lookups are
/// refused. Created in kube-system only when absent, deleted afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_cluster_dns_when_lookups_fail() {
    let Some(k) = Kube::new("graph-dns").await else {
        return;
    };
    let outside = Outside::new(&k);
    let sys = Kube {
        client: k.client.clone(),
        ns: "kube-system".into(),
        kubeconfig: k.kubeconfig.clone(),
    };
    for (api_version, kind, name) in [
        ("v1", "Service", "kube-dns"),
        ("v1", "Service", "coredns"),
        ("apps/v1", "Deployment", "coredns"),
    ] {
        if sys.api(api_version, kind).get(name).await.is_ok() {
            common::unavailable::<()>(
                "an empty kube-system",
                &format!("kube-system/{name} ({kind}) exists: this test does not touch it"),
            );
            return;
        }
    }
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    outside.add("apps/v1", "Deployment", Some("kube-system"), "coredns");
    sys.apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
            "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                "spec": {"nodeSelector": {"kubemedic.io/never": "true"},
                    "containers": [{"name": "coredns", "image": "k8s.gcr.io/coredns:1.7.0",
                        "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"}]}]}}}}))
        .await;
    outside.add("v1", "Service", Some("kube-system"), "kube-dns");
    let svc = sys
        .apply(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"selector": {"k8s-app": "kube-dns"},
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]}}))
        .await;
    let dns_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_owned();
    sys.pods("k8s-app=kube-dns", 1).await;
    // Somebody scales cluster DNS to zero.
    sys.patch(
        "apps/v1",
        "Deployment",
        "coredns",
        json!({"spec": {"replicas": 0}}),
    )
    .await;
    sys.pods("k8s-app=kube-dns", 0).await;
    k.apply(deployment(
        "notifier",
        "shop/notifier:2.7.1",
        1,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    let p = k.pods("app=notifier", 1).await.remove(0);
    let p = crash(&k, &p, &n, ("notifier", "shop/notifier:2.7.1"), 9, 1).await;
    k.event(
        &p,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        41,
        20,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&p),
        "notifier",
        true,
        &format!(
            "{{\"level\":\"info\",\"msg\":\"starting notifier\"}}\n{{\"level\":\"fatal\",\"caller\":\"smtp/relay.go:88\",\"msg\":\"cannot reach mail provider\",\"error\":\"dial tcp: lookup smtp.sendgrid.net on {dns_ip}:53: read udp 10.244.1.7:41862->{dns_ip}:53: read: connection refused\"}}\n"
        ),
    );

    let seen = neighbourhood(&k, "Deployment", "notifier", Utc::now()).await;
    seen.blames(
        DepKind::Dns,
        "Service kube-system/kube-dns (cluster DNS)",
        &[
            "has no ready endpoints",
            "Deployment coredns is scaled to 0 replicas",
        ],
        &[
            "resolves the names the failures could not look up",
            "Scaled down replica set coredns-",
        ],
    );
    assert!(
        seen.culprit().relation.contains("lookup smtp.sendgrid.net"),
        "{}",
        seen.describe()
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Endpoints",
            "Node",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns, "kube-system"],
    );
}

// ---------------------------------------------------------------------------------------------
// nodes: the pods' nodes, a neighbour that eats what the node lacks.

/// node-problem-detector reports the root filesystem of one node read-only; the pods there
/// cannot start their containers, the one elsewhere runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_a_node_with_a_problem_detector_condition() {
    let Some(k) = Kube::new("graph-node").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let good = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let bad = node(
        &k,
        &outside,
        port,
        "worker-2",
        json!({}),
        json!([{"type": "ReadonlyFilesystem", "status": "True", "reason": "FilesystemIsReadOnly",
            "message": "Filesystem is read-only", "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(900)}]),
    )
    .await;
    node_event(
        &k,
        &bad,
        "Warning",
        "FilesystemIsReadOnly",
        "Node condition ReadonlyFilesystem is now: True, reason: FilesystemIsReadOnly",
        900,
    )
    .await;
    let image = "media/thumbnailer:4.1";
    k.apply(deployment(
        "thumbnailer",
        image,
        3,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    let pods = k.pods("app=thumbnailer", 3).await;
    let why = "failed to create containerd task: failed to create shim task: mkdir /run/containerd/io.containerd.runtime.v2.task/k8s.io/5c1f: read-only file system: unknown";
    for p in &pods[..2] {
        waiting(
            &k,
            p,
            &bad,
            ("thumbnailer", image),
            "RunContainerError",
            why,
        )
        .await;
    }
    run(&k, &pods[2], &good, "thumbnailer", image, "10.244.2.4").await;

    let seen = neighbourhood(&k, "Deployment", "thumbnailer", Utc::now()).await;
    seen.blames(
        DepKind::Node,
        &format!("Node {bad}"),
        &["ReadonlyFilesystem (Filesystem is read-only)"],
        &["runs 2 of the pods (2 failing); 1 elsewhere run fine"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// A node that warned of its image filesystem's capacity two hours ago (the kubelet's
/// `InvalidDiskCapacity`, common and harmless) runs one crash-looping pod of four while the
/// others run: the warning is evidence, not trouble, and the node is not the common factor, so
/// nothing proposes to drain it for one pod's fault. A second pod failing there while its
/// siblings elsewhere are ready makes it the common factor — the drain proof's question
/// (`findings::node_at_fault`), asked of what the graph read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_an_old_warning_is_evidence_and_local_failures_make_the_node_the_factor() {
    let Some(k) = Kube::new("graph-warn").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let good = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let warned = node(&k, &outside, port, "worker-2", json!({}), json!([])).await;
    node_event(
        &k,
        &warned,
        "Warning",
        "InvalidDiskCapacity",
        "invalid capacity 0 on image filesystem",
        7_200,
    )
    .await;
    let image = "shop/cart:2.3";
    k.apply(deployment("cart", image, 4, "256Mi", json!({}), json!({})))
        .await;
    let pods = k.pods("app=cart", 4).await;
    crash(&k, &pods[0], &warned, ("cart", image), 6, 1).await;
    run(&k, &pods[1], &good, "cart", image, "10.244.1.4").await;
    run(&k, &pods[2], &good, "cart", image, "10.244.1.5").await;
    run(&k, &pods[3], &warned, "cart", image, "10.244.2.6").await;

    let object = format!("Node {warned}");
    let seen = neighbourhood(&k, "Deployment", "cart", Utc::now()).await;
    let n = seen.dependency(&object);
    assert_eq!(n.unhealthy, None, "{}", seen.describe());
    assert!(
        n.evidence.iter().any(|e| e.contains("InvalidDiskCapacity")),
        "{}",
        seen.describe()
    );
    assert_eq!(
        n.on_node,
        Some(OnNode {
            node: warned.clone(),
            pods: 2,
            failing: 1,
            at_fault: false,
            short_of_memory: None,
        }),
        "{}",
        seen.describe()
    );

    // The pod beside it fails too; the two on the other node still run.
    let mut st = status::crash_loop("cart", image, 4, 1, "Error");
    st["containerStatuses"][0]["lastState"]["terminated"]["startedAt"] = json!(ago(70));
    st["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] = json!(ago(60));
    k.patch_status("v1", "Pod", &name(&pods[3]), st).await;
    let seen = neighbourhood(&k, "Deployment", "cart", Utc::now()).await;
    let n = seen.dependency(&object);
    assert_eq!(
        n.on_node.as_ref().map(|o| (o.failing, o.at_fault)),
        Some((2, true)),
        "{}",
        seen.describe()
    );
    seen.blames(
        DepKind::Node,
        &object,
        &["pods fail while their siblings elsewhere are ready"],
        &[],
    );
}

/// A node under PID pressure: quotes cannot create threads; pdf-renderer on the same node
/// leaks zombie processes. The neighbour outranks the node (draining would leave it behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_a_neighbour_that_eats_what_the_node_lacks() {
    let Some(k) = Kube::new("graph-hog").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(
        &k,
        &outside,
        port,
        "worker-1",
        json!({}),
        json!([{"type": "PIDPressure", "status": "True", "reason": "KubeletHasInsufficientPID",
            "message": "kubelet has insufficient PID available", "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(600)}]),
    )
    .await;
    k.apply(deployment(
        "pdf-renderer",
        "docs/pdf-renderer:1.9",
        1,
        "1Gi",
        json!({}),
        json!({}),
    ))
    .await;
    let hog = k.pods("app=pdf-renderer", 1).await.remove(0);
    run(
        &k,
        &hog,
        &n,
        "pdf-renderer",
        "docs/pdf-renderer:1.9",
        "10.244.1.30",
    )
    .await;
    log(
        &logs,
        &k,
        &name(&hog),
        "pdf-renderer",
        false,
        "rendering invoice-88231.pdf\n[warn] 31744 defunct chromium processes not reaped (pid 1 is node, not an init)\nrendering invoice-88232.pdf\n",
    );
    k.apply(deployment(
        "quotes",
        "shop/quotes:3.3",
        2,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    for p in k.pods("app=quotes", 2).await {
        let p = crash(&k, &p, &n, ("quotes", "shop/quotes:3.3"), 5, 2).await;
        k.event(
            &p,
            "Warning",
            "BackOff",
            "Back-off restarting failed container",
            9,
            20,
        )
        .await;
        log(
            &logs,
            &k,
            &name(&p),
            "quotes",
            true,
            "runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n",
        );
    }

    let seen = neighbourhood(&k, "Deployment", "quotes", Utc::now()).await;
    let c = seen.culprit();
    assert_eq!(c.kind, DepKind::Node, "{}", seen.describe());
    assert!(
        c.object
            .starts_with(&format!("pod {}", ns_of(&k, &name(&hog)))),
        "{}",
        seen.describe()
    );
    assert_eq!(
        c.causes.as_ref().map(ToString::to_string),
        Some(format!("Node {n}")),
        "{}",
        seen.describe()
    );
    assert!(
        seen.explain().contains("defunct chromium processes"),
        "{}",
        seen.describe()
    );
    // The node itself is found unhealthy, ranked below the neighbour.
    assert!(
        seen.n
            .dependencies
            .iter()
            .any(|d| d.object == format!("Node {n}")
                && d.unhealthy
                    .as_deref()
                    .is_some_and(|u| u.contains("PIDPressure"))),
        "{}",
        seen.describe()
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// transcoder's pods write more than their ephemeral-storage limit to a scratch volume: the
/// kubelet evicts them (the real ReplicaSet controller replaces each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_evictions_of_the_pods() {
    let Some(k) = Kube::new("graph-evict").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let image = "media/transcoder:2.4";
    let mut d = deployment(
        "transcoder",
        image,
        1,
        "1Gi",
        json!({"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}),
        json!({}),
    );
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["ephemeral-storage"] =
        json!("1Gi");
    d["spec"]["template"]["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    k.apply(d).await;
    let first = k.pods("app=transcoder", 1).await.remove(0);
    run(&k, &first, &n, "transcoder", image, "10.244.1.110").await;
    let why = "Container transcoder exceeded its local ephemeral storage limit \"1Gi\". ";
    let evicted = k
        .patch_status(
            "v1",
            "Pod",
            &name(&first),
            json!({"phase": "Failed", "reason": "Evicted", "message": why,
                "conditions": null, "containerStatuses": null}),
        )
        .await;
    k.event(&evicted, "Warning", "Evicted", why, 1, 30).await;
    // The ReplicaSet controller replaces it; the replacement runs, for now.
    let pods = k.pods("app=transcoder", 2).await;
    let next = pods.iter().find(|p| name(p) != name(&first)).unwrap();
    run(&k, next, &n, "transcoder", image, "10.244.1.111").await;

    let seen = neighbourhood(&k, "Deployment", "transcoder", Utc::now()).await;
    seen.blames(
        DepKind::Node,
        "the pods' ephemeral storage",
        &["Evicted: Container transcoder exceeded its local ephemeral storage limit"],
        &["Evicted the pods"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// storage: claims, classes, volumes.

/// A claim names a StorageClass that does not exist: the real PersistentVolume controller
/// reports ProvisioningFailed and the claim stays Pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_a_claim_whose_storage_class_does_not_exist() {
    let Some(k) = Kube::new("graph-sc").await else {
        return;
    };
    let class = format!("{}-fast-ssd", k.ns);
    k.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "reports-data"},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}))
        .await;
    let mut d = deployment(
        "reports",
        "bi/reports:7.0",
        1,
        "512Mi",
        json!({"volumeMounts": [{"name": "data", "mountPath": "/var/lib/reports"}]}),
        json!({}),
    );
    d["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "reports-data"}}]);
    k.apply(d).await;
    let p = k.pods("app=reports", 1).await.remove(0);
    unschedulable(
        &k,
        &p,
        "0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims.",
    )
    .await;
    wait_event(&k, "ProvisioningFailed", &class).await;

    let seen = neighbourhood(&k, "Deployment", "reports", Utc::now()).await;
    seen.blames(
        DepKind::Storage,
        &format!("StorageClass {class}"),
        &[format!(
            "does not exist, so PersistentVolumeClaim {} stays Pending",
            ns_of(&k, "reports-data")
        )
        .as_str()],
        &["provisions PersistentVolumeClaim"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "PersistentVolumeClaim",
            "StorageClass",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
    assert!(!seen.read_logs(), "{}", seen.describe());
}

/// A CSI volume `<ns>-<claim>` (ReadWriteOnce, with `node_affinity` unless null) bound by the
/// real PersistentVolume controller to the claim `claim`; returns the volume's name.
async fn bound_claim(
    k: &Kube,
    outside: &Outside,
    claim: &str,
    size: &str,
    node_affinity: Value,
) -> String {
    let pv = format!("{}-{claim}", k.ns);
    outside.add("v1", "PersistentVolume", None, &pv);
    let mut spec = json!({"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": format!("vol-{}", &uuid::Uuid::new_v4().simple().to_string()[..17]), "fsType": "ext4"}});
    if !node_affinity.is_null() {
        spec["nodeAffinity"] = node_affinity;
    }
    k.apply(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv}, "spec": spec}))
        .await;
    // A claim the controller sees before the volume waits for its next resync (15 s).
    k.wait(&format!("{pv} available"), 30, || async {
        let v = k.get("v1", "PersistentVolume", &pv).await;
        (v["status"]["phase"] == "Available").then_some(())
    })
    .await;
    k.apply(
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
        "spec": {"storageClassName": "", "volumeName": pv, "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}}}}),
    )
    .await;
    k.wait(&format!("{claim} bound"), 30, || async {
        let c = k.get("v1", "PersistentVolumeClaim", claim).await;
        (c["status"]["phase"] == "Bound").then_some(())
    })
    .await;
    pv
}

/// postgres's volume lives in one zone; after a node group replacement no node is left there.
/// The real PersistentVolume controller binds the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_a_volume_in_a_zone_with_no_ready_node() {
    let Some(k) = Kube::new("graph-zone").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let (zone_a, zone_b) = (format!("{}-a", k.ns), format!("{}-b", k.ns));
    node(
        &k,
        &outside,
        port,
        "worker-b1",
        json!({"topology.kubernetes.io/zone": zone_b}),
        json!([]),
    )
    .await;
    let affinity = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone_a]}]}]}});
    let pv = bound_claim(&k, &outside, "pg-data", "50Gi", affinity).await;
    let mut d = deployment(
        "postgres",
        "postgres:15.4",
        1,
        "2Gi",
        json!({"volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}]}),
        json!({}),
    );
    d["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "pg-data"}}]);
    k.apply(d).await;
    let p = k.pods("app=postgres", 1).await.remove(0);
    unschedulable(
        &k,
        &p,
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict.",
    )
    .await;

    let seen = neighbourhood(&k, "Deployment", "postgres", Utc::now()).await;
    seen.blames(
        DepKind::Storage,
        &format!("PersistentVolume {pv}"),
        &[format!("lives in zone {zone_a} where no ready, schedulable node is left").as_str()],
        &["a volume of the pods"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "PersistentVolumeClaim",
            "PersistentVolume",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// grafana rolls with maxUnavailable 0 while its ReadWriteOnce volume is attached to the old
/// pod's node: the real attach/detach controller attaches it there (the test plays the CSI
/// external-attacher) and refuses the new pod on another node with a Multi-Attach error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_a_read_write_once_claim_held_by_a_pod_on_another_node() {
    let Some(k) = Kube::new("graph-rwo").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let mut nodes = Vec::new();
    for suffix in ["worker-1", "worker-2"] {
        let n = node(&k, &outside, port, suffix, json!({}), json!([])).await;
        // As a kubelet does: the controller manages this node's attachments.
        k.patch(
            "v1",
            "Node",
            &n,
            json!({"metadata": {"annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}),
        )
        .await;
        nodes.push(n);
    }
    let pv = bound_claim(&k, &outside, "grafana-data", "10Gi", Value::Null).await;
    let mut d = deployment(
        "grafana",
        "grafana/grafana:10.1.0",
        1,
        "512Mi",
        json!({"volumeMounts": [{"name": "data", "mountPath": "/var/lib/grafana"}]}),
        json!({}),
    );
    d["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "grafana-data"}}]);
    k.apply(d).await;
    let old = k.pods("app=grafana", 1).await.remove(0);
    run(
        &k,
        &old,
        &nodes[0],
        "grafana",
        "grafana/grafana:10.1.0",
        "10.244.1.100",
    )
    .await;
    // The external-attacher's part: the VolumeAttachment the controller made is attached.
    let va = k
        .wait("a VolumeAttachment of the volume", 60, || async {
            let api: Api<DynamicObject> = Api::all_with(
                k.client.clone(),
                &ar("storage.k8s.io/v1", "VolumeAttachment"),
            );
            let list = api.list(&Default::default()).await.ok()?;
            list.items
                .into_iter()
                .map(|v| serde_json::to_value(v).unwrap())
                .find(|v| v["spec"]["source"]["persistentVolumeName"] == pv.as_str())
        })
        .await;
    outside.add("storage.k8s.io/v1", "VolumeAttachment", None, &name(&va));
    let vas: Api<DynamicObject> = Api::all_with(
        k.client.clone(),
        &ar("storage.k8s.io/v1", "VolumeAttachment"),
    );
    vas.patch_status(
        &name(&va),
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"attached": true}})),
    )
    .await
    .unwrap();
    wait_event(&k, "SuccessfulAttachVolume", &pv).await;
    k.patch(
        "apps/v1",
        "Deployment",
        "grafana",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "grafana", "image": "grafana/grafana:10.2.0"}]}}}}),
    )
    .await;
    let new = k
        .pods("app=grafana", 2)
        .await
        .into_iter()
        .find(|p| p["spec"]["nodeName"].is_null())
        .unwrap();
    k.bind(&name(&new), &nodes[1]).await;
    k.patch_status(
        "v1",
        "Pod",
        &name(&new),
        status::waiting("grafana", "grafana/grafana:10.2.0", "ContainerCreating", ""),
    )
    .await;
    wait_event(&k, "FailedAttachVolume", "Multi-Attach error").await;

    let seen = neighbourhood(&k, "Deployment", "grafana", Utc::now()).await;
    seen.blames(
        DepKind::Storage,
        &format!("PersistentVolumeClaim {}", ns_of(&k, "grafana-data")),
        &[
            &format!(
                "is ReadWriteOnce and attached to node {} for pod {}",
                nodes[0],
                name(&old)
            ),
            "the new pod cannot attach it (Multi-Attach)",
        ],
        &["a volume of the pods"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "PersistentVolumeClaim",
            "PersistentVolume",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// config: ConfigMaps (names and keys), Secrets (only from the kubelet's words).

/// Someone renamed a key of frontend's ConfigMap; the new pods cannot be configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_a_configmap_that_lost_a_key_the_pods_read() {
    let Some(k) = Kube::new("graph-cm").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frontend-config"},
        "data": {"FEATURE_FLAGS": "checkout-v2,wishlist", "API_URL": "http://api"}}),
    )
    .await;
    // An edit, not the creation: the API server records who changed it, and when.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    patch_as(
        &k,
        "kubectl-edit",
        "v1",
        "ConfigMap",
        "frontend-config",
        json!({"data": {"FEATURE_FLAGS": null, "FEATURES": "checkout-v2,wishlist"}}),
    )
    .await;
    let image = "shop/frontend:8.4";
    k.apply(deployment(
        "frontend",
        image,
        2,
        "256Mi",
        json!({"env": [{"name": "FEATURE_FLAGS", "valueFrom": {"configMapKeyRef": {"name": "frontend-config", "key": "FEATURE_FLAGS"}}}]}),
        json!({}),
    ))
    .await;
    let why = format!(
        "couldn't find key FEATURE_FLAGS in ConfigMap {}",
        ns_of(&k, "frontend-config")
    );
    for p in k.pods("app=frontend", 2).await {
        waiting(
            &k,
            &p,
            &n,
            ("frontend", image),
            "CreateContainerConfigError",
            &why,
        )
        .await;
    }

    let seen = neighbourhood(&k, "Deployment", "frontend", Utc::now()).await;
    seen.blames(
        DepKind::Config,
        &format!("ConfigMap {}", ns_of(&k, "frontend-config")),
        &["lacks the key(s) FEATURE_FLAGS"],
        &["changed by kubectl-edit"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "ConfigMap",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// checkout's pods refer to a Secret that does not exist. kubemedic never reads Secrets: the
/// kubelet's words name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_a_secret_the_kubelet_cannot_find() {
    let Some(k) = Kube::new("graph-secret").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let image = "shop/checkout:1.4.1";
    k.apply(deployment(
        "checkout",
        image,
        1,
        "256Mi",
        json!({"env": [{"name": "STRIPE_KEY", "valueFrom": {"secretKeyRef": {"name": "stripe-api", "key": "key"}}}]}),
        json!({}),
    ))
    .await;
    let p = k.pods("app=checkout", 1).await.remove(0);
    waiting(
        &k,
        &p,
        &n,
        ("checkout", image),
        "CreateContainerConfigError",
        "secret \"stripe-api\" not found",
    )
    .await;

    let seen = neighbourhood(&k, "Deployment", "checkout", Utc::now()).await;
    seen.blames(
        DepKind::Config,
        &format!("Secret {}", ns_of(&k, "stripe-api")),
        &["is not found (the kubelet says so"],
        &["secret \"stripe-api\" not found"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// network: NetworkPolicies selecting the pods, when their connections time out.

/// A new egress policy on orders-api leaves out its inventory backend (healthy, ready). No CNI
/// enforces policies on the tier: the client's timeout is staged in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_a_policy_that_cuts_egress_while_connections_time_out() {
    let Some(k) = Kube::new("graph-netpol").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(deployment(
        "inventory",
        "shop/inventory:4.0",
        1,
        "256Mi",
        json!({"ports": [{"containerPort": 8080, "name": "http"}]}),
        json!({}),
    ))
    .await;
    k.apply(service("inventory", "inventory", 8080, json!(8080)))
        .await;
    let inv = k.pods("app=inventory", 1).await.remove(0);
    run(
        &k,
        &inv,
        &n,
        "inventory",
        "shop/inventory:4.0",
        "10.244.1.40",
    )
    .await;
    wait_endpoints(&k, "inventory", 1).await;
    // The Deployment controller counts the ready pod a moment after the endpoints list it.
    k.wait(
        "inventory's Deployment counts its ready pod",
        30,
        || async {
            let d = k.get("apps/v1", "Deployment", "inventory").await;
            (d["status"]["readyReplicas"] == 1).then_some(())
        },
    )
    .await;
    k.apply(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "orders-api-egress"},
        "spec": {"podSelector": {"matchLabels": {"app": "orders-api"}}, "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}]}}))
        .await;
    k.apply(deployment(
        "orders-api",
        "shop/orders-api:6.1",
        1,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    let p = k.pods("app=orders-api", 1).await.remove(0);
    let p = crash(&k, &p, &n, ("orders-api", "shop/orders-api:6.1"), 4, 1).await;
    k.event(
        &p,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        6,
        20,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&p),
        "orders-api",
        true,
        "orders-api 6.1 starting\nchecking stock service\nGet \"http://inventory:8080/stock/health\": dial tcp 10.96.41.7:8080: i/o timeout\nfatal: stock service unreachable\n",
    );

    let seen = neighbourhood(&k, "Deployment", "orders-api", Utc::now()).await;
    seen.blames(
        DepKind::Network,
        &format!("NetworkPolicy {}", ns_of(&k, "orders-api-egress")),
        &["restricts the pods' outgoing connections (1 egress rule(s))"],
        &["selects the pods (Egress)"],
    );
    // The backend it names was followed and is healthy.
    let inv = seen
        .n
        .dependencies
        .iter()
        .find(|d| d.object == format!("Service {}", ns_of(&k, "inventory")))
        .unwrap_or_else(|| panic!("inventory not followed\n{}", seen.describe()));
    assert!(inv.unhealthy.is_none(), "{}", seen.describe());
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Endpoints",
            "Node",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// admission: webhooks that refuse the pods.

/// A real ValidatingWebhookConfiguration (failurePolicy Fail, only this namespace) whose
/// Service has no endpoints: the API server refuses every pod, the ReplicaSet controller says
/// so in FailedCreate. Returns the configuration's name.
async fn refusing_webhook(k: &Kube, outside: &Outside) -> String {
    let label = "kubemedic.io/graph-test";
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {label: k.ns}}}),
    )
    .await;
    k.apply(service("pod-policy", "pod-policy", 443, json!(8443)))
        .await;
    let cfg = format!("{}-pod-policy", k.ns);
    outside.add(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        None,
        &cfg,
    );
    let api: Api<DynamicObject> = Api::all_with(
        k.client.clone(),
        &ar(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
        ),
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": cfg},
        "webhooks": [{"name": "pods.policy.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "namespaceSelector": {"matchLabels": {label: k.ns}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}],
            "clientConfig": {"service": {"namespace": k.ns, "name": "pod-policy", "path": "/validate", "port": 443}}}]
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create webhook: {e}"));
    // The API server starts calling it once its informer has it: a dry-run pod says when.
    let pods: Api<DynamicObject> = k.api("v1", "Pod");
    let probe: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": k.ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    k.wait("the webhook in force", 30, || async {
        match pods.create(&dry, &probe).await {
            Err(e) if e.to_string().contains("failed calling webhook") => Some(()),
            _ => None,
        }
    })
    .await;
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_a_webhook_whose_backend_has_no_endpoints() {
    let Some(k) = Kube::new("graph-hook").await else {
        return;
    };
    let outside = Outside::new(&k);
    let cfg = refusing_webhook(&k, &outside).await;
    k.apply(deployment(
        "api",
        "shop/api:2.3",
        2,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    wait_event(&k, "FailedCreate", "failed calling webhook").await;

    let object = format!("ValidatingWebhookConfiguration {cfg} (webhook pods.policy.example.com)");
    let backend = format!(
        "its backend Service {} has no ready endpoints",
        ns_of(&k, "pod-policy")
    );
    let seen = neighbourhood(&k, "Deployment", "api", Utc::now()).await;
    seen.blames(
        DepKind::Admission,
        &object,
        &[backend.as_str()],
        &["admits the pods"],
    );
    // Whatever the API server's error says of the webhook's URL, only what the failure names is
    // read: the webhook configurations, the backend's endpoints, Services named.
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Endpoints",
            "StatefulSet",
            "NetworkPolicy",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
    assert!(!seen.read_logs(), "no pod exists: {}", seen.describe());
    // A webhook installed long ago whose backend went away: still the webhook, not the bare
    // Service its error names.
    let later = neighbourhood(&k, "Deployment", "api", Utc::now() + Duration::hours(7)).await;
    later.blames(
        DepKind::Admission,
        &object,
        &[backend.as_str()],
        &["admits the pods"],
    );
}

// ---------------------------------------------------------------------------------------------
// quota: ResourceQuota and LimitRange refusing pods.

/// A ResourceQuota of `pods` pods, in force: the quota controller has counted the namespace
/// (until it has, admission may let more pods through).
async fn pods_quota(k: &Kube, name: &str, pods: i64) {
    k.apply(
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
        "spec": {"hard": {"pods": pods.to_string()}}}),
    )
    .await;
    k.wait(&format!("{name} counted"), 30, || async {
        let q = k.get("v1", "ResourceQuota", name).await;
        q["status"]["used"]["pods"].is_string().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_a_resource_quota_that_is_used_up() {
    let Some(k) = Kube::new("graph-quota").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    pods_quota(&k, "pods-cap", 2).await;
    k.apply(deployment(
        "web",
        "shop/web:5.0",
        4,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    let pods = k.pods("app=web", 2).await;
    for (i, p) in pods.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            "web",
            "shop/web:5.0",
            &format!("10.244.1.{}", 50 + i),
        )
        .await;
    }
    wait_event(&k, "FailedCreate", "exceeded quota: pods-cap").await;

    let seen = neighbourhood(&k, "Deployment", "web", Utc::now()).await;
    seen.blames(
        DepKind::Quota,
        &format!("ResourceQuota {}", ns_of(&k, "pods-cap")),
        &["is used up: pods 2 of 2"],
        &[
            "caps what the namespace may run",
            "is forbidden: exceeded quota: pods-cap",
        ],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "ResourceQuota",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
    assert!(!seen.read_logs(), "every pod runs: {}", seen.describe());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_a_limit_range_that_refuses_the_pods_limits() {
    let Some(k) = Kube::new("graph-limits").await else {
        return;
    };
    k.apply(
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "container-limits"},
        "spec": {"limits": [{"type": "Container", "max": {"memory": "512Mi"}}]}}),
    )
    .await;
    k.apply(deployment(
        "ingest",
        "data/ingest:2.0",
        2,
        "1Gi",
        json!({}),
        json!({}),
    ))
    .await;
    wait_event(&k, "FailedCreate", "maximum memory usage per Container").await;

    let seen = neighbourhood(&k, "Deployment", "ingest", Utc::now()).await;
    seen.blames(
        DepKind::Quota,
        &format!("LimitRange {}", ns_of(&k, "container-limits")),
        &["maximum memory usage per Container is 512Mi, but limit is 1Gi"],
        &["bounds the pods' resources"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "LimitRange",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// scaling: the autoscaler.

/// api-gateway's HPA cannot compute CPU utilisation since an envoy sidecar without a CPU
/// request was added. The tier runs no HPA controller (scripts/kube-tier/start.sh): its
/// status and events are written as the real v1.20.2 controller writes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_an_autoscaler_that_cannot_compute_its_metric() {
    let Some(k) = Kube::new("graph-hpa").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let mut d = deployment(
        "api-gateway",
        "edge/gateway:1.12",
        2,
        "512Mi",
        json!({}),
        json!({}),
    );
    d["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "envoy", "image": "envoyproxy/envoy:v1.27.0", "resources": {"limits": {"memory": "256Mi"}}}));
    k.apply(d).await;
    for (i, p) in k.pods("app=api-gateway", 2).await.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            "api-gateway",
            "edge/gateway:1.12",
            &format!("10.244.1.{}", 60 + i),
        )
        .await;
    }
    k.apply(json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api-gateway"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api-gateway"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}}))
        .await;
    let message = "the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu";
    let hpa = k
        .patch_status(
            "autoscaling/v2beta2",
            "HorizontalPodAutoscaler",
            "api-gateway",
            json!({"currentReplicas": 2, "desiredReplicas": 0, "currentMetrics": null,
            "conditions": [
                {"type": "AbleToScale", "status": "True", "lastTransitionTime": ago(1800), "reason": "SucceededGetScale",
                 "message": "the HPA controller was able to get the target's current scale"},
                {"type": "ScalingActive", "status": "False", "lastTransitionTime": ago(1800), "reason": "FailedGetResourceMetric",
                 "message": message}]}),
        )
        .await;
    k.event(
        &hpa,
        "Warning",
        "FailedGetResourceMetric",
        "failed to get cpu utilization: missing request for cpu",
        120,
        10,
    )
    .await;

    let seen = neighbourhood(&k, "Deployment", "api-gateway", Utc::now()).await;
    seen.blames(
        DepKind::Scaling,
        &format!("HorizontalPodAutoscaler {}", ns_of(&k, "api-gateway")),
        &[
            "ScalingActive False (FailedGetResourceMetric)",
            "missing request for cpu",
        ],
        &["container envoy of the pod template has no cpu request"],
    );
    // The autoscaler's warnings carry the workload's name, so they are the failures' words,
    // matched against the namespace's Services.
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
    assert!(!seen.read_logs(), "every pod runs: {}", seen.describe());
}

// ---------------------------------------------------------------------------------------------
// services: a StatefulSet's governing Service, an Ingress's backends.

/// cassandra's serviceName names a headless Service that was deleted: the real StatefulSet
/// controller still makes the pod, whose peers' names no longer resolve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_a_statefulset_whose_governing_service_is_gone() {
    let Some(k) = Kube::new("graph-sts").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let image = "cassandra:4.1";
    k.apply(
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "cassandra"},
        "spec": {"serviceName": "cassandra-headless", "replicas": 1,
            "selector": {"matchLabels": {"app": "cassandra"}},
            "template": {"metadata": {"labels": {"app": "cassandra"}},
                "spec": {"containers": [{"name": "cassandra", "image": image}]}}}}),
    )
    .await;
    let p = k.pods("app=cassandra", 1).await.remove(0);
    let p = crash(&k, &p, &n, ("cassandra", image), 6, 3).await;
    k.event(
        &p,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        8,
        20,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&p),
        "cassandra",
        true,
        &format!(
            "INFO  [main] StorageService.java:735 - Loading persisted ring state\nERROR [main] CassandraDaemon.java:911 - Exception encountered during startup\njava.lang.IllegalStateException: Unable to contact any seeds: [cassandra-0.cassandra-headless.{}.svc.cluster.local]\n",
            k.ns
        ),
    );

    let seen = neighbourhood(&k, "StatefulSet", "cassandra", Utc::now()).await;
    seen.blames(
        DepKind::Service,
        &format!("Service {}", ns_of(&k, "cassandra-headless")),
        &["does not exist"],
        &["governs the StatefulSet's pod names (serviceName)"],
    );
    seen.read_only(
        &[
            "StatefulSet",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// Ingress shop routes /api to a Service that was renamed; its other backend serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_an_ingress_whose_backend_is_gone() {
    let Some(k) = Kube::new("graph-ing").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(deployment(
        "storefront",
        "shop/storefront:6.2",
        1,
        "256Mi",
        json!({"ports": [{"containerPort": 8080, "name": "http"}]}),
        json!({}),
    ))
    .await;
    k.apply(service("storefront", "storefront", 80, json!("http")))
        .await;
    let sf = k.pods("app=storefront", 1).await.remove(0);
    run(
        &k,
        &sf,
        &n,
        "storefront",
        "shop/storefront:6.2",
        "10.244.1.70",
    )
    .await;
    wait_endpoints(&k, "storefront", 1).await;
    k.apply(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "shop"},
        "spec": {"rules": [{"host": "shop.example.com", "http": {"paths": [
            {"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": "shop-api", "port": {"number": 8080}}}},
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "storefront", "port": {"number": 80}}}}]}}]}}))
        .await;

    let seen = neighbourhood(&k, "Ingress", "shop", Utc::now()).await;
    seen.blames(
        DepKind::Service,
        &format!("Service {}", ns_of(&k, "shop-api")),
        &["does not exist"],
        &["a backend the Ingress routes to"],
    );
    let sf = seen
        .n
        .dependencies
        .iter()
        .find(|d| d.object == format!("Service {}", ns_of(&k, "storefront")))
        .unwrap_or_else(|| panic!("storefront not followed\n{}", seen.describe()));
    assert!(sf.unhealthy.is_none(), "{}", seen.describe());
    seen.read_only(&["Ingress", "Event", "Service", "Endpoints"], &[&k.ns]);
}

// ---------------------------------------------------------------------------------------------
// rollout: a paused Deployment.

/// payment-gateway was paused mid-rollout to investigate its crashing revision 2; the fixed
/// image applied while paused never rolls out (the real Deployment controller holds it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_a_paused_deployment_holding_back_a_fix() {
    let Some(k) = Kube::new("graph-paused").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let app = "payment-gateway";
    let created = k
        .apply(deployment(
            app,
            "pay/gateway:3.0",
            2,
            "256Mi",
            json!({}),
            json!({}),
        ))
        .await;
    for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            app,
            "pay/gateway:3.0",
            &format!("10.244.1.{}", 80 + i),
        )
        .await;
    }
    observed(&k, app).await;
    k.patch(
        "apps/v1",
        "Deployment",
        app,
        json!({"spec": {"template": {"spec": {"containers": [{"name": app, "image": "pay/gateway:3.1"}]}}}}),
    )
    .await;
    let pods = k.pods(&format!("app={app}"), 3).await;
    let new = pods
        .iter()
        .find(|p| p["spec"]["nodeName"].is_null())
        .unwrap();
    let new = crash(&k, new, &n, (app, "pay/gateway:3.1"), 8, 2).await;
    k.event(
        &new,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        14,
        20,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&new),
        app,
        true,
        "gateway 3.1 starting\npanic: runtime error: invalid memory address or nil pointer dereference\n",
    );
    patch_as(
        &k,
        "kubectl-rollout",
        "apps/v1",
        "Deployment",
        app,
        json!({"spec": {"paused": true}}),
    )
    .await;
    observed(&k, app).await;
    // The fix comes later than the Deployment's creation: an edit within two seconds of it
    // counts as part of the creation (managed fields keep whole seconds).
    let created =
        DateTime::parse_from_rfc3339(created["metadata"]["creationTimestamp"].as_str().unwrap())
            .unwrap();
    let wait = (created + Duration::milliseconds(3100)).signed_duration_since(Utc::now());
    if let Ok(wait) = wait.to_std() {
        tokio::time::sleep(wait).await;
    }
    patch_as(
        &k,
        "kubectl-set",
        "apps/v1",
        "Deployment",
        app,
        json!({"spec": {"template": {"spec": {"containers": [{"name": app, "image": "pay/gateway:3.1.1"}]}}}}),
    )
    .await;
    let d = observed(&k, app).await;
    assert_eq!(d["spec"]["paused"], true);

    let seen = neighbourhood(&k, "Deployment", app, Utc::now()).await;
    seen.blames(
        DepKind::Rollout,
        &format!("Deployment {} rollout", ns_of(&k, app)),
        &["is paused: 0 of 2 pods run the current template"],
        &["changed by kubectl-set"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

/// A pause someone left after a finished rollout holds nothing back: every pod runs the current
/// template, so the rollout is no dependency of a pod that crashes on its own (before, the graph
/// named it paused and unhealthy, a culprit the proofs do not see).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_a_pause_left_after_a_finished_rollout_holds_nothing_back() {
    let Some(k) = Kube::new("graph-paused-done").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let app = "ledger-api";
    k.apply(deployment(
        app,
        "shop/ledger-api:2.0",
        2,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    let pods = k.pods(&format!("app={app}"), 2).await;
    for (i, p) in pods.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            app,
            "shop/ledger-api:2.0",
            &format!("10.244.1.{}", 90 + i),
        )
        .await;
    }
    // Rolled out: both pods updated and available, as the controller reports it.
    k.wait("ledger-api rolled out", 30, || async {
        let st = k.get("apps/v1", "Deployment", app).await["status"].clone();
        (st["updatedReplicas"] == 2 && st["availableReplicas"] == 2).then_some(())
    })
    .await;
    patch_as(
        &k,
        "kubectl-rollout",
        "apps/v1",
        "Deployment",
        app,
        json!({"spec": {"paused": true}}),
    )
    .await;
    let d = observed(&k, app).await;
    assert_eq!(d["status"]["updatedReplicas"], 2, "{d}");
    // Its first pod, running, starts crash-looping (it is bound already: no `crash`).
    let mut st = status::crash_loop(app, "shop/ledger-api:2.0", 6, 2, "Error");
    st["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] = json!(ago(60));
    let p = k.patch_status("v1", "Pod", &name(&pods[0]), st).await;
    k.event(
        &p,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        10,
        20,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&p),
        app,
        true,
        "ledger-api 2.0 starting\npanic: index out of range [3] with length 3\n",
    );

    let seen = neighbourhood(&k, "Deployment", app, Utc::now()).await;
    assert!(
        seen.n
            .dependencies
            .iter()
            .all(|d| d.kind != DepKind::Rollout),
        "{}",
        seen.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// probes: a liveness probe that kills the containers.

/// search-api loads a grown index for longer than its liveness probe allows: the kubelet
/// kills it again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_a_liveness_probe_that_kills_a_slow_start() {
    let Some(k) = Kube::new("graph-probe").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    let app = "search-api";
    let image = "search/api:11.0";
    k.apply(deployment(
        app,
        image,
        1,
        "2Gi",
        json!({"livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
            "initialDelaySeconds": 10, "periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 1}}),
        json!({}),
    ))
    .await;
    let p = k.pods(&format!("app={app}"), 1).await.remove(0);
    let p = crash(&k, &p, &n, (app, image), 11, 143).await;
    k.event(
        &p,
        "Warning",
        "Unhealthy",
        "Liveness probe failed: Get \"http://10.244.1.90:8080/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        33,
        15,
    )
    .await;
    k.event(
        &p,
        "Normal",
        "Killing",
        &format!("Container {app} failed liveness probe, will be restarted"),
        11,
        15,
    )
    .await;
    log(
        &logs,
        &k,
        &name(&p),
        app,
        true,
        "search-api 11.0 starting\nloading index shard 1/40 (2.1 GB)\nloading index shard 2/40 (2.1 GB)\nloading index shard 3/40 (2.1 GB)\n",
    );

    let seen = neighbourhood(&k, "Deployment", app, Utc::now()).await;
    seen.blames(
        DepKind::Probe,
        &format!("liveness probe of container {app}"),
        &[
            "it allows 25s to start",
            "initialDelaySeconds 10, periodSeconds 5, failureThreshold 3",
            "no startupProbe",
        ],
        &["failed liveness probe"],
    );
    seen.read_only(
        &[
            "Deployment",
            "Pod",
            "Event",
            "Service",
            "Node",
            "NetworkPolicy",
            "HorizontalPodAutoscaler",
        ],
        &[&k.ns],
    );
}

// ---------------------------------------------------------------------------------------------
// The issue's harmful example, end to end: a workload down to half its replicas because its
// pods could not be created was declared healthy again.

/// KubeDeploymentReplicasMismatch as kube-prometheus-stack sends it.
fn replicas_mismatch(k: &Kube, deploy: &str) -> Value {
    let expr = "(kube_deployment_spec_replicas{job=\"kube-state-metrics\",namespace=~\".*\"} > kube_deployment_status_replicas_available{job=\"kube-state-metrics\",namespace=~\".*\"}) and (changes(kube_deployment_status_replicas_updated{job=\"kube-state-metrics\",namespace=~\".*\"}[10m]) == 0)";
    let url = format!(
        "http://prometheus-kube-prometheus-prometheus.monitoring:9090/graph?g0.expr={}&g0.tab=1",
        form_urlencoded::byte_serialize(expr.as_bytes()).collect::<String>()
    );
    common::scenarios::alert(
        "KubeDeploymentReplicasMismatch",
        "warning",
        &[
            ("namespace", &k.ns),
            ("deployment", deploy),
            ("job", "kube-state-metrics"),
        ],
        &[
            (
                "description",
                &format!(
                    "Deployment {}/{deploy} has not matched the expected number of replicas for longer than 15 minutes.",
                    k.ns
                ),
            ),
            (
                "summary",
                "Deployment has not matched the expected number of replicas.",
            ),
        ],
        &url,
    )
}

/// The offline investigator, then the selection stage with its prover, as the worker runs them
/// (tests/common/scenarios.rs `investigate_and_check`).
async fn investigate(
    k: &Kube,
    alert: &Value,
) -> (
    kubemedic::domain::Analysis,
    kubemedic::domain::RoutedOutcome,
) {
    use kubemedic::clock::{Clock, SystemClock};
    use kubemedic::domain::Stage;
    use kubemedic::investigate::Investigator;
    let cluster = k.cluster().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let catalog = kubemedic::live::Live::new(kubemedic::catalog::Catalog::builtin().unwrap());
    let inv = Arc::new(kubemedic::investigate::offline::OfflineInvestigator {
        reader: cluster.clone(),
        clock: clock.clone(),
        tool_limits: Default::default(),
        catalog: catalog.clone(),
        playbooks: kubemedic::live::Live::new(
            kubemedic::investigate::playbooks::Playbooks::builtin().unwrap(),
        ),
        history: Arc::new(kubemedic::history::InMemoryHistory::default()),
    });
    let prover = Arc::new(kubemedic::prove::Prover::new(
        cluster.clone(),
        Some(cluster),
        catalog,
        clock.clone(),
    ));
    let mut req = common::scenarios::request(alert, clock.now());
    let analysis = inv.analyse(&req).await.expect("analyse");
    req.state.analysis = Some(analysis.clone());
    req.phase = kubemedic::domain::Phase::Selecting;
    let out = kubemedic::investigate::SelectionStage::new(inv, prover)
        .run(&req)
        .await
        .expect("select");
    let selection = out.state.selection.expect("a selection");
    eprintln!(
        "analysis: {} — factors {:?}\nselection: {:?} → {:?}: {}",
        analysis.rca.root_cause_analysis.summary,
        analysis.rca.root_cause_analysis.contributing_factors,
        selection.outcome.kind,
        selection.outcome.next_phase,
        selection.outcome.reason
    );
    (analysis, selection.outcome)
}

/// Not healthy again: a human is sent to the object that refuses the pods, by name.
fn sent_to_a_human_about(
    analysis: &kubemedic::domain::Analysis,
    outcome: &kubemedic::domain::RoutedOutcome,
    object: &str,
) {
    use kubemedic::domain::{InvestigationOutcome, OutcomeKind, Phase};
    let said = format!(
        "{} — {:?} → {:?}: {}",
        analysis.rca.root_cause_analysis.summary, outcome.kind, outcome.next_phase, outcome.reason
    );
    assert_ne!(outcome.kind, OutcomeKind::ProblemResolved, "{said}");
    assert_ne!(
        analysis.rca.investigation_outcome,
        InvestigationOutcome::ProblemResolved,
        "the investigation declared it healthy again: {said}"
    );
    assert_eq!(outcome.next_phase, Phase::ManualReviewRequired, "{said}");
    assert!(outcome.reason.contains(object), "{said}");
    assert!(
        analysis.rca.root_cause_analysis.summary.contains(object),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_the_replicas_refused_by_a_full_quota_is_not_healthy_again() {
    let Some(k) = Kube::new("graph-e2e-quota").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    pods_quota(&k, "pods-cap", 2).await;
    k.apply(deployment(
        "web",
        "shop/web:5.0",
        4,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    for (i, p) in k.pods("app=web", 2).await.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            "web",
            "shop/web:5.0",
            &format!("10.244.1.{}", 50 + i),
        )
        .await;
    }
    k.wait("2 of 4 available", 30, || async {
        let d = k.get("apps/v1", "Deployment", "web").await;
        (d["status"]["availableReplicas"] == 2).then_some(())
    })
    .await;
    wait_event(&k, "FailedCreate", "exceeded quota: pods-cap").await;

    let (analysis, outcome) = investigate(&k, &replicas_mismatch(&k, "web")).await;
    sent_to_a_human_about(
        &analysis,
        &outcome,
        &format!("ResourceQuota {}", ns_of(&k, "pods-cap")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_the_replicas_refused_by_a_webhook_is_not_healthy_again() {
    let Some(k) = Kube::new("graph-e2e-hook").await else {
        return;
    };
    let outside = Outside::new(&k);
    let (_logs, port) = kubelet().await;
    let n = node(&k, &outside, port, "worker-1", json!({}), json!([])).await;
    k.apply(deployment(
        "api",
        "shop/api:2.3",
        2,
        "256Mi",
        json!({}),
        json!({}),
    ))
    .await;
    for (i, p) in k.pods("app=api", 2).await.iter().enumerate() {
        run(
            &k,
            p,
            &n,
            "api",
            "shop/api:2.3",
            &format!("10.244.1.{}", 50 + i),
        )
        .await;
    }
    let cfg = refusing_webhook(&k, &outside).await;
    // Scaled for the day's traffic: the new pods are refused.
    k.patch(
        "apps/v1",
        "Deployment",
        "api",
        json!({"spec": {"replicas": 4}}),
    )
    .await;
    k.wait("2 of 4 available", 30, || async {
        let d = k.get("apps/v1", "Deployment", "api").await;
        (d["status"]["availableReplicas"] == 2 && d["spec"]["replicas"] == 4).then_some(())
    })
    .await;
    wait_event(&k, "FailedCreate", "failed calling webhook").await;

    let (analysis, outcome) = investigate(&k, &replicas_mismatch(&k, "api")).await;
    sent_to_a_human_about(
        &analysis,
        &outcome,
        &format!("ValidatingWebhookConfiguration {cfg}"),
    );
}

// ---------------------------------------------------------------------------------------------
// From a snapshot: the same two admission failures as recorded objects, no API server needed.

/// A webhook installed long ago whose backend went away: every pod is refused, and the API
/// server's error names the backend by URL.
const REFUSED_BY_WEBHOOK: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop, creationTimestamp: "2026-11-01T00:00:00Z"}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: "shop/api:2.3"}]}
---
apiVersion: v1
kind: Event
metadata: {name: api-6dcdd575bd.1, namespace: shop}
involvedObject: {kind: ReplicaSet, name: api-6dcdd575bd, namespace: shop}
type: Warning
reason: FailedCreate
message: 'Error creating: Internal error occurred: failed calling webhook "pods.policy.example.com": Post "https://pod-policy.shop.svc:443/validate?timeout=5s": dial tcp 10.96.3.4:443: connect: connection refused'
firstTimestamp: "2026-11-21T11:50:00Z"
lastTimestamp: "2026-11-21T11:59:00Z"
---
apiVersion: v1
kind: Service
metadata: {name: pod-policy, namespace: shop, creationTimestamp: "2026-11-01T00:00:00Z"}
spec: {selector: {app: pod-policy}, ports: [{port: 443, targetPort: 8443}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: pod-policy, namespace: shop}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: pod-policy, creationTimestamp: "2026-11-01T00:00:00Z"}
webhooks:
- name: pods.policy.example.com
  failurePolicy: Fail
  clientConfig: {service: {namespace: shop, name: pod-policy, path: /validate}}
"#;

/// Half of web's replicas are refused by a used-up quota; the two that exist run.
const REFUSED_BY_QUOTA: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "shop/web:5.0"}]}
---
apiVersion: v1
kind: Event
metadata: {name: web-5f6f4b9758.1, namespace: shop}
involvedObject: {kind: ReplicaSet, name: web-5f6f4b9758, namespace: shop}
type: Warning
reason: FailedCreate
message: 'Error creating: pods "web-5f6f4b9758-d7mb4" is forbidden: exceeded quota: pods-cap, requested: pods=1, used: pods=2, limited: pods=2'
lastTimestamp: "2026-11-21T11:59:00Z"
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: pods-cap, namespace: shop}
spec: {hard: {pods: "2"}}
status: {hard: {pods: "2"}, used: {pods: "2"}}
"#;

#[tokio::test]
async fn snapshot_a_used_up_quota_says_which_pods_it_refused() {
    let snap = SnapshotCluster::from_yaml(REFUSED_BY_QUOTA).unwrap_or_else(|e| panic!("{e}"));
    let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
    let target = Target::new("Deployment", "web", Some("shop".into()));
    let n = graph::build(Arc::new(snap), &target, now)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let c = n.culprit().unwrap_or_else(|| panic!("{}", n.compact(8)));
    assert_eq!(c.object, "ResourceQuota shop/pods-cap");
    assert_eq!(c.unhealthy.as_deref(), Some("is used up: pods 2 of 2"));
    let explain = n.explain().unwrap_or_default();
    assert!(
        explain.contains("pods \"web-5f6f4b9758-d7mb4\" is forbidden: exceeded quota: pods-cap"),
        "{explain}"
    );
}

#[tokio::test]
async fn snapshot_a_refusing_webhook_outranks_the_backend_its_error_names() {
    let snap = SnapshotCluster::from_yaml(REFUSED_BY_WEBHOOK).unwrap_or_else(|e| panic!("{e}"));
    let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
    let target = Target::new("Deployment", "api", Some("shop".into()));
    let n = graph::build(Arc::new(snap), &target, now)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    // Both are found, unhealthy alike; the webhook is what refuses the pods.
    assert!(
        n.dependencies
            .iter()
            .any(|d| d.object == "Service shop/pod-policy" && d.unhealthy.is_some()),
        "{}",
        n.compact(8)
    );
    let c = n.culprit().unwrap_or_else(|| panic!("{}", n.compact(8)));
    assert_eq!(c.kind, DepKind::Admission, "{}", n.compact(8));
    assert_eq!(
        c.object,
        "ValidatingWebhookConfiguration pod-policy (webhook pods.policy.example.com)"
    );
}

/// The api's pods wait on a node-local broker they name in their readiness failures; nothing
/// but the name connects them (no Service), and the broker was scaled to zero.
const NAMED_WITHOUT_A_SERVICE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: telemetry-api, namespace: edge, creationTimestamp: "2026-11-21T10:00:00Z"}
spec:
  replicas: 2
  selector: {matchLabels: {app: telemetry-api}}
  template:
    metadata: {labels: {app: telemetry-api}}
    spec: {containers: [{name: api, image: "edge/api:1.8"}]}
status: {replicas: 2, readyReplicas: 0}
---
apiVersion: v1
kind: Pod
metadata:
  name: telemetry-api-6d5f8-x2k4p
  namespace: edge
  labels: {app: telemetry-api}
  creationTimestamp: "2026-11-21T10:00:00Z"
spec: {containers: [{name: api, image: "edge/api:1.8"}]}
status:
  phase: Running
  startTime: "2026-11-21T10:00:00Z"
  conditions: [{type: Ready, status: "False", lastTransitionTime: "2026-11-21T11:58:10Z"}]
  containerStatuses: [{name: api, ready: false, restartCount: 0, state: {running: {}}}]
---
apiVersion: v1
kind: Event
metadata: {name: telemetry-api-6d5f8-x2k4p.1, namespace: edge}
involvedObject: {kind: Pod, name: telemetry-api-6d5f8-x2k4p, namespace: edge}
type: Warning
reason: Unhealthy
message: 'Readiness probe failed: ERROR upstream telemetry-broker unavailable: no live endpoint'
lastTimestamp: "2026-11-21T11:59:30Z"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: telemetry-broker, namespace: edge, creationTimestamp: "2026-11-21T10:00:00Z"}
spec:
  replicas: 0
  selector: {matchLabels: {app: telemetry-broker}}
  template:
    metadata: {labels: {app: telemetry-broker}}
    spec: {containers: [{name: broker, image: "edge/broker:2.0"}]}
status: {}
---
apiVersion: v1
kind: Event
metadata: {name: telemetry-broker.1, namespace: edge}
involvedObject: {kind: Deployment, name: telemetry-broker, namespace: edge}
type: Normal
reason: ScalingReplicaSet
message: Scaled down replica set telemetry-broker-7bb897fc98 to 0
lastTimestamp: "2026-11-21T11:58:00Z"
"#;

#[tokio::test]
async fn snapshot_a_workload_the_failures_name_without_a_service_is_followed() {
    let snap =
        SnapshotCluster::from_yaml(NAMED_WITHOUT_A_SERVICE).unwrap_or_else(|e| panic!("{e}"));
    let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
    let target = Target::new("Deployment", "telemetry-api", Some("edge".into()));
    let n = graph::build(Arc::new(snap), &target, now)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let c = n.culprit().unwrap_or_else(|| panic!("{}", n.compact(8)));
    assert_eq!(c.object, "Deployment edge/telemetry-broker");
    // The object it is, typed: what decisions and the grouping of incidents read.
    assert_eq!(
        c.subject,
        Some(Target::new(
            "Deployment",
            "telemetry-broker",
            Some("edge".into())
        ))
    );
    assert_eq!(c.unhealthy.as_deref(), Some("is scaled to 0 replicas"));
    let changed = c
        .changed
        .as_ref()
        .map(|ch| ch.what.clone())
        .unwrap_or_default();
    assert!(
        changed.contains("Scaled down replica set telemetry-broker-7bb897fc98 to 0"),
        "{changed}"
    );
    assert!(
        c.relation.contains("upstream telemetry-broker unavailable"),
        "{}",
        c.relation
    );
}

/// fx-rates' rollout to revision 3 relabelled its pods out of the Service's selector (captured
/// in `tests/unseen`): the graph names the Deployment and offers revision 2 only when the
/// questions its rollback's proof asks hold — not when the rollout is paused, and not when
/// revision 2 was replaced before it was shown to serve.
#[tokio::test]
async fn snapshot_a_rollout_that_orphaned_a_service_is_undone_only_where_its_proof_would_hold() {
    const RELABELLED: &str =
        include_str!("unseen/service-selector-orphaned-by-relabel/snapshot.yaml");
    async fn culprit(yaml: &str) -> Dependency {
        let snap = SnapshotCluster::from_yaml(yaml).unwrap_or_else(|e| panic!("{e}"));
        let now: DateTime<Utc> = "2026-11-26T23:17:30Z".parse().unwrap_or_default();
        let target = Target::new("Ingress", "fx-rates", Some("treasury".into()));
        let n = graph::build(Arc::new(snap), &target, now)
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        n.dependencies
            .iter()
            .find(|d| d.object == "Deployment treasury/fx-rates")
            .cloned()
            .unwrap_or_else(|| panic!("{}", n.compact(8)))
    }
    let as_captured = culprit(RELABELLED).await;
    assert_eq!(
        as_captured
            .undo
            .as_ref()
            .map(|u| (u.target.to_string(), u.to_revision)),
        Some(("treasury/Deployment/fx-rates".to_owned(), 2)),
        "{as_captured:?}"
    );
    assert_eq!(as_captured.blocks, None);

    let paused = RELABELLED.replacen(
        "  progressDeadlineSeconds: 600\n",
        "  paused: true\n  progressDeadlineSeconds: 600\n",
        1,
    );
    assert_ne!(paused, RELABELLED);
    let d = culprit(&paused).await;
    assert_eq!(d.undo, None, "{d:?}");
    assert!(
        d.blocks
            .as_deref()
            .unwrap_or_default()
            .contains("the rollout is paused"),
        "{d:?}"
    );

    // Revision 3 replaced revision 2 24 seconds after it appeared: nothing shows 2 served.
    let hurried = RELABELLED.replacen(
        "deployment.kubernetes.io/revision: \"3\"\n    meta.helm.sh/release-name: fx-rates\n  creationTimestamp: \"2026-11-26T23:10:36Z\"",
        "deployment.kubernetes.io/revision: \"3\"\n    meta.helm.sh/release-name: fx-rates\n  creationTimestamp: \"2026-11-26T23:10:00Z\"",
        1,
    );
    assert_ne!(hurried, RELABELLED);
    let d = culprit(&hurried).await;
    assert_eq!(d.undo, None, "{d:?}");
    assert!(
        d.blocks
            .as_deref()
            .unwrap_or_default()
            .contains("nothing shows revision 2 of Deployment treasury/fx-rates worked"),
        "{d:?}"
    );

    // One pod of revision 3 started 20 seconds ago and is not ready yet: the rollout is under
    // way, which only its pods show (the graph read none before it took the Deployment's
    // selector from `spec.selector`).
    let starting = RELABELLED
        .replacen(
            "lastTransitionTime: \"2026-11-26T23:12:45Z\"\n    status: \"True\"\n    type: Ready",
            "lastTransitionTime: \"2026-11-26T23:17:10Z\"\n    status: \"False\"\n    type: Ready",
            1,
        )
        .replacen("    ready: true\n", "    ready: false\n", 1)
        .replacen(
            "startedAt: \"2026-11-26T23:12:45Z\"",
            "startedAt: \"2026-11-26T23:17:10Z\"",
            1,
        )
        .replacen(
            "startTime: \"2026-11-26T23:12:41Z\"",
            "startTime: \"2026-11-26T23:17:08Z\"",
            1,
        );
    assert_eq!(
        starting.matches("T23:17:").count(),
        RELABELLED.matches("T23:17:").count() + 3
    );
    let d = culprit(&starting).await;
    assert_eq!(d.undo, None, "{d:?}");
    assert!(
        d.blocks.as_deref().unwrap_or_default().contains(
            "revision 3 is rolling out now and its pods are starting (fx-rates-7557d7865b-6xdbb)"
        ),
        "{d:?}"
    );
}

/// db's claim is bound to a volume in zone eu-west-1a, whose one node is ready but tainted for
/// another team: no node there takes db's pods (`findings::takes`, the scheduler's question),
/// though one is ready and schedulable for pods that tolerate the taint.
const ZONE_OF_TAINTED_NODES: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "postgres:16"}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: db-0
  namespace: shop
  labels: {app: db}
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, controller: true}]
spec:
  containers: [{name: db, image: "postgres:16"}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable, message: "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) had untolerated taint {team: batch}."}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0, namespace: shop}
spec: {accessModes: [ReadWriteOnce], volumeName: pv-db, storageClassName: gp3}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-db}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a]}]
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/zone: eu-west-1a}}
spec:
  taints: [{key: team, value: batch, effect: NoSchedule}]
status:
  conditions: [{type: Ready, status: "True"}]
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {topology.kubernetes.io/zone: eu-west-1b}}
status:
  conditions: [{type: Ready, status: "True"}]
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
"#;

#[tokio::test]
async fn snapshot_a_volume_whose_zone_has_no_node_that_takes_the_pods_is_the_culprit() {
    let snap = SnapshotCluster::from_yaml(ZONE_OF_TAINTED_NODES).unwrap_or_else(|e| panic!("{e}"));
    let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
    let target = Target::new("StatefulSet", "db", Some("shop".into()));
    let n = graph::build(Arc::new(snap), &target, now)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let d = n
        .dependencies
        .iter()
        .find(|d| d.object == "PersistentVolume pv-db")
        .unwrap_or_else(|| panic!("{}", n.compact(8)));
    assert!(
        d.unhealthy
            .as_deref()
            .is_some_and(|u| u.contains("zone eu-west-1a")),
        "{d:?}"
    );
}

/// claims-api's connections to its database behind a default-deny Ingress policy in the
/// database's namespace time out (captured in `tests/unseen`). The far side's policy is named
/// whichever way the client words the timeout: the pods' egress and the far side's ingress ask
/// one question (`Ctx::timing_out`), so Envoy's `upstream request timeout` finds it as Go's
/// `i/o timeout` does.
#[tokio::test]
async fn snapshot_a_far_sides_ingress_policy_is_found_however_the_timeout_is_worded() {
    const CAPTURED: &str =
        include_str!("unseen/networkpolicy-added-before-readiness-failures/snapshot.yaml");
    async fn far_side(yaml: &str) -> Option<Dependency> {
        let snap = SnapshotCluster::from_yaml(yaml).unwrap_or_else(|e| panic!("{e}"));
        let now: DateTime<Utc> = "2026-11-29T11:18:00Z".parse().unwrap_or_default();
        let target = Target::new("Deployment", "claims-api", Some("claims".into()));
        let n = graph::build(Arc::new(snap), &target, now)
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        n.dependencies
            .iter()
            .find(|d| {
                d.kind == DepKind::Network
                    && d.unhealthy
                        .as_deref()
                        .is_some_and(|u| u.contains("admits no connection from the pods of claims"))
            })
            .cloned()
    }
    assert!(far_side(CAPTURED).await.is_some());
    let envoy = CAPTURED
        .replace(": i/o timeout)", ": upstream request timeout)")
        .replace(
            ": context deadline exceeded)",
            ": upstream request timeout)",
        );
    assert_ne!(envoy, CAPTURED);
    assert!(!envoy.contains("i/o timeout") && !envoy.contains("deadline exceeded"));
    let d = far_side(&envoy).await;
    assert!(d.is_some(), "no far-side policy for an Envoy timeout");
}

/// grafana's new pod cannot attach its ReadWriteOnce claim: the attach controller names the
/// holder, grafana-598dc7748c-7wxdp (captured in `tests/unseen`). A backup Job's pod that
/// mounts the same claim on the same node is not who the warning names: the graph reads the
/// holder from the warning (`findings::attach_conflict`), as the rollout's finding does.
#[tokio::test]
async fn snapshot_the_multi_attach_holder_is_the_pod_the_attach_controller_names() {
    const CAPTURED: &str = include_str!("unseen/multi-attach-rwo-rollout/snapshot.yaml");
    const BACKUP: &str = r#"---
apiVersion: v1
kind: Pod
metadata:
  name: backup-grafana-29001-x7k2p
  namespace: observability
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: backup-grafana-29001, uid: j1, controller: true}]
spec:
  nodeName: ip-10-20-8-11.eu-west-1.compute.internal
  containers: [{name: backup, image: "restic/restic:0.17"}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: grafana-storage}}]
status:
  phase: Running
  containerStatuses: [{name: backup, ready: true, restartCount: 0, state: {running: {}}}]
"#;
    let with_backup = CAPTURED.replacen(
        "---\napiVersion: v1\nkind: Pod\n",
        &format!("{BACKUP}---\napiVersion: v1\nkind: Pod\n"),
        1,
    );
    assert_ne!(with_backup, CAPTURED);
    let snap = SnapshotCluster::from_yaml(&with_backup).unwrap_or_else(|e| panic!("{e}"));
    let now: DateTime<Utc> = "2026-11-26T05:55:00Z".parse().unwrap_or_default();
    let target = Target::new("Deployment", "grafana", Some("observability".into()));
    let n = graph::build(Arc::new(snap), &target, now)
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let claim = n
        .dependencies
        .iter()
        .find(|d| d.object.ends_with("observability/grafana-storage"))
        .unwrap_or_else(|| panic!("{}", n.compact(8)));
    assert!(claim.is_a("PersistentVolumeClaim"), "{claim:?}");
    let unhealthy = claim.unhealthy.as_deref().unwrap_or_default();
    assert!(
        unhealthy.contains("for pod grafana-598dc7748c-7wxdp"),
        "{unhealthy}"
    );
}
