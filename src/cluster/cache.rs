//! A watch-backed view of the cluster (issue 40; `docs/adr/0038-watch-cache.md`): what the
//! investigations read most, kept by one watch per kind for the whole cluster, so a storm of a
//! thousand alerts costs the API server a thousand reads of logs and dry runs, not twenty
//! thousand lists.
//!
//! [`WatchCache`] runs the watches (kube-runtime's watcher, its back-off on errors) and keeps
//! each kind's objects as JSON, trimmed on the way in ([`trim`]: managed fields cut to who wrote
//! what when, no last-applied configuration outside the workload kinds), and never an object
//! of a namespace the read policy blocks. [`CachedReader`] answers `get` and `list` from it for
//! a kind whose watch has listed everything once and is not broken; any other read, a kind not
//! watched, an object not (yet) in the cache, logs and the server's version go to the API
//! server as before.
//!
//! Staleness: an answer from the cache is as old as the watch's delay (the API server sends an
//! event as it commits the change: milliseconds on a healthy server). A broken watch is not
//! served from until it resumes. Only reads whose staleness cannot make a write wrong may use
//! the cache: the investigations and the proofs that choose what to propose. The proof before
//! the first write, the spec hash it compares and the writes themselves read the API server
//! (the daemon gives those stages the direct reader).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::kube::{KubeCluster, to_value};
use super::selector::{Selector, field_matches};
use super::{
    ClusterError, ClusterReader, ErrorKind, ListQuery, LogQuery, ReadPolicy, ResourceInfo, Result,
    obj,
};
use crate::readiness::{Dependency, DependencyStatus};
use crate::telemetry::Metrics;

/// The kinds the cache watches: what investigations, the rules and the proofs read of a
/// workload and its surroundings. ConfigMaps are not among them (their data can be large and
/// a pod's few are read by name, directly); nor are Secrets, ever.
pub const CACHED_KINDS: &[&str] = &[
    "Pod",
    "Event",
    "Node",
    "Namespace",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ControllerRevision",
    "Job",
    "CronJob",
    "Service",
    "Endpoints",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
];

/// The workload kinds whose last-applied configuration is kept: the replicas and template they
/// were declared with are evidence (`findings::declared_replicas`).
const KEEPS_LAST_APPLIED: &[&str] = &["Deployment", "StatefulSet", "DaemonSet"];

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How long to wait before asking discovery again for kinds it could not resolve at start
/// (an API server not up yet).
const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// How often the cache's figures are copied to `/metrics` ([`WatchCache::report_to`]).
const REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// How long the server's version is reused.
const VERSION_FOR: Duration = Duration::from_secs(600);

/// An object's managed fields cut to who wrote it, how and when (a Node keeps which of its
/// spec fields, so who set its taints stays visible): what the decisions read of them
/// (`observed::last_change`, the taint's writer), at a fraction of their size.
pub fn trim_managed_fields(v: &mut Value) {
    let trimmed = trimmed_managed_fields(v);
    if let Some(Value::Array(managed)) = v.pointer_mut("/metadata/managedFields") {
        *managed = trimmed;
    }
}

/// `o`'s managed fields as [`trim_managed_fields`] keeps them (none when it has none).
pub fn trimmed_managed_fields(o: &Value) -> Vec<Value> {
    let node = obj::kind(o) == "Node";
    obj::array(o, &["metadata", "managedFields"])
        .iter()
        .map(|m| {
            let mut kept = serde_json::Map::new();
            for key in ["manager", "operation", "time", "subresource"] {
                if let Some(v) = m.get(key) {
                    kept.insert(key.into(), v.clone());
                }
            }
            if node {
                kept.insert(
                    "fieldsV1".into(),
                    match obj::at(m, &["fieldsV1", "f:spec"]) {
                        Some(f) => json!({"f:spec": f}),
                        None => json!({}),
                    },
                );
            }
            Value::Object(kept)
        })
        .collect()
}

