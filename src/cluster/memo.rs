//! A reader that asks the API server each question once: `get` and `list` answers (errors
//! included) are kept for the reader's life, so the investigation and the proof of one request
//! can read the same objects freely and still stay within their budget of API calls.
//!
//! One [`MemoReader`] lives as long as one stage's work on one request: long enough to share
//! reads, short enough never to serve a stale cluster to a later decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use super::{ClusterReader, ListQuery, LogQuery, ResourceInfo, Result};

type Key = (String, String, String, String);

pub struct MemoReader {
    inner: Arc<dyn ClusterReader>,
    resources: Mutex<HashMap<String, Result<ResourceInfo>>>,
    gets: Mutex<HashMap<Key, Result<Value>>>,
    lists: Mutex<HashMap<Key, Result<Vec<Value>>>>,
    logs: Mutex<HashMap<Key, Result<String>>>,
    /// How many calls reached the API server (not answered from memory).
    calls: std::sync::atomic::AtomicUsize,
}

impl MemoReader {
    pub fn new(inner: Arc<dyn ClusterReader>) -> Self {
        Self {
            inner,
            resources: Mutex::default(),
            gets: Mutex::default(),
            lists: Mutex::default(),
            logs: Mutex::default(),
            calls: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The API calls made through this reader so far (each question once).
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn cached<T: Clone>(m: &Mutex<HashMap<Key, Result<T>>>, k: &Key) -> Option<Result<T>> {
    m.lock().ok().and_then(|m| m.get(k).cloned())
}

fn keep<T: Clone>(m: &Mutex<HashMap<Key, Result<T>>>, k: Key, v: &Result<T>) {
    // An unreachable server is not an answer: ask again next time.
    if let Err(e) = v
        && e.is_unreachable()
    {
        return;
    }
    if let Ok(mut m) = m.lock() {
        m.insert(k, v.clone());
    }
}

#[async_trait]
impl ClusterReader for MemoReader {
    async fn resource(&self, kind: &str) -> Result<ResourceInfo> {
        if let Some(r) = self
            .resources
            .lock()
            .ok()
            .and_then(|m| m.get(kind).cloned())
        {
            return r;
        }
        let r = self.inner.resource(kind).await;
        if !matches!(&r, Err(e) if e.is_unreachable())
            && let Ok(mut m) = self.resources.lock()
        {
            m.insert(kind.to_owned(), r.clone());
        }
        r
    }

    async fn get(&self, res: &ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value> {
        let k = (
            res.api_version(),
            res.kind.clone(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        if let Some(v) = cached(&self.gets, &k) {
            return v;
        }
        self.count();
        let v = self.inner.get(res, namespace, name).await;
        keep(&self.gets, k, &v);
        v
    }

    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<Value>> {
        let k = (
            format!("{}/{}", res.api_version(), res.kind),
            namespace.unwrap_or_default().to_owned(),
            query.label_selector.clone().unwrap_or_default(),
            query.field_selector.clone().unwrap_or_default(),
        );
        if let Some(v) = cached(&self.lists, &k) {
            return v;
        }
        self.count();
        let v = self.inner.list(res, namespace, query).await;
        keep(&self.lists, k, &v);
        v
    }

    async fn logs(&self, namespace: &str, pod: &str, query: &LogQuery) -> Result<String> {
        let k = (
            format!("{namespace}/{pod}"),
            query.container.clone().unwrap_or_default(),
            format!("{}", query.previous),
            format!("{:?}/{:?}", query.tail_lines, query.since_seconds),
        );
        if let Some(v) = cached(&self.logs, &k) {
            return v;
        }
        self.count();
        let v = self.inner.logs(namespace, pod, query).await;
        keep(&self.logs, k, &v);
        v
    }

    async fn server_version(&self) -> Result<String> {
        self.inner.server_version().await
    }
}
