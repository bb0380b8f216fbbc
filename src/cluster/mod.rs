//! kubemedic's view of the cluster, and the write path execution uses.
//!
//! Two traits: [`ClusterReader`] (discovery, get, list, logs) and [`ClusterWriter`] (patch,
//! replace, create, delete, evict). The investigator is given a reader only, so nothing it does
//! can change the cluster. [`KubeCluster`] implements both against a real API server with kube-rs;
//! [`SnapshotCluster`] implements both from a YAML snapshot (its writer only records). Objects
//! travel as JSON values exactly as the API server returns them; the tools, the resource
//! context and the renderers work on those, so both implementations share all the logic.
//!
//! Safety: a [`ReadPolicy`] inside each implementation refuses blocked resources (Secrets by
//! default) and blocked namespaces — there is no way to read a Secret through these types — and
//! every tool output passes the [`crate::redact`] sanitiser before anyone sees it.

pub mod cache;
pub mod context;
mod dryrun;
pub mod jobs;
pub mod kinds;
mod kube;
mod memo;
pub mod observed;
pub mod quantity;
pub mod render;
pub mod selector;
pub mod simulate;
pub mod snapshot;
pub mod tools;
pub mod traced;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::StepDone;

pub use self::kube::{KubeCluster, KubeOptions, RequestCounter};
pub use cache::{CacheDependency, CacheStats, CachedReader, WatchCache};
pub use dryrun::{DryRunOp, DryRunWrite, DryRunWriter};
pub use memo::MemoReader;
pub use snapshot::SnapshotCluster;

/// What a write did, for the audit trail.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WriteOutcome {
    pub action: StepDone,
    pub target: String,
    pub dry_run: bool,
    pub detail: Value,
}

/// What the API server serves for a kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceInfo {
    pub kind: String,
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespaced: bool,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Options of a list call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

impl ListQuery {
    pub fn labels(selector: impl Into<String>) -> Self {
        Self {
            label_selector: Some(selector.into()),
            field_selector: None,
        }
    }
    pub fn fields(selector: impl Into<String>) -> Self {
        Self {
            label_selector: None,
            field_selector: Some(selector.into()),
        }
    }
}

/// Options of a logs call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    pub container: Option<String>,
    pub previous: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    Forbidden,
    Unauthorized,
    /// The server does not serve this kind (old server, missing CRD or aggregated API).
    NotServed,
    /// Refused by kubemedic's own read policy (Secrets, blocked namespaces).
    Blocked,
    Invalid,
    Conflict,
    /// The server refused now (a PodDisruptionBudget blocks an eviction; rate limiting).
    Refused,
    Timeout,
    /// The API server cannot be reached at all.
    Unreachable,
    Other,
}

/// An API error the investigator can reason about: what happened, and a one-line hint about
/// what to do next (the "kubectl error interpreter").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ClusterError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ClusterError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// True when the cluster itself is unreachable (the request should wait, not conclude).
    pub fn is_unreachable(&self) -> bool {
        matches!(self.kind, ErrorKind::Unreachable | ErrorKind::Timeout)
    }

    /// A one-line hint after the raw error, so the LLM does not loop on it.
    pub fn hint(&self) -> &'static str {
        match self.kind {
            ErrorKind::NotFound => {
                "The object may have been deleted or rescheduled under a new name: list the kind in the namespace (kubectl_get / kubectl_find_resource) to find the current one."
            }
            ErrorKind::Forbidden => {
                "kubemedic's service account may not read this; do not retry it — reason from other evidence and mention the gap."
            }
            ErrorKind::Unauthorized => {
                "kubemedic's credentials were rejected by the API server; cluster reads will fail until an operator fixes them."
            }
            ErrorKind::NotServed => {
                "This API is not served by this cluster (older Kubernetes, or the CRD/aggregated API is not installed); do not retry it."
            }
            ErrorKind::Blocked => {
                "kubemedic never reads this resource or namespace by policy; do not retry it."
            }
            ErrorKind::Invalid => {
                "The request was malformed (check kind, name and namespace spelling, and that the selector syntax is valid)."
            }
            ErrorKind::Conflict => {
                "The object changed while it was being updated; read it again before deciding."
            }
            ErrorKind::Refused => {
                "The API server refused this now (a PodDisruptionBudget protects the pods, or rate limiting); do not force it."
            }
            ErrorKind::Timeout => {
                "The API server did not answer in time; try a narrower query (a namespace, a selector, fewer log lines)."
            }
            ErrorKind::Unreachable => {
                "The API server cannot be reached; the investigation cannot continue until it is back."
            }
            ErrorKind::Other => "Unexpected API error; do not retry the same call more than once.",
        }
    }

    /// The error as a tool result text: the raw error, then the hint.
    pub fn tool_text(&self) -> String {
        format!(
            "Error ({:?}): {}\n→ {}",
            self.kind,
            self.message,
            self.hint()
        )
    }
}

pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

/// Read access to a cluster. All objects are JSON as the API server returns them.
#[async_trait]
pub trait ClusterReader: Send + Sync {
    /// Resolve a kind as a user or an LLM may spell it (`Pod`, `pods`, `po`, `deploy`,
    /// `deployments.apps`, `HorizontalPodAutoscaler`…) to what this server serves.
    async fn resource(&self, kind: &str) -> Result<ResourceInfo>;
    async fn get(&self, res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value>;
    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<Value>>;
    async fn logs(&self, namespace: &str, pod: &str, query: &LogQuery) -> Result<String>;
    /// `major.minor` of the server, e.g. `1.20`.
    async fn server_version(&self) -> Result<String>;
}

/// The pods of a workload `object` (a Deployment, StatefulSet, DaemonSet or ReplicaSet), as
/// observed at `now`: those its selector matches that are its own ([`observed::its_pod`]'s
/// question, asked of each pod parsed once); `None` for another kind or a workload without a
/// selector.
pub async fn workload_pods(
    reader: &dyn ClusterReader,
    target: &crate::domain::Target,
    object: &Value,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Vec<observed::Pod>>> {
    if !matches!(
        target.kind.as_str(),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
    ) {
        return Ok(None);
    }
    let Some(selector) = observed::pod_selector(object) else {
        return Ok(None);
    };
    let res = reader.resource("Pod").await?;
    let pods: Vec<observed::Pod> = reader
        .list(
            &res,
            target.namespace.as_deref(),
            &ListQuery::labels(selector.to_query()),
        )
        .await?
        .iter()
        .map(|p| observed::Pod::at(p, now))
        .filter(|p| p.selected_by(&target.kind, &target.name))
        .collect();
    heeding(reader, pods, target.namespace.as_deref())
        .await
        .map(Some)
}

/// `pods` of namespace `namespace` having heeded its events ([`observed::Pod::heed`]), as the
/// rules' evidence, the proofs' scene and the graph heed theirs: read only when a pod placed on
/// a node is still starting, the only pods a warning can be heeded for.
pub async fn heeding(
    reader: &dyn ClusterReader,
    pods: Vec<observed::Pod>,
    namespace: Option<&str>,
) -> Result<Vec<observed::Pod>> {
    if !pods.iter().any(observed::Pod::placed_not_started) {
        return Ok(pods);
    }
    let events = heeded_events(reader, namespace).await?;
    Ok(pods.into_iter().map(|p| p.heed(&events)).collect())
}

/// The events of namespace `namespace` its pods heed ([`heeding`]); none when this reader may
/// not list them (the pods' own status decides then); an error when the cluster does not answer.
pub async fn heeded_events(
    reader: &dyn ClusterReader,
    namespace: Option<&str>,
) -> Result<Vec<observed::Event>> {
    let listed = match reader.resource("Event").await {
        Ok(res) => reader.list(&res, namespace, &ListQuery::default()).await,
        Err(e) => Err(e),
    };
    match listed {
        Ok(events) => Ok(events.iter().map(observed::Event::parse).collect()),
        Err(e) if e.is_unreachable() => Err(e),
        Err(_) => Ok(vec![]),
    }
}

/// Whether an autoscaler of the target's namespace sets its replica count
/// ([`observed::Hpa::scales`], whatever kind its `scaleTargetRef` names: a custom kind with a
/// scale subresource too, as the proofs' `findings::count_set_by` reads it): then its scaling
/// is nobody's change to the spec ([`context::unchanged_spec`]). A cluster-scoped target has
/// none.
pub async fn autoscaled(
    reader: &dyn ClusterReader,
    target: &crate::domain::Target,
) -> Result<bool> {
    if target.namespace.is_none() {
        return Ok(false);
    }
    let res = reader.resource("HorizontalPodAutoscaler").await?;
    let hpas = reader
        .list(&res, target.namespace.as_deref(), &ListQuery::default())
        .await?;
    Ok(hpas
        .iter()
        .any(|h| observed::Hpa::parse(h).scales(&target.kind, &target.name)))
}

/// The events about node `node` (its kubelet's, the node controller's, node-problem-detector's),
/// in whatever namespace they were recorded: by field selector, or, from a server that has none
/// on events, from the `default` namespace, where they are recorded. The proofs and the
/// dependency graph read a node's events here.
pub async fn node_events(reader: &dyn ClusterReader, node: &str) -> Result<Vec<Value>> {
    let res = reader.resource("Event").await?;
    let query = ListQuery::fields(format!(
        "involvedObject.kind=Node,involvedObject.name={node}"
    ));
    match reader.list(&res, None, &query).await {
        Err(e) if e.kind == ErrorKind::Invalid => Ok(reader
            .list(&res, Some("default"), &ListQuery::default())
            .await?
            .into_iter()
            .filter(|e| {
                obj::str_at(e, &["involvedObject", "kind"]) == Some("Node")
                    && obj::str_at(e, &["involvedObject", "name"]) == Some(node)
            })
            .collect()),
        other => other,
    }
}

/// The kinds of change a [`ClusterWriter`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchType {
    /// JSON merge patch (RFC 7386).
    Merge,
    /// Kubernetes strategic merge patch.
    Strategic,
    /// Server-side apply, field manager `kubemedic`.
    Apply,
}

/// Write access. Every call names its object fully and supports server-side dry run; the field
/// manager is always `kubemedic`.
#[async_trait]
pub trait ClusterWriter: Send + Sync {
    async fn patch(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value>;
    /// Replace the object (PUT); `obj` carries the resourceVersion it was read at, so a
    /// concurrent change is a conflict, not a lost update.
    async fn replace(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value>;
    async fn create(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value>;
    async fn delete(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<()>;
    /// Evict a pod through the eviction subresource (respects PodDisruptionBudgets), with
    /// whichever `policy` version the server has.
    async fn evict(&self, namespace: &str, pod: &str, dry_run: bool) -> Result<()>;
}

/// How to reach and read the cluster.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The namespace kubemedic runs in (its custom resources are read from there only).
    pub own_namespace: String,
    /// Watch kubemedic's custom resources.
    pub custom_resources: bool,
    /// Investigate through a watch-backed cache ([`cache::WatchCache`]).
    pub watch_cache: bool,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub timeout: Duration,
    pub policy: ReadPolicy,
    pub tool_limits: tools::ToolLimits,
}

impl ClusterSettings {
    /// Seconds one Kubernetes API call may take, unless configured.
    pub const DEFAULT_TIMEOUT_SECONDS: u64 = 15;

    pub fn kube_options(&self) -> KubeOptions {
        KubeOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            timeout: self.timeout,
            policy: self.policy.clone(),
        }
    }
}

/// What kubemedic refuses to read, whatever it is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPolicy {
    /// Lower-case plural resource names, e.g. `secrets`.
    pub blocked_resources: Vec<String>,
    pub blocked_namespaces: Vec<String>,
}

impl Default for ReadPolicy {
    fn default() -> Self {
        Self {
            blocked_resources: vec!["secrets".into()],
            blocked_namespaces: vec![],
        }
    }
}

impl ReadPolicy {
    /// Whether a listed object stays out of the result: it lives in a blocked namespace, or it
    /// is a blocked namespace.
    pub fn hides(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let blocked = |ns: &str| self.blocked_namespaces.iter().any(|b| b == ns);
        namespace.is_some_and(blocked) || (kind == "Namespace" && blocked(name))
    }

