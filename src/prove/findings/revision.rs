//! Whether a revision works (by its pods, what is recorded of them, or how long it served), and
//! whether two revisions differ.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::{configmap_read_live, configmaps, hhmm};
use crate::cluster::obj::at;
use crate::cluster::observed::{Event, Failure, Pod, Revision, SERVED_MIN_SECONDS};

/// What shows whether a revision works, strongest first: its pods now (one failing, or some
/// ready), else the recorded failures of its pods, else how long it served before the next
/// revision replaced it. The rules judge a failing rollout's previous revision by it, the
/// rollback proof the revision it returns to: one judgement, so the rule never proposes a
/// return the proof then refuses for the revision's health.
#[derive(Debug)]
pub enum RevisionHealth<'a> {
    /// A pod of the revision fails now.
    Fails(&'a Pod, Failure),
    /// This many of its pods are ready now (its pods seen ready, or the ready replicas its
    /// ReplicaSet reports, whichever is more).
    Ready(usize),
    /// None of its pods is ready, and a failure of one is recorded.
    FailedBefore(&'a Event),
    /// None of its pods is ready and nothing records a failure: it served this long before the
    /// next revision appeared (`None` when either time is unknown).
    Served(Option<Duration>),
}

impl RevisionHealth<'_> {
    /// Whether the revision is shown to work: pods of it ready now, or it served at least
    /// [`SERVED_MIN_SECONDS`] with nothing recorded against it.
    pub fn proven(&self) -> bool {
        match self {
            Self::Ready(_) => true,
            Self::Served(served) => {
                served.is_some_and(|s| s >= Duration::seconds(SERVED_MIN_SECONDS))
            }
            Self::Fails(..) | Self::FailedBefore(_) => false,
        }
    }
}

/// How `rev` is known to behave ([`RevisionHealth`]): `pods` are the workload's (those of other
/// revisions are passed over), `replaced_at` when the next revision appeared.
pub fn revision_health<'a>(
    rev: &Revision,
    pods: impl IntoIterator<Item = &'a Pod>,
    events: &'a [Event],
    replaced_at: Option<DateTime<Utc>>,
) -> RevisionHealth<'a> {
    let all: Vec<&Pod> = pods.into_iter().collect();
    let its: Vec<&Pod> = all.iter().copied().filter(|p| rev.owns(p)).collect();
    if let Some((p, f)) = its.iter().find_map(|p| Some((*p, p.broken()?))) {
        return RevisionHealth::Fails(p, f);
    }
    let ready = its
        .iter()
        .filter(|p| p.ready)
        .count()
        .max(usize::try_from(rev.ready).unwrap_or(0));
    if ready > 0 {
        return RevisionHealth::Ready(ready);
    }
    if let Some(e) = revision_failures(events, &rev.name, &rev.hash).first() {
        return RevisionHealth::FailedBefore(e);
    }
    if let Some(e) = earlier_incarnation_failed(rev, &all, events, replaced_at) {
        return RevisionHealth::FailedBefore(e);
    }
    RevisionHealth::Served(match (rev.created, replaced_at) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    })
}

/// Event reasons that record a pod failing: a crash back-off, a failed pull, mount or start, a
/// failed probe, an OOM kill.
pub const FAILURE_REASONS: &[&str] = &["BackOff", "Failed", "Unhealthy", "OOMKilling"];

/// The Warning events that record pods of a revision failing: pods named after its ReplicaSet
/// (`<name>-…`) or carrying its hash (`hash`, empty when unknown) in their name. With none of
/// its pods left, they are what says whether the revision served or failed.
pub fn revision_failures<'e>(events: &'e [Event], name: &str, hash: &str) -> Vec<&'e Event> {
    let prefix = format!("{name}-");
    events
        .iter()
        .filter(|e| {
            e.warning
                && e.kind == "Pod"
                && (e.name.starts_with(&prefix) || (!hash.is_empty() && e.name.contains(hash)))
                && FAILURE_REASONS.contains(&e.reason.as_str())
        })
        .collect()
}