/// An object as the cache keeps it: its managed fields trimmed ([`trim_managed_fields`]), and
/// no last-applied configuration but a workload's ([`KEEPS_LAST_APPLIED`]).
pub fn trim(mut v: Value) -> Value {
    trim_managed_fields(&mut v);
    let keeps = KEEPS_LAST_APPLIED.contains(&obj::kind(&v));
    if !keeps
        && let Some(a) = v
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    v
}

type Key = (String, String);

/// One watched kind.
struct Watched {
    res: ResourceInfo,
    /// By namespace ("" for a cluster-scoped kind), then name.
    objects: RwLock<BTreeMap<Key, Arc<Value>>>,
    /// A complete list has been applied at least once.
    synced: AtomicBool,
    /// The watch failed and has not resumed: reads go to the API server.
    broken: AtomicBool,
    /// Synced, or failed at least once: readiness waits for this, not for success.
    settled: AtomicBool,
    /// The API server refused the watch (no RBAC for it): a list that still succeeds does not
    /// make it serve again, only a change the watch delivers.
    refused: AtomicBool,
    /// Events are not applied (tests: the worst staleness, on purpose).
    held: AtomicBool,
    /// Why the watch last failed.
    failure: Mutex<Option<String>>,
}

impl Watched {
    fn new(res: ResourceInfo) -> Self {
        Self {
            res,
            objects: RwLock::default(),
            synced: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            settled: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            held: AtomicBool::new(false),
            failure: Mutex::default(),
        }
    }

    fn serving(&self) -> bool {
        self.synced.load(Ordering::Acquire) && !self.broken.load(Ordering::Acquire)
    }

    fn len(&self) -> usize {
        self.objects.read().map(|o| o.len()).unwrap_or(0)
    }
}

/// What the cache holds and how it answered, for `/readyz`, `/metrics` and the benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Kinds watched, and of them those serving reads now.
    pub kinds: usize,
    pub serving: usize,
    /// Whether every kind has synced or failed once (and discovery has answered).
    pub settled: bool,
    pub objects: usize,
    /// Reads answered from the cache, and reads it passed to the API server.
    pub hits: u64,
    pub misses: u64,
    /// The kinds read directly, with why (not synced yet, a broken watch).
    pub direct: Vec<String>,
}

