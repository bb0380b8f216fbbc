//! [`KubeCluster`]: the cluster through kube-rs, from a kubeconfig or the in-cluster service
//! account.
//!
//! Discovery runs once (aggregated where the server has it, per group otherwise) and is cached;
//! a kind it does not know triggers at most one refresh a minute. Every HTTP request passes a
//! [`RequestCounter`] layer, so tests and benchmarks can see exactly what an operation cost,
//! and a watch that logs an API server outage once (then a summary a minute) instead of once
//! per failed call.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, GetParams, ListParams, LogParams, Patch,
    PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{ApiResource, Discovery, Scope};
use kube::{Client, Config};
use serde_json::Value;
use tokio::sync::RwLock;

use crate::telemetry::OutageLog;

use super::{
    ClusterError, ClusterReader, ClusterWriter, ErrorKind, ListQuery, LogQuery, PatchType,
    ReadPolicy, ResourceInfo, Result, kinds,
};

#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// A kubeconfig file; `None` infers (`$KUBECONFIG`, `~/.kube/config`, in-cluster).
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    pub policy: ReadPolicy,
}

impl Default for KubeOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            timeout: Duration::from_secs(super::ClusterSettings::DEFAULT_TIMEOUT_SECONDS),
            policy: ReadPolicy::default(),
        }
    }
}

/// How long a watch's connection may stay silent before the client gives up on it: longer
/// than the `timeoutSeconds` (290) the watcher asks the server to end each watch at, so a
/// quiet kind's watch ends by the server's word, not by a read timeout meant for one request.
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(330);

/// How often a continuing API server outage is summarised in the log.
const OUTAGE_REPORT_INTERVAL: Duration = Duration::from_secs(60);

/// Tells the cluster's [`OutageLog`] whether each HTTP call got an answer (a 502/503/504 from a
/// proxy in front of the API server counts as none).
#[derive(Clone)]
struct Watch(Arc<OutageLog>);

