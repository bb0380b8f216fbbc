//! Whether a node ran short of memory itself: what a kill for memory says of the node rather
//! than of the container's limit. The memory proof refuses a raise on it, and the dependency
//! graph lets the node explain a kill only on it ([`node_took_memory`]).

use chrono::{DateTime, Duration, Utc};

use crate::cluster::observed::{Event, MEMORY_KILL_LOOKBACK_HOURS, Node, Pod};

/// The reasons of the events a node leaves when it runs short of memory itself: the kubelet's
/// eviction threshold met, its `MemoryPressure` condition turning True.
pub const SHORT_OF_MEMORY: &[&str] = &["EvictionThresholdMet", "NodeHasInsufficientMemory"];

/// The last event among `events` (the node's own) saying the node ran short of memory itself
/// within [`MEMORY_KILL_LOOKBACK_HOURS`] before `now`: as far back as a kill for memory says a
/// limit is too small, so a kill in that time may be the node's doing rather than the limit's.
/// The memory proof refuses a raise on it; the dependency graph shows it as the node's evidence.
pub fn short_of_memory(events: &[Event], now: DateTime<Utc>) -> Option<&Event> {
    let since = now - Duration::hours(MEMORY_KILL_LOOKBACK_HOURS);
    events
        .iter()
        .filter(|e| SHORT_OF_MEMORY.contains(&e.reason.as_str()))
        .filter(|e| e.last.is_none_or(|t| t >= since))
        .max_by_key(|e| e.last)
}

/// How many nodes a container's kills for memory are asked about ([`memory_nodes`]): a
/// workload killed on more is not one node's shortage, and each node asked costs reads.
pub const MEMORY_NODES_ASKED: usize = 3;

/// The nodes whose own memory is asked about a container's kills ([`node_took_memory`]): those
/// it was killed on (`killed`), else those of all the workload's pods (`all`); each once, in
/// name order, at most [`MEMORY_NODES_ASKED`]. The memory proof and the rules that propose a
/// raise ask the same nodes.
pub fn memory_nodes<'a>(
    killed: impl IntoIterator<Item = &'a str>,
    all: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut nodes: Vec<&str> = killed.into_iter().collect();
    if nodes.is_empty() {
        nodes = all.into_iter().collect();
    }
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .take(MEMORY_NODES_ASKED)
        .map(str::to_owned)
        .collect()
}

/// What a node's own memory says of the kills of containers on it ([`node_took_memory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// What says the node ran short of memory itself; empty when nothing does.
    pub why: Vec<String>,
    /// The processes its kernel killed at the kills' moments beyond the containers that hit
    /// their own limits ([`node_short_at`]).
    pub kernel_kills: i64,
}

impl NodeMemory {
    /// The node ran short of memory itself: a kill on it may be its doing, not the limit's.
    pub fn took(&self) -> bool {
        !self.why.is_empty()
    }
}

