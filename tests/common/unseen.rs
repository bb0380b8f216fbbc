//! The unseen incidents (tests/unseen/): an examiner's measurement set of incident classes no
//! scenario in tests/scenarios describes, staged on the real API server tier the way a
//! kubelet, scheduler, controller-manager and the other controllers would leave a cluster.
//! `examples/capture_unseen.rs` (scripts/capture-unseen) captures each with kubemedic's own
//! snapshot capture; `scripts/score-unseen` and tests/unseen.rs score an investigator against
//! each incident's expected.json, which was written (and committed) before anything ran.
//!
//! Staging conventions:
//! - Each incident owns its namespaces (the first is the app's) and names its nodes
//!   `ip-10-20-<index>-<n>.eu-west-1.compute.internal`, so incidents never share a node.
//! - Node events live in `default`, as a kubelet's do: incidents about nodes capture `default`
//!   too. The one incident about cluster DNS stages CoreDNS in the real `kube-system` under its
//!   real names (only that incident may use `kube-system`).
//! - Every incident is investigated `offset` after it was staged (the capture's clock), so
//!   objects look as old as the incident needs; times in statuses, events and logs are written
//!   relative to that capture moment ([`Ctx::t`]).
//! - Alerts carry the labels kube-prometheus-stack's default rules carry (scrape labels where
//!   the rule does not aggregate them away), except that kube-state-metrics' own `pod` and
//!   `container` target labels are left off Deployment/StatefulSet/Node-level alerts (that
//!   labelling is a separate, known issue, not what this set measures).
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use chrono::Utc;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::kube::{Kube, LogStore};
use super::scenarios::Staged;

/// Every unseen incident, once: `for_each_unseen!(m)` expands to `m!(test_name => "folder", …)`.
#[allow(unused_macros)]
macro_rules! for_each_unseen {
    ($callback:ident) => {
        $callback!(
    coredns_loop_crash => "coredns-loop-crash",
    init_container_dependency_down => "init-container-dependency-down",
    networkpolicy_egress_blocks_backend => "networkpolicy-egress-blocks-backend",
    liveness_probe_kills_slow_app => "liveness-probe-kills-slow-app",
    service_targetport_mismatch => "service-targetport-mismatch",
    pvc_storageclass_missing => "pvc-storageclass-missing",
    statefulset_volume_provisioning_failed => "statefulset-volume-provisioning-failed",
    multi_attach_rwo_rollout => "multi-attach-rwo-rollout",
    node_readonly_rootfs => "node-readonly-rootfs",
    node_pid_pressure => "node-pid-pressure",
    ephemeral_storage_eviction => "ephemeral-storage-eviction",
    container_exits_zero_loop => "container-exits-zero-loop",
    cronjob_forbid_hung_job => "cronjob-forbid-hung-job",
    rollout_missing_configmap => "rollout-missing-configmap",
    statefulset_pod_on_lost_node => "statefulset-pod-on-lost-node",
    paused_deployment_fix_not_rolled_out => "paused-deployment-fix-not-rolled-out",
    redis_maxmemory_noeviction => "redis-maxmemory-noeviction",
    headless_service_missing => "headless-service-missing",
    hpa_missing_cpu_request => "hpa-missing-cpu-request",
    ingress_backend_missing => "ingress-backend-missing",
    x509_expired_upstream => "x509-expired-upstream",
    priority_preemption_churn => "priority-preemption-churn",
    volume_node_affinity_conflict => "volume-node-affinity-conflict",
    disk_pressure_cleared => "disk-pressure-cleared",
    hpa_scaleup_completed => "hpa-scaleup-completed",
    db_failover_stale_connections => "db-failover-stale-connections",
    imagepull_secret_rotated => "imagepull-secret-rotated",
    rollout_stuck_nodeselector => "rollout-stuck-nodeselector",
    pvc_filling_up_expandable => "pvc-filling-up-expandable",
    hpa_maxed_out_cpu => "hpa-maxed-out-cpu",
    leftover_maintenance_taint => "leftover-maintenance-taint",
    node_notready_recovered => "node-notready-recovered",
    daemonset_crash_one_node_kernel => "daemonset-crash-one-node-kernel",
    secret_key_renamed => "secret-key-renamed",
    configmap_edited_in_place => "configmap-edited-in-place",
    hostport_conflict_daemonset => "hostport-conflict-daemonset",
    required_anti_affinity_hpa_scaleout => "required-anti-affinity-hpa-scaleout",
    evicted_pod_tombstone => "evicted-pod-tombstone",
    stale_pidfile_emptydir => "stale-pidfile-emptydir",
    node_readiness_flapping => "node-readiness-flapping",
    statefulset_partition_canary_held => "statefulset-partition-canary-held",
    service_selector_orphaned_by_relabel => "service-selector-orphaned-by-relabel",
    jvm_heap_flag_oomkill => "jvm-heap-flag-oomkill",
    nfs_stale_file_handle => "nfs-stale-file-handle",
    manual_scale_down_overload => "manual-scale-down-overload",
    crashloop_during_db_upgrade_recovered => "crashloop-during-db-upgrade-recovered",
    rbac_role_narrowed_forbidden => "rbac-role-narrowed-forbidden",
    mesh_injection_label_removed => "mesh-injection-label-removed",
    cronjob_suspended_forgotten => "cronjob-suspended-forgotten",
    mutable_latest_tag_repushed => "mutable-latest-tag-repushed",
    configmap_cache_raised_oomkill => "configmap-cache-raised-oomkill",
    oomkill_organic_growth_config_edited_after => "oomkill-organic-growth-config-edited-after",
    upstream_url_edited_then_restarted => "upstream-url-edited-then-restarted",
    networkpolicy_added_before_readiness_failures => "networkpolicy-added-before-readiness-failures",
    stale_connections_after_unrelated_configmap_edit => "stale-connections-after-unrelated-configmap-edit",
        );
    };
}
#[allow(unused_imports)]
pub(crate) use for_each_unseen;

/// What a staging function works with.
pub struct Ctx {
    /// The incident's first (app) namespace.
    pub k: Kube,
    pub logs: LogStore,
    /// The fake kubelet's port (every node's kubelet endpoint).
    pub port: u16,
    /// The incident's index: its node names and pod IPs are derived from it.
    pub index: u8,
    /// How long after staging the capture (the investigation) happens.
    pub offset: chrono::Duration,
}

pub type StageFn = for<'a> fn(&'a Ctx) -> Pin<Box<dyn Future<Output = Staged> + Send + 'a>>;

pub struct Incident {
    pub name: &'static str,
    /// The namespaces the incident uses, its app namespace first; all are captured.
    pub namespaces: &'static [&'static str],
    pub index: u8,
    /// Minutes between staging and the capture.
    pub offset_minutes: i64,
    pub stage: StageFn,
}

impl Ctx {
    /// The capture moment minus `before` seconds, as Kubernetes writes times.
    pub fn t(&self, before: i64) -> String {
        self.at(before)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    pub fn at(&self, before: i64) -> chrono::DateTime<Utc> {
        Utc::now() + self.offset - chrono::Duration::seconds(before)
    }

    /// A log line's timestamp (RFC 3339 with milliseconds) `before` seconds before capture.
    pub fn lt(&self, before: i64) -> String {
        self.at(before)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// A handle on another namespace (which the capture harness has created).
    pub fn ns(&self, ns: &str) -> Kube {
        let mut k = self.k.clone_handle();
        k.ns = ns.to_owned();
        k
    }

    /// The n-th node's name of this incident.
    pub fn node_name(&self, n: u8) -> String {
        format!(
            "ip-10-20-{}-{}.eu-west-1.compute.internal",
            self.index,
            10 + n
        )
    }

    /// A pod IP in this incident's range.
    pub fn ip(&self, n: u8) -> String {
        format!("10.244.{}.{}", self.index, n)
    }

    fn log(&self, ns: &str, pod: &str, container: &str, previous: bool, text: String) {
        self.logs.lock().unwrap().insert(
            (
                ns.to_owned(),
                pod.to_owned(),
                container.to_owned(),
                previous,
            ),
            text,
        );
    }

    /// Container logs as the kubelet would serve them (`previous`: the last terminated
    /// instance). Each line is `(seconds before capture, text)`.
    pub fn logs_of(&self, pod: &Value, container: &str, previous: bool, lines: &[(i64, &str)]) {
        let mut text = String::new();
        for (before, line) in lines {
            text.push_str(&format!("{} {line}\n", self.lt(*before)));
        }
        self.log(
            pod["metadata"]["namespace"].as_str().unwrap_or(&self.k.ns),
            &name(pod),
            container,
            previous,
            text,
        );
    }

    /// Logs without a timestamp prefix (the program prints its own).
    pub fn raw_logs(&self, pod: &Value, container: &str, previous: bool, text: String) {
        self.log(
            pod["metadata"]["namespace"].as_str().unwrap_or(&self.k.ns),
            &name(pod),
            container,
            previous,
            text,
        );
    }

    /// `n` Ready nodes (m5.xlarge: 4 CPU, 16 GiB) in `zones` (cycled), with every condition a
    /// kubelet reports.
    pub async fn nodes(&self, n: u8, zones: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..n {
            let name = self.node_name(i + 1);
            let zone = zones[usize::from(i) % zones.len()];
            let nodes = self.k.api("v1", "Node");
            if nodes.get(&name).await.is_ok() {
                let _ = nodes.delete(&name, &Default::default()).await;
                self.k
                    .wait("the old node gone", 30, || async {
                        nodes.get(&name).await.is_err().then_some(())
                    })
                    .await;
            }
            create_as(&self.k, "kubelet", json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "eu-west-1",
                    "failure-domain.beta.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                    "topology.ebs.csi.aws.com/zone": zone, "node.kubernetes.io/instance-type": "m5.xlarge",
                    "eks.amazonaws.com/nodegroup": "general-2026-11"}},
                "spec": {"providerID": format!("aws:///{zone}/i-0{}", hex(16))}}))
                .await;
            status_as(&self.k, "kubelet", "v1", "Node", &name, json!({
                // Only the InternalIP: the API server reaches a kubelet by the first address of its
                // preferred types (Hostname first), and the fake kubelet is on 127.0.0.1.
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                "nodeInfo": {"kubeletVersion": "v1.20.2-eks-8be107", "kubeProxyVersion": "v1.20.2-eks-8be107",
                    "machineID": hex(32), "systemUUID": format!("ec2{}", hex(29)), "bootID": uuid::Uuid::new_v4().to_string(),
                    "kernelVersion": "5.4.214-120.368.amzn2.x86_64", "osImage": "Amazon Linux 2",
                    "containerRuntimeVersion": "containerd://1.6.6", "operatingSystem": "linux", "architecture": "amd64"}}))
                .await;
            self.node_conditions(&name, &[]).await;
            patch_as(
                &self.k,
                "kube-controller-manager",
                "v1",
                "Node",
                &name,
                json!({"spec": {"taints": null}}),
            )
            .await;
            out.push(name);
        }
        out
    }

    /// Report a node's conditions: all healthy (Ready since 3 days) except `overrides`
    /// (`(type, status, reason, message, seconds since transition)`).
    pub async fn node_conditions(&self, node: &str, overrides: &[(&str, &str, &str, &str, i64)]) {
        let healthy = [
            (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            (
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
        ];
        let beat = self.t(12);
        let mut conditions: Vec<Value> = healthy
            .iter()
            .filter(|(t, ..)| !overrides.iter().any(|o| o.0 == *t))
            .map(|(t, s, r, m)| {
                json!({"type": t, "status": s, "reason": r, "message": m,
                "lastHeartbeatTime": beat, "lastTransitionTime": self.t(3 * 86400)})
            })
            .collect();
        for (t, s, r, m, since) in overrides {
            let heartbeat = if *s == "Unknown" {
                self.t(*since + 40)
            } else {
                beat.clone()
            };
            conditions.push(json!({"type": t, "status": s, "reason": r, "message": m,
                "lastHeartbeatTime": heartbeat, "lastTransitionTime": self.t(*since)}));
        }
        status_as(&self.k, "kubelet", "v1", "Node", node, json!({"conditions": conditions,
                "capacity": {"cpu": "4", "memory": "16085324Ki", "pods": "58", "ephemeral-storage": "83873772Ki"},
                "allocatable": {"cpu": "3920m", "memory": "15069516Ki", "pods": "58", "ephemeral-storage": "76224326324"}}))
            .await;
    }
}

/// The keys every expected.json has (tests/unseen/ and tests/node/; docs/unseen-incidents.md).
/// `scripts/score-unseen` run on `binary` (the test build's, `env!("CARGO_BIN_EXE_kubemedic")`)
/// against `set` (a folder under the crate root, laid out as tests/unseen is): its table, and
/// the counts of its TOTAL line by key (`right`, `harmful`, `proven`, `named`, …).
pub fn score_set(binary: &str, set: &str) -> (String, std::collections::BTreeMap<String, usize>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("python3")
        .arg(format!("{root}/scripts/score-unseen"))
        .arg(binary)
        .args(["--set", &format!("{root}/{set}")])
        .current_dir(root)
        .output()
        .expect("python3 scripts/score-unseen");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "score-unseen failed: {}\n{table}",
        String::from_utf8_lossy(&out.stderr)
    );
    let totals = table
        .lines()
        .find_map(|l| l.strip_prefix("TOTAL "))
        .unwrap_or_else(|| panic!("no TOTAL line:\n{table}"))
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect();
    (table, totals)
}

pub const EXPECTED_KEYS: &[&str] = &[
    "target",
    "phase",
    "outcome",
    "workflow_id",
    "forbidden_action_types",
    "reason_mentions",
    "class",
    "why",
];

pub fn name(o: &Value) -> String {
    o["metadata"]["name"].as_str().unwrap_or("").to_owned()
}

fn hex(n: usize) -> String {
    let mut s = String::new();
    while s.len() < n {
        s.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    s[..n].to_owned()
}

fn ar(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// Create an object (in `k`'s namespace unless cluster-scoped) as `manager`: the field manager
/// the API server records in its managedFields, as the component that would have made it
/// (kubelet, kube-scheduler, helm, kubectl-…).
pub async fn create_as(k: &Kube, manager: &str, mut o: Value) -> Value {
    let api_version = o["apiVersion"].as_str().unwrap().to_owned();
    let kind = o["kind"].as_str().unwrap().to_owned();
    if !matches!(
        kind.as_str(),
        "StorageClass" | "Node" | "Namespace" | "PersistentVolume"
    ) {
        o["metadata"]["namespace"] = json!(k.ns);
    }
    let pp = PostParams {
        field_manager: Some(manager.to_owned()),
        ..Default::default()
    };
    let created = super::kube::create(
        &k.api(&api_version, &kind),
        &pp,
        &serde_json::from_value(o).unwrap(),
    )
    .await
    .unwrap_or_else(|e| panic!("create {kind}: {e}"));
    serde_json::to_value(created).unwrap()
}

fn as_manager(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.to_owned()),
        ..Default::default()
    }
}

/// A merge patch as `manager`.
pub async fn patch_as(
    k: &Kube,
    manager: &str,
    api_version: &str,
    kind: &str,
    name: &str,
    patch: Value,
) -> Value {
    let o = k
        .api(api_version, kind)
        .patch(name, &as_manager(manager), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patch {kind}/{name}: {e}"));
    serde_json::to_value(o).unwrap()
}

/// A status merge patch as `manager`.
pub async fn status_as(
    k: &Kube,
    manager: &str,
    api_version: &str,
    kind: &str,
    name: &str,
    status: Value,
) -> Value {
    let o = k
        .api(api_version, kind)
        .patch_status(
            name,
            &as_manager(manager),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("patch status {kind}/{name}: {e}"));
    serde_json::to_value(o).unwrap()
}

/// Bind a pod to a node, as the scheduler does.
pub async fn bind_as_scheduler(k: &Kube, pod: &str, node: &str) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(k.client.clone(), &k.ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let pp = PostParams {
        field_manager: Some("kube-scheduler".into()),
        ..Default::default()
    };
    let _: Value = pods
        .create_subresource("binding", pod, &pp, &binding)
        .await
        .unwrap_or_else(|e| panic!("bind {pod}: {e}"));
}

/// Create a cluster-scoped object, replacing one of the same name left by an earlier run.
pub async fn replace_cluster_object(k: &Kube, manager: &str, o: Value) -> Value {
    let api: Api<DynamicObject> = Api::all_with(
        k.client.clone(),
        &ar(
            o["apiVersion"].as_str().unwrap(),
            o["kind"].as_str().unwrap(),
        ),
    );
    let n = name(&o);
    if api.get(&n).await.is_ok() {
        let _ = api.delete(&n, &Default::default()).await;
        let _ = api
            .patch(
                &n,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await;
        for _ in 0..100 {
            if api.get(&n).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let obj: DynamicObject = serde_json::from_value(o).unwrap();
    let pp = PostParams {
        field_manager: Some(manager.to_owned()),
        ..Default::default()
    };
    serde_json::to_value(
        super::kube::create(&api, &pp, &obj)
            .await
            .unwrap_or_else(|e| panic!("create {n}: {e}")),
    )
    .unwrap()
}

/// Remove what earlier incidents left outside their namespaces, so that a capture shows only
/// this incident's nodes, volumes and classes, and only its node events.
pub async fn clean_cluster_scope(k: &Kube) {
    for (api_version, kind) in [
        ("v1", "Node"),
        ("v1", "PersistentVolume"),
        ("storage.k8s.io/v1", "StorageClass"),
    ] {
        let api: Api<DynamicObject> = Api::all_with(k.client.clone(), &ar(api_version, kind));
        let Ok(list) = api.list(&Default::default()).await else {
            continue;
        };
        for o in list.items {
            let n = o.metadata.name.clone().unwrap_or_default();
            // Delete first: the pv-protection controller puts its finalizer back on a live
            // volume, not on one being deleted.
            let _ = api.delete(&n, &Default::default()).await;
            let _ = api
                .patch(
                    &n,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
    }
    let events: Api<DynamicObject> =
        Api::namespaced_with(k.client.clone(), "default", &ar("v1", "Event"));
    let _ = events
        .delete_collection(&Default::default(), &Default::default())
        .await;
}

/// Record an Event as `component` (on `host`) would: `count` occurrences between
/// `first` and `last` seconds before capture.
#[allow(clippy::too_many_arguments)]
pub async fn event(
    c: &Ctx,
    about: &Value,
    (component, host): (&str, Option<&str>),
    type_: &str,
    reason: &str,
    message: &str,
    count: i64,
    (first, last): (i64, i64),
) {
    let kind = about["kind"].as_str().unwrap_or("Pod");
    let n = name(about);
    let ns = about["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let mut involved = json!({"apiVersion": about["apiVersion"], "kind": kind, "name": n,
        "uid": about["metadata"]["uid"], "resourceVersion": about["metadata"]["resourceVersion"]});
    if about["metadata"]["namespace"].is_string() {
        involved["namespace"] = json!(ns);
    } else {
        // A kubelet names its node by name, also as the uid.
        involved["uid"] = json!(n);
    }
    let mut source = json!({"component": component});
    if let Some(h) = host {
        source["host"] = json!(h);
    }
    let e = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{n}.{}", hex(16)), "namespace": ns},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": type_, "count": count,
        "firstTimestamp": c.t(first), "lastTimestamp": c.t(last),
        "source": source, "reportingComponent": "", "reportingInstance": ""
    });
    let api: Api<DynamicObject> = Api::namespaced_with(c.k.client.clone(), &ns, &ar("v1", "Event"));
    let pp = PostParams {
        field_manager: Some(event_writer(component).to_owned()),
        ..Default::default()
    };
    api.create(&pp, &serde_json::from_value(e).unwrap())
        .await
        .unwrap_or_else(|err| panic!("event {reason}: {err}"));
}

/// The program that writes a component's events (its field manager).
fn event_writer(component: &str) -> &str {
    match component {
        "default-scheduler" => "kube-scheduler",
        "node-controller"
        | "taint-controller"
        | "attachdetach-controller"
        | "cronjob-controller"
        | "horizontal-pod-autoscaler"
        | "persistentvolume-controller" => "kube-controller-manager",
        "kernel-monitor" => "node-problem-detector",
        c if c.starts_with("ebs.csi.aws.com") => "csi-provisioner",
        c => c,
    }
}

/// A kubelet's event about a pod on its node.
#[allow(clippy::too_many_arguments)]
pub async fn kubelet_event(
    c: &Ctx,
    pod: &Value,
    type_: &str,
    reason: &str,
    message: &str,
    count: i64,
    span: (i64, i64),
) {
    let host = pod["spec"]["nodeName"].as_str().map(str::to_owned);
    event(
        c,
        pod,
        ("kubelet", host.as_deref()),
        type_,
        reason,
        message,
        count,
        span,
    )
    .await;
}

/// The node object, for events about it.
pub async fn node_obj(k: &Kube, node: &str) -> Value {
    k.get("v1", "Node", node).await
}

// ---------------------------------------------------------------------------------------------
// Pod statuses as a kubelet reports them.

fn container_id() -> String {
    format!("containerd://{}", hex(64))
}

fn image_id(image: &str) -> String {
    let repo = image.split(':').next().unwrap_or(image);
    let repo = if repo.contains('/') && repo.split('/').next().unwrap_or("").contains('.') {
        repo.to_owned()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    };
    format!("{repo}@sha256:{}", hex(64))
}

/// A running container, started `started` seconds before capture.
pub fn c_running(
    c: &Ctx,
    (name, image): (&str, &str),
    started: i64,
    ready: bool,
    restarts: i64,
    last: Value,
) -> Value {
    json!({"name": name, "image": image, "imageID": image_id(image), "containerID": container_id(),
        "ready": ready, "started": true, "restartCount": restarts,
        "state": {"running": {"startedAt": c.t(started)}}, "lastState": last})
}

/// A waiting container (`reason`, `message`).
pub fn c_waiting(
    (name, image): (&str, &str),
    (reason, message): (&str, &str),
    restarts: i64,
    last: Value,
) -> Value {
    let mut waiting = json!({"reason": reason});
    if !message.is_empty() {
        waiting["message"] = json!(message);
    }
    let mut s = json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false,
        "restartCount": restarts, "state": {"waiting": waiting}, "lastState": last});
    if restarts > 0 || !last.as_object().is_none_or(|o| o.is_empty()) {
        s["imageID"] = json!(image_id(image));
        s["containerID"] = json!(container_id());
    }
    s
}

/// A `lastState`/`state` of a terminated container: ran from `started` to `finished` seconds
/// before capture.
pub fn terminated(c: &Ctx, code: i64, reason: &str, (started, finished): (i64, i64)) -> Value {
    json!({"terminated": {"exitCode": code, "reason": reason, "startedAt": c.t(started),
        "finishedAt": c.t(finished), "containerID": container_id()}})
}

/// The status of a pod whose containers are `containers`, scheduled and started `start`
/// seconds before capture. `ip` empty: no sandbox yet.
pub fn pod_status(c: &Ctx, phase: &str, start: i64, ip: &str, containers: Vec<Value>) -> Value {
    let unready: Vec<String> = containers
        .iter()
        .filter(|s| s["ready"] != true)
        .map(|s| s["name"].as_str().unwrap_or("").to_owned())
        .collect();
    let ready = unready.is_empty();
    let since = containers
        .iter()
        .filter_map(|s| s["state"]["running"]["startedAt"].as_str())
        .max()
        .map(str::to_owned)
        .unwrap_or_else(|| c.t(start));
    let mut conditions = vec![
        json!({"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(start)}),
    ];
    for t in ["Ready", "ContainersReady"] {
        if ready {
            conditions.push(json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": since}));
        } else {
            conditions.push(json!({"type": t, "status": "False", "lastProbeTime": null, "lastTransitionTime": c.t(start.min(600)),
                "reason": "ContainersNotReady", "message": format!("containers with unready status: [{}]", unready.join(" "))}));
        }
    }
    conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(start + 1)}));
    let mut s = json!({"phase": phase, "conditions": conditions, "hostIP": "127.0.0.1",
        "startTime": c.t(start), "containerStatuses": containers, "qosClass": "Burstable"});
    if !ip.is_empty() {
        s["podIP"] = json!(ip);
        s["podIPs"] = json!([{"ip": ip}]);
    }
    s
}

fn containers_of(pod: &Value) -> Vec<(String, String)> {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ct| {
            (
                ct["name"].as_str().unwrap_or("").to_owned(),
                ct["image"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn k_for(c: &Ctx, pod: &Value) -> Kube {
    c.ns(pod["metadata"]["namespace"].as_str().unwrap_or(&c.k.ns))
}

/// Schedule `pod` on `node` (unless it already is) and report `status`.
pub async fn report(c: &Ctx, pod: &Value, node: &str, status: Value) -> Value {
    let k = k_for(c, pod);
    if !pod["spec"]["nodeName"].is_string() {
        bind_as_scheduler(&k, &name(pod), node).await;
    }
    status_as(&k, "kubelet", "v1", "Pod", &name(pod), status).await
}

/// Play the kubelet of a healthy pod: every container running and ready since `start`.
pub async fn run(c: &Ctx, pod: &Value, node: &str, ip: &str, start: i64) -> Value {
    let containers = containers_of(pod)
        .iter()
        .map(|(n, i)| c_running(c, (n, i), start - 4, true, 0, json!({})))
        .collect();
    report(
        c,
        pod,
        node,
        pod_status(c, "Running", start, ip, containers),
    )
    .await
}

/// Play the kubelet of a pod whose container `crashing` is in CrashLoopBackOff after
/// `restarts` restarts, its last run ended with `exit` (`reason`) `last` seconds before
/// capture; its other containers run.
#[allow(clippy::too_many_arguments)]
pub async fn crash_loop(
    c: &Ctx,
    pod: &Value,
    node: &str,
    ip: &str,
    start: i64,
    crashing: &str,
    (exit, reason, restarts): (i64, &str, i64),
    last: i64,
) -> Value {
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_owned();
    let containers = containers_of(pod)
        .iter()
        .map(|(n, i)| {
            if n == crashing {
                c_waiting(
                    (n, i),
                    (
                        "CrashLoopBackOff",
                        &format!(
                            "back-off 5m0s restarting failed container={n} pod={}_{}({uid})",
                            name(pod),
                            pod["metadata"]["namespace"].as_str().unwrap_or("")
                        ),
                    ),
                    restarts,
                    terminated(c, exit, reason, (last + 20, last)),
                )
            } else {
                c_running(c, (n, i), start - 4, true, 0, json!({}))
            }
        })
        .collect();
    report(
        c,
        pod,
        node,
        pod_status(c, "Running", start, ip, containers),
    )
    .await
}

/// The BackOff event of a crash-looping container, as the kubelet repeats it.
pub async fn backoff_event(c: &Ctx, pod: &Value, count: i64, first: i64) {
    kubelet_event(
        c,
        pod,
        "Warning",
        "BackOff",
        "Back-off restarting failed container",
        count,
        (first, 25),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Workloads.

/// A container with requests, a memory limit and (if `port`) one named TCP port.
pub fn container(name: &str, image: &str, port: Option<i64>) -> Value {
    let mut ct = json!({"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"});
    if let Some(p) = port {
        ct["ports"] = json!([{"name": "http", "containerPort": p, "protocol": "TCP"}]);
    }
    ct
}

/// A Deployment/StatefulSet/DaemonSet `name` (label `app: name`) running `containers`; `pod`
/// is merged into the pod spec.
pub fn workload(kind: &str, name: &str, replicas: i64, containers: Value, pod: Value) -> Value {
    let mut pod_spec = json!({"containers": containers});
    if let (Value::Object(p), Value::Object(extra)) = (&mut pod_spec, pod) {
        p.extend(extra);
    }
    let mut spec = json!({"replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}});
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    json!({"apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "labels": {"app": name},
            "annotations": {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ""}},
        "spec": spec})
}

/// A ClusterIP Service for `app` on `port` → `target`.
pub fn service(name: &str, app: &str, port: i64, target: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"type": "ClusterIP", "selector": {"app": app},
                 "ports": [{"name": "http", "port": port, "targetPort": target, "protocol": "TCP"}]}})
}

/// The ReplicaSet of `deploy` at `revision`, once the controller made it.
pub async fn replicaset(k: &Kube, deploy: &str, revision: &str) -> Value {
    k.wait(&format!("revision {revision} of {deploy}"), 60, || async {
        let list = k
            .api("apps/v1", "ReplicaSet")
            .list(&kube::api::ListParams::default().labels(&format!("app={deploy}")))
            .await
            .ok()?;
        list.items
            .into_iter()
            .map(|r| serde_json::to_value(r).unwrap())
            .find(|r| r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == revision)
    })
    .await
}

/// The pods of `deploy`'s revision `revision`, once there are `n`.
pub async fn revision_pods(k: &Kube, deploy: &str, revision: &str, n: usize) -> Vec<Value> {
    let rs = replicaset(k, deploy, revision).await;
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    k.pods(&format!("app={deploy},pod-template-hash={hash}"), n)
        .await
}

/// Wait until `deploy` reports `n` available replicas.
pub async fn available(k: &Kube, deploy: &str, n: i64) {
    k.wait(&format!("{deploy} available"), 60, || async {
        let d = k.get("apps/v1", "Deployment", deploy).await;
        (d["status"]["availableReplicas"].as_i64() == Some(n)).then_some(())
    })
    .await;
}

/// The StatefulSet pod `name` once the controller has created it.
pub async fn sts_pod(k: &Kube, pod: &str) -> Value {
    k.wait(&format!("pod {pod}"), 60, || async {
        let p = k.api("v1", "Pod").get(pod).await.ok()?;
        Some(serde_json::to_value(p).unwrap())
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Alerts as Alertmanager sends them.

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// kube-state-metrics' scrape labels as kube-prometheus-stack's ServiceMonitor sets them.
pub fn ksm() -> Vec<(&'static str, String)> {
    vec![
        ("job", "kube-state-metrics".into()),
        ("instance", "10.244.0.17:8080".into()),
        ("service", "kube-prometheus-stack-kube-state-metrics".into()),
        ("endpoint", "http".into()),
    ]
}

/// One firing alert in an Alertmanager webhook body. `starts` seconds before capture.
pub fn am(
    c: &Ctx,
    alertname: &str,
    severity: &str,
    labels: Vec<(&str, String)>,
    annotations: &[(&str, String)],
    expr: &str,
    starts: i64,
) -> Value {
    let mut l = serde_json::Map::new();
    l.insert("alertname".into(), json!(alertname));
    for (k, v) in labels {
        l.insert(k.into(), json!(v));
    }
    l.insert("severity".into(), json!(severity));
    let mut a = serde_json::Map::new();
    for (k, v) in annotations {
        a.insert((*k).into(), json!(v));
    }
    if !a.contains_key("runbook_url")
        && (alertname.starts_with("Kube") || alertname == "CPUThrottlingHigh")
    {
        a.insert(
            "runbook_url".into(),
            json!(format!(
                "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/{}",
                alertname.to_lowercase()
            )),
        );
    }
    let group_labels = json!({"alertname": alertname, "namespace": l.get("namespace").cloned().unwrap_or(json!(""))});
    json!({
        "receiver": "kubemedic", "status": "firing",
        "alerts": [{
            "status": "firing", "labels": l, "annotations": a,
            "startsAt": c.at(starts).to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": format!("http://prometheus-kube-prometheus-prometheus.monitoring:9090/graph?g0.expr={}&g0.tab=1", encode(expr)),
            "fingerprint": hex(16),
        }],
        "groupLabels": group_labels, "commonLabels": l, "commonAnnotations": a,
        "externalURL": "http://alertmanager-kube-prometheus-alertmanager.monitoring:9093",
        "version": "4", "groupKey": format!("{{}}/{{severity=~\"critical|warning|info\"}}:{{alertname=\"{alertname}\"}}"),
        "truncatedAlerts": 0
    })
}

/// KubePodCrashLooping as kube-prometheus-stack sends it (the rule keeps every label).
pub fn crashloop_alert(c: &Ctx, pod: &Value, container: &str, starts: i64) -> Value {
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut labels = vec![
        ("container", container.to_owned()),
        ("namespace", ns.clone()),
        ("pod", name(pod)),
        ("reason", "CrashLoopBackOff".to_owned()),
        (
            "uid",
            pod["metadata"]["uid"].as_str().unwrap_or("").to_owned(),
        ),
    ];
    labels.extend(ksm());
    am(
        c,
        "KubePodCrashLooping",
        "warning",
        labels,
        &[
            (
                "description",
                format!(
                    "Pod {ns}/{} ({container}) is in waiting state (reason: \"CrashLoopBackOff\").",
                    name(pod)
                ),
            ),
            ("summary", "Pod is crash looping.".into()),
        ],
        "max_over_time(kube_pod_container_status_waiting_reason{job=\"kube-state-metrics\",namespace=~\".*\",reason=\"CrashLoopBackOff\"}[5m]) >= 1",
        starts,
    )
}

/// KubePodNotReady (the rule aggregates by namespace and pod).
pub fn not_ready_alert(c: &Ctx, pod: &Value, starts: i64) -> Value {
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    am(
        c,
        "KubePodNotReady",
        "warning",
        vec![("namespace", ns.clone()), ("pod", name(pod))],
        &[
            (
                "description",
                format!(
                    "Pod {ns}/{} has been in a non-ready state for longer than 15 minutes.",
                    name(pod)
                ),
            ),
            (
                "summary",
                "Pod has been in a non-ready state for more than 15 minutes.".into(),
            ),
        ],
        "sum by (namespace, pod, cluster) (max by (namespace, pod, cluster) (kube_pod_status_phase{job=\"kube-state-metrics\",namespace=~\".*\",phase=~\"Pending|Unknown|Failed\"}) * on (namespace, pod, cluster) group_left (owner_kind) topk by (namespace, pod, cluster) (1, max by (namespace, pod, owner_kind, cluster) (kube_pod_owner{owner_kind!=\"Job\"}))) > 0",
        starts,
    )
}

/// KubeDeploymentReplicasMismatch / KubeStatefulSetReplicasMismatch.
pub fn replicas_mismatch_alert(c: &Ctx, kind: &str, workload: &str, starts: i64) -> Value {
    let ns = c.k.ns.clone();
    let (alertname, label, expr) = if kind == "StatefulSet" {
        (
            "KubeStatefulSetReplicasMismatch",
            "statefulset",
            "(kube_statefulset_status_replicas_ready{job=\"kube-state-metrics\",namespace=~\".*\"} != kube_statefulset_status_replicas{job=\"kube-state-metrics\",namespace=~\".*\"}) and (changes(kube_statefulset_status_replicas_updated{job=\"kube-state-metrics\",namespace=~\".*\"}[10m]) == 0)",
        )
    } else {
        (
            "KubeDeploymentReplicasMismatch",
            "deployment",
            "(kube_deployment_spec_replicas{job=\"kube-state-metrics\",namespace=~\".*\"} > kube_deployment_status_replicas_available{job=\"kube-state-metrics\",namespace=~\".*\"}) and (changes(kube_deployment_status_replicas_updated{job=\"kube-state-metrics\",namespace=~\".*\"}[10m]) == 0)",
        )
    };
    let mut labels = vec![(label, workload.to_owned()), ("namespace", ns.clone())];
    labels.extend(ksm());
    am(
        c,
        alertname,
        "warning",
        labels,
        &[
            (
                "description",
                format!(
                    "{kind} {ns}/{workload} has not matched the expected number of replicas for longer than 15 minutes."
                ),
            ),
            (
                "summary",
                format!("{kind} has not matched the expected number of replicas."),
            ),
        ],
        expr,
        starts,
    )
}

/// KubeNodePressure (kubernetes-mixin) for `condition` on `node`.
pub fn node_pressure_alert(c: &Ctx, node: &str, condition: &str, starts: i64) -> Value {
    let mut labels = vec![
        ("node", node.to_owned()),
        ("condition", condition.to_owned()),
        ("status", "true".to_owned()),
        ("namespace", "monitoring".to_owned()),
    ];
    labels.extend(ksm());
    am(
        c,
        "KubeNodePressure",
        "info",
        labels,
        &[
            (
                "description",
                format!(
                    "{node} has active Condition {condition}. This is caused by resource usage exceeding eviction thresholds."
                ),
            ),
            ("summary", "Node has as active Condition.".into()),
        ],
        "kube_node_status_condition{condition=~\"(MemoryPressure|DiskPressure|PIDPressure)\",job=\"kube-state-metrics\",status=\"true\"} == 1 and on (cluster, node) kube_node_spec_unschedulable{job=\"kube-state-metrics\"} == 0",
        starts,
    )
}

// ---------------------------------------------------------------------------------------------
// The incidents. Each expected outcome is in tests/unseen/<name>/expected.json, written first.

type Fut<'a> = Pin<Box<dyn Future<Output = Staged> + Send + 'a>>;

fn staged(c: &Ctx, alert: Value) -> Staged {
    Staged {
        alert,
        clock_offset: c.offset,
    }
}

const COREFILE: &str = ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n";

/// CoreDNS crash-loops on its loop plugin (the nodes' resolv.conf now points at a local stub
/// resolver); an app crashes because every lookup to the cluster DNS Service is refused.
fn coredns_loop_crash(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let sys = c.ns("kube-system");
        create_as(
            &sys,
            "kubeadm",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns"},
            "data": {"Corefile": COREFILE}}),
        )
        .await;
        let dns_svc = create_as(&sys, "kubeadm", json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
                    "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
                "spec": {"clusterIP": "10.0.0.10", "selector": {"k8s-app": "kube-dns"},
                    "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                              {"name": "metrics", "port": 9153, "protocol": "TCP"}]}}))
            .await;
        let dns_ip = dns_svc["spec"]["clusterIP"].as_str().unwrap().to_owned();
        let coredns_image = "k8s.gcr.io/coredns:1.7.0";
        create_as(&sys, "kubeadm", json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "coredns", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                    "spec": {"priorityClassName": "system-cluster-critical", "dnsPolicy": "Default",
                        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}],
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "volumes": [{"name": "config-volume", "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}],
                        "containers": [{"name": "coredns", "image": coredns_image, "imagePullPolicy": "IfNotPresent",
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "resources": {"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
                            "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}],
                            "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"}, {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                      {"containerPort": 9153, "name": "metrics", "protocol": "TCP"}],
                            "livenessProbe": {"httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 60, "timeoutSeconds": 5, "failureThreshold": 5},
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"}}}]}}}}))
            .await;
        let dns_pods = sys.pods("k8s-app=kube-dns", 2).await;
        for (i, p) in dns_pods.iter().enumerate() {
            let p = crash_loop(
                c,
                p,
                &nodes[i],
                &c.ip(2 + i as u8),
                2400,
                "coredns",
                (1, "Error", 11),
                95,
            )
            .await;
            backoff_event(c, &p, 52, 1750).await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Pulled",
                &format!("Container image \"{coredns_image}\" already present on machine"),
                12,
                (2390, 115),
            )
            .await;
            let text = format!(
                ".:53\n[INFO] plugin/reload: Running configuration MD5 = db32ca3650231d74073ff4cf814959a7\nCoreDNS-1.7.0\nlinux/amd64, go1.14.4, f59c03d\n[FATAL] plugin/loop: Loop (127.0.0.1:{} -> :53) detected for zone \".\", see https://coredns.io/plugins/loop#troubleshooting. Query: \"HINFO {}.{}.\"\n",
                49_000 + i * 1237,
                4_547_991_504_243_258_144u64 + i as u64,
                3_688_648_895_315_093_531u64
            );
            c.raw_logs(&p, "coredns", true, text);
        }
        // The app.
        let app = "notification-worker";
        let image = "shop/notification-worker:2.7.1";
        create_as(
            &c.k,
            "helm",
            workload(
                "Deployment",
                app,
                2,
                json!([container(app, image, Some(8080))]),
                json!({}),
            ),
        )
        .await;
        let pods = c.k.pods(&format!("app={app}"), 2).await;
        let mut crashed = Vec::new();
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(17 + i as u8);
            let p = crash_loop(c, p, &nodes[i + 1], &ip, 2300, app, (1, "Error", 9), 70).await;
            backoff_event(c, &p, 41, 1700).await;
            let line = format!(
                "{{\"level\":\"fatal\",\"ts\":\"{}\",\"caller\":\"smtp/relay.go:88\",\"msg\":\"cannot connect to SMTP relay\",\"error\":\"dial tcp: lookup smtp-relay.mail.svc.cluster.local on {dns_ip}:53: read udp {ip}:{}->{dns_ip}:53: read: connection refused\"}}",
                c.lt(90),
                41_862 + i * 311
            );
            c.raw_logs(
                &p,
                app,
                true,
                format!(
                    "{{\"level\":\"info\",\"ts\":\"{}\",\"msg\":\"starting notification-worker\",\"version\":\"2.7.1\"}}\n{line}\n",
                    c.lt(91)
                ),
            );
            crashed.push(p);
        }
        staged(c, crashloop_alert(c, &crashed[0], app, 1500))
    })
}

/// An init container waits for RabbitMQ, which crash-loops on its own.
fn init_container_dependency_down(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let rmq_image = "rabbitmq:3.11.9-management";
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rabbitmq-erlang-cookie"},
            "type": "Opaque", "stringData": {"cookie": "not-a-real-cookie"}}))
            .await;
        create_as(
            k,
            "helm",
            service("rabbitmq", "rabbitmq", 5672, json!(5672)),
        )
        .await;
        let mut sts = workload(
            "StatefulSet",
            "rabbitmq",
            1,
            json!([container("rabbitmq", rmq_image, Some(5672))]),
            json!({"volumes": [{"name": "erlang-cookie", "secret": {"secretName": "rabbitmq-erlang-cookie", "defaultMode": 420,
                "items": [{"key": "cookie", "path": ".erlang.cookie"}]}}]}),
        );
        sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "erlang-cookie", "mountPath": "/var/lib/rabbitmq/.erlang.cookie", "subPath": ".erlang.cookie"}]);
        create_as(k, "helm", sts).await;
        let rmq = sts_pod(k, "rabbitmq-0").await;
        let rmq = crash_loop(
            c,
            &rmq,
            &nodes[0],
            &c.ip(20),
            2500,
            "rabbitmq",
            (1, "Error", 10),
            110,
        )
        .await;
        backoff_event(c, &rmq, 44, 2100).await;
        c.raw_logs(
            &rmq,
            "rabbitmq",
            true,
            format!(
                "{} [notice] <0.44.0> Application syslog exited with reason: stopped\nCookie file /var/lib/rabbitmq/.erlang.cookie must be accessible by owner only\n",
                c.at(130).format("%Y-%m-%d %H:%M:%S%.6f+00:00")
            ),
        );
        // The worker and its init container.
        let app = "invoice-worker";
        let image = "shop/invoice-worker:4.2.0";
        let wait_image = "shop/wait-for:1.3";
        create_as(k, "helm", workload(
            "Deployment",
            app,
            2,
            json!([container(app, image, Some(8080))]),
            json!({"initContainers": [{"name": "wait-for-rabbitmq", "image": wait_image,
                "args": ["rabbitmq:5672", "--timeout=60s"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}}]}),
        ))
        .await;
        let pods = k.pods(&format!("app={app}"), 2).await;
        let mut out = Vec::new();
        for (i, p) in pods.iter().enumerate() {
            let uid = p["metadata"]["uid"].as_str().unwrap_or("").to_owned();
            let status = json!({"phase": "Pending", "hostIP": "127.0.0.1", "podIP": c.ip(30 + i as u8),
                "podIPs": [{"ip": c.ip(30 + i as u8)}], "startTime": c.t(2000), "qosClass": "Burstable",
                "conditions": [
                    {"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized", "message": "containers with incomplete status: [wait-for-rabbitmq]", "lastProbeTime": null, "lastTransitionTime": c.t(2000)},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": format!("containers with unready status: [{app}]"), "lastProbeTime": null, "lastTransitionTime": c.t(2000)},
                    {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": format!("containers with unready status: [{app}]"), "lastProbeTime": null, "lastTransitionTime": c.t(2000)},
                    {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(2001)}],
                "initContainerStatuses": [c_waiting(("wait-for-rabbitmq", wait_image),
                    ("CrashLoopBackOff", &format!("back-off 5m0s restarting failed container=wait-for-rabbitmq pod={}_{}({uid})", name(p), k.ns)),
                    8, terminated(c, 1, "Error", (170, 108)))],
                "containerStatuses": [c_waiting((app, image), ("PodInitializing", ""), 0, json!({}))]});
            let p = report(c, p, &nodes[1 + i], status).await;
            backoff_event(c, &p, 31, 1900).await;
            c.logs_of(
                &p,
                "wait-for-rabbitmq",
                true,
                &[
                    (170, "waiting for rabbitmq:5672 (timeout 60s)"),
                    (
                        108,
                        "timeout: rabbitmq:5672 not reachable after 60s: dial tcp rabbitmq:5672: connect: connection refused",
                    ),
                ],
            );
            out.push(p);
        }
        staged(c, not_ready_alert(c, &out[0], 900))
    })
}

/// An egress NetworkPolicy applied to orders-api leaves out its inventory backend.
fn networkpolicy_egress_blocks_backend(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let inv_svc = create_as(
            k,
            "helm",
            service("inventory", "inventory", 8080, json!("http")),
        )
        .await;
        let inv_ip = inv_svc["spec"]["clusterIP"].as_str().unwrap().to_owned();
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                "inventory",
                2,
                json!([container("inventory", "shop/inventory:3.9.4", Some(8080))]),
                json!({}),
            ),
        )
        .await;
        for (i, p) in k.pods("app=inventory", 2).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 1800).await;
        }
        let app = "orders-api";
        let mut ct = container(app, "shop/orders-api:5.12.0", Some(8080));
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10, "failureThreshold": 3});
        ct["env"] = json!([{"name": "INVENTORY_URL", "value": "http://inventory.orders.svc.cluster.local:8080"},
                           {"name": "DATABASE_HOST", "value": "orders-db.orders.svc.cluster.local"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(20 + i as u8), 1790).await;
        }
        available(k, app, 3).await;
        // Twenty seconds later someone tightens orders-api's egress.
        tokio::time::sleep(Duration::from_secs(20)).await;
        create_as(k, "kubectl-client-side-apply", json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "orders-api-egress", "labels": {"app": app},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"name\":\"orders-api-egress\",\"namespace\":\"orders\"}}"}},
            "spec": {"podSelector": {"matchLabels": {"app": app}}, "policyTypes": ["Egress"],
                "egress": [
                    {"to": [{"namespaceSelector": {"matchLabels": {"name": "kube-system"}}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                     "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                    {"to": [{"podSelector": {"matchLabels": {"app": "orders-db"}}}], "ports": [{"protocol": "TCP", "port": 5432}]}]}}))
            .await;
        let mut out = Vec::new();
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(20 + i as u8);
            let mut st = pod_status(
                c,
                "Running",
                1790,
                &ip,
                vec![c_running(
                    c,
                    (app, "shop/orders-api:5.12.0"),
                    1786,
                    false,
                    0,
                    json!({}),
                )],
            );
            st["conditions"][1]["lastTransitionTime"] = json!(c.t(1740));
            st["conditions"][2]["lastTransitionTime"] = json!(c.t(1740));
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                172,
                (1755, 8),
            )
            .await;
            let err = format!(
                "inventory check failed: Get \"http://inventory.orders.svc.cluster.local:8080/v1/stock?sku=A-1042\": dial tcp {inv_ip}:8080: i/o timeout"
            );
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (1785, "INFO  listening on :8080"),
                    (1760, "INFO  GET /ready 200 (3ms)"),
                    (1752, &format!("ERROR {err}")),
                    (1750, "WARN  GET /ready 503 (inventory unreachable)"),
                    (40, &format!("ERROR {err}")),
                    (30, "WARN  GET /ready 503 (inventory unreachable)"),
                    (12, &format!("ERROR {err}")),
                ],
            );
            out.push(p);
        }
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 840))
    })
}

