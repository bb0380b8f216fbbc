//! A writer that can only dry-run: every call goes to the API server with `dryRun=All`
//! whatever the caller asked, and what the server answered is kept beside what the object was
//! before, so the change can be shown to the person asked to approve it.
//!
//! Each call is a `kube <verb> <Kind>` span with `kubemedic.dry_run` set, in the trace of the
//! request whose proof made it.
//!
//! Invariant: nothing sent through a [`DryRunWriter`] changes the cluster — the flag is forced
//! here, not trusted from the caller.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use super::traced::{traced, write_span};
use super::{ClusterReader, ClusterWriter, PatchType, ResourceInfo, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRunOp {
    Patch,
    Replace,
    Create,
    Delete,
    Evict,
}

/// One dry-run call: the object before (when it could be read) and as the server would leave
/// it (`None` for a deletion or an eviction).
#[derive(Debug, Clone, PartialEq)]
pub struct DryRunWrite {
    pub op: DryRunOp,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

pub struct DryRunWriter {
    reader: Arc<dyn ClusterReader>,
    writer: Arc<dyn ClusterWriter>,
    log: Mutex<Vec<DryRunWrite>>,
}

impl DryRunWriter {
    pub fn new(reader: Arc<dyn ClusterReader>, writer: Arc<dyn ClusterWriter>) -> Self {
        Self {
            reader,
            writer,
            log: Mutex::new(Vec::new()),
        }
    }

    /// The calls made so far, in order.
    pub fn writes(&self) -> Vec<DryRunWrite> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn push(&self, w: DryRunWrite) {
        if let Ok(mut l) = self.log.lock() {
            l.push(w);
        }
    }

    async fn before(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.reader.get(res, namespace, name).await.ok()
    }
}

#[async_trait]
impl ClusterWriter for DryRunWriter {
    async fn patch(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        _dry_run: bool,
    ) -> Result<Value> {
        let before = self.before(res, namespace, name).await;
        let after = traced(
            write_span("patch", &res.kind, namespace, Some(name), true),
            self.writer
                .patch(res, namespace, name, patch_type, patch, true),
        )
        .await?;
        self.push(DryRunWrite {
            op: DryRunOp::Patch,
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            before,
            after: Some(after.clone()),
        });
        Ok(after)
    }

    async fn replace(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        _dry_run: bool,
    ) -> Result<Value> {
        let before = self.before(res, namespace, name).await;
        let after = traced(
            write_span("update", &res.kind, namespace, Some(name), true),
            self.writer.replace(res, namespace, name, obj, true),
        )
        .await?;
        self.push(DryRunWrite {
            op: DryRunOp::Replace,
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            before,
            after: Some(after.clone()),
        });
        Ok(after)
    }

    async fn create(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
        _dry_run: bool,
    ) -> Result<Value> {
        let after = traced(
            write_span("create", &res.kind, namespace, None, true),
            self.writer.create(res, namespace, obj, true),
        )
        .await?;
        self.push(DryRunWrite {
            op: DryRunOp::Create,
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: super::obj::name(&after).to_owned(),
            before: None,
            after: Some(after.clone()),
        });
        Ok(after)
    }

    async fn delete(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        _dry_run: bool,
    ) -> Result<()> {
        let before = self.before(res, namespace, name).await;
        traced(
            write_span("delete", &res.kind, namespace, Some(name), true),
            self.writer.delete(res, namespace, name, true),
        )
        .await?;
        self.push(DryRunWrite {
            op: DryRunOp::Delete,
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            before,
            after: None,
        });
        Ok(())
    }

    async fn evict(&self, namespace: &str, pod: &str, _dry_run: bool) -> Result<()> {
        traced(
            write_span("evict", "Pod", Some(namespace), Some(pod), true),
            self.writer.evict(namespace, pod, true),
        )
        .await?;
        self.push(DryRunWrite {
            op: DryRunOp::Evict,
            kind: "Pod".into(),
            namespace: Some(namespace.to_owned()),
            name: pod.to_owned(),
            before: None,
            after: None,
        });
        Ok(())
    }
}