    pub fn check(&self, res: &ResourceInfo, namespace: Option<&str>) -> Result<()> {
        let plural = res.plural.to_ascii_lowercase();
        let kind = res.kind.to_ascii_lowercase();
        if self
            .blocked_resources
            .iter()
            .any(|b| b.eq_ignore_ascii_case(&plural) || b.eq_ignore_ascii_case(&kind))
        {
            return Err(ClusterError::new(
                ErrorKind::Blocked,
                format!(
                    "reading {} is blocked by kubemedic's read policy",
                    res.plural
                ),
            ));
        }
        if let Some(ns) = namespace
            && self.blocked_namespaces.iter().any(|b| b == ns)
        {
            return Err(ClusterError::new(
                ErrorKind::Blocked,
                format!("namespace {ns} is blocked by kubemedic's read policy"),
            ));
        }
        Ok(())
    }
}

/// Small accessors for JSON objects.
pub mod obj {
    use serde_json::Value;

    pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
        at(v, path).and_then(Value::as_str)
    }

    pub fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
        path.iter().try_fold(v, |v, key| v.get(*key))
    }

    pub fn name(v: &Value) -> &str {
        str_at(v, &["metadata", "name"]).unwrap_or("")
    }

    pub fn namespace(v: &Value) -> Option<&str> {
        str_at(v, &["metadata", "namespace"])
    }

    pub fn kind(v: &Value) -> &str {
        str_at(v, &["kind"]).unwrap_or("")
    }