/// A liveness probe tuned for a small index kills search-api while it loads a grown one.
fn liveness_probe_kills_slow_app(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let app = "search-api";
        let image = "shop/search-api:7.4.2";
        let mut ct = container(app, image, Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}});
        ct["livenessProbe"] = json!({"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 20, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
        ct["env"] = json!([{"name": "JAVA_TOOL_OPTIONS", "value": "-XX:MaxRAMPercentage=75"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        let mut out = Vec::new();
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(11 + i as u8);
            let restarts = 7 - (i as i64 % 2);
            let last = terminated(c, 137, "Error", (250, 190));
            let p = if i == 1 {
                // Between two kills: running again, not ready yet, loading its shards.
                let st = pod_status(
                    c,
                    "Running",
                    2600,
                    &ip,
                    vec![c_running(c, (app, image), 25, false, restarts, last)],
                );
                report(c, p, &nodes[i], st).await
            } else {
                crash_loop(
                    c,
                    p,
                    &nodes[i],
                    &ip,
                    2600,
                    app,
                    (137, "Error", restarts),
                    60,
                )
                .await
            };
            kubelet_event(c, &p, "Warning", "Unhealthy",
                &format!("Liveness probe failed: Get \"http://{ip}:8080/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
                3 * restarts, (2540, 70)).await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Killing",
                &format!("Container {app} failed liveness probe, will be restarted"),
                restarts,
                (2520, 65),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                5 * restarts,
                (2580, 12),
            )
            .await;
            if i != 1 {
                backoff_event(c, &p, 9, 1500).await;
            }
            let boot: Vec<(i64, String)> = vec![
                (260, "INFO  [main] c.s.SearchApplication : Starting SearchApplication v7.4.2 using Java 17.0.9 with PID 1".into()),
                (252, "INFO  [main] c.s.index.IndexManager : Opening index /data/index (32 shards, 68.4 GB)".into()),
                (247, "INFO  [main] c.s.index.IndexManager : Loading shard 1/32 (2.1 GB)".into()),
                (238, "INFO  [main] o.s.b.w.e.tomcat.TomcatWebServer : Tomcat started on port(s): 8080 (http)".into()),
                (225, "INFO  [main] c.s.index.IndexManager : Loading shard 4/32 (2.2 GB)".into()),
                (205, "INFO  [main] c.s.index.IndexManager : Loading shard 7/32 (2.1 GB)".into()),
                (192, "INFO  [main] c.s.index.IndexManager : Loading shard 9/32 (2.0 GB)".into()),
            ];
            let lines: Vec<(i64, &str)> = boot.iter().map(|(t, l)| (*t, l.as_str())).collect();
            c.logs_of(&p, app, true, &lines);
            if i == 1 {
                c.logs_of(&p, app, false, &[
                    (24, "INFO  [main] c.s.SearchApplication : Starting SearchApplication v7.4.2 using Java 17.0.9 with PID 1"),
                    (16, "INFO  [main] c.s.index.IndexManager : Opening index /data/index (32 shards, 68.4 GB)"),
                    (11, "INFO  [main] c.s.index.IndexManager : Loading shard 1/32 (2.1 GB)"),
                ]);
            }
            out.push(p);
        }
        staged(c, crashloop_alert(c, &out[0], app, 1200))
    })
}

/// The catalog Service forwards to 8080; catalog listens on 8000. web cannot warm up.
fn service_targetport_mismatch(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let svc = create_as(k, "helm", service("catalog", "catalog", 80, json!(8080))).await;
        let svc_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_owned();
        let mut ct = container("catalog", "shop/catalog:6.1.0", Some(8000));
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", "catalog", 2, json!([ct]), json!({})),
        )
        .await;
        for (i, p) in k.pods("app=catalog", 2).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 2400).await;
        }
        k.wait("catalog endpoints", 30, || async {
            let e = k.get("v1", "Endpoints", "catalog").await;
            (e["subsets"][0]["addresses"].as_array().map(Vec::len) == Some(2)).then_some(())
        })
        .await;
        let app = "web";
        let image = "shop/web:12.3.1";
        let mut ct = container(app, image, Some(3000));
        ct["env"] = json!([{"name": "CATALOG_URL", "value": "http://catalog"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let mut out = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            let ip = c.ip(20 + i as u8);
            let p = crash_loop(c, p, &nodes[i], &ip, 1500, app, (1, "Error", 6), 80).await;
            backoff_event(c, &p, 27, 1380).await;
            c.logs_of(
                &p,
                app,
                true,
                &[
                    (103, "info: web 12.3.1 starting (node v20.9.0)"),
                    (102, "info: warming product cache from http://catalog"),
                    (
                        101,
                        &format!(
                            "error: GET http://catalog/v1/products?page=1 failed: connect ECONNREFUSED {svc_ip}:80"
                        ),
                    ),
                    (
                        100,
                        &format!(
                            "fatal: product cache warmup failed after 3 attempts: connect ECONNREFUSED {svc_ip}:80"
                        ),
                    ),
                ],
            );
            out.push(p);
        }
        staged(c, crashloop_alert(c, &out[0], app, 600))
    })
}

/// A standard default StorageClass and gp3, as an EKS cluster with the EBS CSI driver has.
async fn storage_classes(k: &Kube) {
    replace_cluster_object(k, "kubectl-client-side-apply", json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true, "parameters": {"type": "gp2"}}))
        .await;
    replace_cluster_object(k, "kubectl-client-side-apply", json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "gp3"},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
        "allowVolumeExpansion": true, "parameters": {"type": "gp3", "fsType": "ext4"}}))
        .await;
}

/// A claim asks for a StorageClass that does not exist.
fn pvc_storageclass_missing(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        c.nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        storage_classes(k).await;
        let claim = create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "uploads-data", "labels": {"app": "uploader"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
                     "resources": {"requests": {"storage": "50Gi"}}}}),
        )
        .await;
        let mut ct = container("uploader", "shop/uploader:1.6.3", Some(8080));
        ct["volumeMounts"] = json!([{"name": "data", "mountPath": "/var/lib/uploads"}]);
        create_as(k, "helm", workload(
            "Deployment",
            "uploader",
            1,
            json!([ct]),
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "uploads-data"}}]}),
        ))
        .await;
        let pod = k.pods("app=uploader", 1).await.remove(0);
        let msg = "0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims.";
        let mut st = json!({"phase": "Pending", "qosClass": "Burstable", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": msg, "lastProbeTime": null, "lastTransitionTime": c.t(1500)}]});
        st["conditions"][0]["lastTransitionTime"] = json!(c.t(1500));
        let pod = status_as(k, "kube-scheduler", "v1", "Pod", &name(&pod), st).await;
        event(
            c,
            &pod,
            ("default-scheduler", None),
            "Warning",
            "FailedScheduling",
            msg,
            26,
            (1500, 40),
        )
        .await;
        // The persistentvolume-controller reports the missing class itself.
        let _ = claim;
        k.wait("the ProvisioningFailed event", 60, || async {
            let list = k.api("v1", "Event").list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| serde_json::to_value(e).unwrap()["reason"] == "ProvisioningFailed")
                .then_some(())
        })
        .await;
        staged(c, not_ready_alert(c, &pod, 600))
    })
}

/// kafka-0's claim cannot be provisioned: the StorageClass's KMS key is pending deletion.
fn statefulset_volume_provisioning_failed(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        storage_classes(k).await;
        let key = "arn:aws:kms:eu-west-1:111122223333:key/8f1e2d3c-4b5a-4c6d-9e8f-0a1b2c3d4e5f";
        replace_cluster_object(k, "kubectl-client-side-apply", json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "gp3-encrypted"},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain",
            "allowVolumeExpansion": true, "parameters": {"type": "gp3", "encrypted": "true", "kmsKeyId": key}}))
            .await;
        let mut headless = service("kafka-headless", "kafka", 9092, json!("http"));
        headless["spec"]["clusterIP"] = json!("None");
        headless["spec"]["publishNotReadyAddresses"] = json!(true);
        create_as(k, "helm", headless).await;
        create_as(k, "helm", service("kafka", "kafka", 9092, json!("http"))).await;
        let mut ct = container("kafka", "bitnami/kafka:3.5.1-debian-11-r44", Some(9092));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}});
        ct["volumeMounts"] = json!([{"name": "data", "mountPath": "/bitnami/kafka"}]);
        let mut sts = workload("StatefulSet", "kafka", 3, json!([ct]), json!({}));
        sts["spec"]["serviceName"] = json!("kafka-headless");
        sts["spec"]["podManagementPolicy"] = json!("OrderedReady");
        sts["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3-encrypted", "resources": {"requests": {"storage": "100Gi"}}}}]);
        create_as(k, "helm", sts).await;
        let pod = sts_pod(k, "kafka-0").await;
        // The scheduler picked a node for the WaitForFirstConsumer claim...
        k.wait("claim data-kafka-0", 30, || async {
            k.api("v1", "PersistentVolumeClaim")
                .get("data-kafka-0")
                .await
                .ok()
        })
        .await;
        let claim = patch_as(
            k,
            "kube-scheduler",
            "v1",
            "PersistentVolumeClaim",
            "data-kafka-0",
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": nodes[0]}}}),
        )
        .await;
        // ... and the external provisioner cannot create the volume.
        let provisioner = (
            "ebs.csi.aws.com_ebs-csi-controller-6d8f9c7b5-xk2lp_3f0c9a1e-6b2d-4f7a-8c1e-5d9b0a2f4e61",
            None,
        );
        let claim_uid = claim["metadata"]["uid"].as_str().unwrap_or("").to_owned();
        event(
            c,
            &claim,
            provisioner,
            "Normal",
            "Provisioning",
            "External provisioner is provisioning volume for claim \"streaming/data-kafka-0\"",
            14,
            (1620, 45),
        )
        .await;
        event(c, &claim, provisioner, "Warning", "ProvisioningFailed",
            &format!("failed to provision volume with StorageClass \"gp3-encrypted\": rpc error: code = Internal desc = Could not create volume \"pvc-{claim_uid}\": could not create volume in EC2: operation error EC2: CreateVolume, https response error StatusCode: 400, RequestID: 6f3c2a91-0d4e-4b7a-9c51-2e8f7d6a3b10, api error InvalidKMSKey.InvalidState: {key} is pending deletion."),
            14, (1610, 40)).await;
        let msg = "running PreBind plugin \"VolumeBinding\": binding volumes: timed out waiting for the condition";
        let pod = status_as(k, "kube-scheduler", "v1", "Pod", &name(&pod), json!({"phase": "Pending", "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError", "message": msg,
                    "lastProbeTime": null, "lastTransitionTime": c.t(1020)}]}))
            .await;
        event(
            c,
            &pod,
            ("default-scheduler", None),
            "Warning",
            "FailedScheduling",
            msg,
            3,
            (1020, 30),
        )
        .await;
        staged(c, replicas_mismatch_alert(c, "StatefulSet", "kafka", 600))
    })
}

/// A PV bound to `claim` (ebs.csi.aws.com) in `zone`, and the claim.
async fn bound_volume(c: &Ctx, claim: &str, app: &str, size: &str, zone: &str) -> String {
    let k = &c.k;
    let pv = format!("pvc-{}", uuid::Uuid::new_v4());
    replace_cluster_object(k, "csi-provisioner", json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
            "finalizers": ["kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"]},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "gp3", "volumeMode": "Filesystem",
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": k.ns, "name": claim},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": format!("vol-0{}", hex(16)), "fsType": "ext4",
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1731912345678-8081-ebs.csi.aws.com"}},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}}}))
        .await;
    let manager = if claim.starts_with("data-") {
        "kube-controller-manager"
    } else {
        "helm"
    };
    create_as(k, manager, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "labels": {"app": app},
            "annotations": {"volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com", "volume.kubernetes.io/selected-node": c.node_name(1)}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": pv,
                 "resources": {"requests": {"storage": size}}}}))
        .await;
    k.wait(&format!("claim {claim} bound"), 60, || async {
        let p = k.get("v1", "PersistentVolumeClaim", claim).await;
        (p["status"]["phase"] == "Bound").then_some(())
    })
    .await;
    pv
}

/// grafana rolls with maxUnavailable 0 while its ReadWriteOnce volume is attached to the old
/// pod's node: the new pod cannot attach it.
fn multi_attach_rwo_rollout(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, &["eu-west-1a"]).await;
        let k = &c.k;
        storage_classes(k).await;
        let pv = bound_volume(c, "grafana-storage", "grafana", "10Gi", "eu-west-1a").await;
        let mut ct = container("grafana", "grafana/grafana:9.5.2", Some(3000));
        ct["volumeMounts"] = json!([{"name": "storage", "mountPath": "/var/lib/grafana"}]);
        ct["readinessProbe"] = json!({"httpGet": {"path": "/api/health", "port": 3000}});
        let mut d = workload(
            "Deployment",
            "grafana",
            1,
            json!([ct]),
            json!({"securityContext": {"fsGroup": 472}, "volumes": [{"name": "storage", "persistentVolumeClaim": {"claimName": "grafana-storage"}}]}),
        );
        d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
        create_as(k, "helm", d).await;
        let old = k.pods("app=grafana", 1).await.remove(0);
        let old = run(c, &old, &nodes[0], &c.ip(10), 1370).await;
        available(k, "grafana", 1).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        patch_as(k, "helm", "apps/v1", "Deployment", "grafana", json!({"spec": {"template": {"spec": {"containers": [{"name": "grafana", "image": "grafana/grafana:9.5.3"}]}}}}))
            .await;
        let new = revision_pods(k, "grafana", "2", 1).await.remove(0);
        let mut st = pod_status(
            c,
            "Pending",
            1320,
            "",
            vec![c_waiting(
                ("grafana", "grafana/grafana:9.5.3"),
                ("ContainerCreating", ""),
                0,
                json!({}),
            )],
        );
        st["conditions"][0]["status"] = json!("True");
        let new = report(c, &new, &nodes[1], st).await;
        event(
            c,
            &new,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&new),
                nodes[1]
            ),
            1,
            (1321, 1321),
        )
        .await;
        event(
            c,
            &new,
            ("attachdetach-controller", None),
            "Warning",
            "FailedAttachVolume",
            &format!(
                "Multi-Attach error for volume \"{pv}\" Volume is already used by pod(s) {}",
                name(&old)
            ),
            1,
            (1318, 1318),
        )
        .await;
        let token = k.get("v1", "ServiceAccount", "default").await["secrets"][0]["name"]
            .as_str()
            .unwrap_or("default-token")
            .to_owned();
        kubelet_event(c, &new, "Warning", "FailedMount",
            &format!("Unable to attach or mount volumes: unmounted volumes=[storage], unattached volumes=[storage {token}]: timed out waiting for the condition"),
            10, (1200, 60)).await;
        staged(c, not_ready_alert(c, &new, 420))
    })
}

/// One node's root filesystem went read-only (an EXT4 error); it is still Ready, so pods keep
/// landing there and none of them can start.
fn node_readonly_rootfs(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let bad = nodes[2].clone();
        c.node_conditions(
            &bad,
            &[
                (
                    "ReadonlyFilesystem",
                    "True",
                    "FilesystemIsReadOnly",
                    "Kernel: EXT4-fs (nvme0n1p1): Remounting filesystem read-only",
                    1000,
                ),
                (
                    "KernelDeadlock",
                    "False",
                    "KernelHasNoDeadlock",
                    "kernel has no deadlock",
                    3 * 86400,
                ),
            ],
        )
        .await;
        for n in &nodes[..2] {
            c.node_conditions(
                n,
                &[
                    (
                        "ReadonlyFilesystem",
                        "False",
                        "FilesystemIsNotReadOnly",
                        "Filesystem is not read-only",
                        3 * 86400,
                    ),
                    (
                        "KernelDeadlock",
                        "False",
                        "KernelHasNoDeadlock",
                        "kernel has no deadlock",
                        3 * 86400,
                    ),
                ],
            )
            .await;
        }
        let node = node_obj(k, &bad).await;
        event(
            c,
            &node,
            ("kernel-monitor", Some(bad.as_str())),
            "Warning",
            "FilesystemIsReadOnly",
            "Node condition ReadonlyFilesystem is now: True, reason: FilesystemIsReadOnly",
            1,
            (1000, 1000),
        )
        .await;
        event(c, &node, ("kernel-monitor", Some(bad.as_str())), "Warning", "Ext4Error",
            "EXT4-fs error (device nvme0n1p1): ext4_journal_check_start:83: comm kubelet: Detected aborted journal", 1, (1002, 1002)).await;
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                "cart",
                4,
                json!([container("cart", "shop/cart:8.2.0", Some(8080))]),
                json!({}),
            ),
        )
        .await;
        let carts = k.pods("app=cart", 4).await;
        for (i, p) in carts[..3].iter().enumerate() {
            run(c, p, &nodes[i % 2], &c.ip(10 + i as u8), 1010).await;
        }
        // The fourth replica was rescheduled onto the bad node and cannot get a sandbox.
        let mut st = pod_status(
            c,
            "Pending",
            960,
            "",
            vec![c_waiting(
                ("cart", "shop/cart:8.2.0"),
                ("ContainerCreating", ""),
                0,
                json!({}),
            )],
        );
        st["conditions"][0]["status"] = json!("True");
        let stuck = report(c, &carts[3], &bad, st).await;
        let sandbox = hex(64);
        kubelet_event(c, &stuck, "Warning", "FailedCreatePodSandBox",
            &format!("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create sandbox root directory \"/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/{sandbox}\": mkdir /var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/{sandbox}: read-only file system"),
            61, (950, 20)).await;
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                "price-feed",
                2,
                json!([container("price-feed", "shop/price-feed:2.0.7", Some(9000))]),
                json!({}),
            ),
        )
        .await;
        let feeds = k.pods("app=price-feed", 2).await;
        run(c, &feeds[0], &nodes[0], &c.ip(20), 1010).await;
        let st = pod_status(
            c,
            "Running",
            1010,
            &c.ip(21),
            vec![c_waiting(
                ("price-feed", "shop/price-feed:2.0.7"),
                (
                    "CreateContainerError",
                    "failed to create containerd container: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/5123: read-only file system",
                ),
                1,
                terminated(c, 137, "Error", (1005, 985)),
            )],
        );
        let feed = report(c, &feeds[1], &bad, st).await;
        kubelet_event(c, &feed, "Warning", "Failed",
            "Error: failed to create containerd container: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/5123: read-only file system",
            58, (975, 15)).await;
        staged(c, not_ready_alert(c, &stuck, 60))
    })
}

