//! [`SnapshotCluster`]: a cluster frozen in a multi-document YAML file.
//!
//! Documents are Kubernetes objects exactly as `kubectl get -o yaml` prints them (`List`s are
//! flattened), `PodLogs` documents for container logs, and an optional `SnapshotInfo` header.
//! It implements [`ClusterReader`] (same tools, same resource context as a live cluster) and
//! [`ClusterWriter`], whose writes are recorded — and, on a snapshot made with
//! [`SnapshotCluster::simulating`], applied, with the controllers and kubelets stood in for by
//! [`crate::cluster::simulate`]. [`capture`] makes one from a live cluster
//! (objects, events, current and previous logs; never Secrets; values sanitised), so an incident
//! can be replayed later by `kubemedic investigate --snapshot` and by the demo.

use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cluster::obj::{self, str_at};
use crate::cluster::selector::{Selector, field_matches};
use crate::cluster::simulate;
use crate::cluster::{
    ClusterError, ClusterReader, ClusterWriter, ErrorKind, ListQuery, LogQuery, PatchType,
    ReadPolicy, ResourceInfo, Result, kinds,
};

mod capture;

pub use capture::{CAPTURED_CLUSTER_KINDS, CAPTURED_KINDS, capture};

pub const SNAPSHOT_API_VERSION: &str = "kubemedic.io/v1alpha1";

/// A document that cannot be used, by its index in the file (0-based) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("snapshot document {index}: {reason}")]
pub struct SnapshotError {
    pub index: usize,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodLogs {
    pub namespace: String,
    pub name: String,
    pub container: String,
    pub previous: bool,
    pub text: String,
}

/// A change the snapshot's writer was asked to make.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedWrite {
    pub operation: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub body: Value,
    pub dry_run: bool,
}

pub struct SnapshotCluster {
    captured_at: Option<DateTime<Utc>>,
    objects: RwLock<Vec<Value>>,
    /// Writes are applied and the simulated controllers run, at this clock's time.
    simulation: Option<Arc<dyn crate::clock::Clock>>,
    logs: Vec<PodLogs>,
    server_version: String,
    policy: ReadPolicy,
    writes: Mutex<Vec<RecordedWrite>>,
    dropped_secrets: usize,
}

/// Split a YAML stream into documents on `---` lines.
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") {
            docs.push(trimmed.trim_start_matches("---").trim_start().to_owned());
            if let Some(last) = docs.last_mut()
                && !last.is_empty()
            {
                last.push('\n');
            }
            continue;
        }
        if trimmed == "..." {
            continue;
        }
        if let Some(last) = docs.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    docs
}

