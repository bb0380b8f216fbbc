//! What the obligations read: the target, its pods and revisions, events, nodes, quotas,
//! budgets and autoscalers — each asked of the cluster once (through a [`MemoReader`]) and
//! parsed into the few facts the obligations judge on.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::observed::{self, Event, Node, Pod, QuotaRoom, Revision};
use crate::cluster::selector::Selector;
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

    /// The pods a workload's selector matches.
    pub async fn pods_of(&self, workload: &Value) -> Read<Vec<Pod>> {
        let Some(sel) = at(workload, &["spec", "selector"]).and_then(Selector::from_object) else {
            return Ok(vec![]);
        };
        if sel.is_empty() {
            return Ok(vec![]);
        }
        let pods = self
            .list(
                "Pod",
                obj::namespace(workload).or(self.ns()),
                &ListQuery::labels(sel.to_query()),
            )
            .await?;
        Ok(pods.iter().map(|p| Pod::at(p, self.now)).collect())
    }

    /// The target's pods (a workload's, a Pod itself, a Node's).
    pub async fn target_pods(&self) -> Read<Vec<Pod>> {
        match self.target.kind.as_str() {
            "Pod" => Ok(vec![Pod::at(&self.target_obj().await?, self.now)]),
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
        Ok(pods.iter().map(|p| Pod::at(p, self.now)).collect())
    }

    /// The log of container `container`'s previous instance (its last 50 lines): what the
    /// start before this one ended on. `None` when it cannot be read — a log is evidence a
    /// proof may use, never one it depends on being readable.
    pub async fn previous_log(&self, pod: &str, container: &str) -> Option<String> {
        let ns = self.ns()?;
        let query = LogQuery {
            container: Some(container.to_owned()),
            previous: true,
            tail_lines: Some(50),
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

    pub async fn node_events(&self, node: &str) -> Read<Vec<Event>> {
        let events = self
            .list(
                "Event",
                None,
                &ListQuery::fields(format!(
                    "involvedObject.kind=Node,involvedObject.name={node}"
                )),
            )
            .await;
        match events {
            Ok(e) => Ok(e.iter().map(Event::parse).collect()),
            // A server without field selectors on events: the default namespace holds them.
            Err(e) if e.kind == ErrorKind::Invalid => Ok(self
                .events(Some("default"))
                .await?
                .into_iter()
                .filter(|e| e.kind == "Node" && e.name == node)
                .collect()),
            Err(e) => Err(e),
        }
    }

    pub async fn nodes(&self) -> Read<Vec<Node>> {
        let nodes = self.list("Node", None, &ListQuery::default()).await?;
        Ok(nodes.iter().map(Node::parse).collect())
    }

    /// The target's ReplicaSets (a Deployment's), with their revision numbers.
    pub async fn replicasets(&self, deployment: &Value) -> Read<Vec<(i64, Value)>> {
        let uid = str_at(deployment, &["metadata", "uid"]).unwrap_or_default();
        let all = self
            .list(
                "ReplicaSet",
                obj::namespace(deployment),
                &ListQuery::default(),
            )
            .await?;
        let mut out: Vec<(i64, Value)> = all
            .into_iter()
            .filter(|rs| {
                array(rs, &["metadata", "ownerReferences"]).iter().any(|o| {
                    str_at(o, &["uid"]) == Some(uid)
                        || (uid.is_empty() && str_at(o, &["name"]) == Some(obj::name(deployment)))
                })
            })
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
        let uid = str_at(sts, &["metadata", "uid"]).unwrap_or_default();
        let all = self
            .list(
                "ControllerRevision",
                obj::namespace(sts),
                &ListQuery::default(),
            )
            .await?;
        let mut out: Vec<(i64, Value)> = all
            .into_iter()
            .filter(|cr| {
                array(cr, &["metadata", "ownerReferences"]).iter().any(|o| {
                    str_at(o, &["uid"]) == Some(uid)
                        || (uid.is_empty() && str_at(o, &["name"]) == Some(obj::name(sts)))
                })
            })
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

/// One `SystemOOM` event about a node: how many times, first and last.
pub type OomEvent = (i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// How long after a kubelet starts its `SystemOOM` events are a replay of the kernel log (the
/// kubelet reads the whole log at start and reports every kill in it again, however old).
const OOM_REPLAY_SECONDS: i64 = 10;
/// How close a `SystemOOM` report and a container's OOM kill must be to be the same moment
/// (the kubelet reports within a second or two of the kernel's kill).
const OOM_MATCH_SECONDS: i64 = 10;

/// How many processes node's kernel killed at moment `kill` (a container's OOM kill) beyond
/// the containers that hit their own limits then: the node's own shortage at that moment.
///
/// A real kubelet's `SystemOOM` events say less than their name: kubelets up to 1.20 on
/// current kernels report a container killed at its own memory limit as a `SystemOOM` of its
/// node too (their kernel-log parser misses the cgroup the kill was limited by), and a starting
/// kubelet reports every kill of the kernel log again. So a report counts only at the moment of
/// the kill in question (within [`OOM_MATCH_SECONDS`]), not within [`OOM_REPLAY_SECONDS`] after
/// a kubelet start (`kubelet_starts`), and only beyond the containers of the node whose last
/// termination was an OOM kill at that moment (`limit_kills`, their finishing times).
///
/// A container killed at its limit again and again (`looping`: the last kills of those with a
/// restart behind them) was killed at earlier moments its status no longer dates; each one
/// whose last kill is not at this moment may account for one report here. Two pods of one
/// workload OOM-looping side by side (the old revision and the new after a limit raise that
/// did not help) are not the node running short.
pub fn node_oom_at(
    events: &[OomEvent],
    kubelet_starts: &[DateTime<Utc>],
    limit_kills: &[DateTime<Utc>],
    looping: &[DateTime<Utc>],
    kill: DateTime<Utc>,
) -> i64 {
    let near = |t: DateTime<Utc>| (t - kill).num_seconds().abs() <= OOM_MATCH_SECONDS;
    let replay = |t: DateTime<Utc>| {
        kubelet_starts
            .iter()
            .any(|s| t >= *s && t - *s <= Duration::seconds(OOM_REPLAY_SECONDS))
    };
    // An event the kubelet's recorder combined ("combined from similar events") counts every
    // report since its first, replays included, but dates only the last: it says one report
    // at that time.
    let reported: i64 = events
        .iter()
        .filter_map(|(count, first, last)| {
            let t = last.or(*first)?;
            let at_t = if first.is_none_or(|f| f == t) {
                (*count).max(1)
            } else {
                1
            };
            Some((at_t, t))
        })
        .filter(|(_, t)| near(*t) && !replay(*t))
        .map(|(n, _)| n)
        .sum();
    let own = limit_kills.iter().filter(|t| near(**t)).count() as i64;
    let earlier = looping.iter().filter(|t| !near(**t)).count() as i64;
    (reported - own - earlier).max(0)
}

/// How many processes a node's kernel killed, at the `moments` some containers were
/// OOM-killed, beyond the containers of the node (`here`) killed at their own limits then
/// ([`node_oom_at`] for each moment), from the node's `events`.
pub(super) fn node_short_at(events: &[Event], here: &[Pod], moments: &[DateTime<Utc>]) -> i64 {
    let (ooms, starts) = oom_reports(events);
    if ooms.is_empty() {
        return 0;
    }
    let kills = limit_kills(here);
    let looping: Vec<DateTime<Utc>> = here
        .iter()
        .flat_map(|p| p.oom_killed())
        .filter(|(c, _)| c.restarts > 0)
        .filter_map(|(_, t)| t)
        .collect();
    moments
        .iter()
        .map(|t| node_oom_at(&ooms, &starts, &kills, &looping, *t))
        .sum()
}

/// When the containers of `pods` were last OOM-killed (those whose last termination was one).
pub(super) fn limit_kills(pods: &[Pod]) -> Vec<DateTime<Utc>> {
    pods.iter()
        .flat_map(|p| p.oom_killed())
        .filter_map(|(_, t)| t)
        .collect()
}

/// The `SystemOOM` events of a node and its kubelet's starts, from its events.
pub(super) fn oom_reports(events: &[Event]) -> (Vec<OomEvent>, Vec<DateTime<Utc>>) {
    let ooms = events
        .iter()
        .filter(|e| e.kind == "Node" && e.reason == "SystemOOM")
        .map(|e| (e.count, e.first, e.last))
        .collect();
    let starts = events
        .iter()
        .filter(|e| e.kind == "Node" && e.reason == "Starting" && e.message.contains("kubelet"))
        .flat_map(|e| [e.first, e.last])
        .flatten()
        .collect();
    (ooms, starts)
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
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn a_kill_at_the_containers_own_limit_reported_again_as_system_oom_is_not_the_nodes() {
        let kill = t("2026-11-28T14:53:40Z");
        let ev = [(
            1,
            Some(t("2026-11-28T14:53:41Z")),
            Some(t("2026-11-28T14:53:41Z")),
        )];
        assert_eq!(node_oom_at(&ev, &[], &[kill], &[], kill), 0);
        // Another victim at the same moment: the node ran out itself.
        let two = [
            ev[0],
            (
                1,
                Some(t("2026-11-28T14:53:42Z")),
                Some(t("2026-11-28T14:53:42Z")),
            ),
        ];
        assert_eq!(node_oom_at(&two, &[], &[kill], &[], kill), 1);
        // No container hit its limit then: the one report is the node's.
        assert_eq!(node_oom_at(&ev, &[], &[], &[], kill), 1);
    }

    #[test]
    fn replays_at_a_kubelet_start_and_reports_at_other_times_say_nothing_of_this_kill() {
        let start = t("2026-11-28T14:53:00Z");
        let kill = t("2026-11-28T14:53:04Z");
        let replayed = [(
            1,
            Some(t("2026-11-28T14:53:01Z")),
            Some(t("2026-11-28T14:53:01Z")),
        )];
        assert_eq!(node_oom_at(&replayed, &[start], &[], &[], kill), 0);
        let earlier = [(
            1,
            Some(t("2026-11-28T14:40:00Z")),
            Some(t("2026-11-28T14:40:00Z")),
        )];
        assert_eq!(node_oom_at(&earlier, &[], &[], &[], kill), 0);
    }

    #[test]
    fn an_earlier_kill_of_another_container_looping_at_its_limit_is_not_the_nodes() {
        // The old pod's latest kill is at 14:53:40; the new pod (killed at its own limit again
        // and again, last at 14:54:30) was killed at 14:53:41 too, which its status no longer
        // dates: two reports then, and no shortage of the node.
        let kill = t("2026-11-28T14:53:40Z");
        let other = t("2026-11-28T14:54:30Z");
        let ev = [
            (1, Some(kill), Some(kill)),
            (
                1,
                Some(t("2026-11-28T14:53:41Z")),
                Some(t("2026-11-28T14:53:41Z")),
            ),
        ];
        assert_eq!(
            node_oom_at(&ev, &[], &[kill, other], &[kill, other], kill),
            0
        );
        // Without a looping neighbour the second report is the node's.
        assert_eq!(node_oom_at(&ev, &[], &[kill, other], &[kill], kill), 1);
    }

    #[test]
    fn a_combined_event_counts_one_report_at_its_last_time() {
        let start = t("2026-11-28T14:53:00Z");
        let kill = t("2026-11-28T14:53:40Z");
        let combined = [(
            12,
            Some(t("2026-11-28T14:53:01Z")),
            Some(t("2026-11-28T14:53:41Z")),
        )];
        assert_eq!(node_oom_at(&combined, &[start], &[kill], &[], kill), 0);
        assert_eq!(node_oom_at(&combined, &[start], &[], &[], kill), 1);
    }
}