/// pdf-renderer leaks zombie chromium processes until its node is under PID pressure; a Go
/// service on the same node can no longer create threads.
fn node_pid_pressure(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let bad = nodes[1].clone();
        c.node_conditions(
            &bad,
            &[(
                "PIDPressure",
                "True",
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
                720,
            )],
        )
        .await;
        patch_as(k, "kube-controller-manager", 
            "v1",
            "Node",
            &bad,
            json!({"spec": {"taints": [{"key": "node.kubernetes.io/pid-pressure", "effect": "NoSchedule", "timeAdded": c.t(720)}]}}),
        )
        .await;
        let node = node_obj(k, &bad).await;
        event(
            c,
            &node,
            ("kubelet", Some(bad.as_str())),
            "Normal",
            "NodeHasInsufficientPID",
            &format!("Node {bad} status is now: NodeHasInsufficientPID"),
            1,
            (720, 720),
        )
        .await;
        event(
            c,
            &node,
            ("kubelet", Some(bad.as_str())),
            "Warning",
            "EvictionThresholdMet",
            "Attempting to reclaim pids",
            4,
            (715, 90),
        )
        .await;
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                "pdf-renderer",
                1,
                json!([container(
                    "pdf-renderer",
                    "shop/pdf-renderer:3.3.0",
                    Some(8080)
                )]),
                json!({}),
            ),
        )
        .await;
        let renderer = k.pods("app=pdf-renderer", 1).await.remove(0);
        let renderer = run(c, &renderer, &bad, &c.ip(10), 7000).await;
        c.logs_of(
            &renderer,
            "pdf-renderer",
            false,
            &[
                (6990, "INFO  pdf-renderer 3.3.0 listening on :8080 (pid 1: node /app/server.js)"),
                (3600, "INFO  rendered invoice-88121.pdf in 1.8s (chromium pid 48211)"),
                (1800, "WARN  18211 defunct chromium processes not reaped"),
                (900, "WARN  31822 defunct chromium processes not reaped"),
                (700, "ERROR spawn chromium failed: fork/exec /usr/bin/chromium: resource temporarily unavailable"),
                (300, "ERROR spawn chromium failed: fork/exec /usr/bin/chromium: resource temporarily unavailable"),
                (30, "WARN  32741 defunct chromium processes not reaped"),
            ],
        );
        let app = "invoice-api";
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                2,
                json!([container(app, "shop/invoice-api:1.19.4", Some(8080))]),
                json!({}),
            ),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 2).await;
        run(c, &pods[1], &nodes[0], &c.ip(21), 7000).await;
        let p = crash_loop(c, &pods[0], &bad, &c.ip(20), 7000, app, (2, "Error", 6), 50).await;
        backoff_event(c, &p, 24, 650).await;
        c.raw_logs(
            &p,
            app,
            true,
            "runtime: failed to create new OS thread (have 12 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n\ngoroutine 0 [idle]:\nruntime.throw({0x9c1f4e?, 0x0?})\n\t/usr/local/go/src/runtime/panic.go:1047 +0x5d fp=0xc000097e28 sp=0xc000097df8 pc=0x4380dd\nruntime.newosproc(0xc00005c000)\n\t/usr/local/go/src/runtime/os_linux.go:186 +0x1b6\n".into(),
        );
        staged(c, crashloop_alert(c, &p, app, 420))
    })
}

/// transcoder's pods write more than their ephemeral-storage limit to a scratch emptyDir and
/// are evicted, again and again.
fn ephemeral_storage_eviction(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let app = "transcoder";
        let image = "shop/transcoder:2.14.0";
        let mut ct = container(app, image, None);
        ct["resources"] = json!({"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"},
            "limits": {"memory": "2Gi", "ephemeral-storage": "2Gi"}});
        ct["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                2,
                json!([ct]),
                json!({"volumes": [{"name": "scratch", "emptyDir": {}}]}),
            ),
        )
        .await;
        let msg = "Container transcoder exceeded its local ephemeral storage limit \"2Gi\". ";
        let mut evicted = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for (n, when) in [(0u8, 5700i64), (1, 3000), (2, 720)] {
            let pods = k.pods(&format!("app={app}"), 2 + usize::from(n)).await;
            let victim = pods
                .iter()
                .find(|p| !seen.contains(&name(p)))
                .unwrap()
                .clone();
            seen.push(name(&victim));
            let start = 8100 - i64::from(n) * 5;
            let st = json!({"phase": "Failed", "reason": "Evicted", "message": msg, "hostIP": "127.0.0.1",
                "startTime": c.t(start), "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(start + 1)}],
                "containerStatuses": [{"name": app, "image": image, "imageID": image_id(image), "containerID": container_id(), "ready": false,
                    "restartCount": 0, "started": false, "state": {"terminated": {"exitCode": 137, "reason": "Error",
                        "startedAt": c.t(start - 4), "finishedAt": c.t(when - 30), "containerID": container_id()}}, "lastState": {}}]});
            let p = report(c, &victim, &nodes[usize::from(n)], st).await;
            kubelet_event(c, &p, "Warning", "Evicted", msg, 1, (when, when)).await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Killing",
                &format!("Stopping container {app}"),
                1,
                (when - 1, when - 1),
            )
            .await;
            evicted.push(p);
        }
        let pods = k.pods(&format!("app={app}"), 5).await;
        for (i, p) in pods.iter().filter(|p| !seen.contains(&name(p))).enumerate() {
            let i = i as u8;
            let start = 8000 - i64::from(i) * 5;
            let p = run(c, p, &nodes[usize::from(i) + 1], &c.ip(30 + i), start).await;
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (start - 5, "transcoder 2.14.0: worker ready, scratch=/scratch"),
                    (start - 60, "job 8812: ffmpeg -i s3://media-in/8812.mov -> /scratch/job-8812/seg-%05d.ts"),
                    (40, "job 8812: writing /scratch/job-8812/seg-00412.ts (1.6 GiB so far)"),
                ],
            );
        }
        staged(c, not_ready_alert(c, &evicted[1], 2100))
    })
}

/// A run-to-completion consumer deployed as a Deployment exits 0 and is restarted forever.
fn container_exits_zero_loop(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let app = "queue-consumer";
        let image = "shop/queue-consumer:0.9.0";
        let mut ct = container(app, image, None);
        ct["args"] = json!(["--queue", "orders", "--drain"]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 2, json!([ct]), json!({})),
        )
        .await;
        let mut out = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
            let p = crash_loop(
                c,
                p,
                &nodes[i],
                &c.ip(10 + i as u8),
                2700,
                app,
                (0, "Completed", 12),
                65,
            )
            .await;
            backoff_event(c, &p, 51, 2500).await;
            for (reason, msg) in [
                ("Created", format!("Created container {app}")),
                ("Started", format!("Started container {app}")),
                (
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                ),
            ] {
                kubelet_event(c, &p, "Normal", reason, &msg, 13, (2695, 85)).await;
            }
            c.logs_of(
                &p,
                app,
                true,
                &[
                    (
                        84,
                        "consumer 0.9.0 started (queue=orders, mode=drain, prefetch=50)",
                    ),
                    (54, "queue orders empty after 30s"),
                    (54, "processed 0 messages; drain complete, exiting"),
                ],
            );
            out.push(p);
        }
        staged(c, crashloop_alert(c, &out[1], app, 1800))
    })
}

/// invoice-sync's job has waited 13 h for a database lock; with concurrencyPolicy Forbid the
/// CronJob starts nothing new.
fn cronjob_forbid_hung_job(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let started = 13 * 3600 + 95;
        let image = "shop/billing-jobs:2024.11.3";
        let template = json!({"metadata": {"labels": {"app": "invoice-sync"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "invoice-sync", "image": image,
                "args": ["sync-invoices", "--window=30m"],
                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}}]}});
        // A half-hourly schedule whose last run is the one staged now, named as the controller
        // names it (minutes since the epoch of its scheduled time).
        let now = Utc::now() - chrono::Duration::seconds(2);
        let scheduled = now - chrono::Duration::seconds(now.timestamp() % 60);
        let minute = (scheduled.timestamp() / 60) % 30;
        let schedule = format!("{minute},{} * * * *", minute + 30);
        let cj = create_as(k, "helm", json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
            "metadata": {"name": "invoice-sync", "labels": {"app": "invoice-sync"}},
            "spec": {"schedule": schedule, "concurrencyPolicy": "Forbid", "suspend": false,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": {"app": "invoice-sync"}}, "spec": {"backoffLimit": 2, "template": template}}}}))
            .await;
        let job_name = format!("invoice-sync-{}", scheduled.timestamp() / 60);
        let job = create_as(k, "kube-controller-manager", json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name, "labels": {"app": "invoice-sync"},
                "ownerReferences": [{"apiVersion": "batch/v1beta1", "kind": "CronJob", "name": "invoice-sync",
                    "uid": cj["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"backoffLimit": 2, "template": template}}))
            .await;
        status_as(k, "kube-controller-manager", "batch/v1beta1", "CronJob", "invoice-sync", json!({
            "active": [{"kind": "Job", "namespace": k.ns, "name": job_name, "uid": job["metadata"]["uid"],
                "apiVersion": "batch/v1", "resourceVersion": job["metadata"]["resourceVersion"]}],
            "lastScheduleTime": scheduled.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}))
            .await;
        let pod = k.pods("app=invoice-sync", 1).await.remove(0);
        let pod = run(c, &pod, &nodes[1], &c.ip(10), started - 5).await;
        event(
            c,
            &cj,
            ("cronjob-controller", None),
            "Normal",
            "SuccessfulCreate",
            &format!("Created job {job_name}"),
            1,
            (started, started),
        )
        .await;
        let mut lines: Vec<(i64, String)> = vec![
            (
                started - 10,
                format!(
                    "INFO starting invoice sync window={}",
                    scheduled.format("%Y-%m-%dT%H:%MZ")
                ),
            ),
            (
                started - 11,
                "INFO acquiring advisory lock invoices_sync (pg_advisory_lock(42))".into(),
            ),
        ];
        for h in 1..=13i64 {
            lines.push((
                started - 11 - h * 3600,
                format!("WARN still waiting for advisory lock invoices_sync (held by pid 48121, application_name=invoice-sync, backend_start 2026-11-24) after {}s", h * 3600),
            ));
        }
        let refs: Vec<(i64, &str)> = lines.iter().map(|(t, l)| (*t, l.as_str())).collect();
        c.logs_of(&pod, "invoice-sync", false, &refs);
        staged(
            c,
            am(
                c,
                "KubeJobNotCompleted",
                "warning",
                vec![("job_name", job_name.clone()), ("namespace", k.ns.clone())],
                &[
                    (
                        "description",
                        format!(
                            "Job {}/{job_name} is taking more than 12h 0m 0s to complete.",
                            k.ns
                        ),
                    ),
                    ("summary", "Job did not complete in time".into()),
                ],
                "time() - max by (namespace, job_name, cluster) (kube_job_status_start_time{job=\"kube-state-metrics\",namespace=~\".*\"} and kube_job_status_active{job=\"kube-state-metrics\",namespace=~\".*\"} > 0) > 43200",
                3600,
            ),
        )
    })
}

/// frontend's revision 2 mounts a ConfigMap nobody created; revision 1 still serves.
fn rollout_missing_configmap(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frontend-config-7d9k2m", "labels": {"app": "frontend"}},
            "data": {"config.json": "{\"apiBase\": \"/api\", \"featureFlags\": {\"newCheckout\": false}}"}}))
            .await;
        let mut ct = container("frontend", "shop/frontend:2.8.0", Some(8080));
        ct["volumeMounts"] = json!([{"name": "config", "mountPath": "/etc/frontend"}]);
        ct["readinessProbe"] = json!({"httpGet": {"path": "/healthz", "port": 8080}});
        let mut d = workload(
            "Deployment",
            "frontend",
            3,
            json!([ct]),
            json!({"volumes": [{"name": "config", "configMap": {"name": "frontend-config-7d9k2m"}}]}),
        );
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        create_as(k, "helm", d).await;
        for (i, p) in k.pods("app=frontend", 3).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 1320).await;
        }
        available(k, "frontend", 3).await;
        // The old revision serves for a while before the rollout.
        tokio::time::sleep(Duration::from_secs(62)).await;
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            "frontend",
            json!({"spec": {"template": {"spec": {
            "containers": [{"name": "frontend", "image": "shop/frontend:2.8.1"}],
            "volumes": [{"name": "config", "configMap": {"name": "frontend-config-h4b6t8"}}]}}}}),
        )
        .await;
        let new = revision_pods(k, "frontend", "2", 1).await.remove(0);
        let mut st = pod_status(
            c,
            "Pending",
            1260,
            "",
            vec![c_waiting(
                ("frontend", "shop/frontend:2.8.1"),
                ("ContainerCreating", ""),
                0,
                json!({}),
            )],
        );
        st["conditions"][0]["status"] = json!("True");
        let new = report(c, &new, &nodes[0], st).await;
        let token = k.get("v1", "ServiceAccount", "default").await["secrets"][0]["name"]
            .as_str()
            .unwrap_or("default-token")
            .to_owned();
        kubelet_event(
            c,
            &new,
            "Warning",
            "FailedMount",
            "MountVolume.SetUp failed for volume \"config\" : configmap \"frontend-config-h4b6t8\" not found",
            19,
            (1258, 40),
        )
        .await;
        kubelet_event(c, &new, "Warning", "FailedMount",
            &format!("Unable to attach or mount volumes: unmounted volumes=[config], unattached volumes=[config {token}]: timed out waiting for the condition"),
            9, (1140, 60)).await;
        staged(c, not_ready_alert(c, &new, 360))
    })
}

/// A zookeeper node's machine stopped answering: its pod is Terminating forever and the
/// StatefulSet will not replace it.
fn statefulset_pod_on_lost_node(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let mut headless = service("zookeeper-headless", "zookeeper", 2181, json!(2181));
        headless["spec"]["clusterIP"] = json!("None");
        headless["spec"]["publishNotReadyAddresses"] = json!(true);
        headless["spec"]["ports"] = json!([{"name": "tcp-client", "port": 2181, "targetPort": "client"},
            {"name": "tcp-follower", "port": 2888, "targetPort": "follower"}, {"name": "tcp-election", "port": 3888, "targetPort": "election"}]);
        create_as(k, "helm", headless).await;
        create_as(
            k,
            "helm",
            service("zookeeper", "zookeeper", 2181, json!("client")),
        )
        .await;
        let mut ct = container("zookeeper", "bitnami/zookeeper:3.8.3-debian-11-r0", None);
        ct["ports"] = json!([{"name": "client", "containerPort": 2181}, {"name": "follower", "containerPort": 2888}, {"name": "election", "containerPort": 3888}]);
        ct["readinessProbe"] = json!({"exec": {"command": ["/bin/bash", "-c", "echo \"ruok\" | timeout 2 nc -w 2 localhost 2181 | grep imok"]}, "periodSeconds": 10});
        let mut sts = workload(
            "StatefulSet",
            "zookeeper",
            3,
            json!([ct]),
            json!({"terminationGracePeriodSeconds": 30}),
        );
        sts["spec"]["serviceName"] = json!("zookeeper-headless");
        sts["spec"]["podManagementPolicy"] = json!("Parallel");
        create_as(k, "helm", sts).await;
        let mut zk = Vec::new();
        for i in 0..3u8 {
            let p = sts_pod(k, &format!("zookeeper-{i}")).await;
            zk.push(run(c, &p, &nodes[usize::from(i)], &c.ip(10 + i), 3 * 3600).await);
        }
        k.wait("zookeeper ready", 60, || async {
            let s = k.get("apps/v1", "StatefulSet", "zookeeper").await;
            (s["status"]["readyReplicas"].as_i64() == Some(3)).then_some(())
        })
        .await;
        // The node stops posting status; the node lifecycle controller (played) marks it
        // unreachable and its pods not ready; after 300 s the taint manager evicts them.
        let lost = nodes[1].clone();
        let since = 1320;
        let gone = "Kubelet stopped posting node status.";
        c.node_conditions(
            &lost,
            &[
                (
                    "MemoryPressure",
                    "Unknown",
                    "NodeStatusUnknown",
                    gone,
                    since,
                ),
                ("DiskPressure", "Unknown", "NodeStatusUnknown", gone, since),
                ("PIDPressure", "Unknown", "NodeStatusUnknown", gone, since),
                ("Ready", "Unknown", "NodeStatusUnknown", gone, since),
            ],
        )
        .await;
        patch_as(k, "kube-controller-manager", "v1", "Node", &lost, json!({"spec": {"taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": c.t(since)},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": c.t(since - 5)}]}}))
            .await;
        let node = node_obj(k, &lost).await;
        event(
            c,
            &node,
            ("node-controller", None),
            "Normal",
            "NodeNotReady",
            &format!("Node {lost} status is now: NodeNotReady"),
            1,
            (since, since),
        )
        .await;
        let victim = zk[1].clone();
        let mut st = victim["status"].clone();
        st["conditions"] = json!([
            {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(3 * 3600)},
            {"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": c.t(since - 2)},
            {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(3 * 3600 - 20)},
            {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(3 * 3600 + 1)}]);
        let victim = status_as(
            k,
            "kube-controller-manager",
            "v1",
            "Pod",
            &name(&victim),
            st,
        )
        .await;
        event(
            c,
            &victim,
            ("node-controller", None),
            "Warning",
            "NodeNotReady",
            "Node is not ready",
            1,
            (since - 2, since - 2),
        )
        .await;
        let evicted = since - 300;
        event(
            c,
            &victim,
            ("taint-controller", None),
            "Normal",
            "TaintManagerEviction",
            &format!("Marking for deletion Pod {}/zookeeper-1", k.ns),
            1,
            (evicted, evicted),
        )
        .await;
        // The eviction is a graceful delete no kubelet confirms. (Its deletionTimestamp is the
        // eviction time plus the grace period; staging reaches that moment with a longer grace.)
        let grace = c.offset.num_seconds() - evicted + 30;
        k.api("v1", "Pod")
            .delete(
                &name(&victim),
                &kube::api::DeleteParams {
                    grace_period_seconds: Some(grace as u32),
                    ..Default::default()
                },
            )
            .await
            .expect("delete zookeeper-1");
        c.logs_of(&zk[0], "zookeeper", false, &[
            (3 * 3600 - 10, "INFO  [main:QuorumPeerMain@149] - Starting quorum peer"),
            (since - 20, "WARN  [NIOWorkerThread-2:NIOServerCnxn@371] - Unexpected exception EndOfStreamException: Unable to read additional data from client, it probably closed the socket"),
            (since - 15, &format!("WARN  [QuorumConnectionThread-[myid=1]-3:QuorumCnxManager@400] - Cannot open channel to 2 at election address zookeeper-1.zookeeper-headless.{}.svc.cluster.local/{}:3888", k.ns, c.ip(11))),
            (60, "java.net.SocketTimeoutException: connect timed out"),
        ]);
        staged(
            c,
            replicas_mismatch_alert(c, "StatefulSet", "zookeeper", 300),
        )
    })
}

/// payment-gateway was paused mid-rollout to investigate its crashing revision 2; the fixed
/// image was applied while paused and never rolls out.
fn paused_deployment_fix_not_rolled_out(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let app = "payment-gateway";
        let mut d = workload(
            "Deployment",
            app,
            2,
            json!([container(app, "shop/payment-gateway:3.2.0", Some(8443))]),
            json!({}),
        );
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        create_as(k, "helm", d).await;
        for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 2820).await;
        }
        available(k, app, 2).await;
        tokio::time::sleep(Duration::from_secs(62)).await;
        patch_as(k, "helm", "apps/v1", "Deployment", app, json!({"spec": {"template": {"spec": {"containers": [{"name": app, "image": "shop/payment-gateway:3.3.0"}]}}}}))
            .await;
        let new = revision_pods(k, app, "2", 1).await.remove(0);
        let new = crash_loop(
            c,
            &new,
            &nodes[2],
            &c.ip(20),
            2700,
            app,
            (1, "Error", 10),
            40,
        )
        .await;
        backoff_event(c, &new, 46, 2600).await;
        c.logs_of(&new, app, true, &[
            (62, "INFO  payment-gateway 3.3.0 starting"),
            (61, "INFO  loading /etc/gateway/config.yaml"),
            (60, "FATAL config: unknown field \"acquirer.retry_budget\" in /etc/gateway/config.yaml (line 41)"),
        ]);
        // Someone paused the rollout, then applied the fix, which waits for a resume.
        patch_as(
            k,
            "kubectl-rollout",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"paused": true}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let d = patch_as(k, "kubectl-set", "apps/v1", "Deployment", app, json!({"spec": {"template": {"spec": {"containers": [{"name": app, "image": "shop/payment-gateway:3.3.1"}]}}}}))
            .await;
        let generation = d["metadata"]["generation"].as_i64().unwrap_or(0);
        k.wait("the controller sees the paused template", 60, || async {
            let d = k.get("apps/v1", "Deployment", app).await;
            (d["status"]["observedGeneration"].as_i64() == Some(generation)).then_some(())
        })
        .await;
        staged(c, crashloop_alert(c, &new, app, 1500))
    })
}

/// cart-redis is at its configured maxmemory with noeviction; cart-api's writes fail.
fn redis_maxmemory_noeviction(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cart-redis-config", "labels": {"app": "cart-redis"}},
            "data": {"redis.conf": "bind 0.0.0.0\nport 6379\nmaxmemory 256mb\nmaxmemory-policy noeviction\nappendonly no\nsave \"\"\n"}}))
            .await;
        create_as(
            k,
            "helm",
            service("cart-redis", "cart-redis", 6379, json!(6379)),
        )
        .await;
        let mut metrics = service("cart-redis-metrics", "cart-redis", 9121, json!("metrics"));
        metrics["spec"]["ports"][0]["name"] = json!("metrics");
        create_as(k, "helm", metrics).await;
        let mut redis = container("redis", "redis:6.2.13", None);
        redis["args"] = json!(["redis-server", "/etc/redis/redis.conf"]);
        redis["ports"] = json!([{"name": "redis", "containerPort": 6379}]);
        redis["resources"] =
            json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}});
        redis["volumeMounts"] = json!([{"name": "config", "mountPath": "/etc/redis"}]);
        let mut exporter = container("redis-exporter", "oliver006/redis_exporter:v1.55.0", None);
        exporter["ports"] = json!([{"name": "metrics", "containerPort": 9121}]);
        exporter["resources"] =
            json!({"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}});
        let mut sts = workload(
            "StatefulSet",
            "cart-redis",
            1,
            json!([redis, exporter]),
            json!({"volumes": [{"name": "config", "configMap": {"name": "cart-redis-config"}}]}),
        );
        sts["spec"]["serviceName"] = json!("cart-redis");
        create_as(k, "helm", sts).await;
        let r = sts_pod(k, "cart-redis-0").await;
        let r = run(c, &r, &nodes[0], &c.ip(9), 9 * 86400 / 10).await;
        c.logs_of(
            &r,
            "redis",
            false,
            &[
                (77700, "1:C * oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo"),
                (77700, "1:M * Server initialized"),
                (77699, "1:M * Ready to accept connections"),
            ],
        );
        let app = "cart-api";
        let mut ct = container(app, "shop/cart-api:4.4.0", Some(8080));
        ct["env"] = json!([{"name": "REDIS_ADDR", "value": "cart-redis:6379"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(20 + i as u8), 77000).await;
            c.logs_of(&p, app, false, &[
                (2400, "level=info msg=\"POST /v1/carts/7f3a19/items 201\" duration=4ms"),
                (1900, "level=error msg=\"save cart failed\" cart=51be02 err=\"OOM command not allowed when used memory > 'maxmemory'.\""),
                (1200, "level=error msg=\"POST /v1/carts/51be02/items 500\" duration=2ms"),
                (30, "level=error msg=\"save cart failed\" cart=a9d311 err=\"OOM command not allowed when used memory > 'maxmemory'.\""),
                (29, "level=error msg=\"POST /v1/carts/a9d311/items 500\" duration=1ms"),
            ]);
        }
        let instance = format!("{}:9121", c.ip(9));
        staged(
            c,
            am(
                c,
                "RedisOutOfConfiguredMaxmemory",
                "warning",
                vec![
                    ("container", "redis-exporter".into()),
                    ("endpoint", "metrics".into()),
                    ("instance", instance.clone()),
                    ("job", "cart-redis-metrics".into()),
                    ("namespace", k.ns.clone()),
                    ("pod", "cart-redis-0".into()),
                    ("service", "cart-redis-metrics".into()),
                ],
                &[
                    (
                        "summary",
                        format!("Redis out of configured maxmemory (instance {instance})"),
                    ),
                    (
                        "description",
                        format!(
                            "Redis is running out of configured maxmemory (> 90%)\n  VALUE = 99.97\n  LABELS = map[container:redis-exporter endpoint:metrics instance:{instance} job:cart-redis-metrics namespace:{} pod:cart-redis-0 service:cart-redis-metrics]",
                            k.ns
                        ),
                    ),
                ],
                "redis_memory_used_bytes / redis_memory_max_bytes * 100 > 90 and on (instance) redis_memory_max_bytes > 0",
                1800,
            ),
        )
    })
}

/// cassandra's serviceName names a headless Service that no longer exists.
fn headless_service_missing(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let mut svc = service("cassandra", "cassandra", 9042, json!("cql"));
        svc["spec"]["ports"][0]["name"] = json!("cql");
        create_as(k, "helm", svc).await;
        let mut ct = container("cassandra", "bitnami/cassandra:4.1.3-debian-11-r0", None);
        ct["ports"] = json!([{"name": "intra", "containerPort": 7000}, {"name": "cql", "containerPort": 9042}]);
        ct["resources"] =
            json!({"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}});
        ct["env"] = json!([
            {"name": "CASSANDRA_SEEDS", "value": format!("cassandra-0.cassandra-headless.{}.svc.cluster.local", k.ns)},
            {"name": "CASSANDRA_CLUSTER_NAME", "value": "orders"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]);
        ct["readinessProbe"] = json!({"exec": {"command": ["/bin/bash", "-ec", "nodetool status | grep -E \"^UN\\s+${POD_IP}\""]}, "initialDelaySeconds": 30});
        let mut sts = workload("StatefulSet", "cassandra", 3, json!([ct]), json!({}));
        sts["spec"]["serviceName"] = json!("cassandra-headless");
        sts["spec"]["podManagementPolicy"] = json!("OrderedReady");
        create_as(k, "helm", sts).await;
        let p = sts_pod(k, "cassandra-0").await;
        let p = crash_loop(
            c,
            &p,
            &nodes[0],
            &c.ip(10),
            2100,
            "cassandra",
            (3, "Error", 8),
            90,
        )
        .await;
        backoff_event(c, &p, 33, 1900).await;
        let host = format!("cassandra-0.cassandra-headless.{}.svc.cluster.local", k.ns);
        let stamp = |b: i64| c.at(b).format("%Y-%m-%d %H:%M:%S,%3f").to_string();
        c.raw_logs(&p, "cassandra", true, format!(
            "INFO  [main] {} CassandraDaemon.java:627 - JVM vendor/version: OpenJDK 64-Bit Server VM/11.0.20\nINFO  [main] {} DatabaseDescriptor.java:416 - DiskAccessMode 'auto' determined to be mmap, indexAccessMode is mmap\nWARN  [main] {} SimpleSeedProvider.java:60 - Seed provider couldn't lookup host {host}\nERROR [main] {} CassandraDaemon.java:909 - Exception encountered during startup: The seed provider lists no seeds.\nException (org.apache.cassandra.exceptions.ConfigurationException) encountered during startup: The seed provider lists no seeds.\nThe seed provider lists no seeds.\n",
            stamp(118), stamp(117), stamp(112), stamp(112)));
        staged(c, crashloop_alert(c, &p, "cassandra", 900))
    })
}

/// api-gateway's HPA cannot compute CPU utilisation since an envoy sidecar without a CPU
/// request was added; the gateway container throttles at minReplicas.
fn hpa_missing_cpu_request(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let app = "api-gateway";
        let mut gw = container("gateway", "shop/api-gateway:6.0.2", Some(8080));
        gw["resources"] = json!({"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}});
        let mut envoy = json!({"name": "envoy", "image": "envoyproxy/envoy:v1.27.2",
            "args": ["-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"],
            "ports": [{"name": "https", "containerPort": 8443}, {"name": "admin", "containerPort": 9901}]});
        envoy["volumeMounts"] = json!([{"name": "envoy-config", "mountPath": "/etc/envoy"}]);
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "api-gateway-envoy"},
            "data": {"envoy.yaml": "static_resources:\n  listeners: []\n  clusters: []\n"}}))
            .await;
        create_as(k, "helm", workload("Deployment", app, 2, json!([gw, envoy]),
            json!({"volumes": [{"name": "envoy-config", "configMap": {"name": "api-gateway-envoy"}}]})))
            .await;
        let mut pods = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
            pods.push(run(c, p, &nodes[i], &c.ip(10 + i as u8), 10_700).await);
        }
        let hpa = create_as(k, "helm", json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": app},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                     "minReplicas": 2, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}}))
            .await;
        let failed = "the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu";
        status_as(k, "kube-controller-manager", "autoscaling/v2beta2", "HorizontalPodAutoscaler", app, json!({
            "currentReplicas": 2, "desiredReplicas": 2,
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale", "message": "the HPA controller was able to get the target's current scale", "lastTransitionTime": c.t(10_600)},
                {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric", "message": failed, "lastTransitionTime": c.t(10_500)}]}))
            .await;
        let hpa_source = ("horizontal-pod-autoscaler", None);
        event(
            c,
            &hpa,
            hpa_source,
            "Warning",
            "FailedGetResourceMetric",
            "failed to get cpu utilization: missing request for cpu",
            698,
            (10_500, 15),
        )
        .await;
        event(c, &hpa, hpa_source, "Warning", "FailedComputeMetricsReplicas",
            "invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: missing request for cpu", 698, (10_500, 15)).await;
        let pod = &pods[0];
        staged(
            c,
            am(
                c,
                "CPUThrottlingHigh",
                "info",
                vec![
                    ("container", "gateway".into()),
                    ("instance", format!("{}:10250", "10.20.19.11")),
                    ("namespace", k.ns.clone()),
                    ("pod", name(pod)),
                    ("service", "kube-prometheus-stack-kubelet".into()),
                ],
                &[
                    (
                        "description",
                        format!(
                            "85.3% throttling of CPU in namespace {} for container gateway in pod {}.",
                            k.ns,
                            name(pod)
                        ),
                    ),
                    (
                        "summary",
                        "Processes experience elevated CPU throttling.".into(),
                    ),
                ],
                "sum without (id, metrics_path, name, image, endpoint, job, node) (increase(container_cpu_cfs_throttled_periods_total{container!=\"\",job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",namespace=~\".*\"}[5m])) / on (cluster, namespace, pod, container, instance) group_left () sum without (id, metrics_path, name, image, endpoint, job, node) (increase(container_cpu_cfs_periods_total{job=\"kubelet\",metrics_path=\"/metrics/cadvisor\",namespace=~\".*\"}[5m])) > (25 / 100)",
                1800,
            ),
        )
    })
}

/// Ingress shop routes /api to a Service that was renamed.
fn ingress_backend_missing(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        for (app, image, port) in [
            ("storefront", "shop/storefront:9.2.0", 8080),
            ("api", "shop/api:14.1.0", 8080),
        ] {
            create_as(
                k,
                "helm",
                service(
                    app,
                    app,
                    if app == "api" { 8080 } else { 80 },
                    json!("http"),
                ),
            )
            .await;
            create_as(
                k,
                "helm",
                workload(
                    "Deployment",
                    app,
                    2,
                    json!([container(app, image, Some(port))]),
                    json!({}),
                ),
            )
            .await;
            for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
                let n = if app == "api" { 20 } else { 10 };
                run(c, p, &nodes[i], &c.ip(n + i as u8), 5000).await;
            }
        }
        create_as(k, "helm", json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop", "annotations": {"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}},
            "spec": {"ingressClassName": "nginx",
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                "rules": [{"host": "shop.example.com", "http": {"paths": [
                    {"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": "shop-api", "port": {"number": 8080}}}},
                    {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "storefront", "port": {"number": 80}}}}]}}]}}))
            .await;
        let ing = status_as(k, "nginx-ingress-controller", "networking.k8s.io/v1", "Ingress", "shop", json!({"loadBalancer": {"ingress": [{"hostname": "k8s-ingressn-ingressn-4f2a9c1b7e-1234567890.elb.eu-west-1.amazonaws.com"}]}}))
            .await;
        event(
            c,
            &ing,
            ("nginx-ingress-controller", None),
            "Normal",
            "Sync",
            "Scheduled for sync",
            4,
            (1500, 1480),
        )
        .await;
        staged(
            c,
            am(
                c,
                "NginxIngressHigh5xxRate",
                "critical",
                vec![
                    ("ingress", "shop".into()),
                    ("namespace", k.ns.clone()),
                    ("service", "shop-api".into()),
                ],
                &[
                    (
                        "summary",
                        "More than 5% of requests through an ingress fail with 5xx".into(),
                    ),
                    (
                        "description",
                        format!(
                            "100.0% of requests to ingress {}/shop (backend service shop-api) returned 5xx in the last 5 minutes.",
                            k.ns
                        ),
                    ),
                ],
                "sum by (namespace, ingress, service) (rate(nginx_ingress_controller_requests{status=~\"5..\"}[5m])) / sum by (namespace, ingress, service) (rate(nginx_ingress_controller_requests[5m])) > 0.05",
                1380,
            ),
        )
    })
}