fn is_blank(doc: &str) -> bool {
    doc.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

impl SnapshotCluster {
    pub fn from_yaml(text: &str) -> std::result::Result<Self, SnapshotError> {
        let mut objects = Vec::new();
        let mut logs = Vec::new();
        let mut server_version = "snapshot".to_owned();
        let mut captured_at = None;
        let mut dropped_secrets = 0;
        let docs = documents(text);
        // Index documents as a reader counts them: skip an empty leading document.
        let offset = usize::from(docs.first().is_some_and(|d| is_blank(d)) && docs.len() > 1);
        for (i, doc) in docs.iter().enumerate() {
            if is_blank(doc) {
                continue;
            }
            let index = i - offset.min(i);
            let err = |reason: String| SnapshotError { index, reason };
            let value: Value =
                serde_saphyr::from_str(doc).map_err(|e| err(format!("invalid YAML: {e}")))?;
            let Value::Object(_) = &value else {
                return Err(err("not a mapping (expected a Kubernetes object)".into()));
            };
            let kind = str_at(&value, &["kind"]).ok_or_else(|| err("missing `kind`".into()))?;
            let api_version = str_at(&value, &["apiVersion"])
                .ok_or_else(|| err("missing `apiVersion`".into()))?;
            match (api_version, kind) {
                (SNAPSHOT_API_VERSION, "PodLogs") => logs.push(parse_logs(&value).map_err(err)?),
                (SNAPSHOT_API_VERSION, "SnapshotInfo") => {
                    if let Some(v) = str_at(&value, &["serverVersion"]) {
                        server_version = v.to_owned();
                    }
                    if let Some(t) = str_at(&value, &["capturedAt"]) {
                        captured_at = Some(
                            DateTime::parse_from_rfc3339(t)
                                .map_err(|e| err(format!("capturedAt `{t}`: {e}")))?
                                .with_timezone(&Utc),
                        );
                    }
                }
                (_, k) if k.ends_with("List") => {
                    let items = value
                        .get("items")
                        .and_then(Value::as_array)
                        .ok_or_else(|| err(format!("{k} without an `items` list")))?;
                    for (j, item) in items.iter().enumerate() {
                        let item =
                            validate_object(item).map_err(|r| err(format!("items[{j}]: {r}")))?;
                        if obj::kind(&item) == "Secret" {
                            dropped_secrets += 1;
                        } else {
                            objects.push(item);
                        }
                    }
                }
                _ => {
                    let item = validate_object(&value).map_err(err)?;
                    if obj::kind(&item) == "Secret" {
                        dropped_secrets += 1;
                    } else {
                        objects.push(item);
                    }
                }
            }
        }
        Ok(Self {
            captured_at,
            objects: RwLock::new(objects),
            simulation: None,
            logs,
            server_version,
            policy: ReadPolicy::default(),
            writes: Mutex::new(Vec::new()),
            dropped_secrets,
        })
    }

    pub fn load(path: &std::path::Path) -> std::result::Result<Self, SnapshotError> {
        let text = std::fs::read_to_string(path).map_err(|e| SnapshotError {
            index: 0,
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::from_yaml(&text)
    }

    pub fn with_policy(mut self, policy: ReadPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// When the snapshot was taken: replays use it as "now", so ages read as they did then.
    pub fn captured_at(&self) -> Option<DateTime<Utc>> {
        self.captured_at
    }

    /// Apply the writes it is asked for and play the controllers and kubelets a real cluster
    /// would run ([`crate::cluster::simulate`]), at `clock`'s time. What `kubemedic demo` executes
    /// against; nothing of what the simulation produces is a real cluster's answer.
    pub fn simulating(mut self, clock: Arc<dyn crate::clock::Clock>) -> Self {
        self.simulation = Some(clock);
        self
    }

    /// The objects as they are now (as captured, plus applied writes when simulating).
    pub fn objects(&self) -> Vec<Value> {
        self.read().clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Value>> {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn pod_logs(&self) -> &[PodLogs] {
        &self.logs
    }

    /// Secrets found in the file and ignored (kubemedic never reads Secrets).
    pub fn dropped_secrets(&self) -> usize {
        self.dropped_secrets
    }

    pub fn recorded_writes(&self) -> Vec<RecordedWrite> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }

    fn record(&self, w: RecordedWrite) {
        if let Ok(mut writes) = self.writes.lock() {
            writes.push(w);
        }
    }
}

fn validate_object(v: &Value) -> std::result::Result<Value, String> {
    if !v.is_object() {
        return Err("not a mapping".into());
    }
    if str_at(v, &["kind"]).is_none() {
        return Err("missing `kind`".into());
    }
    if str_at(v, &["apiVersion"]).is_none() {
        return Err("missing `apiVersion`".into());
    }
    match v.get("metadata").and_then(|m| m.get("name")) {
        Some(Value::String(n)) if !n.is_empty() => Ok(v.clone()),
        Some(_) => Err("`metadata.name` must be a non-empty string".into()),
        None => Err("missing `metadata.name`".into()),
    }
}

fn parse_logs(v: &Value) -> std::result::Result<PodLogs, String> {
    let s = |path: &[&str], what: &str| {
        str_at(v, path)
            .map(str::to_owned)
            .ok_or_else(|| format!("PodLogs without `{what}`"))
    };
    let previous = match v.get("previous") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("PodLogs `previous` must be true or false".into()),
    };
    Ok(PodLogs {
        namespace: s(&["metadata", "namespace"], "metadata.namespace")?,
        name: s(&["metadata", "name"], "metadata.name")?,
        container: s(&["container"], "container")?,
        previous,
        text: s(&["text"], "text")?,
    })
}

fn not_found(res: &ResourceInfo, name: &str) -> ClusterError {
    ClusterError::new(
        ErrorKind::NotFound,
        format!("NotFound (404): {} \"{name}\" not found", res.plural),
    )
}

#[async_trait]
impl ClusterReader for SnapshotCluster {
    async fn resource(&self, kind: &str) -> Result<ResourceInfo> {
        let res = if let Some(k) = kinds::lookup(kind) {
            // The version the snapshot's objects carry (a 1.20 capture has policy/v1beta1 PDBs).
            let objects = self.read();
            let version = objects
                .iter()
                .filter(|o| obj::kind(o) == k.kind)
                .filter_map(|o| str_at(o, &["apiVersion"]))
                .map(|v| v.rsplit('/').next().unwrap_or(v).to_owned())
                .next()
                .unwrap_or_else(|| k.versions.first().copied().unwrap_or("v1").to_owned());
            if k.group == "metrics.k8s.io" && !objects.iter().any(|o| obj::kind(o) == k.kind) {
                return Err(ClusterError::new(
                    ErrorKind::NotServed,
                    "NotFound (404): the server could not find the requested resource (metrics.k8s.io)",
                ));
            }
            ResourceInfo {
                kind: k.kind.into(),
                group: k.group.into(),
                version,
                plural: k.plural.into(),
                namespaced: k.namespaced,
            }
        } else {
            let objects = self.read();
            let o = objects
                .iter()
                .find(|o| obj::kind(o).eq_ignore_ascii_case(kind))
                .ok_or_else(|| {
                    ClusterError::new(
                        ErrorKind::NotServed,
                        format!("the server does not serve a resource called `{kind}`"),
                    )
                })?;
            let api = str_at(o, &["apiVersion"]).unwrap_or("v1");
            let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
            ResourceInfo {
                kind: obj::kind(o).to_owned(),
                group: group.to_owned(),
                version: version.to_owned(),
                plural: format!("{}s", obj::kind(o).to_ascii_lowercase()),
                namespaced: obj::namespace(o).is_some(),
            }
        };
        self.policy.check(&res, None)?;
        Ok(res)
    }

    async fn get(&self, res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.policy.check(res, namespace)?;
        let ns = if res.namespaced { namespace } else { None };
        self.read()
            .iter()
            .find(|o| obj::kind(o) == res.kind && obj::name(o) == name && obj::namespace(o) == ns)
            .cloned()
            .ok_or_else(|| not_found(res, name))
    }

    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<Value>> {
        self.policy.check(res, namespace)?;
        let selector = match &query.label_selector {
            Some(s) => Selector::parse(s).map_err(|e| ClusterError::new(ErrorKind::Invalid, e))?,
            None => Selector::default(),
        };
        let ns = if res.namespaced { namespace } else { None };
        Ok(self
            .read()
            .iter()
            .filter(|o| obj::kind(o) == res.kind)
            .filter(|o| ns.is_none() || obj::namespace(o) == ns)
            .filter(|o| {
                !self
                    .policy
                    .hides(&res.kind, obj::namespace(o), obj::name(o))
            })
            .filter(|o| selector.matches_value(obj::at(o, &["metadata", "labels"])))
            .filter(|o| {
                query
                    .field_selector
                    .as_deref()
                    .is_none_or(|f| field_matches(f, o))
            })
            .cloned()
            .collect())
    }

    async fn logs(&self, namespace: &str, pod: &str, query: &LogQuery) -> Result<String> {
        let pods = self.resource("Pod").await?;
        self.policy.check(&pods, Some(namespace))?;
        let pod_obj = self.get(&pods, Some(namespace), pod).await?;
        let containers: Vec<&str> = obj::array(&pod_obj, &["spec", "containers"])
            .iter()
            .filter_map(|c| str_at(c, &["name"]))
            .collect();
        // Init containers have logs too, as on a real API server (a default is only ever
        // among the regular containers).
        let init: Vec<&str> = obj::array(&pod_obj, &["spec", "initContainers"])
            .iter()
            .filter_map(|c| str_at(c, &["name"]))
            .collect();
        let container = match &query.container {
            Some(c)
                if containers.contains(&c.as_str())
                    || init.contains(&c.as_str())
                    || containers.is_empty() =>
            {
                c.clone()
            }
            Some(c) => {
                return Err(ClusterError::new(
                    ErrorKind::Invalid,
                    format!("BadRequest (400): container {c} is not valid for pod {pod}"),
                ));
            }
            None if containers.len() == 1 => containers
                .first()
                .map(|c| (*c).to_owned())
                .unwrap_or_default(),
            None => {
                return Err(ClusterError::new(
                    ErrorKind::Invalid,
                    format!(
                        "BadRequest (400): a container name must be specified for pod {pod}, choose one of: [{}]",
                        containers.join(" ")
                    ),
                ));
            }
        };
        let found = self.logs.iter().find(|l| {
            l.namespace == namespace
                && l.name == pod
                && l.container == container
                && l.previous == query.previous
        });
        let Some(found) = found else {
            if query.previous {
                return Err(ClusterError::new(
                    ErrorKind::Invalid,
                    format!(
                        "BadRequest (400): previous terminated container \"{container}\" in pod \"{pod}\" not found"
                    ),
                ));
            }
            return Ok(String::new());
        };
        let mut lines: Vec<&str> = found.text.lines().collect();
        // `since_seconds` as a kubelet applies it, for lines that carry their time (captured
        // with timestamps): relative to when the snapshot was taken. A line without a
        // timestamp cannot be placed in time and is kept.
        if let (Some(since), Some(at)) = (query.since_seconds, self.captured_at) {
            let from = at - chrono::Duration::seconds(since.max(0));
            lines.retain(|l| line_time(l).is_none_or(|t| t >= from));
        }
        let tail = query
            .tail_lines
            .map_or(lines.len(), |t| (t.max(0) as usize).min(lines.len()));
        let mut out = lines[lines.len() - tail..].join("\n");
        if found.text.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        Ok(out)
    }

    async fn server_version(&self) -> Result<String> {
        Ok(self.server_version.clone())
    }
}

/// The RFC 3339 time a log line starts with (`kubectl logs --timestamps`), if any.
fn line_time(line: &str) -> Option<DateTime<Utc>> {
    let first = line.split_whitespace().next()?;
    DateTime::parse_from_rfc3339(first)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl SnapshotCluster {
    /// Apply a write to the objects when simulating: `change` gets the object as it is (None:
    /// absent) and returns it as it should be (None: removed), or refuses. Stamps, stores (not
    /// on a dry run) and runs the simulated controllers. Not simulating: only checks.
    fn apply(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
        change: impl FnOnce(Option<&Value>) -> Result<Option<Value>>,
    ) -> Result<Option<Value>> {
        let ns = if res.namespaced { namespace } else { None };
        let Some(clock) = &self.simulation else {
            let objects = self.read();
            let current = objects.iter().find(|o| {
                obj::kind(o) == res.kind && obj::name(o) == name && obj::namespace(o) == ns
            });
            return change(current);
        };
        let mut objects = self
            .objects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let index = objects.iter().position(|o| {
            obj::kind(o) == res.kind && obj::name(o) == name && obj::namespace(o) == ns
        });
        let before = index.map(|i| objects[i].clone());
        let after = change(before.as_ref())?;
        if dry_run {
            return Ok(after);
        }
        let mut dirty = simulate::Dirty::new();
        let key = (res.kind.clone(), ns.map(str::to_owned), name.to_owned());
        let stored = match (index, after) {
            (Some(i), None) => {
                let removed = objects.remove(i);
                simulate::owners_of_removed(&objects, &removed, &mut dirty);
                None
            }
            (_, Some(mut o)) => {
                let version = simulate::next_resource_version(&objects);
                simulate::stamp_written(&mut o, before.as_ref(), version);
                match index {
                    Some(i) => objects[i] = o.clone(),
                    None => objects.push(o.clone()),
                }
                Some(o)
            }
            (None, None) => None,
        };
        dirty.insert(key);
        simulate::reconcile(&mut objects, &dirty, clock.now());
        // What the writer answers: the object after the controllers ran.
        Ok(stored.and_then(|o| {
            objects
                .iter()
                .find(|x| {
                    obj::kind(x) == obj::kind(&o)
                        && obj::name(x) == obj::name(&o)
                        && obj::namespace(x) == obj::namespace(&o)
                })
                .cloned()
        }))
    }
}

#[async_trait]
impl ClusterWriter for SnapshotCluster {
    async fn patch(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        self.policy.check(res, namespace)?;
        let changed = self.apply(res, namespace, name, dry_run, |current| {
            let mut o = current.cloned().ok_or_else(|| not_found(res, name))?;
            match patch_type {
                PatchType::Strategic => simulate::strategic_merge(&mut o, patch),
                PatchType::Merge | PatchType::Apply => simulate::merge_patch(&mut o, patch),
            }
            Ok(Some(o))
        })?;
        self.record(RecordedWrite {
            operation: format!("patch/{patch_type:?}").to_ascii_lowercase(),
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            body: patch.clone(),
            dry_run,
        });
        changed.ok_or_else(|| not_found(res, name))
    }

    async fn replace(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        o: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        self.policy.check(res, namespace)?;
        let changed = self.apply(res, namespace, name, dry_run, |current| {
            let current = current.ok_or_else(|| not_found(res, name))?;
            let version = |v: &Value| str_at(v, &["metadata", "resourceVersion"]).map(str::to_owned);
            if let Some(sent) = version(o)
                && Some(&sent) != version(current).as_ref()
            {
                return Err(ClusterError::new(
                    ErrorKind::Conflict,
                    format!(
                        "Conflict (409): Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                        res.plural
                    ),
                ));
            }
            Ok(Some(o.clone()))
        })?;
        self.record(RecordedWrite {
            operation: "replace".into(),
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            body: o.clone(),
            dry_run,
        });
        Ok(changed.unwrap_or_else(|| o.clone()))
    }

    async fn create(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        o: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        self.policy.check(res, namespace)?;
        let name = obj::name(o).to_owned();
        let now = self
            .simulation
            .as_ref()
            .map(|c| c.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        let changed = self.apply(res, namespace, &name, dry_run, |current| {
            if current.is_some() {
                return Err(ClusterError::new(
                    ErrorKind::Conflict,
                    format!(
                        "AlreadyExists (409): {} \"{name}\" already exists",
                        res.plural
                    ),
                ));
            }
            let mut o = o.clone();
            if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                if res.namespaced
                    && let Some(ns) = namespace
                {
                    meta.insert("namespace".into(), json!(ns));
                }
                meta.insert("uid".into(), json!(format!("simulated-{name}")));
                if let Some(t) = &now {
                    meta.insert("creationTimestamp".into(), json!(t));
                }
            }
            Ok(Some(o))
        })?;
        self.record(RecordedWrite {
            operation: "create".into(),
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.clone(),
            body: o.clone(),
            dry_run,
        });
        Ok(changed.unwrap_or_else(|| o.clone()))
    }

    async fn delete(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<()> {
        self.policy.check(res, namespace)?;
        self.apply(res, namespace, name, dry_run, |current| {
            current.ok_or_else(|| not_found(res, name))?;
            Ok(None)
        })?;
        self.record(RecordedWrite {
            operation: "delete".into(),
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            body: Value::Null,
            dry_run,
        });
        Ok(())
    }

    async fn evict(&self, namespace: &str, pod: &str, dry_run: bool) -> Result<()> {
        let pods = self.resource("Pod").await?;
        let budgets = self.read().clone();
        self.apply(&pods, Some(namespace), pod, dry_run, |current| {
            let current = current.ok_or_else(|| not_found(&pods, pod))?;
            // The eviction API refuses what a PodDisruptionBudget protects.
            let blocked = budgets.iter().find(|b| {
                obj::kind(b) == "PodDisruptionBudget"
                    && obj::namespace(b) == Some(namespace)
                    && obj::at(b, &["spec", "selector"])
                        .and_then(Selector::from_object)
                        .is_some_and(|s| s.matches_value(obj::at(current, &["metadata", "labels"])))
                    && obj::i64_at(b, &["status", "disruptionsAllowed"]).unwrap_or(0) < 1
            });
            if let Some(b) = blocked {
                return Err(ClusterError::new(
                    ErrorKind::Refused,
                    format!(
                        "TooManyRequests (429): Cannot evict pod as it would violate the pod's disruption budget ({})",
                        obj::name(b)
                    ),
                ));
            }
            Ok(None)
        })?;
        self.record(RecordedWrite {
            operation: "evict".into(),
            kind: "Pod".into(),
            namespace: Some(namespace.to_owned()),
            name: pod.to_owned(),
            body: Value::Null,
            dry_run,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: web-2, namespace: shop, labels: {app: web}}
  spec: {containers: [{name: web, image: nginx}]}
- apiVersion: v1
  kind: Secret
  metadata: {name: creds, namespace: shop}
  data: {password: aHVudGVyMg==}
---
apiVersion: kubemedic.io/v1alpha1
kind: PodLogs
metadata: {namespace: shop, name: web-1}
container: web
previous: false
text: |
  line one
  line two
  line three
"#;

    #[tokio::test]
    async fn capturing_without_namespaces_takes_every_readable_one() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: kube-system}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: billing}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: dns-1, namespace: kube-system}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: rates, namespace: billing}\n";
        let source =
            SnapshotCluster::from_yaml(yaml)
                .unwrap()
                .with_policy(crate::cluster::ReadPolicy {
                    blocked_namespaces: vec!["kube-system".into()],
                    ..Default::default()
                });
        let now = Utc::now();
        let text = capture(&source, &[], now).await.unwrap();
        let copy = SnapshotCluster::from_yaml(&text).unwrap();
        let mut names: Vec<String> = copy
            .objects()
            .iter()
            .map(|o| format!("{}/{}", obj::kind(o), obj::name(o)))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "ConfigMap/rates",
                "Namespace/billing",
                "Namespace/shop",
                "Pod/web-1"
            ]
        );
        // Named namespaces: only those.
        let text = capture(&source, &["billing".to_owned()], now)
            .await
            .unwrap();
        let copy = SnapshotCluster::from_yaml(&text).unwrap();
        assert!(copy.objects().iter().all(|o| obj::name(o) != "web-1"));
    }

    #[tokio::test]
    async fn loads_lists_logs_and_drops_secrets() {
        let s = SnapshotCluster::from_yaml(SNAP).unwrap();
        assert_eq!(s.dropped_secrets(), 1);
        let pods = s.resource("po").await.unwrap();
        let all = s
            .list(&pods, Some("shop"), &ListQuery::labels("app=web"))
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let q = LogQuery {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(
            s.logs("shop", "web-1", &q).await.unwrap(),
            "line two\nline three\n"
        );
        let secret = s.resource("secrets").await.unwrap_err();
        assert_eq!(secret.kind, ErrorKind::Blocked);
        let missing = s.get(&pods, Some("shop"), "web-9").await.unwrap_err();
        assert_eq!(missing.kind, ErrorKind::NotFound);
    }

    #[test]
    fn broken_documents_are_named() {
        let bad = format!("{SNAP}---\napiVersion: v1\nkind: Pod\nmetadata: {{namespace: shop}}\n");
        let err = SnapshotCluster::from_yaml(&bad).err().unwrap();
        assert_eq!(err.index, 3);
        assert!(err.reason.contains("metadata.name"), "{err}");
        let err = SnapshotCluster::from_yaml("kind: Pod\napiVersion: v1\nmetadata: {name: [\n")
            .err()
            .unwrap();
        assert_eq!(err.index, 0);
        assert!(err.reason.contains("invalid YAML"), "{err}");
    }
}
