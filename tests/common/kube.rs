//! Fixtures for the real API server tier (scripts/kube-tier): a namespace per test, workloads
//! made by the real controller-manager, and failures staged the way a kubelet would leave them —
//! a Node, a Binding, status patches, Events, and a fake kubelet that serves container logs to
//! the API server over TLS (the one part of a node that cannot run here).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

pub struct Kube {
    pub client: kube::Client,
    pub ns: String,
    pub kubeconfig: PathBuf,
}

/// Create `obj`, as a client does: a new namespace's service account reaches the API server's
/// admission a moment after the namespace (and its token) exist, and until then pods are
/// refused with a ServerTimeout that asks to retry after a second.
pub async fn create(
    api: &Api<DynamicObject>,
    pp: &PostParams,
    obj: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    let mut tries = 0;
    loop {
        match api.create(pp, obj).await {
            Err(kube::Error::Api(s)) if s.reason == "ServerTimeout" && tries < 30 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            other => return other,
        }
    }
}

pub fn kubeconfig(var: &str) -> Option<PathBuf> {
    super::component(var, "the Kubernetes API server tier").map(PathBuf::from)
}

async fn client_for(path: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn ar(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

const CLUSTER_SCOPED: &[&str] = &[
    "StorageClass",
    "Node",
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "PersistentVolume",
];

impl Kube {
    /// A fresh namespace `<prefix>-<random>` on the test cluster, ready for pods.
    pub async fn new(prefix: &str) -> Option<Kube> {
        let ns = format!(
            "{prefix}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        Self::with_namespace(&ns).await
    }

    /// A namespace with exactly this name (it must not exist yet).
    pub async fn with_namespace(ns: &str) -> Option<Kube> {
        super::init();
        let kubeconfig = kubeconfig("KUBEMEDIC_TEST_KUBECONFIG")?;
        let client = client_for(&kubeconfig).await;
        let ns = ns.to_owned();
        let k = Kube {
            client,
            ns: ns.clone(),
            kubeconfig,
        };
        k.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .await;
        // Pods are refused until the namespace's default service account (and its token) exist.
        k.wait("default service account token", 30, || async {
            let secrets: Api<DynamicObject> =
                Api::namespaced_with(k.client.clone(), &k.ns, &ar("v1", "Secret"));
            let list = secrets.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|s| {
                    s.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("default-token"))
                })
                .then_some(())
        })
        .await;
        Some(k)
    }

    pub fn api(&self, api_version: &str, kind: &str) -> Api<DynamicObject> {
        if CLUSTER_SCOPED.contains(&kind) {
            Api::all_with(self.client.clone(), &ar(api_version, kind))
        } else {
            Api::namespaced_with(self.client.clone(), &self.ns, &ar(api_version, kind))
        }
    }

    /// Create an object (in the test namespace unless cluster-scoped); returns it as created.
    pub async fn apply(&self, mut o: Value) -> Value {
        let api_version = o["apiVersion"].as_str().expect("apiVersion").to_owned();
        let kind = o["kind"].as_str().expect("kind").to_owned();
        if !CLUSTER_SCOPED.contains(&kind.as_str()) {
            o["metadata"]["namespace"] = json!(self.ns);
        }
        let obj: DynamicObject = serde_json::from_value(o).expect("object");
        let created = create(&self.api(&api_version, &kind), &PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
        serde_json::to_value(created).expect("json")
    }

    pub async fn get(&self, api_version: &str, kind: &str, name: &str) -> Value {
        let o = self
            .api(api_version, kind)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get {kind}/{name}: {e}"));
        serde_json::to_value(o).expect("json")
    }

    pub async fn patch(&self, api_version: &str, kind: &str, name: &str, patch: Value) -> Value {
        let o = self
            .api(api_version, kind)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {kind}/{name}: {e}"));
        serde_json::to_value(o).expect("json")
    }

    pub async fn patch_status(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        status: Value,
    ) -> Value {
        let o = self
            .api(api_version, kind)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .unwrap_or_else(|e| panic!("patch status {kind}/{name}: {e}"));
        serde_json::to_value(o).expect("json")
    }

    /// Poll until `f` returns Some (or panic after `secs`).
    pub async fn wait<T, F, Fut>(&self, what: &str, secs: u64, f: F) -> T
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f().await {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Pods matching a selector, once there are `n` of them.
    pub async fn pods(&self, selector: &str, n: usize) -> Vec<Value> {
        let api = self.api("v1", "Pod");
        self.wait(&format!("{n} pods {selector}"), 30, || async {
            let list = api
                .list(&kube::api::ListParams::default().labels(selector))
                .await
                .ok()?;
            let mut items: Vec<Value> = list
                .items
                .into_iter()
                .map(|p| serde_json::to_value(p).unwrap())
                .collect();
            items.sort_by(|a, b| {
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str())
            });
            (items.len() == n).then_some(items)
        })
        .await
    }

    /// A Ready node whose kubelet endpoint is `kubelet_port` on 127.0.0.1.
    pub async fn node(&self, name: &str, kubelet_port: u16, taints: Value) -> Value {
        let _ = self
            .api("v1", "Node")
            .delete(name, &Default::default())
            .await;
        self.apply(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints}
        }))
        .await;
        let now = Utc::now().to_rfc3339();
        self.patch_status("v1", "Node", name, json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.20.2", "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}
        }))
        .await;
        // Admission tainted the new node not-ready; the node lifecycle controller (off here, so
        // fake nodes are not evicted) would lift that once the node is Ready.
        self.patch("v1", "Node", name, json!({"spec": {"taints": taints}}))
            .await
    }

    /// Another handle on the same namespace (for a task that plays the kubelet).
    pub fn clone_handle(&self) -> Kube {
        Kube {
            client: self.client.clone(),
            ns: self.ns.clone(),
            kubeconfig: self.kubeconfig.clone(),
        }
    }

    /// Schedule a pod onto a node, as the scheduler would.
    pub async fn bind(&self, pod: &str, node: &str) {
        self.try_bind(pod, node)
            .await
            .unwrap_or_else(|e| panic!("bind {pod}: {e}"));
    }

    /// Schedule a pod onto a node, as the scheduler would, reporting the API server's refusal
    /// (a pod its controller deleted since it was listed is NotFound).
    pub async fn try_bind(&self, pod: &str, node: &str) -> Result<(), kube::Error> {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.ns);
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        pods.create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
            .await
            .map(|_| ())
    }

    /// Record an Event about `about`, as a kubelet or controller would.
    pub async fn event(
        &self,
        about: &Value,
        type_: &str,
        reason: &str,
        message: &str,
        count: i64,
        ago_secs: i64,
    ) {
        let t = (Utc::now() - chrono::Duration::seconds(ago_secs))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let kind = about["kind"].as_str().unwrap_or("Pod");
        let name = about["metadata"]["name"].as_str().unwrap();
        let ns = about["metadata"]["namespace"].as_str().unwrap_or("default");
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{}", uuid::Uuid::new_v4().simple()), "namespace": ns},
            "involvedObject": {"apiVersion": about["apiVersion"], "kind": kind, "name": name, "namespace": about["metadata"]["namespace"], "uid": about["metadata"]["uid"]},
            "reason": reason, "message": message, "type": type_, "count": count,
            "firstTimestamp": t, "lastTimestamp": t,
            "source": {"component": "kubelet", "host": "worker"}
        });
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &ar("v1", "Event"));
        let obj: DynamicObject = serde_json::from_value(event).unwrap();
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("event: {e}"));
    }

    /// A KubeCluster for this cluster as admin (or another user's kubeconfig).
    pub async fn cluster_as(
        &self,
        kubeconfig: &std::path::Path,
        policy: kubemedic::cluster::ReadPolicy,
    ) -> Arc<kubemedic::cluster::KubeCluster> {
        let opts = kubemedic::cluster::KubeOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            timeout: Duration::from_secs(10),
            policy,
        };
        Arc::new(
            kubemedic::cluster::KubeCluster::connect(&opts)
                .await
                .expect("connect"),
        )
    }

    pub async fn cluster(&self) -> Arc<kubemedic::cluster::KubeCluster> {
        self.cluster_as(&self.kubeconfig, Default::default()).await
    }

    /// kubemedic's CRDs (charts/kubemedic/crds), applied as `kubectl apply --server-side
    /// --force-conflicts` would (the files win; other tests apply them at the same time), and
    /// served.
    pub async fn kubemedic_crds(&self) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/kubemedic/crds");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("charts/kubemedic/crds")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        let crds: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ar("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        );
        for file in files {
            let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
            let obj: DynamicObject = serde_json::from_value(crd.clone()).unwrap();
            crds.patch(
                &name,
                &PatchParams::apply("kubemedic-tests").force(),
                &Patch::Apply(&obj),
            )
            .await
            .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
            let group = crd["spec"]["group"].as_str().unwrap().to_owned();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
            let version = crd["spec"]["versions"][0]["name"]
                .as_str()
                .unwrap()
                .to_owned();
            let gvk = GroupVersionKind::gvk(&group, &version, &kind);
            self.wait(&format!("the {kind} CRD served"), 30, || async {
                kube::discovery::pinned_kind(&self.client, &gvk).await.ok()
            })
            .await;
        }
    }

    /// A ServiceAccount `name` in the test namespace bound (cluster-wide) to a ClusterRole of
    /// exactly `rules`, and a kubeconfig that acts as it (in `dir`). The role and its binding
    /// are named `<name>-<namespace>`; [`Kube::drop_role`] removes them.
    pub async fn service_account(
        &self,
        name: &str,
        rules: Value,
        dir: &std::path::Path,
    ) -> PathBuf {
        let role = format!("{name}-{}", self.ns);
        self.apply(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        )
        .await;
        self.grant(name, &role, rules).await;
        self.kubeconfig_of(name, dir).await
    }

    /// A kubeconfig (in `dir`) that acts as the test namespace's ServiceAccount `name`, with
    /// its token (once the controller-manager made it).
    pub async fn kubeconfig_of(&self, name: &str, dir: &std::path::Path) -> PathBuf {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), &self.ns);
        let token = self
            .wait("the ServiceAccount's token", 30, || async {
                let list = secrets.list(&Default::default()).await.ok()?;
                list.items.into_iter().find_map(|s| {
                    let ours = s.type_.as_deref() == Some("kubernetes.io/service-account-token")
                        && s.metadata
                            .annotations
                            .as_ref()?
                            .get("kubernetes.io/service-account.name")
                            .map(String::as_str)
                            == Some(name);
                    ours.then(|| {
                        s.data?
                            .get("token")
                            .map(|t| String::from_utf8(t.0.clone()).unwrap())
                    })?
                })
            })
            .await;
        let server =
            std::env::var("KUBEMEDIC_TEST_KUBE_SERVER").expect("KUBEMEDIC_TEST_KUBE_SERVER");
        let ca = std::env::var("KUBEMEDIC_TEST_KUBE_CA_FILE").expect("KUBEMEDIC_TEST_KUBE_CA_FILE");
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: '{server}', certificate-authority: '{ca}'}}}}]\n\
                 users: [{{name: sa, user: {{token: '{token}'}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: sa, namespace: {}}}}}]\ncurrent-context: c\n",
                self.ns
            ),
        )
        .unwrap();
        kubeconfig
    }

    /// Bind ServiceAccount `account` (of the test namespace) to a new ClusterRole `role` of
    /// exactly `rules`.
    pub async fn grant(&self, account: &str, role: &str, rules: Value) {
        self.apply(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role}, "rules": rules}),
        )
        .await;
        self.apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.ns}]}))
            .await;
    }

    /// Remove a ClusterRole and its binding made by [`Kube::grant`].
    pub async fn drop_role(&self, role: &str) {
        let _ = self
            .api("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
            .delete(role, &Default::default())
            .await;
        let _ = self
            .api("rbac.authorization.k8s.io/v1", "ClusterRole")
            .delete(role, &Default::default())
            .await;
    }
}

