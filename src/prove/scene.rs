//! What the obligations read: the target, its pods and revisions, events, nodes, quotas,
//! budgets and autoscalers — each asked of the cluster once (through a [`MemoReader`]) and
//! parsed into the few facts the obligations judge on.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cluster::obj::{self, i64_at};
use crate::cluster::observed::{self, Event, Node, Pod, QuotaRoom, Revision};
use crate::cluster::{ClusterError, ClusterReader, ErrorKind, ListQuery, LogQuery, MemoReader};
use crate::domain::{Neighbourhood, SignalContext, Target};

pub(super) type Read<T> = Result<T, ClusterError>;

/// The part of the cluster one proof looks at.
pub(super) struct Scene {
    pub r: Arc<dyn ClusterReader>,
    pub target: Target,
    pub now: DateTime<Utc>,
    pub signal: SignalContext,
    /// The target's neighbourhood, built once for every obligation that asks
    /// (`workload::neighbourhood`).
    pub neighbourhood: tokio::sync::OnceCell<Neighbourhood>,
}

pub(super) use super::findings::hhmm;

impl Scene {
    pub fn new(
        reader: Arc<dyn ClusterReader>,
        target: Target,
        now: DateTime<Utc>,
        signal: SignalContext,
    ) -> Self {
        Self {
            r: Arc::new(MemoReader::new(reader)),
            target,
            now,
            signal,
            neighbourhood: tokio::sync::OnceCell::new(),
        }
    }

    pub fn ns(&self) -> Option<&str> {
        self.target.namespace.as_deref()
    }

    pub async fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Read<Value> {
        let res = self.r.resource(kind).await?;
        self.r.get(&res, ns, name).await
    }

    pub async fn list(&self, kind: &str, ns: Option<&str>, q: &ListQuery) -> Read<Vec<Value>> {
        let res = self.r.resource(kind).await?;
        self.r.list(&res, ns, q).await
    }

    /// A list of a kind the server may not serve or kubemedic may not read: empty then.
    pub async fn list_optional(&self, kind: &str, ns: Option<&str>) -> Read<Vec<Value>> {
        match self.list(kind, ns, &ListQuery::default()).await {
            Err(e) if matches!(e.kind, ErrorKind::NotServed | ErrorKind::NotFound) => Ok(vec![]),
            other => other,
        }
    }

    pub async fn target_obj(&self) -> Read<Value> {
        self.get(&self.target.kind, self.ns(), &self.target.name)
            .await
    }

    /// The workload's pods: those its selector matches that are its own
    /// ([`observed::its_pod`]).
    pub async fn pods_of(&self, workload: &Value) -> Read<Vec<Pod>> {
        let Some(sel) = observed::pod_selector(workload) else {
            return Ok(vec![]);
        };
        let pods = self
            .list(
                "Pod",
                obj::namespace(workload).or(self.ns()),
                &ListQuery::labels(sel.to_query()),
            )
            .await?;
        // Parsed once, then asked whose it is ([`observed::its_pod`]'s question).
        let (kind, name) = (obj::kind(workload), obj::name(workload));
        let pods: Vec<Pod> = pods
            .iter()
            .map(|p| Pod::at(p, self.now))
            .filter(|p| p.selected_by(kind, name))
            .collect();
        self.heeding(pods, obj::namespace(workload).or(self.ns()))
            .await
    }

    /// `pods` of namespace `ns` having heeded its events ([`Pod::heed`], as the rules' evidence
    /// and the graph do), read only when a pod placed on a node is still starting.
    pub async fn heeding(&self, pods: Vec<Pod>, ns: Option<&str>) -> Read<Vec<Pod>> {
        crate::cluster::heeding(self.r.as_ref(), pods, ns).await
    }

    /// The target's pods (a workload's, a Pod itself, a Node's).
    pub async fn target_pods(&self) -> Read<Vec<Pod>> {
        match self.target.kind.as_str() {
            "Pod" => {
                let pod = Pod::at(&self.target_obj().await?, self.now);
                self.heeding(vec![pod], self.ns()).await
            }
            "Node" => self.pods_on(&self.target.name).await,
            _ => self.pods_of(&self.target_obj().await?).await,
        }
    }