    /// The owner reference marked `controller`: its kind and name.
    pub fn controller(v: &Value) -> Option<(&str, &str)> {
        array(v, &["metadata", "ownerReferences"])
            .iter()
            .find(|o| at(o, &["controller"]).and_then(Value::as_bool) == Some(true))
            .map(|o| {
                (
                    str_at(o, &["kind"]).unwrap_or_default(),
                    str_at(o, &["name"]).unwrap_or_default(),
                )
            })
    }

    /// Whether `child` is `owner`'s: an owner reference of its kind and name, with its uid
    /// where both carry one (a snapshot written by hand may carry none; a namesake created
    /// after a deletion carries another). Asked wherever a workload's ReplicaSets,
    /// ControllerRevisions or pods are looked up by who owns them.
    pub fn owned_by(child: &Value, owner: &Value) -> bool {
        let (kind, name) = (self::kind(owner), self::name(owner));
        let uid = str_at(owner, &["metadata", "uid"]).filter(|u| !u.is_empty());
        array(child, &["metadata", "ownerReferences"])
            .iter()
            .any(|r| {
                (kind.is_empty() || str_at(r, &["kind"]) == Some(kind))
                    && str_at(r, &["name"]) == Some(name)
                    && match (str_at(r, &["uid"]).filter(|u| !u.is_empty()), uid) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            })
    }

    pub fn labels(v: &Value) -> impl Iterator<Item = (&str, &str)> {
        map_pairs(at(v, &["metadata", "labels"]))
    }

    pub fn annotations(v: &Value) -> impl Iterator<Item = (&str, &str)> {
        map_pairs(at(v, &["metadata", "annotations"]))
    }

    pub fn label<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
        at(v, &["metadata", "labels", key]).and_then(Value::as_str)
    }

    pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
        at(v, &["metadata", "annotations", key]).and_then(Value::as_str)
    }

    pub fn map_pairs(v: Option<&Value>) -> impl Iterator<Item = (&str, &str)> {
        v.and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter_map(|(k, v)| v.as_str().map(|s| (k.as_str(), s)))
    }

    pub fn array<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
        at(v, path)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn i64_at(v: &Value, path: &[&str]) -> Option<i64> {
        at(v, path).and_then(Value::as_i64)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::obj;

    #[test]
    fn an_object_is_its_owners_by_kind_name_and_uid_where_both_carry_one() {
        let web = json!({"kind": "Deployment", "metadata": {"name": "web", "uid": "u-2"}});
        let rs = |kind: &str, name: &str, uid: Option<&str>| json!({"metadata": {"ownerReferences": [{"kind": kind, "name": name, "uid": uid, "controller": true}]}});
        assert!(obj::owned_by(&rs("Deployment", "web", Some("u-2")), &web));
        // A namesake's, left from a Deployment deleted and created again.
        assert!(!obj::owned_by(&rs("Deployment", "web", Some("u-1")), &web));
        assert!(!obj::owned_by(&rs("StatefulSet", "web", Some("u-2")), &web));
        assert!(!obj::owned_by(&rs("Deployment", "api", None), &web));
        // A snapshot written by hand: no uid on one side or the other.
        assert!(obj::owned_by(&rs("Deployment", "web", None), &web));
        let bare = json!({"kind": "Deployment", "metadata": {"name": "web"}});
        assert!(obj::owned_by(&rs("Deployment", "web", Some("u-2")), &bare));
        assert!(!obj::owned_by(&json!({"metadata": {}}), &web));
    }

    /// Whatever kind an autoscaler names (an Argo Rollout, with a scale subresource), it sets
    /// that object's count: verification and the undo read it as the proofs do.
    #[tokio::test]
    async fn an_autoscaler_scales_whatever_kind_it_names() {
        let snap = super::SnapshotCluster::from_yaml(
            "apiVersion: kubemedic.io/v1alpha1\nkind: SnapshotInfo\ncapturedAt: \"2026-11-21T12:00:00Z\"\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web, namespace: shop}\nspec: {scaleTargetRef: {apiVersion: argoproj.io/v1alpha1, kind: Rollout, name: web}, minReplicas: 2, maxReplicas: 6}\n",
        )
        .unwrap();
        let target = |kind: &str, ns: Option<&str>| {
            crate::domain::Target::new(kind, "web", ns.map(str::to_owned))
        };
        assert!(
            super::autoscaled(&snap, &target("Rollout", Some("shop")))
                .await
                .unwrap()
        );
        assert!(
            !super::autoscaled(&snap, &target("Deployment", Some("shop")))
                .await
                .unwrap()
        );
        assert!(
            !super::autoscaled(&snap, &target("Node", None))
                .await
                .unwrap()
        );
    }
}