/// A failure recorded of a pod of `rev` whose name a pod of another revision now has: a
/// StatefulSet's pod keeps its name across revisions, so its warnings name no revision (a
/// ReplicaSet's pods, `pod-template-hash`, get new names). One first recorded while `rev` was
/// the newest revision (from its appearance until `replaced_at`) and before the pod now of
/// that name was created was about an earlier incarnation, made from `rev` or an older
/// revision: the rollout did not bring that failure.
fn earlier_incarnation_failed<'e>(
    rev: &Revision,
    pods: &[&Pod],
    events: &'e [Event],
    replaced_at: Option<DateTime<Utc>>,
) -> Option<&'e Event> {
    let since = rev.created?;
    events.iter().find(|e| {
        // When the failure was first recorded: a crash loop's one event runs on past the
        // next revision's appearance while the old pod waits its turn to be replaced.
        let Some(t) = e.first.or(e.last) else {
            return false;
        };
        e.warning
            && e.kind == "Pod"
            && FAILURE_REASONS.contains(&e.reason.as_str())
            && t >= since
            && replaced_at.is_none_or(|r| t < r)
            && pods.iter().any(|p| {
                p.name == e.name
                    && p.template_hash.is_none()
                    && !rev.owns(p)
                    && p.created.is_some_and(|c| t < c)
            })
    })
}

/// Whether pod template `new` differs from `old` only by higher memory limits: every
/// container's limit at least what it was, none added where there was none, the requests as
/// they were, and no container leaving the QoS class it had (a limit raised above a request
/// set equal to the old limit makes a Guaranteed pod Burstable, killed first when its node
/// runs short). A higher limit brings no OOM kill, so a revision that only raised it (a memory
/// raise that did not help) is not the cause of the OOM kills after it.
pub fn only_raised_memory(new: &Value, old: &Value) -> bool {
    let memory = |c: &Value, side: &str| {
        at(c, &["resources", side, "memory"])
            .and_then(Value::as_str)
            .map(crate::cluster::quantity::memory_bytes)
    };
    let without_limits = |t: &Value| {
        let mut spec = at(t, &["spec"]).cloned().unwrap_or(Value::Null);
        if let Some(cs) = spec.get_mut("containers").and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(r) = c
                    .pointer_mut("/resources/limits")
                    .and_then(Value::as_object_mut)
                {
                    r.remove("memory");
                }
            }
        }
        spec
    };
    let containers = |t: &Value| {
        at(t, &["spec", "containers"])
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    // Equal but for the limits: the same containers, in the same order.
    runs_differently(new, old)
        && without_limits(new) == without_limits(old)
        && containers(new).iter().zip(&containers(old)).all(|(n, o)| {
            match (memory(n, "limits"), memory(o, "limits")) {
                (Some(Some(n_limit)), Some(Some(o_limit))) => {
                    let guaranteed_before = memory(o, "requests") == Some(Some(o_limit));
                    n_limit >= o_limit && !(guaranteed_before && n_limit > o_limit)
                }
                (None, None) => true,
                _ => false,
            }
        })
}

/// Why a rollout from `previous` to `current` cannot have brought the failures of the current
/// revision's `failing` pods, though the templates differ: it only raised memory limits and
/// every one was killed for memory ([`only_raised_memory`]), or none was ever tried by a
/// scheduler and both revisions name the same one ([`Pod::unplaced_for`]). The rollout rule
/// does not blame the rollout on it; the rollback proof does not return on it.
pub fn not_the_rollout(
    current: &Revision,
    previous: &Revision,
    failing: &[&Pod],
    events: &[Event],
) -> Option<String> {
    if failing.is_empty() {
        return None;
    }
    if only_raised_memory(&current.template, &previous.template)
        && failing.iter().all(|p| !p.memory_kills(events).is_empty())
    {
        return Some(format!(
            "revision {} only raised the memory limit of revision {}, and a higher limit brings no OOM kill",
            current.number, previous.number
        ));
    }
    let scheduler = |t: &Value| {
        at(t, &["spec", "schedulerName"])
            .and_then(Value::as_str)
            .unwrap_or("default-scheduler")
            .to_owned()
    };
    let named = scheduler(&current.template);
    if failing.iter().all(|p| p.unplaced_for.is_some()) && named == scheduler(&previous.template) {
        return Some(format!(
            "no scheduler has tried to place the pods of revision {} (schedulerName {named}), and revision {} names the same scheduler",
            current.number, previous.number
        ));
    }
    None
}

/// Whether two pod templates run something different: their specs differ (images, commands,
/// environment, resources, volumes…). Metadata alone — the template hash, a restart's
/// `kubectl.kubernetes.io/restartedAt` stamp — changes on every rollout and runs the same: a
/// rollback across such revisions restores nothing, and the rollout did not change what runs.
pub fn runs_differently(a: &Value, b: &Value) -> bool {
    at(a, &["spec"]) != at(b, &["spec"])
}