/// payouts' startup check against settlement-api fails: settlement-api's certificate expired.
fn x509_expired_upstream(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "settlement-api-tls",
                "annotations": {"cert-manager.io/certificate-name": "settlement-api", "cert-manager.io/issuer-name": "internal-ca"}},
            "type": "kubernetes.io/tls", "stringData": {"tls.crt": "", "tls.key": ""}}))
            .await;
        let mut svc = service("settlement-api", "settlement-api", 8443, json!("https"));
        svc["spec"]["ports"][0]["name"] = json!("https");
        create_as(k, "helm", svc).await;
        let mut ct = container("settlement-api", "shop/settlement-api:2.2.6", None);
        ct["ports"] = json!([{"name": "https", "containerPort": 8443}]);
        ct["volumeMounts"] = json!([{"name": "tls", "mountPath": "/etc/tls", "readOnly": true}]);
        create_as(k, "helm", workload(
            "Deployment",
            "settlement-api",
            2,
            json!([ct]),
            json!({"volumes": [{"name": "tls", "secret": {"secretName": "settlement-api-tls"}}]}),
        ))
        .await;
        for (i, p) in k.pods("app=settlement-api", 2).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 3500).await;
        }
        let app = "payouts";
        let mut ct = container(app, "shop/payouts:5.4.2", Some(8080));
        ct["env"] = json!([{"name": "SETTLEMENT_URL", "value": format!("https://settlement-api.{}.svc:8443", k.ns)}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 2, json!([ct]), json!({})),
        )
        .await;
        let expiry = c.at(2520).format("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut out = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
            let p = crash_loop(
                c,
                p,
                &nodes[i + 1],
                &c.ip(20 + i as u8),
                3500,
                app,
                (1, "Error", 9),
                75,
            )
            .await;
            backoff_event(c, &p, 38, 2300).await;
            let now = c.at(96).format("%Y-%m-%dT%H:%M:%SZ").to_string();
            c.raw_logs(&p, app, true, format!(
                "{{\"level\":\"info\",\"ts\":\"{}\",\"msg\":\"starting payouts\",\"version\":\"5.4.2\"}}\n{{\"level\":\"fatal\",\"ts\":\"{}\",\"msg\":\"startup check failed\",\"dependency\":\"settlement-api\",\"error\":\"Post \\\"https://settlement-api.{}.svc:8443/v1/health\\\": x509: certificate has expired or is not yet valid: current time {now} is after {expiry}\"}}\n",
                c.lt(97), c.lt(96), k.ns));
            out.push(p);
        }
        staged(c, crashloop_alert(c, &out[0], app, 1500))
    })
}

/// Create a PriorityClass unless it exists.
async fn priority_class(k: &Kube, name: &str, value: i64, description: &str) {
    let api: Api<DynamicObject> = Api::all_with(
        k.client.clone(),
        &ar("scheduling.k8s.io/v1", "PriorityClass"),
    );
    if api.get(name).await.is_ok() {
        return;
    }
    let o = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
        "value": value, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority", "description": description});
    api.create(&PostParams::default(), &serde_json::from_value(o).unwrap())
        .await
        .unwrap_or_else(|e| panic!("priority class {name}: {e}"));
}

/// model-training (high priority) scaled up and preempted batch-etl (low priority), whose
/// replacements cannot fit anywhere.
fn priority_preemption_churn(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        priority_class(
            k,
            "high-priority",
            100_000,
            "Training and serving jobs of the ML platform.",
        )
        .await;
        priority_class(
            k,
            "batch-low",
            -10,
            "Best-effort batch work; may be preempted.",
        )
        .await;
        let ml = c.ns("ml");
        let mut trainer = container("trainer", "ml/model-training:2026.11.2", None);
        trainer["resources"] =
            json!({"requests": {"cpu": "3", "memory": "8Gi"}, "limits": {"memory": "12Gi"}});
        create_as(
            &ml,
            "helm",
            workload(
                "Deployment",
                "model-training",
                3,
                json!([trainer]),
                json!({"priorityClassName": "high-priority"}),
            ),
        )
        .await;
        let trainers = ml.pods("app=model-training", 3).await;
        for (i, p) in trainers.iter().enumerate() {
            // The first trainer ran for hours; two more started when it was scaled to 3.
            let start = if i == 0 { 6000 } else { 1500 };
            run(c, p, &nodes[i], &c.ip(10 + i as u8), start).await;
        }
        let app = "batch-etl";
        let mut ct = container(app, "analytics/batch-etl:7.3.0", None);
        ct["resources"] =
            json!({"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"memory": "3Gi"}});
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                4,
                json!([ct]),
                json!({"priorityClassName": "batch-low"}),
            ),
        )
        .await;
        let msg = "0/3 nodes are available: 3 Insufficient cpu.";
        for p in k.pods(&format!("app={app}"), 4).await {
            let p = status_as(k, "kube-scheduler", "v1", "Pod", &name(&p), json!({"phase": "Pending", "qosClass": "Burstable",
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                        "lastProbeTime": null, "lastTransitionTime": c.t(1490)}]}))
                .await;
            event(
                c,
                &p,
                ("default-scheduler", None),
                "Warning",
                "FailedScheduling",
                msg,
                31,
                (1490, 20),
            )
            .await;
        }
        // The pods they replace were preempted (and are gone); the scheduler's events stay.
        let rs = k
            .api("apps/v1", "ReplicaSet")
            .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap()
            .items
            .remove(0);
        let hash = rs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
            .cloned()
            .unwrap_or_default();
        for (i, trainer) in [1usize, 1, 2, 2].iter().enumerate() {
            let victim = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{app}-{hash}-{}", hex(5)), "namespace": k.ns, "uid": uuid::Uuid::new_v4().to_string()}});
            event(
                c,
                &victim,
                ("default-scheduler", None),
                "Normal",
                "Preempted",
                &format!(
                    "Preempted by ml/{} on node {}",
                    name(&trainers[*trainer]),
                    nodes[*trainer]
                ),
                1,
                (1502 - i as i64, 1502 - i as i64),
            )
            .await;
            event(
                c,
                &victim,
                ("kubelet", Some(nodes[*trainer].as_str())),
                "Normal",
                "Killing",
                "Stopping container batch-etl",
                1,
                (1501 - i as i64, 1501 - i as i64),
            )
            .await;
        }
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 480))
    })
}

/// postgres-0's volume lives in eu-west-1a; after a node group replacement no node is there.
fn volume_node_affinity_conflict(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        c.nodes(3, &["eu-west-1b", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        storage_classes(k).await;
        bound_volume(c, "data-postgres-0", "postgres", "200Gi", "eu-west-1a").await;
        let mut headless = service("postgres-hl", "postgres", 5432, json!(5432));
        headless["spec"]["clusterIP"] = json!("None");
        create_as(k, "helm", headless).await;
        create_as(
            k,
            "helm",
            service("postgres", "postgres", 5432, json!(5432)),
        )
        .await;
        let mut ct = container("postgres", "bitnami/postgresql:15.4.0-debian-11-r45", None);
        ct["ports"] = json!([{"name": "tcp-postgresql", "containerPort": 5432}]);
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}});
        ct["volumeMounts"] = json!([{"name": "data", "mountPath": "/bitnami/postgresql"}]);
        let mut sts = workload("StatefulSet", "postgres", 1, json!([ct]), json!({}));
        sts["spec"]["serviceName"] = json!("postgres-hl");
        sts["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "resources": {"requests": {"storage": "200Gi"}}}}]);
        create_as(k, "helm", sts).await;
        let pod = sts_pod(k, "postgres-0").await;
        let msg = "0/3 nodes are available: 3 node(s) had volume node affinity conflict.";
        let pod = status_as(k, "kube-scheduler", "v1", "Pod", &name(&pod), json!({"phase": "Pending", "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                    "lastProbeTime": null, "lastTransitionTime": c.t(2100)}]}))
            .await;
        event(
            c,
            &pod,
            ("default-scheduler", None),
            "Warning",
            "FailedScheduling",
            msg,
            44,
            (2100, 30),
        )
        .await;
        staged(c, not_ready_alert(c, &pod, 1200))
    })
}

/// DiskPressure on one node came and went: the kubelet's image GC reclaimed the space.
fn disk_pressure_cleared(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let node = nodes[1].clone();
        c.node_conditions(
            &node,
            &[(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
                360,
            )],
        )
        .await;
        let n = node_obj(k, &node).await;
        let kubelet = ("kubelet", Some(node.as_str()));
        event(
            c,
            &n,
            kubelet,
            "Normal",
            "NodeHasDiskPressure",
            &format!("Node {node} status is now: NodeHasDiskPressure"),
            1,
            (1740, 1740),
        )
        .await;
        event(
            c,
            &n,
            kubelet,
            "Warning",
            "EvictionThresholdMet",
            "Attempting to reclaim ephemeral-storage",
            1,
            (1735, 1735),
        )
        .await;
        event(
            c,
            &n,
            kubelet,
            "Normal",
            "NodeHasNoDiskPressure",
            &format!("Node {node} status is now: NodeHasNoDiskPressure"),
            1,
            (360, 360),
        )
        .await;
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                "route-planner",
                3,
                json!([container(
                    "route-planner",
                    "logistics/route-planner:3.8.1",
                    Some(8080)
                )]),
                json!({}),
            ),
        )
        .await;
        for (i, p) in k.pods("app=route-planner", 3).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 9000).await;
        }
        staged(c, node_pressure_alert(c, &node, "DiskPressure", 1080))
    })
}

/// The HPA scaled recommender from 3 to 8; slow image pulls kept the new pods from being
/// available for 16 minutes; they all run now.
fn hpa_scaleup_completed(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
        )
        .await;
        let app = "recommender";
        let image = "registry.example.com/ml/recommender:4.1.0";
        let mut ct = container(app, image, Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}});
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": 8080}});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 1500).await;
        }
        available(k, app, 3).await;
        // The HPA (played) scales to 8.
        patch_as(
            k,
            "kube-controller-manager",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 8}}),
        )
        .await;
        let all = k.pods(&format!("app={app}"), 8).await;
        let first_names: Vec<String> = first.iter().map(name).collect();
        for (i, p) in all
            .iter()
            .filter(|p| !first_names.contains(&name(p)))
            .enumerate()
        {
            let i = i as u8;
            let node = &nodes[usize::from(i) % 3];
            let p = run(c, p, node, &c.ip(20 + i), 1140).await;
            let mut st = p["status"].clone();
            st["containerStatuses"][0]["state"]["running"]["startedAt"] =
                json!(c.t(178 - i64::from(i)));
            for cond in st["conditions"].as_array_mut().unwrap() {
                if cond["type"] == "Ready" || cond["type"] == "ContainersReady" {
                    cond["lastTransitionTime"] = json!(c.t(170 - i64::from(i)));
                }
            }
            let p = status_as(k, "kubelet", "v1", "Pod", &name(&p), st).await;
            event(
                c,
                &p,
                ("default-scheduler", None),
                "Normal",
                "Scheduled",
                &format!("Successfully assigned {}/{} to {node}", k.ns, name(&p)),
                1,
                (1141, 1141),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Pulling",
                &format!("Pulling image \"{image}\""),
                1,
                (1139, 1139),
            )
            .await;
            let took = 1139 - 180 + i64::from(i);
            kubelet_event(
                c,
                &p,
                "Normal",
                "Pulled",
                &format!(
                    "Successfully pulled image \"{image}\" in {}m{}.{:03}s",
                    took / 60,
                    took % 60,
                    118 + u16::from(i) * 37
                ),
                1,
                (180 - i64::from(i), 180 - i64::from(i)),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Created",
                &format!("Created container {app}"),
                1,
                (179 - i64::from(i), 179 - i64::from(i)),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Started",
                &format!("Started container {app}"),
                1,
                (178 - i64::from(i), 178 - i64::from(i)),
            )
            .await;
        }
        available(k, app, 8).await;
        let hpa = create_as(k, "helm", json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": app},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                     "minReplicas": 3, "maxReplicas": 12,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}}))
            .await;
        status_as(k, "kube-controller-manager", "autoscaling/v2beta2", "HorizontalPodAutoscaler", app, json!({
            "currentReplicas": 8, "desiredReplicas": 8, "lastScaleTime": c.t(1142),
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 52, "averageValue": "261m"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "recommended size matches current size", "lastTransitionTime": c.t(840)},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": c.t(1500)},
                {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range", "lastTransitionTime": c.t(1142)}]}))
            .await;
        event(
            c,
            &hpa,
            ("horizontal-pod-autoscaler", None),
            "Normal",
            "SuccessfulRescale",
            "New size: 8; reason: cpu resource utilization (percentage of request) above target",
            1,
            (1142, 1142),
        )
        .await;
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 200))
    })
}

/// Patroni failed orders-db over to orders-db-1; fulfillment-api's pooled connections still
/// point at orders-db-0, now a read-only replica.
fn db_failover_stale_connections(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(3, &["eu-west-1a", "eu-west-1b", "eu-west-1c"])
            .await;
        let k = &c.k;
        let mut primary = service("orders-db", "orders-db", 5432, json!(5432));
        primary["spec"]["selector"] = json!({"app": "orders-db", "role": "master"});
        create_as(k, "helm", primary).await;
        let mut replica = service("orders-db-replica", "orders-db", 5432, json!(5432));
        replica["spec"]["selector"] = json!({"app": "orders-db", "role": "replica"});
        create_as(k, "helm", replica).await;
        let mut db = container(
            "postgres",
            "registry.opensource.zalan.do/acid/spilo-15:3.0-p1",
            None,
        );
        db["ports"] = json!([{"name": "postgresql", "containerPort": 5432}, {"name": "patroni", "containerPort": 8008}]);
        db["resources"] =
            json!({"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}});
        let mut sts = workload("StatefulSet", "orders-db", 2, json!([db]), json!({}));
        sts["spec"]["podManagementPolicy"] = json!("Parallel");
        create_as(k, "helm", sts).await;
        let mut dbs = Vec::new();
        for i in 0..2u8 {
            let p = sts_pod(k, &format!("orders-db-{i}")).await;
            dbs.push(run(c, &p, &nodes[usize::from(i)], &c.ip(12 + i), 2700).await);
        }
        // Patroni labels the pods with their current role.
        patch_as(
            k,
            "Patroni",
            "v1",
            "Pod",
            "orders-db-0",
            json!({"metadata": {"labels": {"role": "replica"}}}),
        )
        .await;
        patch_as(
            k,
            "Patroni",
            "v1",
            "Pod",
            "orders-db-1",
            json!({"metadata": {"labels": {"role": "master"}}}),
        )
        .await;
        let old_primary = c.ip(12);
        c.logs_of(&dbs[1], "postgres", false, &[
            (2600, "INFO: no action. I am (orders-db-1), a secondary, and following a leader (orders-db-0)"),
            (1872, &format!("WARNING: Request failed to orders-db-0: GET http://{old_primary}:8008/patroni (HTTPConnectionPool(host='{old_primary}', port=8008): Read timed out. (read timeout=2))")),
            (1862, "INFO: promoted self to leader by acquiring session lock"),
            (1860, "INFO: cleared rewind state after becoming the leader"),
            (30, "INFO: no action. I am (orders-db-1), the leader with the lock"),
        ]);
        c.logs_of(&dbs[0], "postgres", false, &[
            (2600, "INFO: no action. I am (orders-db-0), the leader with the lock"),
            (1875, "ERROR: failed to update leader lock"),
            (1870, "INFO: demoted self because failed to update leader lock in DCS"),
            (1850, "INFO: Lock owner: orders-db-1; I am orders-db-0"),
            (30, "INFO: no action. I am (orders-db-0), a secondary, and following a leader (orders-db-1)"),
        ]);
        let app = "fulfillment-api";
        let image = "shop/fulfillment-api:3.17.0";
        let mut ct = container(app, image, Some(8080));
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10, "failureThreshold": 3});
        ct["env"] = json!([{"name": "DATABASE_URL", "value": "postgres://fulfillment@orders-db:5432/orders?pool_max_conns=20"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let mut out = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            let st = pod_status(
                c,
                "Running",
                2650,
                &c.ip(20 + i as u8),
                vec![c_running(c, (app, image), 2645, false, 0, json!({}))],
            );
            let p = report(c, p, &nodes[i], st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                183,
                (1840, 6),
            )
            .await;
            c.logs_of(&p, app, false, &[
                (2640, "INFO  fulfillment-api 3.17.0 listening on :8080 (db pool: 20 connections to orders-db:5432)"),
                (1858, &format!("ERROR update order 88213 status=shipped: ERROR: cannot execute UPDATE in a read-only transaction (SQLSTATE 25006) [conn {old_primary}:5432]")),
                (1850, "WARN  GET /ready 503 (db write check failed: cannot execute INSERT in a read-only transaction)"),
                (20, &format!("ERROR update order 91877 status=packed: ERROR: cannot execute UPDATE in a read-only transaction (SQLSTATE 25006) [conn {old_primary}:5432]")),
                (10, "WARN  GET /ready 503 (db write check failed: cannot execute INSERT in a read-only transaction)"),
            ]);
            out.push(p);
        }
        staged(c, not_ready_alert(c, &out[0], 900))
    })
}

// ---------------------------------------------------------------------------------------------
// The second blind set (expected.json committed before this staging ran).

const ZONES: &[&str] = &["eu-west-1a", "eu-west-1b", "eu-west-1c"];

/// The pods of `app` that are not among `before`, once there are `n` pods in all.
async fn new_pods(k: &Kube, app: &str, before: &[Value], n: usize) -> Vec<Value> {
    let old: Vec<String> = before.iter().map(name).collect();
    k.pods(&format!("app={app}"), n)
        .await
        .into_iter()
        .filter(|p| !old.contains(&name(p)))
        .collect()
}

/// A Pending pod the scheduler cannot place (`msg`) since `since`, with its repeated event.
async fn unschedulable(c: &Ctx, pod: &Value, msg: &str, since: i64, count: i64) -> Value {
    let k = k_for(c, pod);
    let p = status_as(&k, "kube-scheduler", "v1", "Pod", &name(pod), json!({"phase": "Pending", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                "lastProbeTime": null, "lastTransitionTime": c.t(since)}]}))
        .await;
    event(
        c,
        &p,
        ("default-scheduler", None),
        "Warning",
        "FailedScheduling",
        msg,
        count,
        (since, 25),
    )
    .await;
    p
}

/// The price-engine HPA scaled out; the registry refuses the (rotated) robot credential the
/// pull secret still holds, so the new pods cannot pull while the old ones run.
fn imagepull_secret_rotated(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let registry = "harbor.corp.example.io";
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "harbor-robot-pricing"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": format!("{{\"auths\":{{\"{registry}\":{{\"username\":\"robot$pricing+puller\",\"password\":\"not-a-real-token\"}}}}}}")}}))
            .await;
        let app = "price-engine";
        let image = format!("{registry}/pricing/price-engine:5.3.2");
        let mut ct = container(app, &image, Some(8080));
        ct["imagePullPolicy"] = json!("Always");
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "768Mi"}, "limits": {"memory": "1Gi"}});
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                3,
                json!([ct]),
                json!({"imagePullSecrets": [{"name": "harbor-robot-pricing"}]}),
            ),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 2300).await;
        }
        available(k, app, 3).await;
        let hpa = create_as(k, "helm", json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": app},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                     "minReplicas": 3, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 65}}}]}}))
            .await;
        // The HPA (played) scales to 6 at a traffic peak.
        patch_as(
            k,
            "kube-controller-manager",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 6}}),
        )
        .await;
        status_as(k, "kube-controller-manager", "autoscaling/v2beta2", "HorizontalPodAutoscaler", app, json!({
            "currentReplicas": 6, "desiredReplicas": 6, "lastScaleTime": c.t(1500),
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 97, "averageValue": "486m"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ScaleDownStabilized", "message": "recent recommendations were higher than current one, applying the highest recent recommendation", "lastTransitionTime": c.t(1200)},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": c.t(2250)},
                {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range", "lastTransitionTime": c.t(1500)}]}))
            .await;
        event(
            c,
            &hpa,
            ("horizontal-pod-autoscaler", None),
            "Normal",
            "SuccessfulRescale",
            "New size: 6; reason: cpu resource utilization (percentage of request) above target",
            1,
            (1500, 1500),
        )
        .await;
        let pull_error = format!(
            "Failed to pull image \"{image}\": rpc error: code = Unknown desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized"
        );
        for (i, p) in new_pods(k, app, &first, 6).await.iter().enumerate() {
            let i = i as u8;
            let st = pod_status(
                c,
                "Pending",
                1495,
                &c.ip(20 + i),
                vec![c_waiting(
                    (app, &image),
                    (
                        "ImagePullBackOff",
                        &format!("Back-off pulling image \"{image}\""),
                    ),
                    0,
                    json!({}),
                )],
            );
            let node = &nodes[usize::from(i) % 3];
            let p = report(c, p, node, st).await;
            let ago = 1497 - i64::from(i);
            event(
                c,
                &p,
                ("default-scheduler", None),
                "Normal",
                "Scheduled",
                &format!("Successfully assigned {}/{} to {node}", k.ns, name(&p)),
                1,
                (ago, ago),
            )
            .await;
            let pulling = format!("Pulling image \"{image}\"");
            let backoff = format!("Back-off pulling image \"{image}\"");
            for (type_, reason, msg, count, first) in [
                ("Normal", "Pulling", pulling.as_str(), 9, ago - 2),
                ("Warning", "Failed", pull_error.as_str(), 9, ago - 3),
                ("Warning", "Failed", "Error: ErrImagePull", 9, ago - 3),
                ("Normal", "BackOff", backoff.as_str(), 104, ago - 20),
                (
                    "Warning",
                    "Failed",
                    "Error: ImagePullBackOff",
                    104,
                    ago - 20,
                ),
            ] {
                let last = if reason == "BackOff" || msg.ends_with("ImagePullBackOff") {
                    14
                } else {
                    190
                };
                kubelet_event(c, &p, type_, reason, msg, count, (first, last)).await;
            }
        }
        c.logs_of(
            &first[0],
            app,
            false,
            &[
                (2290, "INFO  price-engine 5.3.2 listening on :8080"),
                (
                    1530,
                    "INFO  quote rate 2410/s (p99 180ms), pricing rules v2026.11.24 loaded",
                ),
                (
                    30,
                    "INFO  quote rate 2630/s (p99 240ms), pricing rules v2026.11.24 loaded",
                ),
            ],
        );
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 600))
    })
}

/// Revision 2 of geocoder asks for an instance type no node has; the surge pod never
/// schedules and the rollout passes its progress deadline while revision 1 keeps serving.
fn rollout_stuck_nodeselector(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "geocoder";
        let mut ct = container(app, "geo/geocoder:1.14.0", Some(8080));
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        ct["resources"] =
            json!({"requests": {"cpu": "1", "memory": "3Gi"}, "limits": {"memory": "4Gi"}});
        let mut d = workload("Deployment", app, 3, json!([ct]), json!({}));
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        d["spec"]["progressDeadlineSeconds"] = json!(120);
        create_as(k, "helm", d).await;
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 2080).await;
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(62)).await;
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"template": {"spec": {
            "containers": [{"name": app, "image": "geo/geocoder:1.15.0"}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "c6i.2xlarge"}}}}}),
        )
        .await;
        let new = revision_pods(k, app, "2", 1).await.remove(0);
        unschedulable(
            c,
            &new,
            "0/3 nodes are available: 3 node(s) didn't match node selector.",
            2010,
            41,
        )
        .await;
        // The deployment controller itself declares the deadline passed.
        k.wait("geocoder ProgressDeadlineExceeded", 240, || async {
            let d = k.get("apps/v1", "Deployment", app).await;
            d["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["reason"] == "ProgressDeadlineExceeded")
                .then_some(())
        })
        .await;
        let mut labels = vec![
            ("condition", "Progressing".to_owned()),
            ("deployment", app.to_owned()),
            ("namespace", k.ns.clone()),
            ("status", "false".to_owned()),
        ];
        labels.extend(ksm());
        let ns = k.ns.clone();
        staged(
            c,
            am(
                c,
                "KubeDeploymentRolloutStuck",
                "warning",
                labels,
                &[
                    (
                        "description",
                        format!(
                            "Rollout of deployment {ns}/{app} is not progressing for longer than 15 minutes."
                        ),
                    ),
                    ("summary", "Deployment rollout is not progressing.".into()),
                ],
                "kube_deployment_status_condition{condition=\"Progressing\",job=\"kube-state-metrics\",namespace=~\".*\",status=\"false\"} != 0",
                900,
            ),
        )
    })
}

/// The CRM's PostgreSQL volume is predicted to fill within four days; everything runs.
fn pvc_filling_up_expandable(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        storage_classes(k).await;
        let app = "crm-postgres";
        let claim = "data-crm-postgres-0";
        bound_volume(c, claim, app, "50Gi", "eu-west-1a").await;
        let mut headless = service("crm-postgres-hl", app, 5432, json!(5432));
        headless["spec"]["clusterIP"] = json!("None");
        create_as(k, "helm", headless).await;
        create_as(k, "helm", service(app, app, 5432, json!(5432))).await;
        let image = "bitnami/postgresql:15.4.0-debian-11-r45";
        let mut ct = container("postgresql", image, None);
        ct["ports"] = json!([{"name": "tcp-postgresql", "containerPort": 5432}]);
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}});
        ct["volumeMounts"] = json!([{"name": "data", "mountPath": "/bitnami/postgresql"}]);
        ct["readinessProbe"] = json!({"exec": {"command": ["/bin/sh", "-c", "exec pg_isready -U postgres -h 127.0.0.1 -p 5432"]}, "periodSeconds": 10});
        let mut sts = workload("StatefulSet", app, 1, json!([ct]), json!({}));
        sts["spec"]["serviceName"] = json!("crm-postgres-hl");
        sts["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "resources": {"requests": {"storage": "50Gi"}}}}]);
        create_as(k, "helm", sts).await;
        let pg = sts_pod(k, "crm-postgres-0").await;
        let pg = run(c, &pg, &nodes[0], &c.ip(10), 1750).await;
        c.logs_of(&pg, "postgresql", false, &[
            (1745, "LOG:  database system is ready to accept connections"),
            (1200, "LOG:  checkpoint starting: time"),
            (1030, "LOG:  checkpoint complete: wrote 21873 buffers (16.7%); 0 WAL file(s) added, 0 removed, 9 recycled; write=269.8 s, sync=0.004 s, total=270.1 s; sync files=112, longest=0.003 s, average=0.001 s; distance=152318 kB, estimate=161204 kB"),
            (300, "LOG:  checkpoint starting: time"),
            (40, "LOG:  checkpoint complete: wrote 20417 buffers (15.6%); 0 WAL file(s) added, 0 removed, 10 recycled; write=259.6 s, sync=0.003 s, total=259.9 s; sync files=108, longest=0.002 s, average=0.001 s; distance=149877 kB, estimate=160071 kB"),
        ]);
        let api = "crm-api";
        let mut act = container(api, "crm/crm-api:12.4.1", Some(8080));
        act["env"] = json!([{"name": "DATABASE_URL", "value": "postgres://crm@crm-postgres.crm.svc.cluster.local:5432/crm"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", api, 2, json!([act]), json!({})),
        )
        .await;
        for (i, p) in k.pods(&format!("app={api}"), 2).await.iter().enumerate() {
            run(c, p, &nodes[1 + i], &c.ip(20 + i as u8), 1700).await;
        }
        let ns = k.ns.clone();
        let labels = vec![
            ("endpoint", "https-metrics".to_owned()),
            ("instance", "127.0.0.1:10250".to_owned()),
            ("job", "kubelet".to_owned()),
            ("metrics_path", "/metrics".to_owned()),
            ("namespace", ns.clone()),
            ("node", nodes[0].clone()),
            ("persistentvolumeclaim", claim.to_owned()),
            ("service", "kube-prometheus-stack-kubelet".to_owned()),
        ];
        staged(
            c,
            am(
                c,
                "KubePersistentVolumeFillingUp",
                "warning",
                labels,
                &[
                    (
                        "description",
                        format!(
                            "Based on recent sampling, the PersistentVolume claimed by {claim} in Namespace {ns} is expected to fill up within four days. Currently 8.7% is available."
                        ),
                    ),
                    ("summary", "PersistentVolume is filling up.".into()),
                ],
                "(kubelet_volume_stats_available_bytes{job=\"kubelet\",metrics_path=\"/metrics\",namespace=~\".*\"} / kubelet_volume_stats_capacity_bytes{job=\"kubelet\",metrics_path=\"/metrics\",namespace=~\".*\"}) < 0.15 and kubelet_volume_stats_used_bytes{job=\"kubelet\",metrics_path=\"/metrics\",namespace=~\".*\"} > 0 and predict_linear(kubelet_volume_stats_available_bytes{job=\"kubelet\",metrics_path=\"/metrics\",namespace=~\".*\"}[6h], 4 * 24 * 3600) < 0 unless on (namespace, persistentvolumeclaim) kube_persistentvolumeclaim_access_mode{access_mode=\"ReadOnlyMany\"} == 1 unless on (namespace, persistentvolumeclaim) kube_persistentvolumeclaim_labels{label_excluded_from_alerts=\"true\"} == 1",
                1260,
            ),
        )
    })
}

/// ad-server's HPA has sat at its maximum for 40 minutes with CPU far above target; the
/// nodes have room.
fn hpa_maxed_out_cpu(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(4, &["eu-west-1a", "eu-west-1b", "eu-west-1c", "eu-west-1a"])
            .await;
        let k = &c.k;
        let app = "ad-server";
        let image = "ads/ad-server:9.12.3";
        let mut ct = container(app, image, Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}});
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 4, json!([ct]), json!({})),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 4).await;
        for (i, p) in first.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 2650).await;
        }
        available(k, app, 4).await;
        patch_as(
            k,
            "kube-controller-manager",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 8}}),
        )
        .await;
        for (i, p) in new_pods(k, app, &first, 8).await.iter().enumerate() {
            let start = if i < 2 { 2580 } else { 2400 };
            run(c, p, &nodes[i % 4], &c.ip(20 + i as u8), start).await;
        }
        available(k, app, 8).await;
        let hpa = create_as(k, "helm", json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": app},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                     "minReplicas": 4, "maxReplicas": 8,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}}))
            .await;
        status_as(k, "kube-controller-manager", "autoscaling/v2beta2", "HorizontalPodAutoscaler", app, json!({
            "currentReplicas": 8, "desiredReplicas": 8, "lastScaleTime": c.t(2410),
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 138, "averageValue": "690m"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "recommended size matches current size", "lastTransitionTime": c.t(2100)},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": c.t(2640)},
                {"type": "ScalingLimited", "status": "True", "reason": "TooManyReplicas", "message": "the desired replica count is more than the maximum replica count", "lastTransitionTime": c.t(2410)}]}))
            .await;
        for (size, at) in [(6, 2590), (8, 2410)] {
            event(
                c,
                &hpa,
                ("horizontal-pod-autoscaler", None),
                "Normal",
                "SuccessfulRescale",
                &format!("New size: {size}; reason: cpu resource utilization (percentage of request) above target"),
                1,
                (at, at),
            )
            .await;
        }
        c.logs_of(
            &first[0],
            app,
            false,
            &[
                (2640, "INFO  ad-server 9.12.3 ready on :8080"),
                (2400, "INFO  stats 60s: 1710 bid req/s, fill 93.1%, p50 21ms, p99 118ms, errors 0.00%"),
                (1200, "INFO  stats 60s: 1985 bid req/s, fill 92.8%, p50 34ms, p99 236ms, errors 0.00%"),
                (600, "WARN  stats 60s: 2140 bid req/s, fill 92.5%, p50 47ms, p99 311ms (budget 250ms), errors 0.00%"),
                (60, "WARN  stats 60s: 2205 bid req/s, fill 92.4%, p50 52ms, p99 342ms (budget 250ms), errors 0.01%"),
            ],
        );
        let mut labels = vec![
            ("horizontalpodautoscaler", app.to_owned()),
            ("namespace", k.ns.clone()),
        ];
        labels.extend(ksm());
        let ns = k.ns.clone();
        staged(
            c,
            am(
                c,
                "KubeHpaMaxedOut",
                "warning",
                labels,
                &[
                    (
                        "description",
                        format!(
                            "HPA {ns}/{app} has been running at max replicas for longer than 15 minutes."
                        ),
                    ),
                    ("summary", "HPA is running at max replicas".into()),
                ],
                "kube_horizontalpodautoscaler_status_current_replicas{job=\"kube-state-metrics\",namespace=~\".*\"} == kube_horizontalpodautoscaler_spec_max_replicas{job=\"kube-state-metrics\",namespace=~\".*\"}",
                1500,
            ),
        )
    })
}