impl<S> tower::Layer<S> for Watch {
    type Service = Watched<S>;
    fn layer(&self, inner: S) -> Watched<S> {
        Watched {
            inner,
            log: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Watched<S> {
    inner: S,
    log: Arc<OutageLog>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Watched<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display + Send,
    RB: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let call = self.inner.call(req);
        let log = self.log.clone();
        Box::pin(async move {
            let result = call.await;
            match &result {
                Ok(r) if matches!(r.status().as_u16(), 502..=504) => {
                    log.failed(&format!("the API server answered {}", r.status()))
                }
                Ok(_) => log.succeeded(),
                Err(e) => log.failed(e),
            }
            result
        })
    }
}

/// Records every API request (`GET /api/v1/namespaces/shop/pods/x`) made through a client.
#[derive(Clone, Default)]
pub struct RequestCounter(Arc<Mutex<Vec<String>>>);

impl RequestCounter {
    pub fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl<S> tower::Layer<S> for RequestCounter {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            log: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    log: RequestCounter,
}

impl<S, B> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if let Ok(mut log) = self.log.0.lock() {
            let query = req
                .uri()
                .query()
                .filter(|q| !q.is_empty())
                .map(|q| format!("?{q}"))
                .unwrap_or_default();
            log.push(format!("{} {}{query}", req.method(), req.uri().path()));
        }
        self.inner.call(req)
    }
}

struct DiscoveryCache {
    discovery: Option<Discovery>,
    refreshed: Option<Instant>,
}

pub struct KubeCluster {
    client: Client,
    /// The same credentials without the per-request read timeout: for watches
    /// ([`super::cache::WatchCache`]), which stay open for minutes.
    watch_client: Client,
    policy: ReadPolicy,
    counter: RequestCounter,
    discovery: RwLock<DiscoveryCache>,
}

impl KubeCluster {
    /// Build a client. Makes no API call: an unreachable server shows up on first use.
    pub async fn connect(opts: &KubeOptions) -> Result<Self> {
        let config_error =
            |e: String| ClusterError::new(ErrorKind::Unreachable, format!("kube config: {e}"));
        let mut config = match &opts.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|e| config_error(e.to_string()))?;
                let options = KubeConfigOptions {
                    context: opts.context.clone(),
                    ..Default::default()
                };
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| config_error(e.to_string()))?
            }
            None if opts.context.is_some() => {
                let options = KubeConfigOptions {
                    context: opts.context.clone(),
                    ..Default::default()
                };
                Config::from_kubeconfig(&options)
                    .await
                    .map_err(|e| config_error(e.to_string()))?
            }
            None => Config::infer()
                .await
                .map_err(|e| config_error(e.to_string()))?,
        };
        config.connect_timeout = Some(opts.timeout.min(Duration::from_secs(10)));
        config.read_timeout = Some(opts.timeout);
        config.write_timeout = Some(opts.timeout);
        // Count the read timeout from when a request is sent, not from when its pooled
        // connection went idle.
        config.reset_reader_on_write = true;
        // No silent client-side retries: a PodDisruptionBudget refusing an eviction (429) must
        // come back at once, and the pipeline decides itself when to wait and retry.
        config.default_retry = false;
        let counter = RequestCounter::default();
        let outage = Arc::new(OutageLog::new(
            "Kubernetes API server",
            OUTAGE_REPORT_INTERVAL,
        ));
        let mut watch_config = config.clone();
        watch_config.read_timeout = Some(WATCH_READ_TIMEOUT);
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| config_error(e.to_string()))?
            .with_layer(&counter)
            .with_layer(&Watch(outage))
            .build();
        let watch_client = kube::client::ClientBuilder::try_from(watch_config)
            .map_err(|e| config_error(e.to_string()))?
            .with_layer(&counter)
            .build();
        Ok(Self {
            client,
            watch_client,
            policy: opts.policy.clone(),
            counter,
            discovery: RwLock::new(DiscoveryCache {
                discovery: None,
                refreshed: None,
            }),
        })
    }

    /// The client, for kubemedic's own objects (the Remediation mirror, the watched
    /// configuration); reads and writes of workloads go through [`ClusterReader`] and
    /// [`ClusterWriter`] and their checks.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The client for watches (no per-request read timeout).
    pub fn watch_client(&self) -> Client {
        self.watch_client.clone()
    }

    /// What this cluster refuses to read.
    pub fn policy(&self) -> &ReadPolicy {
        &self.policy
    }

    pub fn requests(&self) -> &RequestCounter {
        &self.counter
    }

    /// Run (or reuse) discovery.
    async fn discover(&self, force: bool) -> Result<()> {
        {
            let cache = self.discovery.read().await;
            let fresh = cache
                .refreshed
                .is_some_and(|t| t.elapsed() < Duration::from_secs(60));
            if cache.discovery.is_some() && (!force || fresh) {
                return Ok(());
            }
        }
        let mut cache = self.discovery.write().await;
        // Aggregated discovery (1.26+) costs two requests; older servers answer it with the
        // plain group list, which parses as "no resources" — fall back to per-group discovery.
        let aggregated = Discovery::new(self.client.clone())
            .run_aggregated()
            .await
            .ok();
        let usable = aggregated.filter(|d| {
            d.get("")
                .is_some_and(|core| !core.recommended_resources().is_empty())
        });
        let discovery = match usable {
            Some(d) => d,
            None => Discovery::new(self.client.clone())
                .run()
                .await
                .map_err(map_err)?,
        };
        cache.discovery = Some(discovery);
        cache.refreshed = Some(Instant::now());
        Ok(())
    }

    async fn lookup(&self, spelled: &str) -> Option<ResourceInfo> {
        let cache = self.discovery.read().await;
        let discovery = cache.discovery.as_ref()?;
        let known = kinds::lookup(spelled);
        let (name, group_hint) = match spelled.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (spelled, None),
        };
        let mut best: Option<(usize, ResourceInfo)> = None;
        for group in discovery.groups() {
            if let Some(k) = known
                && k.group != group.name()
            {
                continue;
            }
            if let Some(g) = group_hint
                && !g.eq_ignore_ascii_case(group.name())
            {
                continue;
            }
            for version in group.versions() {
                for (ar, caps) in group.versioned_resources(version) {
                    let matches = match known {
                        Some(k) => ar.kind == k.kind,
                        None => {
                            ar.kind.eq_ignore_ascii_case(name)
                                || ar.plural.eq_ignore_ascii_case(name)
                        }
                    };
                    if !matches {
                        continue;
                    }
                    let rank = known.map_or(0, |k| kinds::version_rank(k, version));
                    if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                        best = Some((
                            rank,
                            ResourceInfo {
                                kind: ar.kind.clone(),
                                group: ar.group.clone(),
                                version: ar.version.clone(),
                                plural: ar.plural.clone(),
                                namespaced: caps.scope == Scope::Namespaced,
                            },
                        ));
                    }
                }
                if known.is_none() && best.is_some() {
                    // The group's preferred version comes first; take it.
                    break;
                }
            }
        }
        best.map(|(_, r)| r)
    }

    fn api(&self, res: &ResourceInfo, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = ApiResource {
            group: res.group.clone(),
            version: res.version.clone(),
            api_version: res.api_version(),
            kind: res.kind.clone(),
            plural: res.plural.clone(),
        };
        match (res.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }
}