/// Whether `node` (named `name`) ran short of memory itself, for containers OOM-killed on it
/// at `moments`: its `MemoryPressure` condition now, its own word within the kills' look-back
/// ([`short_of_memory`]), or more processes killed by its kernel at those moments than
/// containers that hit their own limits ([`node_short_at`], of the pods on it, `here`). When
/// nothing says so the kill was the container's own, whatever else ails the node (a full disk,
/// a flapping readiness): the memory proof and the dependency graph ask this one question.
pub fn node_took_memory(
    node: Option<&Node>,
    name: &str,
    events: &[Event],
    here: &[Pod],
    moments: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> NodeMemory {
    let mut why = Vec::new();
    if node.is_some_and(|n| n.pressure.iter().any(|p| p == "MemoryPressure")) {
        why.push(format!("node {name} is under MemoryPressure"));
    }
    let kernel_kills = node_short_at(events, here, moments);
    if let Some(e) = short_of_memory(events, now) {
        why.push(format!(
            "node {name} ran out of memory itself: {}",
            e.line()
        ));
    } else if kernel_kills > 0 {
        why.push(format!(
            "node {name} ran out of memory itself: {kernel_kills} more process(es) killed by the kernel at the moment of the kill than containers that hit their own limits"
        ));
    }
    NodeMemory { why, kernel_kills }
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
/// ([`node_oom_at`] for each moment), from the node's `events`. The kills at `moments` are
/// their containers' own (the caller found them so: an `OOMKilled` termination, or an exit 137
/// the kernel's warning names), so each counts as one, whether or not its pod's status still
/// says `OOMKilled`.
pub fn node_short_at(events: &[Event], here: &[Pod], moments: &[DateTime<Utc>]) -> i64 {
    let (ooms, starts) = oom_reports(events);
    if ooms.is_empty() {
        return 0;
    }
    let mut kills = limit_kills(here);
    for m in moments {
        if !kills.contains(m) {
            kills.push(*m);
        }
    }
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

/// When the containers of `pods` were killed for memory lately, as the memory proof counts
/// the kills ([`Pod::recent_memory_kills`]: an `OOMKilled` status, or an exit 137 that the
/// kernel's warning about the pod names, within [`MEMORY_KILL_LOOKBACK_HOURS`]). The moments
/// the dependency graph asks [`node_took_memory`] about.
pub fn kill_moments(pods: &[Pod], events: &[Event], now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    pods.iter()
        .flat_map(|p| p.recent_memory_kills(events, now))
        .filter_map(|(_, t)| t)
        .collect()
}

/// When the containers of `pods` were last OOM-killed (those whose last termination was one).
pub fn limit_kills(pods: &[Pod]) -> Vec<DateTime<Utc>> {
    pods.iter()
        .flat_map(|p| p.oom_killed())
        .filter_map(|(_, t)| t)
        .collect()
}

/// The `SystemOOM` events of a node and its kubelet's starts, from its events.
pub fn oom_reports(events: &[Event]) -> (Vec<OomEvent>, Vec<DateTime<Utc>>) {
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_nodes_asked_are_the_kills_else_all_the_pods_at_most_three() {
        use super::memory_nodes;
        assert_eq!(memory_nodes(["n2", "n1", "n2"], ["n9"]), ["n1", "n2"]);
        assert_eq!(memory_nodes([], ["n9", "n8"]), ["n8", "n9"]);
        assert_eq!(memory_nodes(["d", "c", "b", "a"], []), ["a", "b", "c"]);
    }

    use serde_json::json;

    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    /// Issue 43: the graph asks the node about the kills the memory proof counts: an exit 137
    /// the kernel's warning names counts, a kill past the look-back does not.
    #[test]
    fn the_kills_asked_about_are_those_the_memory_proof_counts() {
        let now = t("2026-11-30T12:00:00Z");
        let pod = |name: &str, reason: &str, at: &str| {
            Pod::parse(
                &json!({"metadata": {"name": name}, "status": {"containerStatuses": [
                {"name": "app", "restartCount": 1, "lastState": {"terminated": {
                    "reason": reason, "exitCode": 137, "finishedAt": at}}}]}}),
            )
        };
        let said = Event::parse(&json!({"type": "Warning",
            "reason": crate::cluster::observed::OOM_KILL_EVENT,
            "involvedObject": {"kind": "Pod", "name": "a"}, "message": "killed"}));
        let pods = [
            pod("a", "Error", "2026-11-30T11:50:00Z"),
            pod("b", "OOMKilled", "2026-11-30T11:55:00Z"),
            pod("c", "OOMKilled", "2026-11-29T11:55:00Z"),
        ];
        assert_eq!(
            kill_moments(&pods, std::slice::from_ref(&said), now),
            [t("2026-11-30T11:50:00Z"), t("2026-11-30T11:55:00Z")]
        );
        assert_eq!(kill_moments(&pods, &[], now), [t("2026-11-30T11:55:00Z")]);
    }

    #[test]
    fn a_node_ran_short_of_memory_when_it_said_so_within_the_kills_look_back() {
        let now = t("2026-11-30T12:00:00Z");
        let event = |reason: &str, at: &str| {
            Event::parse(
                &json!({"reason": reason, "type": "Warning", "message": "low memory",
                "involvedObject": {"kind": "Node", "name": "n1"}, "lastTimestamp": at}),
            )
        };
        let events = [
            event("NodeHasInsufficientMemory", "2026-11-30T02:00:00Z"),
            event("EvictionThresholdMet", "2026-11-30T09:00:00Z"),
            event("NodeHasDiskPressure", "2026-11-30T11:00:00Z"),
        ];
        let short = short_of_memory(&events, now).map(|e| e.reason.as_str());
        assert_eq!(short, Some("EvictionThresholdMet"));
        // Ten hours ago is past the look-back.
        assert!(short_of_memory(&events[..1], now).is_none());
    }

    #[test]
    fn the_kill_in_question_is_its_containers_own_though_its_status_says_error() {
        // The runtime reported the kill as `Error` 137 (the memory proof found it by the
        // kernel's warning): the node's one SystemOOM report at that moment is that kill.
        let kill = t("2026-11-28T14:53:40Z");
        let events = [Event::parse(&json!({
            "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "SystemOOM",
            "type": "Warning", "message": "System OOM encountered", "count": 1,
            "firstTimestamp": "2026-11-28T14:53:41Z", "lastTimestamp": "2026-11-28T14:53:41Z"}))];
        assert_eq!(node_short_at(&events, &[], &[kill]), 0);
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