/// Last night's kernel patching drained ip-10-20-31-13 with a custom NoSchedule taint; the node
/// came back and was uncordoned, the taint stayed, and the two evicted ticket-api pods have been
/// Pending since (the other nodes are full).
fn leftover_maintenance_taint(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let patched = nodes[2].clone();
        let key = "maintenance.ops.example.com/kernel-patch";
        patch_as(
            k,
            "kubectl-taint",
            "v1",
            "Node",
            &patched,
            json!({"spec": {"taints": [{"key": key, "value": "true", "effect": "NoSchedule"}]}}),
        )
        .await;
        patch_as(
            k,
            "kubectl-cordon",
            "v1",
            "Node",
            &patched,
            json!({"spec": {"unschedulable": true}}),
        )
        .await;
        // Rebooted into the patched kernel, then uncordoned; the taint was forgotten.
        status_as(k, "kubelet", "v1", "Node", &patched, json!({"nodeInfo": {
            "kernelVersion": "5.4.219-126.411.amzn2.x86_64", "bootID": uuid::Uuid::new_v4().to_string()}}))
            .await;
        c.node_conditions(
            &patched,
            &[(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
                31_500,
            )],
        )
        .await;
        patch_as(
            k,
            "kubectl-cordon",
            "v1",
            "Node",
            &patched,
            json!({"spec": {"unschedulable": null}}),
        )
        .await;
        let app = "ticket-api";
        let mut ct = container(app, "ticketing/ticket-api:6.0.4", Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"memory": "3Gi"}});
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 6, json!([ct]), json!({})),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 6).await;
        for (i, p) in pods.iter().take(4).enumerate() {
            run(c, p, &nodes[i / 2], &c.ip(10 + i as u8), 32_000).await;
        }
        let msg = format!(
            "0/3 nodes are available: 1 node(s) had taint {{{key}: true}}, that the pod didn't tolerate, 2 Insufficient cpu."
        );
        for p in &pods[4..] {
            unschedulable(c, p, &msg, 31_980, 236).await;
        }
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 31_000))
    })
}

/// ip-10-20-32-12's kubelet reported NotReady (PLEG) for 18 minutes; its collector pod was
/// evicted and replaced elsewhere; the node has been Ready again for 13 minutes.
fn node_notready_recovered(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let node = nodes[1].clone();
        let (down, up) = (1860, 780);
        c.node_conditions(
            &node,
            &[(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
                up,
            )],
        )
        .await;
        let n = node_obj(k, &node).await;
        let kubelet = ("kubelet", Some(node.as_str()));
        event(
            c,
            &n,
            kubelet,
            "Normal",
            "NodeNotReady",
            &format!("Node {node} status is now: NodeNotReady"),
            1,
            (down, down),
        )
        .await;
        event(
            c,
            &n,
            kubelet,
            "Normal",
            "NodeReady",
            &format!("Node {node} status is now: NodeReady"),
            1,
            (up, up),
        )
        .await;
        let app = "collector";
        let image = "telemetry/otel-collector:0.88.0";
        let mut ct = container(app, image, Some(4317));
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/", "port": 13133}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        run(c, &pods[0], &nodes[0], &c.ip(10), 2300).await;
        run(c, &pods[1], &nodes[2], &c.ip(12), 2300).await;
        // The pod that ran on the node was evicted by the not-ready taint (300 s) and is gone;
        // the events about it stay.
        let hash = pods[0]["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let victim = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-{hash}-{}", hex(5)), "namespace": k.ns, "uid": uuid::Uuid::new_v4().to_string()}});
        event(
            c,
            &victim,
            ("node-controller", None),
            "Warning",
            "NodeNotReady",
            "Node is not ready",
            1,
            (down - 2, down - 2),
        )
        .await;
        let evicted = down - 300;
        event(
            c,
            &victim,
            ("taint-controller", None),
            "Normal",
            "TaintManagerEviction",
            &format!("Marking for deletion Pod {}/{}", k.ns, name(&victim)),
            1,
            (evicted, evicted),
        )
        .await;
        event(
            c,
            &victim,
            kubelet,
            "Normal",
            "Killing",
            &format!("Stopping container {app}"),
            1,
            (up - 5, up - 5),
        )
        .await;
        let repl = run(c, &pods[2], &nodes[2], &c.ip(13), evicted - 4).await;
        event(
            c,
            &repl,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&repl),
                nodes[2]
            ),
            1,
            (evicted - 1, evicted - 1),
        )
        .await;
        for (reason, msg) in [
            (
                "Pulled",
                format!("Container image \"{image}\" already present on machine"),
            ),
            ("Created", format!("Created container {app}")),
            ("Started", format!("Started container {app}")),
        ] {
            kubelet_event(
                c,
                &repl,
                "Normal",
                reason,
                &msg,
                1,
                (evicted - 3, evicted - 3),
            )
            .await;
        }
        c.logs_of(&repl, app, false, &[
            (evicted - 4, "info    service/service.go:161   Everything is ready. Begin running and processing data."),
            (60, "info    exporterhelper/queued_retry.go:433  Exporting succeeded {\"kind\": \"exporter\", \"data_type\": \"traces\", \"name\": \"otlp\", \"items\": 1812}"),
        ]);
        let mut labels = vec![
            ("condition", "Ready".to_owned()),
            ("node", node.clone()),
            ("status", "true".to_owned()),
            ("namespace", "monitoring".to_owned()),
        ];
        labels.extend(ksm());
        staged(
            c,
            am(
                c,
                "KubeNodeNotReady",
                "warning",
                labels,
                &[
                    (
                        "description",
                        format!("{node} has been unready for more than 15 minutes."),
                    ),
                    ("summary", "Node is not ready.".into()),
                ],
                "kube_node_status_condition{condition=\"Ready\",job=\"kube-state-metrics\",status=\"true\"} == 0",
                down,
            ),
        )
    })
}

/// falco crash-loops on the one node of the new Amazon Linux 2023 nodegroup: no driver for its
/// kernel. It runs on the three Amazon Linux 2 nodes.
fn daemonset_crash_one_node_kernel(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c
            .nodes(4, &["eu-west-1a", "eu-west-1b", "eu-west-1c", "eu-west-1a"])
            .await;
        let k = &c.k;
        let odd = nodes[3].clone();
        let kernel = "6.1.61-85.141.amzn2023.x86_64";
        patch_as(k, "kubelet", "v1", "Node", &odd, json!({"metadata": {"labels": {
            "eks.amazonaws.com/nodegroup": "general-al2023-2026-11", "node.kubernetes.io/instance-type": "m6i.xlarge"}}}))
            .await;
        status_as(k, "kubelet", "v1", "Node", &odd, json!({"nodeInfo": {
            "kernelVersion": kernel, "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.2"}}))
            .await;
        c.node_conditions(
            &odd,
            &[(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
                2_900,
            )],
        )
        .await;
        let image = "falcosecurity/falco:0.36.2";
        let host = |n: &str, p: &str| json!({"name": n, "hostPath": {"path": p}});
        let mut ct = container("falco", image, None);
        ct["resources"] = json!({"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}});
        ct["securityContext"] = json!({"privileged": true});
        ct["args"] = json!([
            "/usr/bin/falco",
            "--cri",
            "/run/containerd/containerd.sock",
            "-pk"
        ]);
        ct["volumeMounts"] = json!([
            {"name": "dev-fs", "mountPath": "/host/dev", "readOnly": true},
            {"name": "proc-fs", "mountPath": "/host/proc", "readOnly": true},
            {"name": "boot-fs", "mountPath": "/host/boot", "readOnly": true},
            {"name": "lib-modules", "mountPath": "/host/lib/modules"},
            {"name": "usr-fs", "mountPath": "/host/usr", "readOnly": true},
            {"name": "containerd-socket", "mountPath": "/host/run/containerd"}]);
        let mut ds = workload(
            "DaemonSet",
            "falco",
            0,
            json!([ct]),
            json!({
            "tolerations": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/master"}, {"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
            "volumes": [host("dev-fs", "/dev"), host("proc-fs", "/proc"), host("boot-fs", "/boot"),
                host("lib-modules", "/lib/modules"), host("usr-fs", "/usr"), host("containerd-socket", "/run/containerd")]}),
        );
        ds["spec"].as_object_mut().unwrap().remove("replicas");
        create_as(k, "helm", ds).await;
        let pods = k.pods("app=falco", 4).await;
        let node_of = |p: &Value| {
            p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                .as_str()
                .unwrap_or("")
                .to_owned()
        };
        let mut failing = None;
        for p in &pods {
            let node = node_of(p);
            let i = nodes
                .iter()
                .position(|n| *n == node)
                .expect("a falco pod per node") as u8;
            if node == odd {
                let p = crash_loop(
                    c,
                    p,
                    &node,
                    &c.ip(10 + i),
                    2_880,
                    "falco",
                    (1, "Error", 31),
                    140,
                )
                .await;
                backoff_event(c, &p, 590, 2_700).await;
                let ts = c.at(165);
                let falco_ts = ts.format("%a %b %e %H:%M:%S %Y");
                c.raw_logs(&p, "falco", true, format!(
                    "* Setting up /usr/src links from host\n\
                     * Running falco-driver-loader for: falco version=0.36.2, driver version=6.0.1+driver, arch=x86_64, kernel release={kernel}, kernel version=1\n\
                     * Running falco-driver-loader with: driver=module, compile=yes, download=yes\n\
                     * Unloading falco module, if present\n\
                     * Looking for a falco module locally (kernel {kernel})\n\
                     * Filename 'falco_amazonlinux2023_{kernel}_1.ko'\n\
                     * Trying to download a prebuilt falco module from https://download.falco.org/driver/6.0.1%2Bdriver/x86_64/falco_amazonlinux2023_{kernel}_1.ko\n\
                     curl: (22) The requested URL returned error: 404\n\
                     Unable to find a prebuilt falco module\n\
                     * Trying to dkms install falco module with GCC /usr/bin/gcc\n\
                     * Running dkms build failed, couldn't find /var/lib/dkms/falco/6.0.1+driver/build/make.log (with GCC /usr/bin/gcc)\n\
                     Consider compiling your own falco driver and loading it or getting in touch with the Falco community\n\
                     {falco_ts}: Falco version: 0.36.2 (x86_64)\n\
                     {falco_ts}: Loading rules from file /etc/falco/falco_rules.yaml\n\
                     {falco_ts}: Opening 'syscall' source with Kernel module\n\
                     {falco_ts}: An error occurred in an event source, forcing termination...\n\
                     Error: error opening device /host/dev/falco0. Make sure you have root credentials and that the falco module is loaded: No such file or directory\n"
                ));
                failing = Some(p);
            } else {
                let p = run(c, p, &node, &c.ip(10 + i), 2_950).await;
                let ts = c.at(2_940).format("%a %b %e %H:%M:%S %Y");
                c.raw_logs(&p, "falco", false, format!(
                    "* Looking for a falco module locally (kernel 5.4.214-120.368.amzn2.x86_64)\n\
                     * Found a prebuilt falco module at /root/.falco/6.0.1+driver/x86_64/falco_amazonlinux2_5.4.214-120.368.amzn2.x86_64_1.ko, loading it\n\
                     * Success: falco module found and inserted\n\
                     {ts}: Falco version: 0.36.2 (x86_64)\n\
                     {ts}: Opening 'syscall' source with Kernel module\n"
                ));
            }
        }
        let failing = failing.expect("the falco pod on the AL2023 node");
        staged(c, crashloop_alert(c, &failing, "falco", 2_400))
    })
}

/// external-secrets now writes accounts-db-credentials with the key `password`; the pods read
/// `DB_PASSWORD`. Running pods are fine; the one a spot interruption replaced cannot start.
fn secret_key_renamed(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let secret = "accounts-db-credentials";
        create_as(k, "external-secrets", json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "labels": {"reconcile.external-secrets.io/managed": "true"},
                "annotations": {"reconcile.external-secrets.io/data-hash": hex(32)}},
            "type": "Opaque", "stringData": {"username": "accounts", "password": "not-a-real-password"}}))
            .await;
        let app = "accounts-api";
        let mut ct = container(app, "accounts/accounts-api:8.2.0", Some(8080));
        ct["env"] = json!([
            {"name": "DB_HOST", "value": "accounts-db.accounts.svc.cluster.local"},
            {"name": "DB_USER", "value": "accounts"},
            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": "DB_PASSWORD"}}}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        // Revision 1 (8.2.0) was replaced by revision 2 (8.2.1), which ran for days; staged as a
        // template change at zero replicas, then the scale, so that no revision-1 pod needs a
        // kubelet to go away.
        create_as(
            k,
            "helm",
            workload("Deployment", app, 0, json!([ct]), json!({})),
        )
        .await;
        replicaset(k, app, "1").await;
        patch_as(k, "helm", "apps/v1", "Deployment", app,
            json!({"spec": {"template": {"spec": {"containers": [{"name": app, "image": "accounts/accounts-api:8.2.1"}]}}}}))
            .await;
        replicaset(k, app, "2").await;
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 3}}),
        )
        .await;
        let pods = revision_pods(k, app, "2", 3).await;
        let image = "accounts/accounts-api:8.2.1";
        for (i, p) in pods.iter().take(2).enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 1_990).await;
            c.logs_of(&p, app, false, &[
                (1_985, "INFO  accounts-api 8.2.1 starting"),
                (1_983, "INFO  connected to postgres accounts-db.accounts.svc.cluster.local:5432 as accounts"),
                (1_980, "INFO  listening on :8080"),
            ]);
        }
        let p = &pods[2];
        let msg = format!("couldn't find key DB_PASSWORD in Secret {}/{secret}", k.ns);
        let st = pod_status(
            c,
            "Pending",
            1_500,
            &c.ip(12),
            vec![c_waiting(
                (app, image),
                ("CreateContainerConfigError", &msg),
                0,
                json!({}),
            )],
        );
        let p = report(c, p, &nodes[2], st).await;
        event(
            c,
            &p,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&p),
                nodes[2]
            ),
            1,
            (1_502, 1_502),
        )
        .await;
        kubelet_event(
            c,
            &p,
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            131,
            (1_498, 18),
        )
        .await;
        kubelet_event(
            c,
            &p,
            "Warning",
            "Failed",
            &format!("Error: {msg}"),
            131,
            (1_498, 18),
        )
        .await;
        staged(c, not_ready_alert(c, &p, 540))
    })
}

// ---------------------------------------------------------------------------------------------
// The third blind set (expected.json committed before this staging ran, dcd42c0).

/// Delete a pod the way its kubelet confirms a graceful delete (grace 0), as `kubelet`.
async fn kubelet_delete(k: &Kube, pod: &str) {
    let _ = k
        .api("v1", "Pod")
        .delete(
            pod,
            &kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await;
    k.wait(&format!("pod {pod} gone"), 30, || async {
        k.api("v1", "Pod").get(pod).await.is_err().then_some(())
    })
    .await;
}

const PRICING_CONFIG: &str = "# pricing-api runtime configuration\n\
pricing:\n\
\x20 currency: EUR\n\
\x20 rounding: half-even\n\
\x20 cache_ttl: 30s\n\
\x20 rules_source: s3://pricing-rules-eu/rules-v41.json\n\
\x20 discounts:\n\
\x20   max_percent: 30\n\
\x20   stackable: false\n\
\x20 tax:\n\
\x20   provider: vertex\n\
\x20   timeout: 800ms\n\
\x20 surcharges:\n\
\x20   weekend_percent: 5\n\
\x20   express_flat: 4.90\n\
upstreams:\n\
\x20 catalog: http://catalog.catalog.svc.cluster.local:8080\n\
\x20 fx: http://fx-rates.treasury.svc.cluster.local\n";

/// pricing-api-config was edited in place with kubectl (line 14 no longer parses); the two pods
/// started before the edit run on the old config, the pod recreated after a node scale-down
/// crash-loops on the new one. No rollout happened.
fn configmap_edited_in_place(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
        )
        .await;
        let app = "pricing-api";
        let cm = "pricing-api-config";
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "labels": {"app": app}},
            "data": {"config.yaml": PRICING_CONFIG}}),
        )
        .await;
        let image = "pricing/pricing-api:3.8.2";
        let mut ct = container(app, image, Some(8080));
        ct["args"] = json!(["--config", "/etc/pricing/config.yaml"]);
        ct["volumeMounts"] =
            json!([{"name": "config", "mountPath": "/etc/pricing", "readOnly": true}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                3,
                json!([ct]),
                json!({"volumes": [{"name": "config", "configMap": {"name": cm}}]}),
            ),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 3_290).await;
            if i < 2 {
                c.logs_of(&p, app, false, &[
                    (3_286, "INFO  pricing-api 3.8.2 starting"),
                    (3_285, "INFO  loaded config /etc/pricing/config.yaml (currency EUR, 214 rules, surcharges: weekend 5%, express 4.90)"),
                    (3_284, "INFO  listening on :8080"),
                    (600, "INFO  stats 300s: 1412 quotes, p99 41ms, errors 0"),
                    (300, "INFO  stats 300s: 1388 quotes, p99 44ms, errors 0"),
                ]);
            }
        }
        available(k, app, 3).await;
        // Some time later someone edits the ConfigMap in place (a nested map on one line).
        tokio::time::sleep(Duration::from_secs(120)).await;
        let broken = PRICING_CONFIG.replace(
            "  surcharges:\n    weekend_percent: 5\n",
            "  surcharges:\n    weekend: percent: 7\n",
        );
        assert_ne!(broken, PRICING_CONFIG);
        patch_as(
            k,
            "kubectl-edit",
            "v1",
            "ConfigMap",
            cm,
            json!({"data": {"config.yaml": broken}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(20)).await;
        // The cluster autoscaler removes the third node; its pod is recreated on the first.
        let gone = &first[2];
        event(
            c,
            gone,
            ("cluster-autoscaler", None),
            "Normal",
            "ScaleDown",
            "deleting pod for node scale down",
            1,
            (3_195, 3_195),
        )
        .await;
        kubelet_delete(k, &name(gone)).await;
        let _ = k
            .api("v1", "Node")
            .delete(&nodes[2], &Default::default())
            .await;
        let repl = new_pods(k, app, &first[..2], 3).await.remove(0);
        let repl = crash_loop(
            c,
            &repl,
            &nodes[0],
            &c.ip(20),
            3_190,
            app,
            (1, "Error", 15),
            150,
        )
        .await;
        event(
            c,
            &repl,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&repl),
                nodes[0]
            ),
            1,
            (3_192, 3_192),
        )
        .await;
        kubelet_event(
            c,
            &repl,
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            16,
            (3_190, 170),
        )
        .await;
        backoff_event(c, &repl, 188, 3_140).await;
        c.logs_of(&repl, app, true, &[
            (171, "INFO  pricing-api 3.8.2 starting"),
            (170, "FATAL config: /etc/pricing/config.yaml: yaml: line 14: mapping values are not allowed in this context"),
        ]);
        staged(c, crashloop_alert(c, &repl, app, 2_900))
    })
}

/// statsd-relay, new, asks for hostPort 8125/UDP; datadog-agent (DogStatsD) holds it on every
/// node, so its pods stay Pending.
fn hostport_conflict_daemonset(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let dd = c.ns("datadog");
        let mut agent = container("agent", "gcr.io/datadoghq/agent:7.49.1", None);
        agent["ports"] = json!([
            {"name": "dogstatsdport", "containerPort": 8125, "hostPort": 8125, "protocol": "UDP"},
            {"name": "traceport", "containerPort": 8126, "hostPort": 8126, "protocol": "TCP"}]);
        agent["resources"] =
            json!({"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}});
        agent["env"] = json!([
            {"name": "DD_DOGSTATSD_NON_LOCAL_TRAFFIC", "value": "true"},
            {"name": "DD_APM_ENABLED", "value": "true"},
            {"name": "DD_KUBERNETES_KUBELET_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]);
        let mut ds = workload(
            "DaemonSet",
            "datadog-agent",
            0,
            json!([agent]),
            json!({"tolerations": [{"operator": "Exists"}]}),
        );
        ds["spec"].as_object_mut().unwrap().remove("replicas");
        create_as(&dd, "helm", ds).await;
        let agents = dd.pods("app=datadog-agent", 3).await;
        for p in &agents {
            let node = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
                .as_str()
                .unwrap_or("")
                .to_owned();
            let i = nodes
                .iter()
                .position(|n| *n == node)
                .expect("an agent per node") as u8;
            run(c, p, &node, &c.ip(10 + i), 2_690).await;
        }
        let app = "statsd-relay";
        let mut ct = container(app, "prom/statsd-exporter:v0.26.0", None);
        ct["args"] = json!([
            "--statsd.listen-udp=:8125",
            "--statsd.mapping-config=/etc/statsd/mapping.yaml",
            "--web.listen-address=:9102"
        ]);
        ct["ports"] = json!([
            {"name": "statsd", "containerPort": 8125, "hostPort": 8125, "protocol": "UDP"},
            {"name": "metrics", "containerPort": 9102, "protocol": "TCP"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 2, json!([ct]), json!({})),
        )
        .await;
        let msg = "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports.";
        let mut pending = Vec::new();
        for p in k.pods(&format!("app={app}"), 2).await {
            pending.push(unschedulable(c, &p, msg, 2_400, 47).await);
        }
        staged(c, not_ready_alert(c, &pending[0], 1_500))
    })
}

/// quote-engine requires one replica per node (required pod anti-affinity); its HPA scaled it
/// to 6 on 3 nodes, and 3 replicas stay Pending.
fn required_anti_affinity_hpa_scaleout(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
        )
        .await;
        let app = "quote-engine";
        let mut ct = container(app, "quotes/quote-engine:5.2.0", Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}});
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(k, "helm", workload("Deployment", app, 3, json!([ct]), json!({
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}})))
            .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 2_350).await;
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (2_345, "INFO  quote-engine 5.2.0 listening on :8080"),
                    (900, "INFO  stats 60s: 310 quotes/s, p99 88ms"),
                    (
                        60,
                        "WARN  stats 60s: 655 quotes/s, p99 412ms (cpu saturated, queue depth 140)",
                    ),
                ],
            );
        }
        available(k, app, 3).await;
        let hpa = create_as(k, "helm", json!({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": app},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                     "minReplicas": 3, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}}))
            .await;
        patch_as(
            k,
            "kube-controller-manager",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 6}}),
        )
        .await;
        let msg = "0/3 nodes are available: 3 node(s) didn't match pod affinity/anti-affinity, 3 node(s) didn't match pod anti-affinity rules.";
        for p in new_pods(k, app, &first, 6).await {
            unschedulable(c, &p, msg, 1_500, 61).await;
        }
        status_as(k, "kube-controller-manager", "autoscaling/v2beta2", "HorizontalPodAutoscaler", app, json!({
            "currentReplicas": 6, "desiredReplicas": 6, "lastScaleTime": c.t(1_510),
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 93, "averageValue": "465m"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "recommended size matches current size", "lastTransitionTime": c.t(1_200)},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": c.t(2_340)},
                {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange", "message": "the desired count is within the acceptable range", "lastTransitionTime": c.t(2_340)}]}))
            .await;
        event(
            c,
            &hpa,
            ("horizontal-pod-autoscaler", None),
            "Normal",
            "SuccessfulRescale",
            "New size: 6; reason: cpu resource utilization (percentage of request) above target",
            1,
            (1_510, 1_510),
        )
        .await;
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 600))
    })
}

/// A catalog-search pod was evicted during a short node MemoryPressure 5 hours ago; its
/// replacement has run since, the node is fine, and the Failed pod object keeps
/// KubePodNotReady firing.
fn evicted_pod_tombstone(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "catalog-search";
        let image = "catalog/catalog-search:7.4.1";
        let mut ct = container(app, image, Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}});
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().take(2).enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 18_500).await;
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (
                        18_490,
                        "INFO  catalog-search 7.4.1: index loaded (2.1M documents) in 8.2s",
                    ),
                    (18_488, "INFO  listening on :8080"),
                    (300, "INFO  stats 300s: 52110 queries, p99 63ms, errors 0"),
                ],
            );
        }
        // The evicted pod: the kubelet reports it Failed/Evicted and it stays as an object.
        let evicted = 18_000;
        bind_as_scheduler(k, &name(&first[2]), &nodes[2]).await;
        let victim = status_as(k, "kubelet", "v1", "Pod", &name(&first[2]), json!({
            "phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory. Container catalog-search was using 1468Mi, which exceeds its request of 512Mi. ",
            "startTime": c.t(18_500), "hostIP": "127.0.0.1", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": c.t(18_501)}]}))
            .await;
        let repl = new_pods(k, app, &first, 4).await.remove(0);
        let repl = run(c, &repl, &nodes[0], &c.ip(20), evicted - 40).await;
        c.logs_of(
            &repl,
            app,
            false,
            &[
                (
                    evicted - 45,
                    "INFO  catalog-search 7.4.1: index loaded (2.1M documents) in 8.9s",
                ),
                (evicted - 44, "INFO  listening on :8080"),
                (300, "INFO  stats 300s: 51876 queries, p99 61ms, errors 0"),
            ],
        );
        c.node_conditions(
            &nodes[2],
            &[(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                17_400,
            )],
        )
        .await;
        staged(c, not_ready_alert(c, &victim, evicted - 900))
    })
}

/// celery-beat was killed by its liveness probe during a broker stall; its pidfile stayed in
/// the pod's emptyDir, and every restart since refuses to start.
fn stale_pidfile_emptydir(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let image = "registry.example.com/reporting/reporting:2026.11.3";
        let run_dir = json!([{"name": "run", "mountPath": "/var/run/celery"}]);
        let mut worker = container("celery-worker", image, None);
        worker["command"] = json!([
            "celery",
            "-A",
            "reporting",
            "worker",
            "--loglevel=INFO",
            "--concurrency=4"
        ]);
        worker["env"] =
            json!([{"name": "CELERY_BROKER_URL", "value": "redis://reporting-redis:6379/0"}]);
        create_as(
            k,
            "helm",
            workload("Deployment", "celery-worker", 2, json!([worker]), json!({})),
        )
        .await;
        for (i, p) in k.pods("app=celery-worker", 2).await.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 3_550).await;
            c.logs_of(&p, "celery-worker", false, &[
                (3_545, "[INFO/MainProcess] Connected to redis://reporting-redis:6379/0"),
                (3_544, "[INFO/MainProcess] celery@reporting-worker ready."),
                (3_100, "[WARNING/MainProcess] consumer: Connection to broker lost. Trying to re-establish the connection..."),
                (3_020, "[INFO/MainProcess] Connected to redis://reporting-redis:6379/0"),
                (1_200, "[INFO/MainProcess] Task reporting.tasks.nightly_rollup[4b1f] succeeded in 3.2s: None"),
            ]);
        }
        let app = "celery-beat";
        let mut beat = container(app, image, None);
        beat["command"] = json!([
            "celery",
            "-A",
            "reporting",
            "beat",
            "--loglevel=INFO",
            "--pidfile=/var/run/celery/celerybeat.pid",
            "--schedule=/var/run/celery/celerybeat-schedule"
        ]);
        beat["env"] =
            json!([{"name": "CELERY_BROKER_URL", "value": "redis://reporting-redis:6379/0"}]);
        beat["volumeMounts"] = run_dir;
        beat["livenessProbe"] = json!({"exec": {"command": ["sh", "-c",
            "test $(( $(date +%s) - $(stat -c %Y /var/run/celery/celerybeat-schedule) )) -lt 120"]},
            "periodSeconds": 30, "failureThreshold": 3, "timeoutSeconds": 5});
        let mut d = workload(
            "Deployment",
            app,
            1,
            json!([beat]),
            json!({"volumes": [{"name": "run", "emptyDir": {}}]}),
        );
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        create_as(k, "helm", d).await;
        let p = k.pods(&format!("app={app}"), 1).await.remove(0);
        let p = crash_loop(
            c,
            &p,
            &nodes[2],
            &c.ip(20),
            3_560,
            app,
            (1, "Error", 14),
            140,
        )
        .await;
        kubelet_event(
            c,
            &p,
            "Warning",
            "Unhealthy",
            "Liveness probe failed: ",
            3,
            (3_190, 3_130),
        )
        .await;
        kubelet_event(
            c,
            &p,
            "Normal",
            "Killing",
            "Container celery-beat failed liveness probe, will be restarted",
            1,
            (3_130, 3_130),
        )
        .await;
        kubelet_event(
            c,
            &p,
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            15,
            (3_100, 160),
        )
        .await;
        backoff_event(c, &p, 241, 3_060).await;
        let started = c.at(160).format("%Y-%m-%d %H:%M:%S");
        c.raw_logs(
            &p,
            app,
            true,
            format!(
                "celery beat v5.3.4 (emerald-rush) is starting.\n\
             __    -    ... __   -        _\n\
             LocalTime -> {started}\n\
             Configuration ->\n\
             \x20   . broker -> redis://reporting-redis:6379/0\n\
             \x20   . loader -> celery.loaders.app.AppLoader\n\
             \x20   . scheduler -> celery.beat.PersistentScheduler\n\
             \x20   . db -> /var/run/celery/celerybeat-schedule\n\
             \x20   . logfile -> [stderr]@%INFO\n\
             \x20   . maxinterval -> 5.00 minutes (300s)\n\
             ERROR: Pidfile (/var/run/celery/celerybeat.pid) already exists.\n\
             Seems we're already running? (pid: 1)\n"
            ),
        );
        staged(c, crashloop_alert(c, &p, app, 2_700))
    })
}