/// The rules of the chart's role files (charts/kubemedic/rbac/<name>-rules.yaml), one list.
pub fn chart_rules(names: &[&str]) -> Value {
    let mut all = Vec::new();
    for name in names {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("charts/kubemedic/rbac/{name}-rules.yaml"));
        let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        all.extend(rules.as_array().unwrap().iter().cloned());
    }
    Value::Array(all)
}

/// Container statuses as a kubelet reports them.
pub mod status {
    use serde_json::{Value, json};

    pub fn running(container: &str, image: &str) -> Value {
        json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": container, "image": image, "imageID": "", "ready": true, "restartCount": 0, "started": true,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        })
    }

    /// Running, its container not ready (a failing readiness probe).
    pub fn not_ready(container: &str, image: &str) -> Value {
        let mut st = running(container, image);
        st["conditions"] =
            json!([{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]);
        st["containerStatuses"][0]["ready"] = json!(false);
        st
    }

    pub fn crash_loop(
        container: &str,
        image: &str,
        restarts: i64,
        exit_code: i64,
        reason: &str,
    ) -> Value {
        json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": format!("containers with unready status: [{container}]")},
                           {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": container, "image": image, "imageID": "", "ready": false, "restartCount": restarts, "started": false,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off 5m0s restarting failed container={container}")}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}}]
        })
    }

    pub fn waiting(container: &str, image: &str, reason: &str, message: &str) -> Value {
        json!({
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": container, "image": image, "imageID": "", "ready": false, "restartCount": 0, "started": false,
                "state": {"waiting": {"reason": reason, "message": message}}}]
        })
    }

    pub fn unschedulable(message: &str) -> Value {
        json!({
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]
        })
    }

    pub fn succeeded(container: &str) -> Value {
        json!({
            "phase": "Succeeded",
            "containerStatuses": [{"name": container, "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}}]
        })
    }
}

/// Logs a fake kubelet serves, by (namespace, pod, container, previous).
pub type LogStore = Arc<Mutex<HashMap<(String, String, String, bool), String>>>;

/// A kubelet's log endpoint (`/containerLogs/{ns}/{pod}/{container}`) over TLS on 127.0.0.1,
/// so the API server's real log proxy works against the fake nodes. Returns its port.
pub async fn fake_kubelet(logs: LogStore) -> u16 {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let certs = vec![CertificateDer::from_pem_file(&cert).unwrap()];
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _keep = dir;
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let logs = logs.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let logs = logs.clone();
                        async move {
                            let path = req.uri().path().to_owned();
                            let query: HashMap<String, String> = req
                                .uri()
                                .query()
                                .unwrap_or("")
                                .split('&')
                                .filter_map(|kv| {
                                    kv.split_once('=')
                                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                                })
                                .collect();
                            let parts: Vec<&str> = path
                                .trim_start_matches("/containerLogs/")
                                .split('/')
                                .collect();
                            let previous = query.get("previous").is_some_and(|v| v == "true");
                            let found = match parts.as_slice() {
                                [ns, pod, container] => logs
                                    .lock()
                                    .unwrap()
                                    .get(&(
                                        (*ns).to_owned(),
                                        (*pod).to_owned(),
                                        (*container).to_owned(),
                                        previous,
                                    ))
                                    .cloned(),
                                _ => None,
                            };
                            let (status, body) = match found {
                                Some(text) => {
                                    let mut lines: Vec<&str> = text.lines().collect();
                                    // sinceSeconds as a kubelet applies it: by each line's
                                    // time (here the RFC 3339 stamp the line starts with).
                                    if let Some(since) = query
                                        .get("sinceSeconds")
                                        .and_then(|s| s.parse::<i64>().ok())
                                    {
                                        let from =
                                            chrono::Utc::now() - chrono::Duration::seconds(since);
                                        lines.retain(|l| {
                                            l.split_whitespace()
                                                .next()
                                                .and_then(|t| {
                                                    chrono::DateTime::parse_from_rfc3339(t).ok()
                                                })
                                                .is_none_or(|t| t >= from)
                                        });
                                    }
                                    let tail = query
                                        .get("tailLines")
                                        .and_then(|t| t.parse::<usize>().ok())
                                        .unwrap_or(lines.len())
                                        .min(lines.len());
                                    let mut out = lines[lines.len() - tail..].join("\n");
                                    out.push('\n');
                                    (200, out)
                                }
                                None => (404, format!("container not found ({path})")),
                            };
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}