    pub async fn pods_on(&self, node: &str) -> Read<Vec<Pod>> {
        let pods = self
            .list(
                "Pod",
                None,
                &ListQuery::fields(format!("spec.nodeName={node}")),
            )
            .await?;
        // The pods of each namespace with a pod still starting heed its events.
        let mut out: Vec<Pod> = pods.iter().map(|p| Pod::at(p, self.now)).collect();
        let mut starting: Vec<String> = out
            .iter()
            .filter(|p| p.placed_not_started())
            .filter_map(|p| obj::namespace(&p.raw).map(str::to_owned))
            .collect();
        starting.sort_unstable();
        starting.dedup();
        for ns in starting {
            let warnings = crate::cluster::heeded_events(self.r.as_ref(), Some(&ns)).await?;
            for p in out
                .iter_mut()
                .filter(|p| obj::namespace(&p.raw) == Some(ns.as_str()))
            {
                *p = std::mem::take(p).heed(&warnings);
            }
        }
        Ok(out)
    }

    /// The log of container `container`'s previous instance (its last 50 lines): what the
    /// start before this one ended on. `None` when it cannot be read — a log is evidence a
    /// proof may use, never one it depends on being readable.
    pub async fn previous_log(&self, pod: &str, container: &str) -> Option<String> {
        let ns = self.ns()?;
        let query = LogQuery {
            container: Some(container.to_owned()),
            previous: true,
            tail_lines: Some(observed::FAILURE_LOG_LINES),
            since_seconds: None,
        };
        self.r.logs(ns, pod, &query).await.ok()
    }

    /// Events of a namespace (the target's unless named).
    pub async fn events(&self, ns: Option<&str>) -> Read<Vec<Event>> {
        let ns = ns.or(self.ns());
        let events = self.list("Event", ns, &ListQuery::default()).await?;
        Ok(events.iter().map(Event::parse).collect())
    }

    /// How node `node`'s readiness came and went lately, when it flaps
    /// ([`super::findings::flaps`]): one line.
    pub async fn node_flaps(&self, node: &str) -> Read<Option<String>> {
        let events = self.node_events(node).await?;
        Ok(super::findings::flaps(self.now, &events, node))
    }

    /// The events about node `node` ([`crate::cluster::node_events`]).
    pub async fn node_events(&self, node: &str) -> Read<Vec<Event>> {
        let events = crate::cluster::node_events(self.r.as_ref(), node).await?;
        Ok(events.iter().map(Event::parse).collect())
    }

    pub async fn nodes(&self) -> Read<Vec<Node>> {
        let nodes = self.list("Node", None, &ListQuery::default()).await?;
        Ok(nodes.iter().map(Node::parse).collect())
    }

    /// The target's ReplicaSets (a Deployment's), with their revision numbers.
    pub async fn replicasets(&self, deployment: &Value) -> Read<Vec<(i64, Value)>> {
        let all = self
            .list(
                "ReplicaSet",
                obj::namespace(deployment),
                &ListQuery::default(),
            )
            .await?;
        let mut out: Vec<(i64, Value)> = all
            .into_iter()
            .filter(|rs| obj::owned_by(rs, deployment))
            .filter_map(|rs| {
                let rev = obj::annotation(&rs, "deployment.kubernetes.io/revision")?
                    .parse()
                    .ok()?;
                Some((rev, rs))
            })
            .collect();
        out.sort_by_key(|(r, _)| *r);
        Ok(out)
    }

    /// A StatefulSet's ControllerRevisions, by revision number.
    pub async fn controller_revisions(&self, sts: &Value) -> Read<Vec<(i64, Value)>> {
        let all = self
            .list(
                "ControllerRevision",
                obj::namespace(sts),
                &ListQuery::default(),
            )
            .await?;
        let mut out: Vec<(i64, Value)> = all
            .into_iter()
            .filter(|cr| obj::owned_by(cr, sts))
            .filter_map(|cr| Some((i64_at(&cr, &["revision"])?, cr)))
            .collect();
        out.sort_by_key(|(r, _)| *r);
        Ok(out)
    }