/// The watches and what they keep. Start it with [`WatchCache::start`]; read it through a
/// [`CachedReader`].
pub struct WatchCache {
    kinds: RwLock<HashMap<String, Arc<Watched>>>,
    policy: ReadPolicy,
    /// Discovery has resolved every kind it can.
    discovered: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl WatchCache {
    /// Resolve [`CACHED_KINDS`] through `cluster`'s discovery (again later for what it could
    /// not yet) and watch each for as long as the process runs. Never fails: a kind that cannot
    /// be watched is read directly.
    pub fn start(cluster: Arc<KubeCluster>) -> Arc<Self> {
        let cache = Arc::new(Self {
            kinds: RwLock::default(),
            policy: cluster.policy().clone(),
            discovered: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        });
        let me = cache.clone();
        tokio::spawn(async move { me.discover_and_watch(cluster).await });
        cache
    }

    async fn discover_and_watch(self: Arc<Self>, cluster: Arc<KubeCluster>) {
        let mut left: Vec<&str> = CACHED_KINDS.to_vec();
        loop {
            let mut unreachable = false;
            let mut still = Vec::new();
            for kind in left {
                match cluster.resource(kind).await {
                    Ok(res) => {
                        let w = Arc::new(Watched::new(res.clone()));
                        if let Ok(mut kinds) = self.kinds.write() {
                            kinds.insert(res.kind.clone(), w.clone());
                        }
                        let me = self.clone();
                        let client = cluster.watch_client();
                        tokio::spawn(async move { me.watch(w, client).await });
                    }
                    Err(e) if e.is_unreachable() => {
                        unreachable = true;
                        still.push(kind);
                    }
                    // Not served here, or blocked by the read policy: read directly (and then
                    // refused by the policy, as before).
                    Err(e) => debug!(kind, error = %e, "not cached"),
                }
            }
            if !unreachable {
                break;
            }
            left = still;
            tokio::time::sleep(DISCOVERY_RETRY).await;
        }
        self.discovered.store(true, Ordering::Release);
        info!(kinds = self.stats().kinds, "watching the cluster");
    }

    async fn watch(self: Arc<Self>, w: Arc<Watched>, client: kube::Client) {
        let ar = ApiResource {
            group: w.res.group.clone(),
            version: w.res.version.clone(),
            api_version: w.res.api_version(),
            kind: w.res.kind.clone(),
            plural: w.res.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(client, &ar);
        let events = watcher(api, watcher::Config::default()).default_backoff();
        futures::pin_mut!(events);
        let mut listing: Option<BTreeMap<Key, Arc<Value>>> = None;
        while let Some(event) = events.next().await {
            let held = w.held.load(Ordering::Acquire);
            match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(o)) => {
                    if let (Some(l), Some((k, v))) = (&mut listing, self.entry(o, &w.res)) {
                        l.insert(k, v);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(l) = listing.take()
                        && !held
                        && let Ok(mut objects) = w.objects.write()
                    {
                        *objects = l;
                    }
                    if !w.refused.load(Ordering::Acquire) {
                        self.resumed(&w);
                    }
                    w.synced.store(true, Ordering::Release);
                    w.settled.store(true, Ordering::Release);
                }
                Ok(watcher::Event::Apply(o)) => {
                    if !held
                        && let Some((k, v)) = self.entry(o, &w.res)
                        && let Ok(mut objects) = w.objects.write()
                    {
                        objects.insert(k, v);
                    }
                    self.resumed(&w);
                }
                Ok(watcher::Event::Delete(o)) => {
                    let k = key(
                        &w.res,
                        o.metadata.namespace.as_deref(),
                        o.metadata.name.as_deref().unwrap_or_default(),
                    );
                    if !held && let Ok(mut objects) = w.objects.write() {
                        objects.remove(&k);
                    }
                    self.resumed(&w);
                }
                Err(e) => {
                    let first = !w.broken.swap(true, Ordering::AcqRel);
                    w.settled.store(true, Ordering::Release);
                    if let Ok(mut f) = w.failure.lock() {
                        *f = Some(e.to_string());
                    }
                    // An API server that refuses the watch (no RBAC for it) is said once; an
                    // outage is the cluster's to report (`/readyz`, the outage log).
                    let refused = matches!(
                        &e,
                        watcher::Error::InitialListFailed(kube::Error::Api(_))
                            | watcher::Error::WatchStartFailed(kube::Error::Api(_))
                    );
                    if refused {
                        w.refused.store(true, Ordering::Release);
                    }
                    if first && refused {
                        warn!(kind = %w.res.kind, error = %e,
                            "cannot watch this kind; reading it from the API server instead");
                    } else if first {
                        debug!(kind = %w.res.kind, error = %e,
                            "watch interrupted; reading from the API server until it resumes");
                    }
                }
            }
        }
    }

    fn resumed(&self, w: &Watched) {
        w.refused.store(false, Ordering::Release);
        if w.broken.swap(false, Ordering::AcqRel) {
            debug!(kind = %w.res.kind, "watch resumed; reading from the cache again");
        }
    }

    /// The object's key and what is kept of it; none for one in a namespace the policy blocks.
    fn entry(&self, o: DynamicObject, res: &ResourceInfo) -> Option<(Key, Arc<Value>)> {
        let (namespace, name) = (o.metadata.namespace.as_deref(), o.metadata.name.as_deref());
        let name = name.unwrap_or_default();
        if self.policy.hides(&res.kind, namespace, name) {
            return None;
        }
        let k = key(res, namespace, name);
        let v = to_value(o, res).ok()?;
        Some((k, Arc::new(trim(v))))
    }

    /// The watched kind for `res`, if it serves reads now (synced, not broken, the same group
    /// and version discovery chose).
    fn serving(&self, res: &ResourceInfo) -> Option<Arc<Watched>> {
        let w = self.kinds.read().ok()?.get(&res.kind).cloned()?;
        (w.res == *res && w.serving()).then_some(w)
    }

    /// Stop applying `kind`'s events while it keeps serving reads: the stalest the cache can
    /// be, for tests that show which reads may be stale and which must not.
    #[doc(hidden)]
    pub fn hold(&self, kind: &str, held: bool) {
        if let Some(w) = self.kinds.read().ok().and_then(|k| k.get(kind).cloned()) {
            w.held.store(held, Ordering::Release);
        }
    }

    /// What the cache holds of `kind` `namespace`/`name` now, whether or not it serves reads.
    #[doc(hidden)]
    pub fn peek(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let w = self.kinds.read().ok()?.get(kind).cloned()?;
        let k = key(&w.res, namespace, name);
        let v = w.objects.read().ok()?.get(&k).cloned()?;
        Some(Value::clone(&v))
    }

    pub fn stats(&self) -> CacheStats {
        let kinds: Vec<Arc<Watched>> = self
            .kinds
            .read()
            .map(|k| k.values().cloned().collect())
            .unwrap_or_default();
        let mut direct: Vec<String> = kinds
            .iter()
            .filter(|w| !w.serving())
            .map(|w| {
                let why = if !w.synced.load(Ordering::Acquire) && !w.settled.load(Ordering::Acquire)
                {
                    "listing".to_owned()
                } else {
                    w.failure
                        .lock()
                        .ok()
                        .and_then(|f| f.clone())
                        .unwrap_or_else(|| "not synced".into())
                };
                format!("{} ({why})", w.res.kind)
            })
            .collect();
        direct.sort();
        CacheStats {
            kinds: kinds.len(),
            serving: kinds.iter().filter(|w| w.serving()).count(),
            settled: self.discovered.load(Ordering::Acquire)
                && kinds.iter().all(|w| w.settled.load(Ordering::Acquire)),
            objects: kinds.iter().map(|w| w.len()).sum(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            direct,
        }
    }

    /// Wait until every kind has synced or failed once, or `within` passes; whether it did.
    pub async fn settled(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.stats().settled {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Copy the cache's figures to `metrics` every [`REPORT_INTERVAL`] for as long as the
    /// process runs.
    pub fn report_to(self: &Arc<Self>, metrics: Arc<Metrics>) {
        let cache = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(REPORT_INTERVAL);
            loop {
                every.tick().await;
                let s = cache.stats();
                metrics.set_cache(
                    s.objects,
                    (s.serving, s.kinds.saturating_sub(s.serving)),
                    (s.hits, s.misses),
                );
            }
        });
    }

    fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }
}

/// `/readyz` entry `cluster_cache`: ready once every watched kind has listed the cluster once
/// or failed to (a kind that cannot be watched is read directly, and said so).
pub struct CacheDependency(pub Arc<WatchCache>);

#[async_trait]
impl Dependency for CacheDependency {
    fn name(&self) -> &'static str {
        "cluster_cache"
    }
    async fn check(&self) -> DependencyStatus {
        let s = self.0.stats();
        let mut detail = format!(
            "{} of {} kinds served from watches, {} objects",
            s.serving, s.kinds, s.objects
        );
        if !s.direct.is_empty() {
            detail.push_str(&format!("; read directly: {}", s.direct.join(", ")));
        }
        if !s.settled {
            detail = format!("first lists under way: {detail}");
        }
        DependencyStatus {
            ok: s.settled,
            detail,
        }
    }
}