/// What a rollout undo to `target` does about a ConfigMap its pods read, last written at
/// `written`. A rollout undo restores the pod template, never what the template reads: a
/// ConfigMap rewritten in place (a release that ships the image and its configuration together)
/// keeps its new content. The rollout rule asks this before proposing the return, the rollback
/// proof before allowing it.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoOnConfig {
    /// Pods of the revision read the content as written ([`Pod::started_since`] the write: the
    /// pod, or a container of it, started since) and are ready: the revision works with it.
    Proven(String),
    /// The revision never ran on the content as written ([`never_ran_on`]): a return to it
    /// keeps what it never ran on.
    Kept(String),
    /// The revision ran on it, or does not read it.
    RanOn,
}

/// [`UndoOnConfig`] for the ConfigMap `name`: `pods` are the workload's pods (those of other
/// revisions are passed over), `replaced_at` when the next revision appeared
/// ([`Revision::replaced_at`]).
pub fn undo_on_config(
    target: &Revision,
    name: &str,
    written: DateTime<Utc>,
    replaced_at: Option<DateTime<Utc>>,
    pods: &[&Pod],
) -> UndoOnConfig {
    let proven: Vec<&str> = pods
        .iter()
        .filter(|p| target.owns(p) && p.ready && p.started_since(written))
        .map(|p| p.name.as_str())
        .take(2)
        .collect();
    if !proven.is_empty() {
        return UndoOnConfig::Proven(format!(
            "ConfigMap {name} was written at {}; pod(s) {} of revision {} started after that and are ready: the revision works with its content",
            hhmm(written),
            proven.join(", "),
            target.number
        ));
    }
    match never_ran_on(target, name, written, replaced_at) {
        Some(why) => UndoOnConfig::Kept(format!(
            "ConfigMap {name} was written at {}, {why}, and none of its pods started since: a rollout undo keeps its new content",
            hhmm(written),
        )),
        None => UndoOnConfig::RanOn,
    }
}

/// Why the revision returned to never ran on the ConfigMap `name` as written at `written`, if
/// it did not: its pods read a ConfigMap at their start (environment, `subPath`) or, mounted as
/// a volume, as it is ([`configmap_read_live`]). Every pod of the revision read what
/// was written before the revision appeared; what was written later reached its running pods
/// only through a live mount, and only while the revision still ran (for
/// [`SERVED_MIN_SECONDS`], as for any proof that a revision served).
pub fn never_ran_on(
    target: &Revision,
    name: &str,
    written: DateTime<Utc>,
    replaced_at: Option<DateTime<Utc>>,
) -> Option<String> {
    if target.created.is_some_and(|c| written <= c) || !configmaps(&target.template).contains(name)
    {
        return None;
    }
    let revision = target.number;
    if !configmap_read_live(&target.template, name) {
        return Some(format!(
            "after revision {revision} appeared, whose pods read it only when they start"
        ));
    }
    match replaced_at {
        Some(r) if r - written >= Duration::seconds(SERVED_MIN_SECONDS) => None,
        Some(_) => Some(format!(
            "less than {SERVED_MIN_SECONDS}s before revision {revision} was replaced"
        )),
        None => None,
    }
}