    /// A workload's revisions, oldest first: a Deployment's ReplicaSets, a StatefulSet's (or
    /// DaemonSet's) ControllerRevisions.
    pub async fn revisions(&self, w: &Value) -> Read<Vec<Revision>> {
        let (raw, of) = match obj::kind(w) {
            "Deployment" => (
                self.replicasets(w).await?,
                Revision::of_replicaset as fn(&Value) -> Option<Revision>,
            ),
            _ => (
                self.controller_revisions(w).await?,
                Revision::of_controller_revision as fn(&Value) -> Option<Revision>,
            ),
        };
        let raw: Vec<Value> = raw.into_iter().map(|(_, v)| v).collect();
        Ok(observed::revisions(&raw, of))
    }

    /// The HorizontalPodAutoscalers of the target's namespace ([`findings::count_set_by`] picks
    /// the one that sets a workload's count).
    pub async fn autoscalers(&self) -> Read<Vec<observed::Hpa>> {
        Ok(self
            .list_optional("HorizontalPodAutoscaler", self.ns())
            .await?
            .iter()
            .map(observed::Hpa::parse)
            .collect())
    }

    /// The namespace's quota that leaves the least room for `resource`
    /// ([`observed::tightest_quota`]).
    pub async fn quota(&self, resource: &str) -> Read<Option<QuotaRoom>> {
        let quotas = self.list_optional("ResourceQuota", self.ns()).await?;
        Ok(observed::tightest_quota(&quotas, resource))
    }

    /// The signal's own container label, when it names one.
    pub fn signal_container(&self) -> Option<String> {
        self.signal.subject_container()
    }

    pub fn proactive(&self) -> bool {
        self.signal.mode == crate::domain::SignalMode::Proactive
    }
}

/// A reactive Alertmanager signal named `name`, received at `now`: what a proof's unit test
/// judges against.
#[cfg(test)]
pub(super) fn test_signal(name: &str, now: DateTime<Utc>) -> SignalContext {
    use crate::domain::{SignalMode, SignalSource};
    SignalContext {
        fingerprint: "fp".into(),
        name: name.into(),
        severity: Some("warning".into()),
        mode: SignalMode::Reactive,
        source: SignalSource::Alertmanager,
        starts_at: now,
        received_at: now,
        labels: Default::default(),
        annotations: Default::default(),
        generator_url: None,
        external_url: None,
        requested: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cluster::observed::FailureKind;
    use crate::cluster::snapshot::SnapshotCluster;

    /// Issue 43: the proofs' pods heed the warnings about them as the rules' evidence and the
    /// graph do: a pod placed seconds ago whose sandbox cannot be made fails to start, whether
    /// the proof reads the workload's pods or the node's.
    #[tokio::test]
    async fn the_scene_s_pods_heed_the_warnings_about_them() {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "api", "namespace": "shop"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}}}},
            {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "api-5d8f-0", "namespace": "shop", "labels": {"app": "api"},
                    "creationTimestamp": "2026-11-21T11:59:50Z"},
                "spec": {"nodeName": "n1", "containers": [{"name": "api"}]},
                "status": {"phase": "Pending", "startTime": "2026-11-21T11:59:50Z",
                    "containerStatuses": [{"name": "api", "ready": false, "restartCount": 0,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]}},
            {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "api-5d8f-0.1", "namespace": "shop"},
                "involvedObject": {"kind": "Pod", "name": "api-5d8f-0", "namespace": "shop"},
                "type": "Warning", "reason": "FailedCreatePodSandBox",
                "lastTimestamp": "2026-11-21T11:59:55Z",
                "message": "failed to setup network for sandbox: plugin type=\"calico\" failed"}]});
        let snap =
            SnapshotCluster::from_yaml(&objects.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let scene = Scene::new(
            Arc::new(snap),
            target,
            now,
            test_signal("KubePodNotReady", now),
        );
        let kinds = |pods: Vec<Pod>| -> Vec<Option<FailureKind>> {
            pods.iter().map(|p| p.broken().map(|f| f.kind)).collect()
        };
        let of = scene
            .target_pods()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(kinds(of), [Some(FailureKind::Warned)]);
        let on = scene
            .pods_on("n1")
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(kinds(on), [Some(FailureKind::Warned)]);
    }
}