/// Map a kube error to what the investigator and the pipeline can act on.
fn map_err(e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(status) => {
            let kind = match status.code {
                404 if status
                    .message
                    .contains("the server could not find the requested resource") =>
                {
                    ErrorKind::NotServed
                }
                404 => ErrorKind::NotFound,
                403 => ErrorKind::Forbidden,
                401 => ErrorKind::Unauthorized,
                409 => ErrorKind::Conflict,
                400 | 422 => ErrorKind::Invalid,
                429 => ErrorKind::Refused,
                408 | 504 => ErrorKind::Timeout,
                503 => ErrorKind::Unreachable,
                _ => ErrorKind::Other,
            };
            ClusterError::new(
                kind,
                format!("{} ({}): {}", status.reason, status.code, status.message),
            )
        }
        kube::Error::HyperError(e) => ClusterError::new(ErrorKind::Unreachable, e.to_string()),
        kube::Error::Service(e) => {
            let text = e.to_string();
            let kind = if text.contains("elapsed") || text.contains("timed out") {
                ErrorKind::Timeout
            } else {
                ErrorKind::Unreachable
            };
            ClusterError::new(kind, format!("API server: {text}"))
        }
        other => ClusterError::new(ErrorKind::Other, other.to_string()),
    }
}

pub(super) fn to_value(obj: DynamicObject, res: &ResourceInfo) -> Result<Value> {
    let mut v = serde_json::to_value(obj)
        .map_err(|e| ClusterError::new(ErrorKind::Other, format!("cannot encode object: {e}")))?;
    if let Value::Object(map) = &mut v {
        map.entry("apiVersion")
            .or_insert_with(|| Value::String(res.api_version()));
        map.entry("kind")
            .or_insert_with(|| Value::String(res.kind.clone()));
    }
    Ok(v)
}

fn from_value(v: &Value) -> Result<DynamicObject> {
    serde_json::from_value(v.clone())
        .map_err(|e| ClusterError::new(ErrorKind::Invalid, format!("not a Kubernetes object: {e}")))
}

#[async_trait]
impl ClusterReader for KubeCluster {
    async fn resource(&self, kind: &str) -> Result<ResourceInfo> {
        self.discover(false).await?;
        let found = match self.lookup(kind).await {
            Some(r) => Some(r),
            None => {
                self.discover(true).await?;
                self.lookup(kind).await
            }
        };
        let res = found.ok_or_else(|| {
            ClusterError::new(
                ErrorKind::NotServed,
                format!("the server does not serve a resource called `{kind}`"),
            )
        })?;
        self.policy.check(&res, None)?;
        Ok(res)
    }