/// ip-10-20-40-12's container runtime stalls: its readiness has flapped 9 times in two hours;
/// it is Ready again since 3 minutes.
fn node_readiness_flapping(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let node = nodes[1].clone();
        c.node_conditions(
            &node,
            &[
                (
                    "Ready",
                    "True",
                    "KubeletReady",
                    "kubelet is posting ready status",
                    190,
                ),
                (
                    "ContainerRuntimeUnhealthy",
                    "False",
                    "ContainerRuntimeIsHealthy",
                    "Container runtime on the node is functioning properly",
                    230,
                ),
            ],
        )
        .await;
        let n = node_obj(k, &node).await;
        let kubelet = ("kubelet", Some(node.as_str()));
        for (reason, msg, type_, span) in [
            (
                "NodeNotReady",
                format!("Node {node} status is now: NodeNotReady"),
                "Normal",
                (6_900, 420),
            ),
            (
                "NodeReady",
                format!("Node {node} status is now: NodeReady"),
                "Normal",
                (6_700, 190),
            ),
            (
                "ContainerGCFailed",
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded".to_owned(),
                "Warning",
                (7_000, 450),
            ),
            (
                "ImageGCFailed",
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded".to_owned(),
                "Warning",
                (6_100, 1_400),
            ),
        ] {
            let count = match reason {
                "ImageGCFailed" => 3,
                "ContainerGCFailed" => 12,
                _ => 9,
            };
            event(c, &n, kubelet, type_, reason, &msg, count, span).await;
        }
        event(
            c,
            &n,
            ("health-checker", Some(node.as_str())),
            "Warning",
            "ContainerdUnhealthy",
            "Node condition ContainerRuntimeUnhealthy is now: True, reason: ContainerdUnhealthy, message: \"containerd is not functioning properly: ctr --namespace k8s.io containers list timed out after 60s\"",
            9,
            (6_950, 440),
        )
        .await;
        event(
            c,
            &n,
            ("node-controller", None),
            "Normal",
            "NodeNotReady",
            &format!("Node {node} status is now: NodeNotReady"),
            9,
            (6_880, 400),
        )
        .await;
        let app = "ingest-worker";
        let image = "data/ingest-worker:12.0.3";
        let mut ct = container(app, image, Some(8080));
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 6, json!([ct]), json!({})),
        )
        .await;
        let pods = k.pods(&format!("app={app}"), 6).await;
        for (i, p) in pods.iter().enumerate() {
            let on = &nodes[i % 3];
            if *on == node {
                let last = terminated(c, 255, "Unknown", (1_300, 400));
                let cs = vec![c_running(c, (app, image), 150, true, 9, last)];
                let p = report(
                    c,
                    p,
                    on,
                    pod_status(c, "Running", 7_600, &c.ip(10 + i as u8), cs),
                )
                .await;
                kubelet_event(
                    c,
                    &p,
                    "Normal",
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.",
                    9,
                    (6_650, 170),
                )
                .await;
                event(
                    c,
                    &p,
                    ("node-controller", None),
                    "Warning",
                    "NodeNotReady",
                    "Node is not ready",
                    9,
                    (6_880, 400),
                )
                .await;
                c.logs_of(
                    &p,
                    app,
                    false,
                    &[
                        (
                            148,
                            "INFO  ingest-worker 12.0.3 starting (partition lease renewed)",
                        ),
                        (140, "INFO  consuming topic events.raw, 4 partitions"),
                    ],
                );
            } else {
                let p = run(c, p, on, &c.ip(10 + i as u8), 7_600).await;
                c.logs_of(
                    &p,
                    app,
                    false,
                    &[
                        (
                            7_596,
                            "INFO  ingest-worker 12.0.3 starting (partition lease renewed)",
                        ),
                        (7_590, "INFO  consuming topic events.raw, 4 partitions"),
                        (
                            420,
                            "WARN  rebalance: took over partitions from a lost member",
                        ),
                        (60, "INFO  stats 60s: 48211 events, lag 310"),
                    ],
                );
            }
        }
        available(k, app, 6).await;
        staged(
            c,
            am(
                c,
                "KubeNodeReadinessFlapping",
                "warning",
                vec![("node", node.clone())],
                &[
                    (
                        "description",
                        format!(
                            "The readiness status of node {node} has changed 4 times in the last 15 minutes."
                        ),
                    ),
                    ("summary", "Node readiness status is flapping.".into()),
                ],
                "sum by (cluster, node) (changes(kube_node_status_condition{job=\"kube-state-metrics\",status=\"true\",condition=\"Ready\"}[15m])) > 2",
                5_400,
            ),
        )
    })
}

/// solr's update (9.4.0 → 9.4.1) was patched with partition 2 two days ago: solr-2 runs the
/// new revision, solr-0/1 wait for the partition to be lowered.
fn statefulset_partition_canary_held(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "solr";
        create_as(k, "helm", json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"clusterIP": "None", "selector": {"app": app}, "publishNotReadyAddresses": true,
                "ports": [{"name": "http", "port": 8983, "targetPort": 8983, "protocol": "TCP"}]}}))
            .await;
        let mut ct = container(app, "solr:9.4.0", Some(8983));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "3Gi"}});
        ct["readinessProbe"] = json!({"httpGet": {"path": "/solr/admin/info/health", "port": 8983}, "periodSeconds": 10});
        ct["env"] = json!([{"name": "ZK_HOST", "value": "zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181"}, {"name": "SOLR_HEAP", "value": "1536m"}]);
        let mut canary_ct = ct.clone();
        canary_ct["image"] = json!("solr:9.4.1");
        let mut sts = workload("StatefulSet", app, 3, json!([ct]), json!({}));
        sts["spec"]["podManagementPolicy"] = json!("Parallel");
        sts["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}});
        create_as(k, "helm", sts).await;
        for i in 0..3u8 {
            let p = sts_pod(k, &format!("{app}-{i}")).await;
            run(c, &p, &nodes[usize::from(i)], &c.ip(10 + i), 173_900).await;
        }
        k.wait("solr ready", 60, || async {
            let s = k.get("apps/v1", "StatefulSet", app).await;
            (s["status"]["readyReplicas"].as_i64() == Some(3)).then_some(())
        })
        .await;
        patch_as(
            k,
            "kubectl-patch",
            "apps/v1",
            "StatefulSet",
            app,
            json!({"spec": {
            "updateStrategy": {"rollingUpdate": {"partition": 2}},
            "template": {"spec": {"containers": [canary_ct]}}}}),
        )
        .await;
        let old = k.get("v1", "Pod", &format!("{app}-2")).await;
        let old_uid = old["metadata"]["uid"].clone();
        k.wait("solr-2 deleted by the controller", 60, || async {
            let p = k.get("v1", "Pod", &format!("{app}-2")).await;
            p["metadata"]["deletionTimestamp"].is_string().then_some(())
        })
        .await;
        // The kubelet confirms the delete; the controller recreates solr-2 at once (same name).
        let _ = k
            .api("v1", "Pod")
            .delete(
                &format!("{app}-2"),
                &kube::api::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
        let canary = k
            .wait("the new solr-2", 60, || async {
                let p =
                    serde_json::to_value(k.api("v1", "Pod").get(&format!("{app}-2")).await.ok()?)
                        .ok()?;
                (p["metadata"]["uid"] != old_uid).then_some(p)
            })
            .await;
        let canary = run(c, &canary, &nodes[2], &c.ip(22), 170_100).await;
        c.logs_of(&canary, app, false, &[
            (170_090, "INFO  (main) [   ] o.e.j.s.Server Started Server@5e4bd84a{STARTING}[10.0.18,sto=0] @4120ms"),
            (170_080, "INFO  (main) [   ] o.a.s.c.SolrCore Solr 9.4.1 started, live nodes 3"),
            (600, "INFO  (qtp-41) [c:products s:shard1 r:core_node6] o.a.s.c.S.Request webapp=/solr path=/select params={q=*:*&rows=0} hits=1843312 status=0 QTime=3"),
        ]);
        k.wait("solr ready again", 60, || async {
            let s = k.get("apps/v1", "StatefulSet", app).await;
            (s["status"]["readyReplicas"].as_i64() == Some(3)
                && s["status"]["updatedReplicas"].as_i64() == Some(1))
            .then_some(())
        })
        .await;
        let ns = k.ns.clone();
        staged(
            c,
            am(
                c,
                "KubeStatefulSetUpdateNotRolledOut",
                "warning",
                vec![
                    ("namespace", ns.clone()),
                    ("statefulset", app.to_owned()),
                    ("job", "kube-state-metrics".to_owned()),
                ],
                &[
                    (
                        "description",
                        format!("StatefulSet {ns}/{app} update has not been rolled out."),
                    ),
                    (
                        "summary",
                        "StatefulSet update has not been rolled out.".into(),
                    ),
                ],
                "(max by (namespace, statefulset, job, cluster) (kube_statefulset_status_current_revision{job=\"kube-state-metrics\",namespace=~\".*\"} unless kube_statefulset_status_update_revision{job=\"kube-state-metrics\",namespace=~\".*\"}) * (kube_statefulset_replicas{job=\"kube-state-metrics\",namespace=~\".*\"} != kube_statefulset_status_replicas_updated{job=\"kube-state-metrics\",namespace=~\".*\"})) and (changes(kube_statefulset_status_replicas_updated{job=\"kube-state-metrics\",namespace=~\".*\"}[5m]) == 0)",
                173_000,
            ),
        )
    })
}

/// fx-rates' chart 2.0 renamed the pod label `tier` to `component`; the Service (owned by the
/// platform's kustomization) still selects `tier: api`, so it has no endpoints while every pod
/// is Ready, and ingress-nginx answers 503.
fn service_selector_orphaned_by_relabel(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "fx-rates";
        create_as(k, "kustomize-controller", json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": app, "labels": {"app": app, "kustomize.toolkit.fluxcd.io/name": "treasury-platform", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
            "spec": {"type": "ClusterIP", "selector": {"app": app, "tier": "api"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}))
            .await;
        create_as(k, "kustomize-controller", json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": app, "labels": {"kustomize.toolkit.fluxcd.io/name": "treasury-platform", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
            "spec": {"ingressClassName": "nginx",
                "rules": [{"host": "fx.treasury.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": app, "port": {"number": 80}}}}]}}]}}))
            .await;
        status_as(k, "nginx-ingress-controller", "networking.k8s.io/v1", "Ingress", app, json!({"loadBalancer": {"ingress": [{"hostname": "k8s-ingressn-ingressn-9c31d0a2f4-1234567890.elb.eu-west-1.amazonaws.com"}]}}))
            .await;
        let mut ct = container(app, "treasury/fx-rates:1.8.0", Some(8080));
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        let (mut ct2, mut ct3) = (ct.clone(), ct.clone());
        ct2["image"] = json!("treasury/fx-rates:1.9.2");
        ct3["image"] = json!("treasury/fx-rates:2.0.0");
        let mut d = workload("Deployment", app, 0, json!([ct]), json!({}));
        d["spec"]["template"]["metadata"]["labels"]["tier"] = json!("api");
        d["metadata"]["labels"]["helm.sh/chart"] = json!("fx-rates-1.4.0");
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        create_as(k, "helm", d).await;
        replicaset(k, app, "1").await;
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"template": {"spec": {"containers": [ct2]}}}}),
        )
        .await;
        replicaset(k, app, "2").await;
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"replicas": 3}}),
        )
        .await;
        let old = revision_pods(k, app, "2", 3).await;
        for (i, p) in old.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 1_790).await;
        }
        available(k, app, 3).await;
        k.wait("fx-rates endpoints", 30, || async {
            let e = k.get("v1", "Endpoints", app).await;
            (e["subsets"][0]["addresses"].as_array().map(Vec::len) == Some(3)).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        // helm upgrade to chart 2.0: the pod label tier becomes component.
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({
            "metadata": {"labels": {"helm.sh/chart": "fx-rates-2.0.0"}},
            "spec": {"template": {"metadata": {"labels": {"tier": null, "component": "api"}},
                "spec": {"containers": [ct3]}}}}),
        )
        .await;
        let rs = replicaset(k, app, "3").await;
        let hash = rs["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        // Play the kubelets through the rollout: start each new pod, confirm each old pod's delete.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut n_new: u8 = 0;
        loop {
            let pods: Vec<Value> = k
                .api("v1", "Pod")
                .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|p| serde_json::to_value(p).unwrap())
                .collect();
            let mut new_running = 0;
            for p in &pods {
                if p["metadata"]["deletionTimestamp"].is_string() {
                    let _ = k
                        .api("v1", "Pod")
                        .delete(
                            &name(p),
                            &kube::api::DeleteParams {
                                grace_period_seconds: Some(0),
                                ..Default::default()
                            },
                        )
                        .await;
                } else if p["metadata"]["labels"]["pod-template-hash"] == hash.as_str() {
                    if p["status"]["phase"] != "Running" {
                        let started = 1_690 - 15 * i64::from(n_new);
                        let p = run(
                            c,
                            p,
                            &nodes[usize::from(n_new % 3)],
                            &c.ip(20 + n_new),
                            started,
                        )
                        .await;
                        c.logs_of(&p, app, false, &[
                            (started - 2, "INFO  fx-rates 2.0.0 listening on :8080 (providers: ecb, reuters)"),
                            (started - 30, "INFO  rates refreshed: 164 currency pairs"),
                            (300, "INFO  rates refreshed: 164 currency pairs; 0 requests served in the last 300s"),
                        ]);
                        n_new += 1;
                    }
                    new_running += 1;
                }
            }
            if new_running == 3 && pods.len() == 3 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for the rollout of revision 3"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        available(k, app, 3).await;
        staged(
            c,
            am(
                c,
                "NginxIngressHigh5xxRate",
                "critical",
                vec![
                    ("ingress", app.into()),
                    ("namespace", k.ns.clone()),
                    ("service", app.into()),
                ],
                &[
                    (
                        "summary",
                        "More than 5% of requests through an ingress fail with 5xx".into(),
                    ),
                    (
                        "description",
                        format!(
                            "100.0% of requests to ingress {}/{app} (backend service {app}) returned 5xx in the last 5 minutes.",
                            k.ns
                        ),
                    ),
                ],
                "sum by (namespace, ingress, service) (rate(nginx_ingress_controller_requests{status=~\"5..\"}[5m])) / sum by (namespace, ingress, service) (rate(nginx_ingress_controller_requests[5m])) > 0.05",
                1_400,
            ),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The fourth blind set (indexes 43–50). Expected outcomes were committed before this staging.

/// A container status whose image resolved to `digest` (what a kubelet reports as imageID).
fn with_image_id(mut status: Value, repo: &str, digest: &str) -> Value {
    status["imageID"] = json!(format!("{repo}@{digest}"));
    status
}

/// stock-service's revision 2 raises the JVM heap (-Xmx1g → -Xmx3g) under the unchanged 2Gi
/// memory limit: its pod is OOMKilled on every cache warm-up; revision 1 serves.
fn jvm_heap_flag_oomkill(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "stock-service";
        let image = "registry.example.com/warehouse/stock-service:5.14.2";
        let ct = |heap: &str| {
            let mut ct = container(app, image, Some(8080));
            ct["env"] = json!([
                {"name": "JAVA_TOOL_OPTIONS", "value": format!("-Xms1g {heap} -XX:MaxMetaspaceSize=256m -XX:+ExitOnOutOfMemoryError")},
                {"name": "SPRING_PROFILES_ACTIVE", "value": "prod"},
                {"name": "STOCK_DB_URL", "value": "jdbc:postgresql://stock-db.warehouse.svc:5432/stock"}]);
            ct["resources"] = json!({"requests": {"cpu": "500m", "memory": "1536Mi"}, "limits": {"memory": "2Gi"}});
            ct["readinessProbe"] = json!({"httpGet": {"path": "/actuator/health/readiness", "port": "http"},
                "initialDelaySeconds": 20, "periodSeconds": 10});
            ct
        };
        let mut d = workload("Deployment", app, 3, json!([ct("-Xmx1g")]), json!({}));
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        create_as(k, "helm", d).await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(10 + i as u8), 1_600).await;
            c.logs_of(&p, app, false, &[
                (1_596, "Picked up JAVA_TOOL_OPTIONS: -Xms1g -Xmx1g -XX:MaxMetaspaceSize=256m -XX:+ExitOnOutOfMemoryError"),
                (1_570, "INFO  c.w.stock.StockServiceApplication : Started StockServiceApplication in 24.1 seconds (JVM running for 26.0)"),
                (1_560, "INFO  c.w.stock.cache.SkuCache : warm-up done: 1184203 SKUs, 612 MB"),
                (300, "INFO  c.w.stock.api.Metrics : 60s: 4210 requests, p99 38 ms, heap used 791 MB of 1024 MB"),
            ]);
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(70)).await;
        // helm upgrade: only the heap flag changes; the limit stays 2Gi.
        patch_as(
            k,
            "helm",
            "apps/v1",
            "Deployment",
            app,
            json!({"spec": {"template": {"spec": {"containers": [ct("-Xmx3g")]}}}}),
        )
        .await;
        let new = revision_pods(k, app, "2", 1).await.remove(0);
        let new = crash_loop(
            c,
            &new,
            &nodes[0],
            &c.ip(20),
            1_480,
            app,
            (137, "OOMKilled", 8),
            95,
        )
        .await;
        event(
            c,
            &new,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&new),
                nodes[0]
            ),
            1,
            (1_482, 1_482),
        )
        .await;
        kubelet_event(
            c,
            &new,
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            9,
            (1_480, 120),
        )
        .await;
        kubelet_event(
            c,
            &new,
            "Normal",
            "Started",
            &format!("Started container {app}"),
            9,
            (1_479, 119),
        )
        .await;
        backoff_event(c, &new, 61, 1_300).await;
        c.logs_of(&new, app, true, &[
            (118, "Picked up JAVA_TOOL_OPTIONS: -Xms1g -Xmx3g -XX:MaxMetaspaceSize=256m -XX:+ExitOnOutOfMemoryError"),
            (96, "INFO  c.w.stock.StockServiceApplication : Started StockServiceApplication in 21.7 seconds (JVM running for 23.4)"),
            (96, "INFO  c.w.stock.cache.SkuCache : warm-up: loading SKUs from stock-db (batch 50000)"),
            (95, "INFO  c.w.stock.cache.SkuCache : warm-up: 650000 SKUs, heap used 1702 MB of 3072 MB"),
        ]);
        staged(c, crashloop_alert(c, &new, app, 1_200))
    })
}

/// thumbnailer mounts an NFS export; the NFS server failed over 70 minutes ago. The two pods
/// recreated since mounted it afresh and run; the one pod whose mount predates the failover
/// gets ESTALE on every start.
fn nfs_stale_file_handle(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "thumbnailer";
        let image = "registry.example.com/assets/thumbnailer:2.3.1";
        let mut ct = container(app, image, Some(8080));
        ct["args"] = json!([
            "--watch=/mnt/assets/incoming",
            "--out=/mnt/assets/thumbs",
            "--workers=4"
        ]);
        ct["volumeMounts"] = json!([{"name": "assets", "mountPath": "/mnt/assets"}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10});
        create_as(k, "helm", workload("Deployment", app, 3, json!([ct]),
            json!({"volumes": [{"name": "assets", "nfs": {"server": "10.20.200.15", "path": "/exports/assets"}}]})))
            .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        // The first pod on the first node; the other two on the second node.
        let stale = run(c, &first[0], &nodes[0], &c.ip(10), 4_480).await;
        for (i, p) in first[1..].iter().enumerate() {
            run(c, p, &nodes[1], &c.ip(11 + i as u8), 4_480).await;
        }
        available(k, app, 3).await;
        // The cluster autoscaler removes the second node; its two pods are recreated.
        for p in &first[1..] {
            event(
                c,
                p,
                ("cluster-autoscaler", None),
                "Normal",
                "ScaleDown",
                "deleting pod for node scale down",
                1,
                (2_420, 2_420),
            )
            .await;
            kubelet_delete(k, &name(p)).await;
        }
        let _ = k
            .api("v1", "Node")
            .delete(&nodes[1], &Default::default())
            .await;
        let repl = new_pods(k, app, &first[..1], 3).await;
        for (p, (node, ip)) in repl
            .iter()
            .zip([(&nodes[0], c.ip(20)), (&nodes[2], c.ip(21))])
        {
            let p = run(c, p, node, &ip, 2_400).await;
            event(
                c,
                &p,
                ("default-scheduler", None),
                "Normal",
                "Scheduled",
                &format!("Successfully assigned {}/{} to {node}", k.ns, name(&p)),
                1,
                (2_402, 2_402),
            )
            .await;
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (2_395, "INFO thumbnailer 2.3.1 starting, 4 workers"),
                    (
                        2_394,
                        "INFO watching /mnt/assets/incoming (nfs 10.20.200.15:/exports/assets)",
                    ),
                    (2_390, "INFO backlog: 1842 files"),
                    (600, "INFO 300s: 512 thumbnails written, 0 errors"),
                    (300, "INFO 300s: 498 thumbnails written, 0 errors"),
                ],
            );
        }
        // The stale pod: fine until the failover, then exit 1 on every start.
        let stale = crash_loop(
            c,
            &stale,
            &nodes[0],
            &c.ip(10),
            4_480,
            app,
            (1, "Error", 19),
            130,
        )
        .await;
        kubelet_event(
            c,
            &stale,
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            19,
            (4_150, 150),
        )
        .await;
        backoff_event(c, &stale, 402, 4_100).await;
        c.logs_of(&stale, app, true, &[
            (151, "INFO thumbnailer 2.3.1 starting, 4 workers"),
            (150, "INFO watching /mnt/assets/incoming (nfs 10.20.200.15:/exports/assets)"),
            (150, "ERROR scan /mnt/assets/incoming: open /mnt/assets/incoming: stale NFS file handle"),
            (130, "FATAL watcher: 20 consecutive errors reading /mnt/assets/incoming: stale NFS file handle"),
        ]);
        staged(c, crashloop_alert(c, &stale, app, 3_900))
    })
}

/// listing-api (helm, 6 replicas) was scaled to 1 with kubectl 40 minutes ago; the one pod left
/// is overloaded and fails its readiness probe.
fn manual_scale_down_overload(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "listing-api";
        let image = "registry.example.com/marketplace/listing-api:4.2.0";
        let mut ct = container(app, image, Some(8080));
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}});
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 5, "timeoutSeconds": 1, "failureThreshold": 3});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 6, json!([ct]), json!({})),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let pods = k.pods(&format!("app={app}"), 6).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i % 3], &c.ip(10 + i as u8), 2_500).await;
        }
        available(k, app, 6).await;
        tokio::time::sleep(Duration::from_secs(75)).await;
        // Someone runs `kubectl scale --replicas=1` in the wrong context.
        k.api("apps/v1", "Deployment")
            .patch_scale(
                app,
                &as_manager("kubectl-scale"),
                &Patch::Merge(&json!({"spec": {"replicas": 1}})),
            )
            .await
            .unwrap_or_else(|e| panic!("scale {app}: {e}"));
        let left = k
            .wait("5 pods terminating", 60, || async {
                let list = k
                    .api("v1", "Pod")
                    .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
                    .await
                    .ok()?;
                let items: Vec<Value> = list
                    .items
                    .into_iter()
                    .map(|p| serde_json::to_value(p).unwrap())
                    .collect();
                let going = items
                    .iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
                    .count();
                (going == 5).then_some(items)
            })
            .await;
        let mut keep = None;
        for p in left {
            if p["metadata"]["deletionTimestamp"].is_string() {
                kubelet_delete(k, &name(&p)).await;
            } else {
                keep = Some(p);
            }
        }
        let pod = keep.unwrap();
        let ip = pod["status"]["podIP"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| c.ip(10));
        let mut st = pod_status(
            c,
            "Running",
            2_500,
            &ip,
            vec![c_running(c, (app, image), 2_504, false, 0, json!({}))],
        );
        st["conditions"][1]["lastTransitionTime"] = json!(c.t(40));
        st["conditions"][2]["lastTransitionTime"] = json!(c.t(40));
        let pod = status_as(k, "kubelet", "v1", "Pod", &name(&pod), st).await;
        kubelet_event(c, &pod, "Warning", "Unhealthy",
            &format!("Readiness probe failed: Get \"http://{ip}:8080/ready\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
            287, (2_330, 12)).await;
        c.logs_of(
            &pod,
            app,
            false,
            &[
                (
                    2_490,
                    "INFO  listing-api 4.2.0 listening on :8080 (max in-flight 512)",
                ),
                (
                    2_460,
                    "INFO  60s: 392 rps, served 392, shed 0, p99 44ms, cpu 0.41",
                ),
                (
                    2_400,
                    "INFO  60s: 401 rps, served 401, shed 0, p99 47ms, cpu 0.43",
                ),
                (
                    2_340,
                    "WARN  request queue full (512/512): shedding load with 503",
                ),
                (
                    2_280,
                    "INFO  60s: 2388 rps, served 1207, shed 1181, p99 8.1s, cpu 1.00 (throttled)",
                ),
                (
                    1_200,
                    "WARN  request queue full (512/512): shedding load with 503",
                ),
                (
                    600,
                    "INFO  60s: 2415 rps, served 1188, shed 1227, p99 8.6s, cpu 1.00 (throttled)",
                ),
                (
                    60,
                    "INFO  60s: 2402 rps, served 1196, shed 1206, p99 8.4s, cpu 1.00 (throttled)",
                ),
            ],
        );
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 1_500))
    })
}

/// loyalty-db's StatefulSet was updated 75 minutes ago and its pod took 37 minutes of crash
/// recovery to come back; loyalty-api crash-looped meanwhile and has run cleanly since.
fn crashloop_during_db_upgrade_recovered(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let mut db = container("postgres", "postgres:15.4", None);
        db["ports"] = json!([{"name": "postgresql", "containerPort": 5432}]);
        db["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}});
        db["readinessProbe"] =
            json!({"exec": {"command": ["pg_isready", "-U", "loyalty"]}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("StatefulSet", "loyalty-db", 1, json!([db]), json!({})),
        )
        .await;
        let mut svc = service("loyalty-db", "loyalty-db", 5432, json!(5432));
        svc["spec"]["clusterIP"] = json!("None");
        create_as(k, "helm", svc).await;
        let old_db = sts_pod(k, "loyalty-db-0").await;
        run(c, &old_db, &nodes[2], &c.ip(30), 4_700).await;
        let app = "loyalty-api";
        let image = "registry.example.com/loyalty/loyalty-api:3.9.0";
        let mut ct = container(app, image, Some(8080));
        ct["env"] = json!([{"name": "DATABASE_URL", "value": "postgres://loyalty@loyalty-db:5432/loyalty?sslmode=disable"}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 2, json!([ct]), json!({})),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let pods = k.pods(&format!("app={app}"), 2).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), 4_650).await;
        }
        available(k, app, 2).await;
        tokio::time::sleep(Duration::from_secs(40)).await;
        // The database's minor upgrade: the controller deletes loyalty-db-0 and recreates it.
        patch_as(k, "helm", "apps/v1", "StatefulSet", "loyalty-db",
            json!({"spec": {"template": {"spec": {"containers": [{
                "name": "postgres", "image": "postgres:15.5", "ports": [{"name": "postgresql", "containerPort": 5432}],
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                "readinessProbe": {"exec": {"command": ["pg_isready", "-U", "loyalty"]}, "periodSeconds": 10}}]}}}}))
            .await;
        let old_uid = old_db["metadata"]["uid"].clone();
        k.wait("loyalty-db-0 being replaced", 60, || async {
            let p = k.api("v1", "Pod").get("loyalty-db-0").await.ok()?;
            let p = serde_json::to_value(p).unwrap();
            (p["metadata"]["deletionTimestamp"].is_string() || p["metadata"]["uid"] != old_uid)
                .then_some(())
        })
        .await;
        let _ = k
            .api("v1", "Pod")
            .delete(
                "loyalty-db-0",
                &kube::api::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
        let new_db = k
            .wait("new loyalty-db-0", 60, || async {
                let p = k.api("v1", "Pod").get("loyalty-db-0").await.ok()?;
                let p = serde_json::to_value(p).unwrap();
                (p["metadata"]["uid"] != old_uid).then_some(p)
            })
            .await;
        let mut st = pod_status(
            c,
            "Running",
            4_480,
            &c.ip(31),
            vec![c_running(
                c,
                ("postgres", "postgres:15.5"),
                4_470,
                true,
                0,
                json!({}),
            )],
        );
        for i in [1, 2] {
            st["conditions"][i]["lastTransitionTime"] = json!(c.t(2_280));
        }
        let new_db = report(c, &new_db, &nodes[2], st).await;
        kubelet_event(
            c,
            &new_db,
            "Normal",
            "Pulled",
            "Successfully pulled image \"postgres:15.5\" in 9.812s",
            1,
            (4_472, 4_472),
        )
        .await;
        kubelet_event(
            c,
            &new_db,
            "Warning",
            "Unhealthy",
            "Readiness probe failed: /var/run/postgresql:5432 - rejecting connections",
            216,
            (4_440, 2_290),
        )
        .await;
        c.logs_of(&new_db, "postgres", false, &[
            (4_468, "LOG:  starting PostgreSQL 15.5 (Debian 15.5-1.pgdg120+1) on x86_64-pc-linux-gnu"),
            (4_467, "LOG:  database system was interrupted; last known up at 2026-11-27 00:41:12 UTC"),
            (4_466, "LOG:  database system was not properly shut down; automatic recovery in progress"),
            (4_465, "LOG:  redo starts at 3A/1C000028"),
            (2_290, "LOG:  redo done at 3B/8F2A1C40 system usage: CPU: user: 1702.31 s, system: 388.20 s, elapsed: 2175.02 s"),
            (2_285, "LOG:  checkpoint complete: wrote 402113 buffers (76.7%)"),
            (2_282, "LOG:  database system is ready to accept connections"),
        ]);
        for (i, p) in pods.iter().enumerate() {
            let st = pod_status(
                c,
                "Running",
                4_650,
                &c.ip(10 + i as u8),
                vec![c_running(
                    c,
                    (app, image),
                    2_220 - 10 * i as i64,
                    true,
                    6,
                    terminated(
                        c,
                        1,
                        "Error",
                        (2_330 - 10 * i as i64, 2_300 - 10 * i as i64),
                    ),
                )],
            );
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "BackOff",
                "Back-off restarting failed container",
                14,
                (4_380, 2_300),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
                7,
                (4_440, 2_225),
            )
            .await;
            c.logs_of(&p, app, true, &[
                (2_330, "INFO  loyalty-api 3.9.0 starting"),
                (2_300, "FATAL db: failed to connect to `host=loyalty-db user=loyalty database=loyalty`: dial error (dial tcp 10.244.46.31:5432: connect: connection refused)"),
            ]);
            c.logs_of(
                &p,
                app,
                false,
                &[
                    (2_219, "INFO  loyalty-api 3.9.0 starting"),
                    (
                        2_218,
                        "INFO  db: connected to loyalty-db:5432 (PostgreSQL 15.5)",
                    ),
                    (2_217, "INFO  listening on :8080"),
                    (600, "INFO  300s: 8120 requests, 0 errors, p99 31ms"),
                    (300, "INFO  300s: 7994 requests, 0 errors, p99 29ms"),
                ],
            );
        }
        staged(c, crashloop_alert(c, &pods[0], app, 3_300))
    })
}

/// The platform team's chart re-applied Role workload-runner without `create`/`delete` on
/// jobs; job-dispatcher's API calls are Forbidden and it crash-loops.
fn rbac_role_narrowed_forbidden(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "job-dispatcher";
        let rbac_annotations = json!({"meta.helm.sh/release-name": "platform-rbac", "meta.helm.sh/release-namespace": "platform-system"});
        let rbac_labels = json!({"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "platform-rbac"});
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": app, "labels": {"app": app}}}),
        )
        .await;
        let rules = |job_verbs: &[&str]| {
            json!([
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": job_verbs},
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
        };
        create_as(k, "helm", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "workload-runner", "labels": rbac_labels.clone(), "annotations": rbac_annotations.clone()},
            "rules": rules(&["get", "list", "watch", "create", "delete"])})).await;
        create_as(k, "helm", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "job-dispatcher-workload-runner", "labels": rbac_labels, "annotations": rbac_annotations},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "workload-runner"},
            "subjects": [{"kind": "ServiceAccount", "name": app, "namespace": k.ns}]})).await;
        let image = "registry.example.com/batch-platform/job-dispatcher:1.12.0";
        let mut ct = container(app, image, Some(8080));
        ct["args"] = json!([
            "--namespace=batch-platform",
            "--queue=redis://dispatch-queue:6379/0"
        ]);
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                2,
                json!([ct]),
                json!({"serviceAccountName": app}),
            ),
        )
        .await;
        let mut pods = Vec::new();
        for (i, p) in k.pods(&format!("app={app}"), 2).await.iter().enumerate() {
            pods.push(run(c, p, &nodes[i], &c.ip(10 + i as u8), 1_650).await);
        }
        available(k, app, 2).await;
        tokio::time::sleep(Duration::from_secs(80)).await;
        // helm upgrade of platform-rbac: the jobs rule keeps only the read verbs.
        patch_as(
            k,
            "helm",
            "rbac.authorization.k8s.io/v1",
            "Role",
            "workload-runner",
            json!({"rules": rules(&["get", "list", "watch"])}),
        )
        .await;
        let forbidden = format!(
            "jobs.batch is forbidden: User \"system:serviceaccount:{}:{app}\" cannot create resource \"jobs\" in API group \"batch\" in the namespace \"{}\"",
            k.ns, k.ns
        );
        for (i, p) in pods.iter().enumerate() {
            let p = crash_loop(
                c,
                p,
                &nodes[i],
                &c.ip(10 + i as u8),
                1_650,
                app,
                (1, "Error", 9),
                70 + 15 * i as i64,
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
                9,
                (1_500, 90),
            )
            .await;
            backoff_event(c, &p, 96, 1_480).await;
            let last = 70 + 15 * i as i64;
            let check = format!(
                "FATAL permission check failed: create jobs.batch in batch-platform: {forbidden}"
            );
            c.logs_of(&p, app, true, &[
                (last + 3, "INFO  job-dispatcher 1.12.0 starting (serviceaccount batch-platform/job-dispatcher)"),
                (last + 2, "INFO  checking permissions (SelfSubjectAccessReview): get,list,watch,create,delete jobs.batch"),
                (last, check.as_str()),
            ]);
        }
        staged(c, crashloop_alert(c, &pods[0], app, 1_200))
    })
}