fn key(res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Key {
    let namespace = namespace.filter(|_| res.namespaced).unwrap_or_default();
    (namespace.to_owned(), name.to_owned())
}

/// A reader that answers `get` and `list` from a [`WatchCache`] where it can, and asks
/// `direct` otherwise (see the module's staleness rules: never give one to a stage that writes).
pub struct CachedReader {
    cache: Arc<WatchCache>,
    direct: Arc<dyn ClusterReader>,
    version: Mutex<Option<(Instant, String)>>,
}

impl CachedReader {
    pub fn new(cache: Arc<WatchCache>, direct: Arc<dyn ClusterReader>) -> Self {
        Self {
            cache,
            direct,
            version: Mutex::default(),
        }
    }
}

#[async_trait]
impl ClusterReader for CachedReader {
    async fn resource(&self, kind: &str) -> Result<ResourceInfo> {
        self.direct.resource(kind).await
    }

    async fn get(&self, res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value> {
        if let Some(w) = self.cache.serving(res) {
            self.cache.policy.check(res, namespace)?;
            let k = key(res, namespace, name);
            let found = w.objects.read().ok().and_then(|o| o.get(&k).cloned());
            if let Some(v) = found {
                self.cache.hit();
                return Ok(Value::clone(&v));
            }
            // Not in the cache: perhaps created a moment ago; the API server says.
        }
        self.cache.miss();
        self.direct.get(res, namespace, name).await
    }

    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<Value>> {
        let Some(w) = self.cache.serving(res) else {
            self.cache.miss();
            return self.direct.list(res, namespace, query).await;
        };
        self.cache.policy.check(res, namespace)?;
        let selector = match &query.label_selector {
            Some(s) => Selector::parse(s).map_err(|e| ClusterError::new(ErrorKind::Invalid, e))?,
            None => Selector::default(),
        };
        let keep = |v: &Value| {
            selector.matches_value(obj::at(v, &["metadata", "labels"]))
                && query
                    .field_selector
                    .as_deref()
                    .is_none_or(|f| field_matches(f, v))
        };
        let objects = w
            .objects
            .read()
            .map_err(|_| ClusterError::new(ErrorKind::Other, "the cluster cache is poisoned"))?;
        let found: Vec<Value> = match namespace.filter(|_| res.namespaced) {
            Some(ns) => objects
                .range((ns.to_owned(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v)
                .filter(|v| keep(v))
                .map(|v| Value::clone(v))
                .collect(),
            None => objects
                .values()
                .filter(|v| keep(v))
                .map(|v| Value::clone(v))
                .collect(),
        };
        self.cache.hit();
        Ok(found)
    }

    async fn logs(&self, namespace: &str, pod: &str, query: &LogQuery) -> Result<String> {
        self.direct.logs(namespace, pod, query).await
    }

    async fn server_version(&self) -> Result<String> {
        if let Some((at, v)) = self.version.lock().ok().and_then(|v| v.clone())
            && at.elapsed() < VERSION_FOR
        {
            return Ok(v);
        }
        let v = self.direct.server_version().await?;
        if let Ok(mut kept) = self.version.lock() {
            *kept = Some((Instant::now(), v.clone()));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_of_an_object_is_who_wrote_it_and_when_not_how() {
        let pod = trim(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "annotations": {LAST_APPLIED: "{…}", "team": "shop"},
                "managedFields": [{"manager": "kubectl", "operation": "Update",
                    "time": "2026-12-01T10:00:00Z", "fieldsV1": {"f:spec": {"f:containers": {}}}}]}}));
        assert_eq!(
            pod["metadata"]["managedFields"],
            json!([{"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:00:00Z"}])
        );
        assert_eq!(pod["metadata"]["annotations"], json!({"team": "shop"}));
        // A workload keeps what it was declared with; a Node which spec fields were written.
        let d = trim(json!({"kind": "Deployment",
            "metadata": {"name": "api", "annotations": {LAST_APPLIED: "{\"spec\":{}}"}}}));
        assert_eq!(d["metadata"]["annotations"][LAST_APPLIED], "{\"spec\":{}}");
        let n = trim(
            json!({"kind": "Node", "metadata": {"name": "n1", "managedFields": [
            {"manager": "ops", "fieldsV1": {"f:spec": {"f:taints": {}}, "f:metadata": {}}}]}}),
        );
        assert_eq!(
            n["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:taints": {}}})
        );
    }
}
