//! The stamp on every change: a [`ClusterWriter`] that writes `kubemedic.io/remediation:
//! <request id>/<step>` into each object it patches, replaces or creates — in the same request
//! as the change, so the stamp is on the object exactly when the change is. After a crash the
//! executor reads the stamp to tell an applied step from one that never reached the API server.
//! Workloads also get `kubernetes.io/change-cause`, which `kubectl rollout history` shows.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::cluster::traced::{traced, write_span};
use crate::cluster::{ClusterWriter, PatchType, ResourceInfo, Result};
use crate::domain::REMEDIATION_ANNOTATION;

const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

pub struct StampingWriter {
    inner: Arc<dyn ClusterWriter>,
    stamp: String,
    change_cause: String,
}

impl StampingWriter {
    pub fn new(inner: Arc<dyn ClusterWriter>, stamp: String, change_cause: String) -> Self {
        Self {
            inner,
            stamp,
            change_cause,
        }
    }

    fn annotate(&self, kind: &str, v: &mut Value) {
        let Some(obj) = v.as_object_mut() else {
            return;
        };
        let metadata = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
        let Some(metadata) = metadata.as_object_mut() else {
            return;
        };
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                REMEDIATION_ANNOTATION.into(),
                Value::String(self.stamp.clone()),
            );
            if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet") {
                a.insert(
                    CHANGE_CAUSE.into(),
                    Value::String(self.change_cause.clone()),
                );
            }
        }
    }
}

/// Whether `obj` carries `stamp`: the step that stamped it was applied.
pub fn is_stamped(obj: &Value, stamp: &str) -> bool {
    crate::cluster::obj::annotation(obj, REMEDIATION_ANNOTATION) == Some(stamp)
}

#[async_trait]
impl ClusterWriter for StampingWriter {
    async fn patch(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let mut stamped = patch.clone();
        self.annotate(&res.kind, &mut stamped);
        traced(
            write_span("patch", &res.kind, namespace, Some(name), dry_run),
            self.inner
                .patch(res, namespace, name, patch_type, &stamped, dry_run),
        )
        .await
    }

    /// A replace is a read-modify-write: `obj` is the object as read, changed. If it already
    /// carries this step's stamp, this very step was applied after its intent was recorded —
    /// by another replica that took the request over while this one stalled past its lease, or
    /// by an earlier attempt. Writing again would repeat the change (a second `rollout undo`
    /// rolls the bad revision forward), so the object is returned as it is. The replace carries
    /// the resourceVersion of that read, so a stamp that lands after the read makes the write
    /// fail with a conflict instead: read and check are one step for the API server.
    async fn replace(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        if is_stamped(obj, &self.stamp) {
            return Ok(obj.clone());
        }
        let mut stamped = obj.clone();
        self.annotate(&res.kind, &mut stamped);
        traced(
            write_span("update", &res.kind, namespace, Some(name), dry_run),
            self.inner.replace(res, namespace, name, &stamped, dry_run),
        )
        .await
    }

    async fn create(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let mut stamped = obj.clone();
        self.annotate(&res.kind, &mut stamped);
        traced(
            write_span("create", &res.kind, namespace, None, dry_run),
            self.inner.create(res, namespace, &stamped, dry_run),
        )
        .await
    }

    async fn delete(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<()> {
        traced(
            write_span("delete", &res.kind, namespace, Some(name), dry_run),
            self.inner.delete(res, namespace, name, dry_run),
        )
        .await
    }

    async fn evict(&self, namespace: &str, pod: &str, dry_run: bool) -> Result<()> {
        traced(
            write_span("evict", "Pod", Some(namespace), Some(pod), dry_run),
            self.inner.evict(namespace, pod, dry_run),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Null;
    #[async_trait]
    impl ClusterWriter for Null {
        async fn patch(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
            _: PatchType,
            p: &Value,
            _: bool,
        ) -> Result<Value> {
            Ok(p.clone())
        }
        async fn replace(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            _: &str,
            o: &Value,
            _: bool,
        ) -> Result<Value> {
            Ok(o.clone())
        }
        async fn create(
            &self,
            _: &ResourceInfo,
            _: Option<&str>,
            o: &Value,
            _: bool,
        ) -> Result<Value> {
            Ok(o.clone())
        }
        async fn delete(&self, _: &ResourceInfo, _: Option<&str>, _: &str, _: bool) -> Result<()> {
            Ok(())
        }
        async fn evict(&self, _: &str, _: &str, _: bool) -> Result<()> {
            Ok(())
        }
    }

    fn res(kind: &str) -> ResourceInfo {
        ResourceInfo {
            kind: kind.into(),
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
            namespaced: true,
        }
    }

    #[tokio::test]
    async fn every_change_carries_the_stamp_and_workloads_their_change_cause() {
        let w = StampingWriter::new(
            Arc::new(Null),
            "r1/1".into(),
            "kubemedic r1: rollback".into(),
        );
        let sent = w
            .patch(
                &res("Deployment"),
                Some("shop"),
                "checkout",
                PatchType::Merge,
                &json!({"spec": {"replicas": 3}}),
                false,
            )
            .await
            .unwrap();
        assert!(is_stamped(&sent, "r1/1"));
        assert_eq!(
            sent["metadata"]["annotations"][CHANGE_CAUSE],
            "kubemedic r1: rollback"
        );
        assert_eq!(sent["spec"]["replicas"], 3);
        let sent = w
            .replace(
                &res("HorizontalPodAutoscaler"),
                Some("shop"),
                "h",
                &json!({"metadata": {"annotations": {"keep": "me"}}}),
                false,
            )
            .await
            .unwrap();
        assert!(is_stamped(&sent, "r1/1"));
        assert_eq!(sent["metadata"]["annotations"]["keep"], "me");
        assert!(sent["metadata"]["annotations"].get(CHANGE_CAUSE).is_none());
        assert!(
            !is_stamped(&sent, "r1/2"),
            "another step's stamp is not this one"
        );
    }
}