    async fn get(&self, res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.policy.check(res, namespace)?;
        let obj = self
            .api(res, namespace)
            .get_with(name, &GetParams::default())
            .await
            .map_err(map_err)?;
        to_value(obj, res)
    }

    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<Value>> {
        self.policy.check(res, namespace)?;
        let mut params = ListParams::default();
        if let Some(l) = &query.label_selector {
            params = params.labels(l);
        }
        if let Some(f) = &query.field_selector {
            params = params.fields(f);
        }
        let list = self
            .api(res, namespace)
            .list(&params)
            .await
            .map_err(map_err)?;
        list.items
            .into_iter()
            .filter(|o| {
                !self.policy.hides(
                    &res.kind,
                    o.metadata.namespace.as_deref(),
                    o.metadata.name.as_deref().unwrap_or(""),
                )
            })
            .map(|o| to_value(o, res))
            .collect()
    }

    async fn logs(&self, namespace: &str, pod: &str, query: &LogQuery) -> Result<String> {
        let pods = ResourceInfo {
            kind: "Pod".into(),
            group: String::new(),
            version: "v1".into(),
            plural: "pods".into(),
            namespaced: true,
        };
        self.policy.check(&pods, Some(namespace))?;
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let params = LogParams {
            container: query.container.clone(),
            previous: query.previous,
            tail_lines: query.tail_lines,
            since_seconds: query.since_seconds,
            ..Default::default()
        };
        api.logs(pod, &params).await.map_err(map_err)
    }

    async fn server_version(&self) -> Result<String> {
        let info = self.client.apiserver_version().await.map_err(map_err)?;
        Ok(format!(
            "{}.{}",
            info.major,
            info.minor.trim_end_matches('+')
        ))
    }
}

fn patch_params(dry_run: bool, force: bool) -> PatchParams {
    PatchParams {
        dry_run,
        force,
        field_manager: Some("kubemedic".into()),
        ..Default::default()
    }
}

fn post_params(dry_run: bool) -> PostParams {
    PostParams {
        dry_run,
        field_manager: Some("kubemedic".into()),
    }
}

#[async_trait]
impl ClusterWriter for KubeCluster {
    async fn patch(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let api = self.api(res, namespace);
        let result = match patch_type {
            PatchType::Merge => {
                api.patch(name, &patch_params(dry_run, false), &Patch::Merge(patch))
                    .await
            }
            PatchType::Strategic => {
                api.patch(
                    name,
                    &patch_params(dry_run, false),
                    &Patch::Strategic(patch),
                )
                .await
            }
            PatchType::Apply => {
                api.patch(name, &patch_params(dry_run, false), &Patch::Apply(patch))
                    .await
            }
        };
        to_value(result.map_err(map_err)?, res)
    }

    async fn replace(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let obj = from_value(obj)?;
        let out = self
            .api(res, namespace)
            .replace(name, &post_params(dry_run), &obj)
            .await
            .map_err(map_err)?;
        to_value(out, res)
    }

    async fn create(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let obj = from_value(obj)?;
        let out = self
            .api(res, namespace)
            .create(&post_params(dry_run), &obj)
            .await
            .map_err(map_err)?;
        to_value(out, res)
    }

    async fn delete(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<()> {
        let params = DeleteParams {
            dry_run,
            ..Default::default()
        };
        self.api(res, namespace)
            .delete(name, &params)
            .await
            .map_err(map_err)?;
        Ok(())
    }

    async fn evict(&self, namespace: &str, pod: &str, dry_run: bool) -> Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        let params = EvictParams {
            delete_options: None,
            post_options: post_params(dry_run),
        };
        api.evict(pod, &params).await.map_err(map_err)?;
        Ok(())
    }
}