/// Pods of booking-api as the Istio sidecar injector leaves them (istio-init, istio-proxy).
fn injected_pod(app: &str, hash: &str, ct: &Value) -> Value {
    let proxy = "docker.io/istio/proxyv2:1.20.3";
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{app}-{hash}-"),
            "labels": {"app": app, "pod-template-hash": hash, "security.istio.io/tlsMode": "istio",
                "service.istio.io/canonical-name": app, "service.istio.io/canonical-revision": "latest"},
            "annotations": {"sidecar.istio.io/status": "{\"initContainers\":[\"istio-init\"],\"containers\":[\"istio-proxy\"],\"volumes\":[\"istio-envoy\",\"istio-data\",\"istio-podinfo\",\"istio-token\",\"istiod-ca-cert\"],\"imagePullSecrets\":null,\"revision\":\"default\"}",
                "prometheus.io/path": "/stats/prometheus", "prometheus.io/port": "15020", "prometheus.io/scrape": "true"}},
        "spec": {"initContainers": [{"name": "istio-init", "image": proxy,
                "args": ["istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020"],
                "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]}, "runAsUser": 0, "runAsNonRoot": false}}],
            "containers": [ct, {"name": "istio-proxy", "image": proxy,
                "args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local", "--proxyLogLevel=warning"],
                "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021}, "periodSeconds": 15},
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                "volumeMounts": [{"name": "istio-envoy", "mountPath": "/etc/istio/proxy"}]}],
            "volumes": [{"name": "istio-envoy", "emptyDir": {"medium": "Memory"}}]}})
}

/// Someone replaced the namespace's istio-injection label (by an istio.io/rev no injector
/// serves); the two booking-api pods recreated since have no sidecar and are refused by their
/// STRICT-mTLS upstream, the two older ones keep theirs.
fn mesh_injection_label_removed(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"istio-injection": "enabled", "team": "bookings"}}}),
        )
        .await;
        let app = "booking-api";
        let image = "registry.example.com/bookings/booking-api:7.3.1";
        let mut ct = container(app, image, Some(8080));
        ct["env"] = json!([{"name": "AVAILABILITY_URL", "value": "http://availability.inventory-staging.svc.cluster.local:8080"}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 10});
        let template = workload("Deployment", app, 4, json!([ct.clone()]), json!({}));
        // The pod-template-hash the deployment controller will give this template.
        // (it hashes the pod template only): a Deployment of the same template at 0 replicas,
        // deleted before the pods exist.
        let mut probe = template.clone();
        probe["metadata"]["name"] = json!("booking-api-hash-probe");
        probe["spec"]["replicas"] = json!(0);
        create_as(k, "helm", probe).await;
        let rs = k
            .wait("the probe's ReplicaSet", 60, || async {
                let list = k
                    .api("apps/v1", "ReplicaSet")
                    .list(&Default::default())
                    .await
                    .ok()?;
                list.items
                    .into_iter()
                    .map(|r| serde_json::to_value(r).unwrap())
                    .find(|r| {
                        r["metadata"]["ownerReferences"][0]["name"] == "booking-api-hash-probe"
                    })
            })
            .await;
        let hash = rs["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap()
            .to_owned();
        k.api("apps/v1", "Deployment")
            .delete(
                "booking-api-hash-probe",
                &kube::api::DeleteParams::foreground(),
            )
            .await
            .unwrap();
        k.wait("the probe gone", 60, || async {
            let list = k
                .api("apps/v1", "ReplicaSet")
                .list(&Default::default())
                .await
                .ok()?;
            list.items.is_empty().then_some(())
        })
        .await;
        // The sidecar injector mutated the replica set controller's pods two days ago.
        let mut first = Vec::new();
        for _ in 0..4 {
            first
                .push(create_as(k, "kube-controller-manager", injected_pod(app, &hash, &ct)).await);
        }
        create_as(k, "helm", template).await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let proxy = "docker.io/istio/proxyv2:1.20.3";
        for (i, p) in first.iter().enumerate() {
            let mut st = pod_status(
                c,
                "Running",
                2_900,
                &c.ip(10 + i as u8),
                vec![
                    c_running(c, (app, image), 2_896, true, 0, json!({})),
                    c_running(c, ("istio-proxy", proxy), 2_897, true, 0, json!({})),
                ],
            );
            st["initContainerStatuses"] = json!([{"name": "istio-init", "image": proxy, "imageID": format!("{proxy}@sha256:{}", hex(64)),
                "ready": true, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": c.t(2_899), "finishedAt": c.t(2_898), "containerID": container_id()}}}]);
            report(c, p, &nodes[i % 2], st).await;
        }
        available(k, app, 4).await;
        let rs = replicaset(k, app, "1").await;
        assert_eq!(
            rs["metadata"]["labels"]["pod-template-hash"].as_str(),
            Some(hash.as_str()),
            "the probe's hash"
        );
        tokio::time::sleep(Duration::from_secs(30)).await;
        // Someone moves the namespace to a revision label no injector serves.
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"istio-injection": null, "istio.io/rev": "1-22"}}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        // The cluster autoscaler removes the second node; its two pods come back without a sidecar.
        let gone: Vec<Value> = first
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, p)| p.clone())
            .collect();
        let kept: Vec<Value> = first
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, p)| p.clone())
            .collect();
        for p in &gone {
            event(
                c,
                p,
                ("cluster-autoscaler", None),
                "Normal",
                "ScaleDown",
                "deleting pod for node scale down",
                1,
                (2_720, 2_720),
            )
            .await;
            kubelet_delete(k, &name(p)).await;
        }
        let _ = k
            .api("v1", "Node")
            .delete(&nodes[1], &Default::default())
            .await;
        let repl = new_pods(k, app, &kept, 4).await;
        for (i, p) in repl.iter().enumerate() {
            let node = &nodes[2 * i];
            let p = report(
                c,
                p,
                node,
                pod_status(
                    c,
                    "Running",
                    2_700,
                    &c.ip(20 + i as u8),
                    vec![c_running(c, (app, image), 2_696, false, 0, json!({}))],
                ),
            )
            .await;
            event(
                c,
                &p,
                ("default-scheduler", None),
                "Normal",
                "Scheduled",
                &format!("Successfully assigned {}/{} to {node}", k.ns, name(&p)),
                1,
                (2_702, 2_702),
            )
            .await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                268,
                (2_680, 8),
            )
            .await;
            c.logs_of(&p, app, false, &[
                (2_695, "INFO  booking-api 7.3.1 listening on :8080"),
                (2_690, &format!("ERROR availability: GET http://availability.inventory-staging.svc.cluster.local:8080/v2/slots: read tcp {}:41822->10.0.113.40:8080: read: connection reset by peer", c.ip(20 + i as u8))),
                (2_680, "WARN  ready: dependency availability unhealthy (5 consecutive errors)"),
                (60, &format!("ERROR availability: GET http://availability.inventory-staging.svc.cluster.local:8080/v2/slots: read tcp {}:52210->10.0.113.40:8080: read: connection reset by peer", c.ip(20 + i as u8))),
            ]);
        }
        for p in &kept {
            c.logs_of(
                p,
                app,
                false,
                &[
                    (2_895, "INFO  booking-api 7.3.1 listening on :8080"),
                    (
                        600,
                        "INFO  300s: 3311 requests, 0 errors (availability p99 22ms)",
                    ),
                    (
                        300,
                        "INFO  300s: 3290 requests, 0 errors (availability p99 24ms)",
                    ),
                ],
            );
        }
        staged(c, replicas_mismatch_alert(c, "Deployment", app, 1_900))
    })
}

/// gl-export (daily) was suspended with kubectl patch three days ago and never resumed; its
/// last Job ran four days ago.
fn cronjob_suspended_forgotten(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(2, ZONES).await;
        let k = &c.k;
        let app = "gl-export";
        let image = "registry.example.com/finance/gl-export:2026.10.2";
        let template = json!({"metadata": {"labels": {"app": app}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": app, "image": image,
                "args": ["export", "--ledger=general", "--target=warehouse", "--since=yesterday"],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]}});
        // The suspension (below) is now. The schedule's hour is chosen so that the last run
        // started 5 h before it (and ended long before it), whatever the time of staging.
        let capture = c.at(0);
        let now = Utc::now();
        let hour = now - chrono::Duration::hours(5);
        let last = hour
            .date_naive()
            .and_hms_opt(chrono::Timelike::hour(&hour), 15, 0)
            .unwrap()
            .and_utc();
        let schedule = format!("15 {} * * *", chrono::Timelike::hour(&last));
        let cj = create_as(k, "helm", json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
            "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"schedule": schedule, "concurrencyPolicy": "Forbid", "suspend": false,
                "startingDeadlineSeconds": 3600, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": {"app": app}}, "spec": {"backoffLimit": 2, "template": template}}}}))
            .await;
        // The last three daily runs, the latest 5 h before the suspension.
        let runs: Vec<chrono::DateTime<Utc>> = [2, 1, 0]
            .iter()
            .map(|d| last - chrono::Duration::days(*d))
            .collect();
        for (i, at) in runs.iter().enumerate() {
            let job_name = format!("{app}-{}", at.timestamp() / 60);
            create_as(k, "kube-controller-manager", json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job_name, "labels": {"app": app},
                    "ownerReferences": [{"apiVersion": "batch/v1beta1", "kind": "CronJob", "name": app,
                        "uid": cj["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"backoffLimit": 2, "template": template}}))
                .await;
            let started = (capture - *at).num_seconds() - 2;
            let took = 1_140 + 60 * i as i64;
            let pod = k.pods(&format!("job-name={job_name}"), 1).await.remove(0);
            let mut st = pod_status(
                c,
                "Succeeded",
                started,
                &c.ip(10 + i as u8),
                vec![json!({"name": app, "image": image,
                "imageID": image_id(image), "containerID": container_id(), "ready": false, "started": false, "restartCount": 0,
                "state": terminated(c, 0, "Completed", (started - 3, started - took)), "lastState": {}})],
            );
            for j in [1, 2] {
                st["conditions"][j]["status"] = json!("False");
                st["conditions"][j]["reason"] = json!("PodCompleted");
                st["conditions"][j]["lastTransitionTime"] = json!(c.t(started - took));
                st["conditions"][j]
                    .as_object_mut()
                    .unwrap()
                    .remove("message");
            }
            report(c, &pod, &nodes[i % 2], st).await;
            k.wait(&format!("{job_name} complete"), 60, || async {
                let j = k.api("batch/v1", "Job").get(&job_name).await.ok()?;
                (serde_json::to_value(j).unwrap()["status"]["succeeded"] == 1).then_some(())
            })
            .await;
            status_as(k, "kube-controller-manager", "batch/v1", "Job", &job_name, json!({
                "startTime": c.t(started), "completionTime": c.t(started - took - 2),
                "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": c.t(started - took - 2),
                    "lastTransitionTime": c.t(started - took - 2)}]})).await;
        }
        status_as(
            k,
            "kube-controller-manager",
            "batch/v1beta1",
            "CronJob",
            app,
            json!({
            "lastScheduleTime": runs[2].to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}),
        )
        .await;
        // During a warehouse outage someone suspends it by hand.
        patch_as(
            k,
            "kubectl-patch",
            "batch/v1beta1",
            "CronJob",
            app,
            json!({"spec": {"suspend": true}}),
        )
        .await;
        // Events of three days ago have expired (the API server keeps them an hour).
        let _ = k
            .api("v1", "Event")
            .delete_collection(&Default::default(), &Default::default())
            .await;
        // The freshness rule fires 36 h after the last schedule.
        let fired = (capture - (runs[2] + chrono::Duration::hours(36))).num_seconds();
        let mut labels = vec![("cronjob", app.to_owned()), ("namespace", k.ns.clone())];
        labels.extend(ksm());
        staged(
            c,
            am(
                c,
                "CronJobScheduleStale",
                "warning",
                labels,
                &[
                    (
                        "description",
                        format!(
                            "CronJob {}/{app} has not been scheduled for more than 36 hours.",
                            k.ns
                        ),
                    ),
                    ("summary", "CronJob has not been scheduled recently.".into()),
                ],
                "time() - kube_cronjob_status_last_schedule_time{job=\"kube-state-metrics\"} > 1.5 * 86400",
                fired,
            ),
        )
    })
}

/// doc-indexer runs :latest with imagePullPolicy Always; CI re-pushed the tag with an
/// incompatible build; the one pod recreated since pulled it and crash-loops.
fn mutable_latest_tag_repushed(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "doc-indexer";
        let repo = "registry.internal.example.com/search/doc-indexer";
        let image = format!("{repo}:latest");
        let old = "sha256:41ab7e0c93d15f2b8c6a0e4d7f19b3a25c8e6d0f4b7a19c2e5d83f60a1b4c7e9";
        let new = "sha256:9f3c2d1b7a6e05c4f8d29b31e6a70c5d4f2b8e19a3c6d07f5b1e48a92c3d6f10";
        let mut ct = container(app, &image, Some(8080));
        ct["imagePullPolicy"] = json!("Always");
        ct["args"] = json!([
            "--shard-count=6",
            "--source=kafka://events-kafka.streaming-staging:9092/docs",
            "--index=docs-v3"
        ]);
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        let first = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in first.iter().enumerate() {
            let st = pod_status(
                c,
                "Running",
                2_200,
                &c.ip(10 + i as u8),
                vec![with_image_id(
                    c_running(c, (app, &image), 2_196, true, 0, json!({})),
                    repo,
                    old,
                )],
            );
            let p = report(c, p, &nodes[i], st).await;
            if i < 2 {
                c.logs_of(&p, app, false, &[
                    (2_195, "INFO doc-indexer 2026.11.20-3 (commit 31c9e77) starting: 6 shards, index docs-v3"),
                    (2_190, "INFO kafka: joined group doc-indexer, partitions [0..11]"),
                    (600, "INFO 300s: indexed 48211 docs, lag 120"),
                    (300, "INFO 300s: indexed 47904 docs, lag 98"),
                ]);
            }
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(45)).await;
        let gone = &first[2];
        event(
            c,
            gone,
            ("cluster-autoscaler", None),
            "Normal",
            "ScaleDown",
            "deleting pod for node scale down",
            1,
            (2_110, 2_110),
        )
        .await;
        kubelet_delete(k, &name(gone)).await;
        let _ = k
            .api("v1", "Node")
            .delete(&nodes[2], &Default::default())
            .await;
        let repl = new_pods(k, app, &first[..2], 3).await.remove(0);
        let uid = repl["metadata"]["uid"].as_str().unwrap_or("").to_owned();
        let waiting = c_waiting(
            (app, &image),
            (
                "CrashLoopBackOff",
                &format!(
                    "back-off 5m0s restarting failed container={app} pod={}_{}({uid})",
                    name(&repl),
                    k.ns
                ),
            ),
            12,
            terminated(c, 1, "Error", (112, 110)),
        );
        let repl = report(
            c,
            &repl,
            &nodes[0],
            pod_status(
                c,
                "Running",
                2_100,
                &c.ip(20),
                vec![with_image_id(waiting, repo, new)],
            ),
        )
        .await;
        event(
            c,
            &repl,
            ("default-scheduler", None),
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {}/{} to {}",
                k.ns,
                name(&repl),
                nodes[0]
            ),
            1,
            (2_102, 2_102),
        )
        .await;
        kubelet_event(
            c,
            &repl,
            "Normal",
            "Pulling",
            &format!("Pulling image \"{image}\""),
            13,
            (2_100, 115),
        )
        .await;
        kubelet_event(
            c,
            &repl,
            "Normal",
            "Pulled",
            &format!("Successfully pulled image \"{image}\" in 1.84s"),
            13,
            (2_098, 113),
        )
        .await;
        backoff_event(c, &repl, 171, 2_050).await;
        c.logs_of(
            &repl,
            app,
            true,
            &[
                (
                    111,
                    "INFO doc-indexer 2026.11.27-1 (commit 8be1f0a) starting",
                ),
                (110, "Error: unknown flag: --shard-count"),
                (
                    110,
                    "Usage: doc-indexer --shards=N --source=URL --index=NAME [--dry-run]",
                ),
            ],
        );
        staged(c, crashloop_alert(c, &repl, app, 1_500))
    })
}

// ---------------------------------------------------------------------------------------------
// The fifth blind set (indexes 51–55): a change to something the workload reads, before (or
// after) its failures began. Expected outcomes were committed before this staging (84b3fee).

/// How long `growth_hold` waits between starting suggest-api's pods and the on-call's edit, so
/// that the pods (and the first kill) are older than the edit by the API server's own clock.
const GROWTH_HOLD: Duration = Duration::from_secs(27 * 60);
/// How long subscription-api's feature-flag edit precedes the database failover, in real time
/// (managedFields and Endpoints times are the API server's).
const FLAGS_HOLD: Duration = Duration::from_secs(89 * 60);

/// Seconds between `o`'s creation (the API server's clock) and the capture moment.
fn age(c: &Ctx, o: &Value) -> i64 {
    let created = o["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(Utc::now);
    (c.at(0) - created).num_seconds()
}

/// Seconds between now (a write just made) and the capture moment.
fn now_before_capture(c: &Ctx) -> i64 {
    (c.at(0) - Utc::now()).num_seconds()
}

/// `kubectl rollout restart deployment/<app>`: the template's restartedAt annotation.
async fn rollout_restart(c: &Ctx, app: &str) {
    let at = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    patch_as(
        &c.k,
        "kubectl-rollout",
        "apps/v1",
        "Deployment",
        app,
        json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": at}}}}}),
    )
    .await;
}

/// Play the kubelets through the deployment controller's rolling update of `app` to
/// `revision`: every new pod starts and is Ready (as it is for its first seconds), every old
/// pod the controller deletes goes, until `n` new pods and no old one are left. The new pods
/// run on `nodes` in turn, with IPs from `ip_base`.
async fn roll_out(
    c: &Ctx,
    app: &str,
    revision: &str,
    n: usize,
    nodes: &[String],
    ip_base: u8,
) -> Vec<Value> {
    let k = &c.k;
    let rs = replicaset(k, app, revision).await;
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut placed: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let list = k
            .api("v1", "Pod")
            .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap();
        let pods: Vec<Value> = list
            .items
            .into_iter()
            .map(|p| serde_json::to_value(p).unwrap())
            .collect();
        let mut old_left = 0;
        for p in &pods {
            let new = p["metadata"]["labels"]["pod-template-hash"] == hash.as_str();
            let going = p["metadata"]["deletionTimestamp"].is_string();
            if new && !going && !placed.contains(&name(p)) {
                // Image present, container created and started, probe passed: a few seconds.
                tokio::time::sleep(Duration::from_secs(4)).await;
                let i = placed.len();
                run(
                    c,
                    p,
                    &nodes[i % nodes.len()],
                    &c.ip(ip_base + i as u8),
                    age(c, p) - 1,
                )
                .await;
                placed.push(name(p));
            } else if !new {
                old_left += 1;
                if going {
                    kubelet_delete(k, &name(p)).await;
                }
            }
        }
        if placed.len() == n && old_left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout of {app} to revision {revision}: {} new, {old_left} old",
            placed.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    k.pods(&format!("app={app},pod-template-hash={hash}"), n)
        .await
}

/// The runs `(started, finished)` of a container that ran `first` and is then killed `run`
/// seconds after every start, restarted with the kubelet's back-off (10 s doubling to 5 min);
/// and whether the last of them is running now (its end lies after the capture).
fn restart_cycle(first: (i64, i64), run: i64) -> (Vec<(i64, i64)>, bool) {
    let mut runs = vec![first];
    let mut backoff = 10;
    loop {
        let (_, end) = *runs.last().unwrap();
        let start = end - backoff;
        if start <= 0 {
            return (runs, false);
        }
        runs.push((start, start - run));
        if start - run <= 0 {
            return (runs, true);
        }
        backoff = (backoff * 2).min(300);
    }
}

/// The kubelet's status of a pod (started `start` seconds before capture) whose one container
/// was OOMKilled at the end of every run in `runs` but the last, which runs now (`running`) or
/// was killed too and waits out its back-off. Not ready since the first kill.
fn oom_loop_status(
    c: &Ctx,
    pod: &Value,
    (image, ip, start): (&str, &str, i64),
    runs: &[(i64, i64)],
    running: bool,
) -> Value {
    let ct = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let restarts = runs.len() as i64 - 1;
    let last = *runs.last().unwrap();
    let status = if running {
        let prev = runs[runs.len() - 2];
        c_running(
            c,
            (&ct, image),
            last.0,
            false,
            restarts,
            terminated(c, 137, "OOMKilled", prev),
        )
    } else {
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_owned();
        c_waiting(
            (&ct, image),
            (
                "CrashLoopBackOff",
                &format!(
                    "back-off 5m0s restarting failed container={ct} pod={}_{}({uid})",
                    name(pod),
                    pod["metadata"]["namespace"].as_str().unwrap_or("")
                ),
            ),
            restarts,
            terminated(c, 137, "OOMKilled", last),
        )
    };
    let mut st = pod_status(c, "Running", start, ip, vec![status]);
    for i in [1, 2] {
        st["conditions"][i]["lastTransitionTime"] = json!(c.t(runs[0].1));
    }
    st
}

/// The kubelet's events of a container restarted through `runs` (see [`restart_cycle`]).
async fn restart_events(c: &Ctx, pod: &Value, image: &str, runs: &[(i64, i64)]) {
    let ct = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let n = runs.len() as i64;
    let (first, last) = (runs[0].0, runs[runs.len() - 1].0);
    for (reason, message, lead) in [
        (
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
            1,
        ),
        ("Created", format!("Created container {ct}"), 1),
        ("Started", format!("Started container {ct}"), 0),
    ] {
        kubelet_event(
            c,
            pod,
            "Normal",
            reason,
            &message,
            n,
            (first + lead, last + lead),
        )
        .await;
    }
    if n > 1 {
        // Backing off now, or until just before the run that goes on now.
        let waited: i64 = runs.windows(2).map(|w| w[0].1 - w[1].0).sum();
        let until = if runs[runs.len() - 1].1 <= 0 {
            last + 1
        } else {
            6
        };
        kubelet_event(
            c,
            pod,
            "Warning",
            "BackOff",
            "Back-off restarting failed container",
            waited / 10 + n,
            (runs[0].1 - 2, until),
        )
        .await;
    }
}

/// [`Ctx::logs_of`] for lines built at run time.
fn logs_owned(c: &Ctx, pod: &Value, container: &str, previous: bool, lines: &[(i64, String)]) {
    let lines: Vec<(i64, &str)> = lines.iter().map(|(t, l)| (*t, l.as_str())).collect();
    c.logs_of(pod, container, previous, &lines);
}

const TILE_CONFIG: &str = r#"# tile-server configuration (maps platform, staging)
server:
  port: 8080
  workers: 4
style: s3://maps-styles-eu/osm-bright/v12/style.json
cache:
  # tiles kept in memory; preloaded from the hot-tile index at start
  max_tiles: 40000
  preload: hot-tiles
  hot_tiles: s3://maps-tiles-eu/hot/z0-14.idx
  ttl: 24h
render:
  max_zoom: 18
  timeout: 3s
"#;

/// Someone raised tile-server's cache tenfold (kubectl edit of its mounted ConfigMap) and
/// restarted it a minute later; the rollout completed (the pods are ready before their cache
/// warm-up) and every new pod is OOMKilled at its unchanged 512Mi limit while warming up.
fn configmap_cache_raised_oomkill(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        patch_as(
            k,
            "kubectl-label",
            "v1",
            "Namespace",
            &k.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": "staging", "team": "maps"}}}),
        )
        .await;
        let app = "tile-server";
        let cm = "tile-server-config";
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "labels": {"app": app}},
            "data": {"config.yaml": TILE_CONFIG}}),
        )
        .await;
        let image = "registry.example.com/maps/tile-server:2.9.1";
        let mut ct = container(app, image, Some(8080));
        ct["args"] = json!(["--config=/etc/tile-server/config.yaml"]);
        ct["resources"] =
            json!({"requests": {"cpu": "250m", "memory": "384Mi"}, "limits": {"memory": "512Mi"}});
        ct["volumeMounts"] =
            json!([{"name": "config", "mountPath": "/etc/tile-server", "readOnly": true}]);
        ct["readinessProbe"] =
            json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5});
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                app,
                3,
                json!([ct]),
                json!({"volumes": [{"name": "config", "configMap": {"name": cm}}]}),
            ),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), age(c, p) - 2).await;
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        // A tenfold cache, edited in place; a minute later the pods are restarted to read it.
        let raised = TILE_CONFIG.replace("max_tiles: 40000", "max_tiles: 400000");
        assert_ne!(raised, TILE_CONFIG);
        patch_as(
            k,
            "kubectl-edit",
            "v1",
            "ConfigMap",
            cm,
            json!({"data": {"config.yaml": raised}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        rollout_restart(c, app).await;
        let new = roll_out(c, app, "2", 3, &nodes, 20).await;
        // Each warm-up grows past 512Mi 40 to 60 seconds after the start.
        tokio::time::sleep(Duration::from_secs(40)).await;
        let mut alerted: Option<(Value, i64)> = None;
        for (i, p) in new.iter().enumerate() {
            let start = age(c, p) - 2;
            let killed_after = [39, 58, 60][i];
            let (runs, running) = restart_cycle((start, start - killed_after), killed_after);
            let st = oom_loop_status(c, p, (image, &c.ip(20 + i as u8), start), &runs, running);
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            restart_events(c, &p, image, &runs).await;
            let log = |(s, e): (i64, i64)| -> Vec<(i64, String)> {
                let mut lines = vec![
                    (s - 1, "level=info msg=\"tile-server 2.9.1 starting\" config=/etc/tile-server/config.yaml".to_owned()),
                    (s - 1, "level=info msg=\"config loaded\" cache.max_tiles=400000 cache.preload=hot-tiles cache.ttl=24h render.max_zoom=18 workers=4".to_owned()),
                    (s - 2, "level=info msg=listening addr=:8080".to_owned()),
                    (s - 2, "level=info msg=\"cache warm-up: preloading up to 400000 tiles\" source=s3://maps-tiles-eu/hot/z0-14.idx".to_owned()),
                ];
                let step = (s - e) / 4;
                for j in 1..=3 {
                    let tiles = 100_000 * j;
                    let rss = 38 + 133 * j;
                    lines.push((
                        s - step * j,
                        format!("level=info msg=\"cache warm-up\" tiles={tiles} rss_mib={rss} limit_mib=512"),
                    ));
                }
                lines
            };
            let last = *runs.last().unwrap();
            if running {
                let now: Vec<(i64, String)> =
                    log(last).into_iter().filter(|(t, _)| *t > 0).collect();
                logs_owned(c, &p, app, false, &now);
                logs_owned(c, &p, app, true, &log(runs[runs.len() - 2]));
            } else {
                logs_owned(c, &p, app, true, &log(last));
                if alerted.is_none() {
                    // In back-off since its second kill; the rule holds for 15 minutes.
                    alerted = Some((p.clone(), (runs[1].1 - 900).max(30)));
                }
            }
        }
        let (alerted, since) = alerted.unwrap_or_else(|| (new[0].clone(), 120));
        staged(c, crashloop_alert(c, &alerted, app, since))
    })
}

/// suggest-api's in-memory index outgrew its 1Gi limit with the catalogue: one pod was first
/// OOMKilled about 38 minutes before the capture, a second about 31, the third runs at the
/// edge. Well after the first kill the on-call set LOG_LEVEL=debug in its env ConfigMap with
/// kubectl edit (no restart); containers started since log at debug and die the same way.
fn oomkill_organic_growth_config_edited_after(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let app = "suggest-api";
        let cm = "suggest-api-env";
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "labels": {"app": app}},
            "data": {"LOG_LEVEL": "info", "INDEX_SNAPSHOT_URL": "s3://suggest-snapshots-eu/products/",
                "KAFKA_BROKERS": "catalog-kafka-bootstrap.catalog-events:9092", "KAFKA_TOPIC": "catalog.products.v2",
                "INDEX_MIN_PREFIX": "2", "MAX_SUGGESTIONS": "10"}}),
        )
        .await;
        let image = "registry.example.com/search/suggest-api:4.7.3";
        let mut ct = container(app, image, Some(8080));
        ct["envFrom"] = json!([{"configMapRef": {"name": cm}}]);
        ct["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}});
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 10, "failureThreshold": 3});
        let mut d = workload("Deployment", app, 3, json!([ct]), json!({}));
        d["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
        create_as(k, "helm", d).await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), age(c, p) - 2).await;
        }
        available(k, app, 3).await;
        // The pods serve (and grow) for a while: the first kills and the alert come before the
        // edit. The kubelet reports each first kill when it happens (the Deployment's
        // availability changes then); the full history is written at the end.
        let capture = Utc::now() + chrono::Duration::from_std(GROWTH_HOLD).unwrap() + c.offset;
        let first_kills: [i64; 2] = [2_290, 1_860];
        for (p, kill) in pods.iter().zip(first_kills) {
            let at = capture - chrono::Duration::seconds(kill);
            if let Ok(wait) = (at - Utc::now()).to_std() {
                tokio::time::sleep(wait).await;
            }
            let now = Utc::now();
            let ts =
                |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let mut st = k.get("v1", "Pod", &name(p)).await["status"].clone();
            for cond in st["conditions"].as_array_mut().unwrap() {
                if cond["type"] == "Ready" || cond["type"] == "ContainersReady" {
                    cond["status"] = json!("False");
                    cond["reason"] = json!("ContainersNotReady");
                    cond["message"] = json!(format!("containers with unready status: [{app}]"));
                    cond["lastTransitionTime"] = json!(ts(now));
                }
            }
            let cs = &mut st["containerStatuses"][0];
            cs["lastState"] = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled",
                "startedAt": cs["state"]["running"]["startedAt"].clone(),
                "finishedAt": ts(now - chrono::Duration::seconds(10)), "containerID": cs["containerID"].clone()}});
            cs["containerID"] = json!(container_id());
            cs["state"] = json!({"running": {"startedAt": ts(now)}});
            cs["ready"] = json!(false);
            cs["restartCount"] = json!(1);
            status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
        }
        if let Ok(wait) = (capture - c.offset - Utc::now()).to_std() {
            tokio::time::sleep(wait).await;
        }
        patch_as(
            k,
            "kubectl-edit",
            "v1",
            "ConfigMap",
            cm,
            json!({"data": {"LOG_LEVEL": "debug"}}),
        )
        .await;
        let edited = now_before_capture(c);
        let day = |d: i64| {
            (c.at(0) - chrono::Duration::days(d))
                .format("%Y-%m-%d")
                .to_string()
        };
        let manifest = format!(
            "snapshot {}T02:00Z: 8412551 entries (snapshot {}T02:00Z: 7698114, +9.3% in 7 days)",
            day(0),
            day(7)
        );
        let mut alerted = None;
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(10 + i as u8);
            let start = age(c, p) - 2;
            if i == 2 {
                // Not killed yet: its memory climbs with the live updates.
                let mut lines = vec![
                    (start - 1, "INFO  suggest-api 4.7.3 starting (cgroup memory limit 1024 MiB, log level info)".to_owned()),
                    (start - 2, format!("INFO  {manifest}")),
                    (start - 118, "INFO  index built: 8412551 entries in 116s, rss 912 MiB".to_owned()),
                    (start - 120, "INFO  kafka: consuming catalog.products.v2 (12 partitions) from the snapshot's offsets".to_owned()),
                    (start - 121, "INFO  listening on :8080".to_owned()),
                ];
                // Every five minutes; resident memory climbs to 1001 MiB at the last one.
                let times: Vec<i64> = (0..)
                    .map(|j| start - 420 - 300 * j)
                    .take_while(|t| *t > 30)
                    .collect();
                let m = times.len().max(2) as i64;
                for (j, t) in times.iter().enumerate() {
                    let j = j as i64;
                    let rss = 924 + (1001 - 924) * j / (m - 1);
                    lines.push((*t, format!("INFO  stats 300s: {} queries, p99 {}ms, index {} entries (+{} live), rss {rss} MiB of 1024 MiB",
                        13_800 + 97 * j, 8 + j % 3, 8_412_551 + 1_163 * (j + 1), 1_163 * (j + 1))));
                    let share = (rss * 100 + 512) / 1024;
                    if share >= 95 {
                        lines.push((t - 1, format!("WARN  memory: rss {rss} MiB is {share}% of the cgroup limit (1024 MiB)")));
                    }
                }
                logs_owned(c, p, app, false, &lines);
                // Ready once its index was built.
                let mut st = pod_status(
                    c,
                    "Running",
                    start,
                    &ip,
                    vec![c_running(c, (app, image), start, true, 0, json!({}))],
                );
                for j in [1, 2] {
                    st["conditions"][j]["lastTransitionTime"] = json!(c.t(start - 121));
                }
                status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
                continue;
            }
            // Killed first at these times before the capture; each start reloads the index.
            let first_kill = first_kills[i].min(start - 60);
            let (runs, running) = restart_cycle((start, first_kill), 170);
            let st = oom_loop_status(c, p, (image, &ip, start), &runs, running);
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            restart_events(c, &p, image, &runs).await;
            let log = |(s, e): (i64, i64)| -> Vec<(i64, String)> {
                let debug = s < edited;
                let level = if debug { "debug" } else { "info" };
                let mut lines = vec![(
                    s - 1,
                    format!(
                        "INFO  suggest-api 4.7.3 starting (cgroup memory limit 1024 MiB, log level {level})"
                    ),
                )];
                if debug {
                    lines.push((s - 1, "DEBUG config: INDEX_SNAPSHOT_URL=s3://suggest-snapshots-eu/products/ KAFKA_TOPIC=catalog.products.v2 INDEX_MIN_PREFIX=2 MAX_SUGGESTIONS=10".to_owned()));
                }
                lines.push((s - 2, format!("INFO  {manifest}")));
                if debug {
                    for (j, (entries, rss)) in [
                        (2_000_000, 231),
                        (4_000_000, 455),
                        (6_000_000, 679),
                        (8_000_000, 902),
                    ]
                    .iter()
                    .enumerate()
                    {
                        let at = s - 25 * (j as i64 + 1);
                        if at > e {
                            lines.push((
                                at,
                                format!("DEBUG index: {entries} entries loaded, rss {rss} MiB"),
                            ));
                        }
                    }
                    if s - 112 > e {
                        lines.push((s - 112, "DEBUG index: 8412551 entries loaded, building prefix tree, rss 958 MiB".to_owned()));
                    }
                    if e + 3 < s {
                        lines.push((
                            e + 3,
                            "DEBUG index: prefix tree 71% built, rss 1019 MiB".to_owned(),
                        ));
                    }
                }
                lines
            };
            let last = *runs.last().unwrap();
            if running {
                let now: Vec<(i64, String)> =
                    log(last).into_iter().filter(|(t, _)| *t > 0).collect();
                logs_owned(c, &p, app, false, &now);
                logs_owned(c, &p, app, true, &log(runs[runs.len() - 2]));
            } else {
                logs_owned(c, &p, app, true, &log(last));
            }
            if alerted.is_none() && runs.len() > 1 {
                alerted = Some((p.clone(), (runs[1].1 - 900).max(30)));
            }
        }
        let (alerted, since) = alerted.unwrap();
        staged(c, crashloop_alert(c, &alerted, app, since))
    })
}