/// Whether a rollback would cut across a rollout someone else runs: the rollout is paused
/// (stopped on purpose), the current revision's pods are starting rather than failing (it is
/// rolling out now), or the pods that fail are not of the current revision (the workload has
/// moved on). `current` is the revision the workload names now (`None`: not kept, numbered
/// `current_number`), `pods` the workload's, `stalled` the controller's word that the rollout
/// is stuck ([`Pod::never_ready_in_rollout`]). The rollback proof asks it
/// (`rollback.no-rollout-by-others`), and the dependency graph before it offers the return of
/// a Deployment whose rollout broke a dependent. `Ok` or `Err` with the line that shows it.
pub fn rollout_by_others(
    paused: bool,
    current: Option<&Revision>,
    current_number: i64,
    pods: &[&Pod],
    stalled: bool,
) -> Result<String, String> {
    let of_current = |p: &Pod| current.is_some_and(|c| c.owns(p));
    let never_ready = |p: &Pod| of_current(p) && p.never_ready_in_rollout(stalled);
    let starting: Vec<&str> = pods
        .iter()
        .filter(|p| {
            of_current(p) && !p.ready && !p.outlived() && p.broken().is_none() && !never_ready(p)
        })
        .map(|p| p.name.as_str())
        .collect();
    let current_fails = pods
        .iter()
        .any(|p| of_current(p) && (p.broken().is_some() || never_ready(p)));
    let failing = pods.iter().any(|p| p.broken().is_some() || never_ready(p));
    if paused {
        Err("the rollout is paused".into())
    } else if !current_fails && !starting.is_empty() {
        Err(format!(
            "revision {current_number} is rolling out now and its pods are starting ({}), not failing",
            starting
                .iter()
                .take(3)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else if !current_fails && failing {
        Err(format!(
            "the failing pods are not of the current revision {current_number}: the workload has moved on since"
        ))
    } else if current_fails {
        Ok(format!(
            "the current revision {current_number} is the one failing"
        ))
    } else {
        Ok(format!(
            "no pod of the current revision {current_number} is starting or failing: no rollout is under way"
        ))
    }
}

/// A pod of a rollout's new revision kept from starting by an older revision's pod: the
/// volume it waits to attach is still attached to the holder (a ReadWriteOnce volume on
/// another node, a `Multi-Attach` error). Every new pod waits for it whatever the revision
/// changed: the rollout strategy is what fails, and a rollback only abandons the attempt. The
/// rollout rule asks it before it blames the release, the rollback proof before it allows the
/// return.
#[derive(Debug)]
pub struct HeldByOlder<'a> {
    pub pod: &'a Pod,
    pub volume: String,
    pub holder: &'a Pod,
}

/// The pods of `current` that wait on a volume an older revision's pod holds
/// ([`HeldByOlder`]), one finding per waiting pod, from the workload's `pods` and the
/// namespace's `events`.
pub fn held_by_older<'a>(
    current: &Revision,
    pods: &[&'a Pod],
    events: &[Event],
) -> Vec<HeldByOlder<'a>> {
    let mut out = Vec::new();
    for p in pods.iter().copied().filter(|p| current.owns(p) && !p.ready) {
        let found = events
            .iter()
            .filter(|e| e.warning && e.kind == "Pod" && e.name == p.name)
            .filter_map(attach_conflict)
            .find_map(|(volume, holders)| {
                let holder = holders
                    .iter()
                    .filter_map(|h| pods.iter().copied().find(|o| &o.name == h))
                    .find(|o| !current.owns(o))?;
                Some(HeldByOlder {
                    pod: p,
                    volume,
                    holder,
                })
            });
        out.extend(found);
    }
    out
}

/// The volume and the pods holding it, from a `FailedAttachVolume` event's `Multi-Attach`
/// error: the attach controller's own account, which the rollout's finding and the dependency
/// graph's claim both read.
pub fn attach_conflict(e: &Event) -> Option<(String, Vec<String>)> {
    if e.reason != "FailedAttachVolume" || !e.message.contains("Multi-Attach") {
        return None;
    }
    let volume = e.message.split('"').nth(1)?.to_owned();
    let (_, holders) = e.message.split_once("used by pod(s)")?;
    let holders = holders
        .split(',')
        .map(|h| h.trim().trim_end_matches('.').to_owned())
        .filter(|h| !h.is_empty())
        .collect();
    Some((volume, holders))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: &str, name: &str, reason: &str, kind_of_event: &str) -> Event {
        Event::parse(&json!({"involvedObject": {"kind": kind, "name": name},
            "reason": reason, "type": kind_of_event, "message": "m"}))
    }

    #[test]
    fn failures_of_a_revision_s_pods_are_its_record() {
        let events = [
            event("Pod", "api-5d9f-x1", "BackOff", "Warning"),
            event("Pod", "api-7c2a-y2", "BackOff", "Warning"),
            event("Pod", "api-5d9f-x3", "Pulled", "Normal"),
            event("ReplicaSet", "api-5d9f", "FailedCreate", "Warning"),
        ];
        let got: Vec<&str> = revision_failures(&events, "api-5d9f", "5d9f")
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(got, ["api-5d9f-x1"]);
        assert!(revision_failures(&events, "api-0000", "").is_empty());
    }

    #[test]
    fn a_restart_stamp_or_a_new_hash_runs_the_same_and_an_image_or_env_change_does_not() {
        let t = |stamp: &str, image: &str, env: &str| {
            json!({"metadata": {"labels": {"pod-template-hash": stamp},
                    "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}},
                "spec": {"containers": [{"name": "api", "image": image,
                    "env": [{"name": "MODE", "value": env}]}]}})
        };
        let before = t("a", "api:1", "x");
        assert!(!runs_differently(&before, &t("b", "api:1", "x")));
        assert!(runs_differently(&before, &t("a", "api:2", "x")));
        assert!(runs_differently(&before, &t("a", "api:1", "y")));
    }

    fn rs(ready: i64, created: &str) -> Revision {
        Revision::of_replicaset(&json!({"kind": "ReplicaSet",
            "metadata": {"name": "api-5d9f", "creationTimestamp": created,
                "labels": {"pod-template-hash": "5d9f"},
                "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "status": {"readyReplicas": ready}}))
        .expect("a revision")
    }

    fn pod(name: &str, ready: bool, waiting: Option<&str>) -> Pod {
        let state = match waiting {
            Some(w) => json!({"waiting": {"reason": w}}),
            None => json!({"running": {}}),
        };
        Pod::parse(&json!({"kind": "Pod",
            "metadata": {"name": name, "labels": {"pod-template-hash": "5d9f"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "api-5d9f", "controller": true}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "api", "restartCount": 3, "state": state}]}}))
    }

    #[test]
    fn a_revision_is_judged_by_its_pods_then_its_record_then_how_long_it_served() {
        let created = "2026-11-30T10:00:00Z";
        let t = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
        };
        let failing = [
            pod("api-5d9f-a", true, None),
            pod("api-5d9f-b", false, Some("CrashLoopBackOff")),
        ];
        // One pod failing outweighs a ready sibling.
        assert!(matches!(
            revision_health(&rs(1, created), &failing, &[], None),
            RevisionHealth::Fails(p, _) if p.name == "api-5d9f-b"
        ));
        // Ready pods, or the ready replicas the ReplicaSet reports.
        let ready = [pod("api-5d9f-a", true, None)];
        assert!(matches!(
            revision_health(&rs(0, created), &ready, &[], None),
            RevisionHealth::Ready(1)
        ));
        assert!(matches!(
            revision_health(&rs(2, created), &[], &[], None),
            RevisionHealth::Ready(2)
        ));
        // No pods: a recorded failure of one, else the time it served.
        let record = [event("Pod", "api-5d9f-x1", "BackOff", "Warning")];
        let gone = rs(0, created);
        assert!(matches!(
            revision_health(&gone, &[], &record, None),
            RevisionHealth::FailedBefore(_)
        ));
        let served = |until: &str| revision_health(&gone, &[], &[], t(until));
        assert!(served("2026-11-30T11:00:00Z").proven());
        assert!(!served("2026-11-30T10:00:20Z").proven());
        assert!(matches!(
            revision_health(&gone, &[], &[], None),
            RevisionHealth::Served(None)
        ));
    }

    /// Issue 43: a pod of the revision its node evicted is a record its ReplicaSet replaced,
    /// not a failing replica; one evicted for overrunning its own ephemeral storage is.
    #[test]
    fn a_pod_its_node_evicted_does_not_fail_its_revision_and_one_over_its_own_limit_does() {
        let evicted = |message: &str| {
            Pod::parse(&json!({"kind": "Pod",
                "metadata": {"name": "api-5d9f-e", "labels": {"pod-template-hash": "5d9f"},
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "api-5d9f", "controller": true}]},
                "status": {"phase": "Failed", "reason": "Evicted", "message": message,
                    "containerStatuses": [{"name": "api", "restartCount": 0,
                        "state": {"terminated": {"reason": "Error", "exitCode": 137}}}]}}))
        };
        let health = |message: &str| {
            let pods = [pod("api-5d9f-a", true, None), evicted(message)];
            match revision_health(&rs(1, "2026-11-30T10:00:00Z"), &pods, &[], None) {
                RevisionHealth::Ready(n) => format!("ready {n}"),
                RevisionHealth::Fails(p, _) => format!("fails {}", p.name),
                other => format!("{other:?}"),
            }
        };
        assert_eq!(health("The node was low on resource: memory. "), "ready 1");
        // Evicted on the node's pressure, but for using more than it asked for: its own doing.
        let own = "The node was low on resource: memory. Container api was using 3Gi, request is 256Mi, has larger consumption of memory. ";
        assert_eq!(health(own), "fails api-5d9f-e");
        assert_eq!(
            health("Container api exceeded its local ephemeral storage limit \"2Gi\". "),
            "fails api-5d9f-e"
        );
    }

    fn minute(min: i64) -> DateTime<Utc> {
        use chrono::TimeZone;
        Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap() + Duration::minutes(min)
    }

    /// Revision 4, created at minute 0, reading ConfigMap `conf` as a volume (`live`) or as
    /// environment.
    fn revision(live: bool) -> Revision {
        let spec = if live {
            json!({"containers": [{"name": "api", "volumeMounts": [{"name": "c", "mountPath": "/etc/api"}]}],
                "volumes": [{"name": "c", "configMap": {"name": "conf"}}]})
        } else {
            json!({"containers": [{"name": "api", "envFrom": [{"configMapRef": {"name": "conf"}}]}]})
        };
        Revision {
            number: 4,
            name: "api-5d9f".into(),
            hash: "5d9f".into(),
            template: json!({ "spec": spec }),
            created: Some(minute(0)),
            ready: 0,
            replicas: Some(1),
        }
    }

    #[test]
    fn a_revision_ran_on_what_was_written_before_it_or_what_its_live_mount_served() {
        // Written before the revision appeared: every pod of it read it.
        assert_eq!(
            never_ran_on(&revision(false), "conf", minute(-5), Some(minute(30))),
            None
        );
        // Written while it ran, read only at start: its pods never read it.
        assert!(never_ran_on(&revision(false), "conf", minute(10), Some(minute(30))).is_some());
        // Mounted live: it ran on it for 20 minutes, or for 30 seconds only.
        assert_eq!(
            never_ran_on(&revision(true), "conf", minute(10), Some(minute(30))),
            None
        );
        let brief = minute(30) - Duration::seconds(30);
        assert!(never_ran_on(&revision(true), "conf", brief, Some(minute(30))).is_some());
        // A ConfigMap the revision does not read is no reason against returning to it.
        assert_eq!(
            never_ran_on(&revision(false), "other", minute(10), Some(minute(30))),
            None
        );
    }

    /// Issue 43: a StatefulSet's pod keeps its name across revisions. A failure recorded of
    /// `web-0` while revision 1 was the newest, before the `web-0` of revision 2 was made, was
    /// revision 1's own; one recorded after the new `web-0` was made is the new pod's. A
    /// ReplicaSet's pod of the same name and dates is never an earlier incarnation.
    #[test]
    fn a_failure_of_a_reused_pod_name_before_the_pod_was_made_is_the_earlier_revision_s() {
        let rev1 = Revision::of_controller_revision(&json!({"kind": "ControllerRevision",
            "metadata": {"name": "web-6f5c", "creationTimestamp": "2026-11-30T08:00:00Z"},
            "revision": 1}))
        .expect("a revision");
        let replaced_at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .ok();
        let web0 = |labels: Value| {
            Pod::parse(&json!({"kind": "Pod",
                "metadata": {"name": "web-0", "creationTimestamp": "2026-11-30T10:01:00Z",
                    "labels": labels},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "web", "restartCount": 3,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}))
        };
        let warned_from = |first: &str, last: &str| {
            [Event::parse(
                &json!({"involvedObject": {"kind": "Pod", "name": "web-0"},
                "reason": "BackOff", "type": "Warning", "message": "Back-off restarting failed container",
                "firstTimestamp": first, "lastTimestamp": last}),
            )]
        };
        let warned = |at: &str| warned_from(at, at);
        let stateful = [web0(json!({"controller-revision-hash": "web-7d8e"}))];
        let before = warned("2026-11-30T09:30:00Z");
        assert!(matches!(
            revision_health(&rev1, &stateful, &before, replaced_at),
            RevisionHealth::FailedBefore(e) if e.name == "web-0"
        ));
        // A crash loop of the old pod goes on being recorded while it waits to be replaced.
        let lasting = warned_from("2026-11-30T09:30:00Z", "2026-11-30T10:00:40Z");
        assert!(matches!(
            revision_health(&rev1, &stateful, &lasting, replaced_at),
            RevisionHealth::FailedBefore(e) if e.name == "web-0"
        ));
        let after = warned("2026-11-30T10:02:00Z");
        assert!(matches!(
            revision_health(&rev1, &stateful, &after, replaced_at),
            RevisionHealth::Served(_)
        ));
        let replicaset = [web0(json!({"pod-template-hash": "7d8e"}))];
        assert!(matches!(
            revision_health(&rev1, &replicaset, &before, replaced_at),
            RevisionHealth::Served(_)
        ));
    }

    /// A revision that only raised a memory limit brought no OOM kill; one that lowered it,
    /// added one where there was none, or changed anything else may have.
    #[test]
    fn only_a_higher_memory_limit_is_a_raise_that_brings_no_oom_kill() {
        let t = |image: &str, limit: Option<&str>| {
            let mut c = json!({"name": "api", "image": image,
                "resources": {"requests": {"cpu": "100m"}}});
            if let Some(l) = limit {
                c["resources"]["limits"] = json!({"memory": l});
            }
            json!({"spec": {"containers": [c]}})
        };
        let old = t("api:1", Some("256Mi"));
        assert!(only_raised_memory(&t("api:1", Some("384Mi")), &old));
        assert!(!only_raised_memory(&t("api:1", Some("128Mi")), &old));
        assert!(!only_raised_memory(&t("api:2", Some("384Mi")), &old));
        assert!(!only_raised_memory(&t("api:1", None), &old));
        assert!(!only_raised_memory(
            &t("api:1", Some("256Mi")),
            &t("api:1", None)
        ));
        assert!(!only_raised_memory(&old, &old));
        // A request lowered beside the raise, or a Guaranteed container made Burstable.
        let mut lowered = t("api:1", Some("384Mi"));
        lowered["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("64Mi");
        assert!(!only_raised_memory(&lowered, &old));
        let guaranteed = |limit: &str| {
            let mut g = t("api:1", Some(limit));
            g["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("256Mi");
            g
        };
        assert!(!only_raised_memory(
            &guaranteed("384Mi"),
            &guaranteed("256Mi")
        ));
    }

    /// Issue 43: one finding says when a rollout cannot have brought its pods' failures, for
    /// the rollout rule and the rollback proof: it only raised the memory limit of pods killed
    /// for memory, or no scheduler has tried its pods and both revisions name the same one.
    /// A raise whose pods fail otherwise, or a revision that moved to another scheduler, may
    /// still be the cause.
    #[test]
    fn a_rollout_that_only_raised_memory_or_whose_pods_no_scheduler_tried_is_not_the_cause() {
        let revision = |number: i64, limit: &str, scheduler: &str| {
            Revision::of_replicaset(&json!({"kind": "ReplicaSet",
                "metadata": {"name": format!("api-{number}"), "creationTimestamp": "2026-11-30T10:00:00Z",
                    "annotations": {"deployment.kubernetes.io/revision": number.to_string()}},
                "spec": {"template": {"spec": {"schedulerName": scheduler, "containers": [{"name": "api", "image": "api:1",
                    "resources": {"limits": {"memory": limit}}}]}}}}))
            .expect("a revision")
        };
        let killed = Pod::parse(&json!({"kind": "Pod", "metadata": {"name": "api-2-a"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [{"name": "api", "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}}));
        let crashed = Pod::parse(&json!({"kind": "Pod", "metadata": {"name": "api-2-b"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [{"name": "api", "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}]}}));
        let old = revision(1, "256Mi", "default-scheduler");
        let raised = revision(2, "384Mi", "default-scheduler");
        assert!(
            not_the_rollout(&raised, &old, &[&killed], &[])
                .is_some_and(|l| l.contains("only raised the memory limit of revision 1"))
        );
        assert_eq!(
            not_the_rollout(&raised, &old, &[&killed, &crashed], &[]),
            None
        );
        let lowered = revision(2, "128Mi", "default-scheduler");
        assert_eq!(not_the_rollout(&lowered, &old, &[&killed], &[]), None);

        let mut unplaced = Pod::parse(&json!({"kind": "Pod", "metadata": {"name": "api-2-c"},
            "status": {"phase": "Pending"}}));
        unplaced.unplaced_for = Some(Duration::minutes(5));
        let same = revision(2, "256Mi", "default-scheduler");
        let mut same_other_image = same.clone();
        same_other_image.template["spec"]["containers"][0]["image"] = json!("api:2");
        assert!(
            not_the_rollout(&same_other_image, &old, &[&unplaced], &[]).is_some_and(
                |l| l.contains("no scheduler has tried to place the pods of revision 2")
            )
        );
        let moved = revision(2, "256Mi", "batch-scheduler");
        assert_eq!(not_the_rollout(&moved, &old, &[&unplaced], &[]), None);
    }
}