/// rate-shopper's CARRIER_GATEWAY_URL (env from a ConfigMap) was edited to a namespace that
/// does not exist and the Deployment rollout-restarted half a minute later; the new pods were
/// ready for their first seconds, so no old pod is left, and none is ready now.
fn upstream_url_edited_then_restarted(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        // The upstream, healthy throughout.
        let gw = "carrier-gateway";
        let gw_image = "registry.example.com/shipping/carrier-gateway:3.2.0";
        create_as(
            k,
            "helm",
            workload(
                "Deployment",
                gw,
                2,
                json!([container(gw, gw_image, Some(8080))]),
                json!({}),
            ),
        )
        .await;
        create_as(k, "helm", service(gw, gw, 8080, json!("http"))).await;
        for (i, p) in k.pods(&format!("app={gw}"), 2).await.iter().enumerate() {
            let p = run(c, p, &nodes[i], &c.ip(30 + i as u8), age(c, p) - 2).await;
            c.logs_of(
                &p,
                gw,
                false,
                &[
                    (age(c, &p) - 4, "INFO  carrier-gateway 3.2.0 listening on :8080 (carriers: dhl-express, ups, dpd, gls)"),
                    (600, "INFO  300s: 2210 rate requests, 0 errors, p99 180ms"),
                    (300, "INFO  300s: 1984 rate requests, 0 errors, p99 171ms"),
                ],
            );
        }
        let app = "rate-shopper";
        let cm = "rate-shopper-env";
        let good = "http://carrier-gateway.shipping.svc.cluster.local:8080";
        let bad = "http://carrier-gateway.shipping-v2.svc.cluster.local:8080";
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "labels": {"app": app}},
            "data": {"CARRIER_GATEWAY_URL": good, "QUOTE_TIMEOUT": "2s", "DEFAULT_CURRENCY": "EUR"}}),
        )
        .await;
        let image = "registry.example.com/shipping/rate-shopper:1.18.4";
        let mut ct = container(app, image, Some(8080));
        let key =
            |k: &str| json!({"name": k, "valueFrom": {"configMapKeyRef": {"name": cm, "key": k}}});
        ct["env"] = json!([
            key("CARRIER_GATEWAY_URL"),
            key("QUOTE_TIMEOUT"),
            key("DEFAULT_CURRENCY")
        ]);
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 10, "failureThreshold": 3});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        for (i, p) in k.pods(&format!("app={app}"), 3).await.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), age(c, p) - 2).await;
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        // The gateway's move to a new namespace, edited ahead of it; then a restart to pick it up.
        patch_as(
            k,
            "kubectl-edit",
            "v1",
            "ConfigMap",
            cm,
            json!({"data": {"CARRIER_GATEWAY_URL": bad}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        rollout_restart(c, app).await;
        let new = roll_out(c, app, "2", 3, &nodes, 20).await;
        // Ready until their dependency check has failed three times.
        tokio::time::sleep(Duration::from_secs(30)).await;
        let err = format!(
            "Post \"{bad}/v1/rates\": dial tcp: lookup carrier-gateway.shipping-v2.svc.cluster.local on 10.0.0.10:53: no such host"
        );
        let mut since = 0;
        for (i, p) in new.iter().enumerate() {
            let start = age(c, p) - 1;
            // Ready until its dependency check has failed three times.
            let unready = start - 34;
            since = since.max(unready);
            let mut st = pod_status(
                c,
                "Running",
                start,
                &c.ip(20 + i as u8),
                vec![c_running(c, (app, image), start - 4, false, 0, json!({}))],
            );
            for j in [1, 2] {
                st["conditions"][j]["lastTransitionTime"] = json!(c.t(unready));
            }
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                unready / 10,
                (unready + 8, 4),
            )
            .await;
            logs_owned(
                c,
                &p,
                app,
                false,
                &[
                    (start - 5, "INFO  rate-shopper 1.18.4 starting".to_owned()),
                    (start - 5, format!("INFO  carrier gateway {bad}, quote timeout 2s, currency EUR")),
                    (start - 6, "INFO  listening on :8080".to_owned()),
                    (start - 12, format!("ERROR quote order=SO-7712{i}3 carrier=dhl-express: {err}")),
                    (start - 22, format!("ERROR quote order=SO-7712{i}7 carrier=ups: {err}")),
                    (start - 32, format!("ERROR dependency check carrier-gateway: {err}")),
                    (unready, "WARN  ready: carrier-gateway unreachable (3 consecutive errors), reporting not ready".to_owned()),
                    (95, format!("ERROR quote order=SO-7744{i}0 carrier=dpd: {err}")),
                    (40, format!("ERROR dependency check carrier-gateway: {err}")),
                    (11, format!("ERROR quote order=SO-7744{i}2 carrier=gls: {err}")),
                ],
            );
        }
        // KubeDeploymentReplicasMismatch holds for 15 minutes.
        staged(
            c,
            replicas_mismatch_alert(c, "Deployment", app, (since - 900).max(30)),
        )
    })
}

/// Argo CD applied the platform team's baseline default-deny-ingress NetworkPolicy to the
/// database namespace claims-data; claims-api (namespace claims), running since before, keeps
/// its established connections for a minute, then every new one to claims-postgres times out.
fn networkpolicy_added_before_readiness_failures(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let data = c.ns("claims-data");
        // The database (a bitnami/postgresql release).
        let db = "claims-postgres";
        let db_image = "docker.io/bitnami/postgresql:15.4.0-debian-11-r45";
        let mut pg = container("postgresql", db_image, None);
        pg["ports"] = json!([{"name": "tcp-postgresql", "containerPort": 5432, "protocol": "TCP"}]);
        pg["resources"] =
            json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}});
        pg["readinessProbe"] = json!({"exec": {"command": ["/bin/sh", "-c", "-e", "exec pg_isready -U \"claims_app\" -d \"dbname=claims\" -h 127.0.0.1 -p 5432"]},
            "periodSeconds": 10, "timeoutSeconds": 5});
        let mut sts = workload("StatefulSet", db, 1, json!([pg]), json!({}));
        sts["spec"]["serviceName"] = json!(format!("{db}-hl"));
        create_as(&data, "helm", sts).await;
        let mut svc = service(db, db, 5432, json!("tcp-postgresql"));
        svc["spec"]["ports"][0]["name"] = json!("tcp-postgresql");
        let svc = create_as(&data, "helm", svc).await;
        let db_ip = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_owned();
        let mut hl = service(&format!("{db}-hl"), db, 5432, json!("tcp-postgresql"));
        hl["spec"]["clusterIP"] = json!("None");
        hl["spec"]["publishNotReadyAddresses"] = json!(true);
        hl["spec"]["ports"][0]["name"] = json!("tcp-postgresql");
        create_as(&data, "helm", hl).await;
        let dbp = sts_pod(&data, &format!("{db}-0")).await;
        let dbp = run(c, &dbp, &nodes[2], &c.ip(30), age(c, &dbp) - 2).await;
        // The app, in its own namespace.
        let app = "claims-api";
        let image = "registry.example.com/claims/claims-api:2.4.0";
        let mut ct = container(app, image, Some(8080));
        ct["env"] = json!([
            {"name": "DATABASE_URL", "value": "postgres://claims_app@claims-postgres.claims-data.svc.cluster.local:5432/claims?pool_max_conns=10&pool_max_conn_lifetime=5m"}]);
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 10, "timeoutSeconds": 3, "failureThreshold": 3});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(10 + i as u8), age(c, p) - 2).await;
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(120)).await;
        // The platform team's network baseline reaches this namespace through Argo CD.
        let np = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-ingress", "labels": {"app.kubernetes.io/instance": "platform-netpol-baseline"}},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}});
        let mut last_applied = np.clone();
        last_applied["metadata"]["namespace"] = json!("claims-data");
        let mut np = np;
        np["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": serde_json::to_string(&last_applied).unwrap()});
        let np = create_as(&data, "argocd-application-controller", np).await;
        // Established connections outlive the policy; the pool's next reconnects do not, and
        // the readiness probes fail from then on (the kubelet reports it then).
        tokio::time::sleep(Duration::from_secs(90)).await;
        let applied = age(c, &np);
        let db_start = age(c, &dbp) - 4;
        let failing = applied - 65;
        let err = format!(
            "failed to connect to `host=claims-postgres.claims-data.svc.cluster.local user=claims_app database=claims`: dial error (dial tcp {db_ip}:5432: i/o timeout)"
        );
        let mut since = 0;
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(10 + i as u8);
            let start = age(c, p) - 2;
            let unready = failing - 25 - 5 * i as i64;
            since = since.max(unready);
            let mut st = pod_status(
                c,
                "Running",
                start,
                &ip,
                vec![c_running(c, (app, image), start - 4, false, 0, json!({}))],
            );
            for j in [1, 2] {
                st["conditions"][j]["lastTransitionTime"] = json!(c.t(unready));
            }
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                unready / 10 + 2,
                (unready + 20, 7),
            )
            .await;
            let mut lines = vec![
                (start - 5, "INFO  claims-api 2.4.0 starting".to_owned()),
                (start - 6, "INFO  db: pool ready (claims-postgres.claims-data.svc.cluster.local:5432/claims, max 10 conns, max lifetime 5m)".to_owned()),
                (start - 6, "INFO  listening on :8080".to_owned()),
            ];
            let mut t = start - 300;
            while t > applied {
                lines.push((
                    t,
                    "INFO  300s: 1843 requests, 0 errors, p99 28ms".to_owned(),
                ));
                t -= 300;
            }
            lines.extend([
                (
                    failing - 5 * i as i64,
                    "INFO  db: connection reached max lifetime, reconnecting".to_owned(),
                ),
                (failing - 5 * i as i64 - 10, format!("ERROR db: {err}")),
                (
                    failing - 5 * i as i64 - 12,
                    format!("ERROR POST /v1/claims/CLM-2291{i}8/notes: {err}"),
                ),
                (
                    unready,
                    "WARN  GET /ready 503 (db: acquire connection: context deadline exceeded)"
                        .to_owned(),
                ),
                (
                    300,
                    "INFO  300s: 1790 requests, 1790 errors (db unavailable), pool 0/10 connected"
                        .to_owned(),
                ),
                (45, format!("ERROR db: {err}")),
                (
                    12,
                    "WARN  GET /ready 503 (db: acquire connection: context deadline exceeded)"
                        .to_owned(),
                ),
            ]);
            logs_owned(c, &p, app, false, &lines);
        }
        // The database itself is fine: its last client connections simply stop.
        logs_owned(
            c,
            &dbp,
            "postgresql",
            false,
            &[
                (db_start - 2, "postgresql INFO  ==> ** Starting PostgreSQL **".to_owned()),
                (db_start - 3, "LOG:  listening on IPv4 address \"0.0.0.0\", port 5432".to_owned()),
                (db_start - 4, "LOG:  database system is ready to accept connections".to_owned()),
                ((db_start + applied) / 2, "LOG:  checkpoint complete: wrote 1821 buffers (11.1%); 0 WAL file(s) added, 0 removed, 1 recycled".to_owned()),
                (failing + 8, format!("LOG:  disconnection: session time: 0:05:00.012 user=claims_app database=claims host={}", c.ip(10))),
                (failing + 3, format!("LOG:  disconnection: session time: 0:05:00.009 user=claims_app database=claims host={}", c.ip(11))),
                (240, "LOG:  checkpoint complete: wrote 12 buffers (0.1%); 0 WAL file(s) added, 0 removed, 0 recycled".to_owned()),
            ],
        );
        staged(
            c,
            replicas_mismatch_alert(c, "Deployment", app, (since - 900).max(30)),
        )
    })
}

/// subs-mysql's primary (subs-mysql-0) stalled on I/O and the mysql-operator promoted
/// subs-mysql-1; subs-mysql-0 came back as a super-read-only replica and subscription-api's
/// pooled connections, opened to it hours before, now fail every write. An hour and a half
/// before that, someone flipped a feature flag in the app's env ConfigMap without a restart.
fn stale_connections_after_unrelated_configmap_edit(c: &Ctx) -> Fut<'_> {
    Box::pin(async move {
        let nodes = c.nodes(3, ZONES).await;
        let k = &c.k;
        let db = "subs-mysql";
        let db_image = "percona:5.7.35";
        let mut my = container("mysql", db_image, None);
        my["ports"] = json!([{"name": "mysql", "containerPort": 3306, "protocol": "TCP"}]);
        my["resources"] =
            json!({"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}});
        my["livenessProbe"] = json!({"exec": {"command": ["mysqladmin", "ping"]},
            "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 10});
        my["readinessProbe"] = json!({"exec": {"command": ["mysql", "-h", "127.0.0.1", "-e", "SELECT 1"]},
            "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3});
        let mut sts = workload("StatefulSet", db, 2, json!([my]), json!({}));
        sts["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        sts["spec"]["podManagementPolicy"] = json!("Parallel");
        create_as(k, "mysql-operator", sts).await;
        let mut headless = service(db, db, 3306, json!(3306));
        headless["spec"]["clusterIP"] = json!("None");
        headless["spec"]["ports"][0]["name"] = json!("mysql");
        create_as(k, "mysql-operator", headless).await;
        let mut master = service(&format!("{db}-master"), db, 3306, json!(3306));
        master["spec"]["clusterIP"] = json!("None");
        master["spec"]["ports"][0]["name"] = json!("mysql");
        master["spec"]["selector"] = json!({"app": db, "role": "master"});
        create_as(k, "mysql-operator", master).await;
        let mut replicas = service(&format!("{db}-replicas"), db, 3306, json!(3306));
        replicas["spec"]["ports"][0]["name"] = json!("mysql");
        replicas["spec"]["selector"] = json!({"app": db, "role": "replica"});
        create_as(k, "mysql-operator", replicas).await;
        let mut dbs = Vec::new();
        for (i, role) in ["master", "replica"].iter().enumerate() {
            let p = sts_pod(k, &format!("{db}-{i}")).await;
            let p = run(c, &p, &nodes[i], &c.ip(12 + i as u8), age(c, &p) - 2).await;
            patch_as(
                k,
                "mysql-operator",
                "v1",
                "Pod",
                &name(&p),
                json!({"metadata": {"labels": {"role": role}}}),
            )
            .await;
            dbs.push(p);
        }
        let app = "subscription-api";
        let flags = "subscription-api-flags";
        create_as(
            k,
            "helm",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": flags, "labels": {"app": app}},
            "data": {"FEATURE_PRORATION_V2": "false", "FEATURE_DUNNING_EMAILS": "true", "FEATURE_ANNUAL_PLANS": "true"}}),
        )
        .await;
        let image = "registry.example.com/billing/subscription-api:5.2.1";
        let mut ct = container(app, image, Some(8080));
        ct["envFrom"] = json!([{"configMapRef": {"name": flags}}]);
        ct["env"] = json!([
            {"name": "DB_HOST", "value": "subs-mysql-master.subscriptions.svc.cluster.local"},
            {"name": "DB_PORT", "value": "3306"}, {"name": "DB_NAME", "value": "subscriptions"},
            {"name": "DB_USER", "value": "subs_app"}, {"name": "DB_MAX_OPEN_CONNS", "value": "16"}]);
        ct["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": "http"},
            "periodSeconds": 10, "failureThreshold": 3});
        create_as(
            k,
            "helm",
            workload("Deployment", app, 3, json!([ct]), json!({})),
        )
        .await;
        create_as(k, "helm", service(app, app, 80, json!("http"))).await;
        let pods = k.pods(&format!("app={app}"), 3).await;
        for (i, p) in pods.iter().enumerate() {
            run(c, p, &nodes[i], &c.ip(20 + i as u8), age(c, p) - 2).await;
        }
        available(k, app, 3).await;
        tokio::time::sleep(Duration::from_secs(20)).await;
        // A feature flag flipped by hand, to take effect "with the next deploy".
        patch_as(
            k,
            "kubectl-edit",
            "v1",
            "ConfigMap",
            flags,
            json!({"data": {"FEATURE_PRORATION_V2": "true"}}),
        )
        .await;
        // Nothing happens for an hour and a half (events of that time expire meanwhile).
        tokio::time::sleep(FLAGS_HOLD).await;
        // The failover: the operator moves the master label from subs-mysql-0 to subs-mysql-1.
        for (pod, role) in [(&dbs[0], "replica"), (&dbs[1], "master")] {
            patch_as(
                k,
                "mysql-operator",
                "v1",
                "Pod",
                &name(pod),
                json!({"metadata": {"labels": {"role": role}}}),
            )
            .await;
        }
        tokio::time::sleep(Duration::from_secs(25)).await;
        let moved = now_before_capture(c) + 25;
        let host = |i: usize| format!("{db}-{i}.{db}.{}", k.ns);
        // subs-mysql-0 stalled on I/O for about a minute (probes timed out, not killed).
        let start0 = age(c, &dbs[0]) - 4;
        let mut st = pod_status(
            c,
            "Running",
            start0 + 4,
            &c.ip(12),
            vec![c_running(
                c,
                ("mysql", db_image),
                start0,
                true,
                0,
                json!({}),
            )],
        );
        for j in [1, 2] {
            st["conditions"][j]["lastTransitionTime"] = json!(c.t(moved - 15));
        }
        let p0 = status_as(k, "kubelet", "v1", "Pod", &name(&dbs[0]), st).await;
        kubelet_event(
            c,
            &p0,
            "Warning",
            "Unhealthy",
            "Readiness probe failed: command \"mysql -h 127.0.0.1 -e SELECT 1\" timed out",
            11,
            (moved + 52, moved - 12),
        )
        .await;
        kubelet_event(
            c,
            &p0,
            "Warning",
            "Unhealthy",
            "Liveness probe failed: command \"mysqladmin ping\" timed out",
            6,
            (moved + 50, moved - 10),
        )
        .await;
        logs_owned(
            c,
            &p0,
            "mysql",
            false,
            &[
                (start0 - 8, "[Note] mysqld: ready for connections.".to_owned()),
                (start0 - 8, "Version: '5.7.35-38'  socket: '/var/lib/mysql/mysql.sock'  port: 3306  Percona Server (GPL), Release 38, Revision 3692a61".to_owned()),
                (moved + 58, "[Warning] InnoDB: Difficult to find free blocks in the buffer pool (21 search iterations)! 0 failed attempts to flush a page!".to_owned()),
                (moved - 11, "[Note] InnoDB: page_cleaner: 1000ms intended loop took 63871ms. The settings might not be optimal. (flushed=200 and evicted=0, during the time.)".to_owned()),
                (moved - 14, format!("[Note] 'CHANGE MASTER TO FOR CHANNEL '' executed'. Previous state master_host='', master_port= 3306, master_log_file='', master_log_pos= 4, master_bind=''. New state master_host='{}', master_port= 3306, master_log_file='mysql-bin.000017', master_log_pos= 5531071, master_bind=''.", host(1))),
                (moved - 15, format!("[Note] Slave I/O thread for channel '': connected to master 'repl@{}:3306',replication started in log 'mysql-bin.000017' at position 5531071", host(1))),
            ],
        );
        logs_owned(
            c,
            &dbs[1],
            "mysql",
            false,
            &[
                (start0 - 8, "[Note] mysqld: ready for connections.".to_owned()),
                (start0 - 8, "Version: '5.7.35-38'  socket: '/var/lib/mysql/mysql.sock'  port: 3306  Percona Server (GPL), Release 38, Revision 3692a61".to_owned()),
                (start0 - 20, format!("[Note] Slave I/O thread for channel '': connected to master 'repl@{}:3306',replication started in log 'mysql-bin.000016' at position 194", host(0))),
                (moved + 36, format!("[ERROR] Slave I/O for channel '': error reconnecting to master 'repl@{}:3306' - retry-time: 1  retries: 1, Error_code: 2013", host(0))),
                (moved + 4, "[Note] Error reading relay log event for channel '': slave SQL thread was killed".to_owned()),
                (moved + 4, "[Note] Slave I/O thread killed while connecting to master".to_owned()),
            ],
        );
        // subscription-api: every pod's pool still holds connections to subs-mysql-0.
        let old_master = c.ip(12);
        let err = "Error 1290 (HY000): The MySQL server is running with the --super-read-only option so it cannot execute this statement";
        let failing = moved - 20;
        for (i, p) in pods.iter().enumerate() {
            let ip = c.ip(20 + i as u8);
            let start = age(c, p) - 2;
            let unready = failing - 8 - 4 * i as i64;
            let mut st = pod_status(
                c,
                "Running",
                start,
                &ip,
                vec![c_running(c, (app, image), start - 4, false, 0, json!({}))],
            );
            for j in [1, 2] {
                st["conditions"][j]["lastTransitionTime"] = json!(c.t(unready));
            }
            let p = status_as(k, "kubelet", "v1", "Pod", &name(p), st).await;
            kubelet_event(
                c,
                &p,
                "Warning",
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503",
                unready / 10 + 1,
                (unready + 15, 5),
            )
            .await;
            let mut lines = vec![
                (start - 5, "INFO  subscription-api 5.2.1 starting; feature flags: proration_v2=false dunning_emails=true annual_plans=true".to_owned()),
                (start - 6, "INFO  db: pool open to subs-mysql-master.subscriptions.svc.cluster.local:3306/subscriptions (max 16 conns, no max lifetime)".to_owned()),
                (start - 6, format!("INFO  db: connected to {old_master}:3306 (@@hostname={db}-0, @@read_only=0)")),
                (start - 7, "INFO  listening on :8080".to_owned()),
            ];
            let mut t = start - 600;
            while t > moved + 60 {
                lines.push((
                    t,
                    format!(
                        "INFO  600s: {} requests, 0 errors, p99 {}ms",
                        4_380 + 17 * (t % 7),
                        31 + t % 5
                    ),
                ));
                t -= 600;
            }
            lines.extend([
                (
                    moved + 50,
                    "WARN  db: query took 61.3s (UPDATE subscriptions SET renewed_at=…)".to_owned(),
                ),
                (
                    failing - 2 * i as i64,
                    format!("ERROR renew sub_88{i}4127: {err} [conn {old_master}:3306]"),
                ),
                (
                    unready,
                    format!("WARN  GET /ready 503 (db write check failed: {err})"),
                ),
                (
                    600,
                    "INFO  600s: 4297 requests, 3511 errors (Error 1290), p99 37ms".to_owned(),
                ),
                (
                    25,
                    format!("ERROR cancel sub_77{i}0915: {err} [conn {old_master}:3306]"),
                ),
                (
                    9,
                    format!("WARN  GET /ready 503 (db write check failed: {err})"),
                ),
            ]);
            logs_owned(c, &p, app, false, &lines);
        }
        staged(
            c,
            replicas_mismatch_alert(c, "Deployment", app, (failing - 8 - 900).max(30)),
        )
    })
}

/// Every unseen incident with its namespaces, index and capture offset.
pub fn all() -> Vec<Incident> {
    macro_rules! inc {
        ($name:literal, $ns:expr, $index:literal, $offset:literal, $stage:ident) => {
            Incident {
                name: $name,
                namespaces: $ns,
                index: $index,
                offset_minutes: $offset,
                stage: $stage,
            }
        };
    }
    vec![
        inc!(
            "coredns-loop-crash",
            &["notifications", "kube-system"],
            2,
            42,
            coredns_loop_crash
        ),
        inc!(
            "init-container-dependency-down",
            &["invoicing"],
            1,
            43,
            init_container_dependency_down
        ),
        inc!(
            "networkpolicy-egress-blocks-backend",
            &["orders"],
            3,
            31,
            networkpolicy_egress_blocks_backend
        ),
        inc!(
            "liveness-probe-kills-slow-app",
            &["search"],
            4,
            45,
            liveness_probe_kills_slow_app
        ),
        inc!(
            "service-targetport-mismatch",
            &["storefront"],
            5,
            41,
            service_targetport_mismatch
        ),
        inc!(
            "pvc-storageclass-missing",
            &["uploads"],
            6,
            26,
            pvc_storageclass_missing
        ),
        inc!(
            "statefulset-volume-provisioning-failed",
            &["streaming"],
            7,
            28,
            statefulset_volume_provisioning_failed
        ),
        inc!(
            "multi-attach-rwo-rollout",
            &["observability"],
            8,
            23,
            multi_attach_rwo_rollout
        ),
        inc!(
            "node-readonly-rootfs",
            &["checkout", "default"],
            9,
            17,
            node_readonly_rootfs
        ),
        inc!(
            "node-pid-pressure",
            &["reports", "default"],
            10,
            120,
            node_pid_pressure
        ),
        inc!(
            "ephemeral-storage-eviction",
            &["media"],
            11,
            137,
            ephemeral_storage_eviction
        ),
        inc!(
            "container-exits-zero-loop",
            &["messaging"],
            12,
            46,
            container_exits_zero_loop
        ),
        inc!(
            "cronjob-forbid-hung-job",
            &["billing"],
            13,
            782,
            cronjob_forbid_hung_job
        ),
        inc!(
            "rollout-missing-configmap",
            &["web"],
            14,
            22,
            rollout_missing_configmap
        ),
        inc!(
            "statefulset-pod-on-lost-node",
            &["coordination", "default"],
            15,
            182,
            statefulset_pod_on_lost_node
        ),
        inc!(
            "paused-deployment-fix-not-rolled-out",
            &["payments"],
            16,
            47,
            paused_deployment_fix_not_rolled_out
        ),
        inc!(
            "redis-maxmemory-noeviction",
            &["cart"],
            17,
            1300,
            redis_maxmemory_noeviction
        ),
        inc!(
            "headless-service-missing",
            &["db"],
            18,
            36,
            headless_service_missing
        ),
        inc!(
            "hpa-missing-cpu-request",
            &["edge"],
            19,
            180,
            hpa_missing_cpu_request
        ),
        inc!(
            "ingress-backend-missing",
            &["shop"],
            20,
            84,
            ingress_backend_missing
        ),
        inc!(
            "x509-expired-upstream",
            &["finance"],
            21,
            59,
            x509_expired_upstream
        ),
        inc!(
            "priority-preemption-churn",
            &["analytics", "ml"],
            22,
            101,
            priority_preemption_churn
        ),
        inc!(
            "volume-node-affinity-conflict",
            &["inventory"],
            23,
            36,
            volume_node_affinity_conflict
        ),
        inc!(
            "disk-pressure-cleared",
            &["logistics", "default"],
            24,
            151,
            disk_pressure_cleared
        ),
        inc!(
            "hpa-scaleup-completed",
            &["recommendations"],
            25,
            26,
            hpa_scaleup_completed
        ),
        inc!(
            "db-failover-stale-connections",
            &["fulfillment"],
            26,
            46,
            db_failover_stale_connections
        ),
        inc!(
            "imagepull-secret-rotated",
            &["pricing"],
            27,
            40,
            imagepull_secret_rotated
        ),
        inc!(
            "rollout-stuck-nodeselector",
            &["geo"],
            28,
            36,
            rollout_stuck_nodeselector
        ),
        inc!(
            "pvc-filling-up-expandable",
            &["crm"],
            29,
            31,
            pvc_filling_up_expandable
        ),
        inc!("hpa-maxed-out-cpu", &["ads"], 30, 45, hpa_maxed_out_cpu),
        inc!(
            "leftover-maintenance-taint",
            &["ticketing"],
            31,
            540,
            leftover_maintenance_taint
        ),
        inc!(
            "node-notready-recovered",
            &["telemetry", "default"],
            32,
            40,
            node_notready_recovered
        ),
        inc!(
            "daemonset-crash-one-node-kernel",
            &["security"],
            33,
            50,
            daemonset_crash_one_node_kernel
        ),
        inc!(
            "secret-key-renamed",
            &["accounts"],
            34,
            35,
            secret_key_renamed
        ),
        inc!(
            "configmap-edited-in-place",
            &["pricing-staging"],
            35,
            56,
            configmap_edited_in_place
        ),
        inc!(
            "hostport-conflict-daemonset",
            &["metrics-pipeline", "datadog"],
            36,
            45,
            hostport_conflict_daemonset
        ),
        inc!(
            "required-anti-affinity-hpa-scaleout",
            &["quotes"],
            37,
            40,
            required_anti_affinity_hpa_scaleout
        ),
        inc!(
            "evicted-pod-tombstone",
            &["catalog"],
            38,
            310,
            evicted_pod_tombstone
        ),
        inc!(
            "stale-pidfile-emptydir",
            &["reporting"],
            39,
            60,
            stale_pidfile_emptydir
        ),
        inc!(
            "node-readiness-flapping",
            &["ingest", "default"],
            40,
            130,
            node_readiness_flapping
        ),
        inc!(
            "statefulset-partition-canary-held",
            &["search-staging"],
            41,
            2900,
            statefulset_partition_canary_held
        ),
        inc!(
            "service-selector-orphaned-by-relabel",
            &["treasury"],
            42,
            30,
            service_selector_orphaned_by_relabel
        ),
        inc!(
            "jvm-heap-flag-oomkill",
            &["warehouse"],
            43,
            27,
            jvm_heap_flag_oomkill
        ),
        inc!(
            "nfs-stale-file-handle",
            &["assets"],
            44,
            76,
            nfs_stale_file_handle
        ),
        inc!(
            "manual-scale-down-overload",
            &["marketplace"],
            45,
            43,
            manual_scale_down_overload
        ),
        inc!(
            "crashloop-during-db-upgrade-recovered",
            &["loyalty-staging"],
            46,
            79,
            crashloop_during_db_upgrade_recovered
        ),
        inc!(
            "rbac-role-narrowed-forbidden",
            &["batch-platform"],
            47,
            28,
            rbac_role_narrowed_forbidden
        ),
        inc!(
            "mesh-injection-label-removed",
            &["bookings-staging"],
            48,
            49,
            mesh_injection_label_removed
        ),
        inc!(
            "cronjob-suspended-forgotten",
            &["finance-etl"],
            49,
            4380,
            cronjob_suspended_forgotten
        ),
        inc!(
            "mutable-latest-tag-repushed",
            &["indexing-staging"],
            50,
            37,
            mutable_latest_tag_repushed
        ),
        inc!(
            "configmap-cache-raised-oomkill",
            &["maps-staging"],
            51,
            20,
            configmap_cache_raised_oomkill
        ),
        inc!(
            "oomkill-organic-growth-config-edited-after",
            &["suggest"],
            52,
            15,
            oomkill_organic_growth_config_edited_after
        ),
        inc!(
            "upstream-url-edited-then-restarted",
            &["shipping"],
            53,
            16,
            upstream_url_edited_then_restarted
        ),
        inc!(
            "networkpolicy-added-before-readiness-failures",
            &["claims", "claims-data"],
            54,
            16,
            networkpolicy_added_before_readiness_failures
        ),
        inc!(
            "stale-connections-after-unrelated-configmap-edit",
            &["subscriptions"],
            55,
            31,
            stale_connections_after_unrelated_configmap_edit
        ),
    ]
}

/// The folder of an unseen incident.
pub fn dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/unseen")
        .join(name)
}
