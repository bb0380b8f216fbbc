//! A change to what the workload reads, made before its failures began, that explains them better
//! than the remedy in hand (issue 38, item 3): raising a limit, restarting, scaling or deleting a
//! pod leaves such a change in place, and new pods read it again.
//!
//! What "explains better" means here is what the cluster shows:
//! - the change came before the failures began, just before by the neighbourhood's own measure
//!   ([`Neighbourhood::just_before_onset`], the one the ranking of culprits uses), and no
//!   dependency the failures name (a host, DNS) changed between it and the onset;
//! - the failing pods read it: the dependency is read live (a ConfigMap mounted as a volume, a
//!   NetworkPolicy, RBAC, a Service), or read at a pod's start (environment, `subPath`, admission
//!   by quota or a webhook) and a failing pod started after the change;
//! - the workload ran without the failure before the change, for at least as long as any proof
//!   asks of a revision that served ([`SERVED_MIN_SECONDS`]).
//!
//! Pods started before a change they read only at start, and that serve, are the contrast that
//! confirms it; they are named when there are any.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::hhmm;
use crate::cluster::obj::{array, at, str_at};
use crate::cluster::observed::{Pod, SERVED_MIN_SECONDS, ago};
use crate::domain::{Change, DepKind, Dependency, Neighbourhood};

/// The change, the dependency it was made to, and the lines that show it explains the failures.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeExplains {
    /// `ConfigMap shop/cache`.
    pub object: String,
    pub change: Change,
    pub evidence: Vec<String>,
}

/// How the pods read a dependency.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Read {
    /// Always as it is now (a mounted ConfigMap the kubelet keeps in sync, a policy the network
    /// or the API enforces on every call).
    Live,
    /// When a pod (or its container) starts: environment, a `subPath` mount, what admission
    /// decided at the pod's creation.
    AtStart,
}

/// Whether the pods read the dependency, and how: the kinds that are the workload's own
/// configuration and the policies of its namespace. The hosts its failures name, its nodes and
/// volumes are what it runs against, not what it reads (a database that failed over is a reason
/// to restart, not against it).
fn read_as(d: &Dependency, template: &Value) -> Option<Read> {
    match d.kind {
        DepKind::Config => {
            let live = d
                .subject
                .as_ref()
                .is_some_and(|s| s.kind == "ConfigMap" && configmap_read_live(template, &s.name));
            Some(if live { Read::Live } else { Read::AtStart })
        }
        DepKind::Network | DepKind::Access | DepKind::Service => Some(Read::Live),
        DepKind::Quota | DepKind::Admission => Some(Read::AtStart),
        _ => None,
    }
}

/// Where a pod template names objects of one kind: `envFrom`, an `env` value's reference, a
/// volume, a projected volume's source.
struct Refs {
    env_from: &'static str,
    key_ref: &'static str,
    volume: [&'static str; 2],
    projected: &'static str,
}

const CONFIGMAP_REFS: Refs = Refs {
    env_from: "configMapRef",
    key_ref: "configMapKeyRef",
    volume: ["configMap", "name"],
    projected: "configMap",
};

const SECRET_REFS: Refs = Refs {
    env_from: "secretRef",
    key_ref: "secretKeyRef",
    volume: ["secret", "secretName"],
    projected: "secret",
};

/// The names a pod template refers to where `r` says (its containers and init containers,
/// its volumes).
fn referenced(template: &Value, r: &Refs) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let spec = at(template, &["spec"]).cloned().unwrap_or(Value::Null);
    for key in ["containers", "initContainers"] {
        for c in array(&spec, &[key]) {
            let from = array(c, &["envFrom"])
                .iter()
                .filter_map(|e| str_at(e, &[r.env_from, "name"]));
            let env = array(c, &["env"])
                .iter()
                .filter_map(|e| str_at(e, &["valueFrom", r.key_ref, "name"]));
            out.extend(from.chain(env).map(str::to_owned));
        }
    }
    for v in array(&spec, &["volumes"]) {
        out.extend(str_at(v, &r.volume).map(str::to_owned));
        out.extend(
            array(v, &["projected", "sources"])
                .iter()
                .filter_map(|s| str_at(s, &[r.projected, "name"]))
                .map(str::to_owned),
        );
    }
    out
}

/// The ConfigMaps a pod template refers to (env, envFrom, volumes, projected volumes).
pub fn configmaps(template: &Value) -> BTreeSet<String> {
    referenced(template, &CONFIGMAP_REFS)
}

/// The Secrets a pod template refers to (names only: kubemedic never reads them).
pub fn secrets(template: &Value) -> BTreeSet<String> {
    referenced(template, &SECRET_REFS)
}

/// Whether the ConfigMap `name` is mounted as a volume (directly or projected) that some
/// container mounts without `subPath`: the kubelet keeps that copy in sync with the object.
/// Otherwise the pods read it only when they start.
pub fn configmap_read_live(template: &Value, name: &str) -> bool {
    let spec = at(template, &["spec"]).cloned().unwrap_or(Value::Null);
    let volumes: Vec<&str> = array(&spec, &["volumes"])
        .iter()
        .filter(|v| {
            str_at(v, &["configMap", "name"]) == Some(name)
                || array(v, &["projected", "sources"])
                    .iter()
                    .any(|s| str_at(s, &["configMap", "name"]) == Some(name))
        })
        .filter_map(|v| str_at(v, &["name"]))
        .collect();
    ["containers", "initContainers"]
        .iter()
        .flat_map(|k| array(&spec, &[k]))
        .flat_map(|c| array(c, &["volumeMounts"]))
        .any(|m| {
            str_at(m, &["name"]).is_some_and(|n| volumes.contains(&n))
                && str_at(m, &["subPath"]).is_none_or(str::is_empty)
        })
}

/// Whether a write at `t` to configuration `pod` reads at its start sets it apart from the
/// `ready` pods beside it: the pod has read it ([`Pod::started_since`]: it, or a container of
/// it, started since) and none of them has — they run on what was there before, so a
/// replacement reads what the pod fails on. With no ready pod beside it (the only replica): it
/// ran before the write, and its restarting containers and its replacement read it as it is
/// now. The deletion's proof refuses on it; the change finding asks the same of the failing
/// pods and the serving ones.
pub fn read_only_by(pod: &Pod, ready: &[&Pod], t: DateTime<Utc>) -> bool {
    if ready.is_empty() {
        return pod.start().is_some_and(|s| s < t);
    }
    pod.started_since(t) && !ready.iter().any(|p| p.started_since(t))
}

/// The change to what the workload reads that explains its failures better than its limits,
/// its pods or its replica count do, if there is one (see the module's definition).
///
/// `template`: the workload's pod template (or the pod itself); `pods`: its pods; `since`: when
/// the workload began to run (its creation).
pub fn change_explains(
    n: &Neighbourhood,
    template: &Value,
    pods: &[Pod],
    since: Option<DateTime<Utc>>,
) -> Option<ChangeExplains> {
    let onset = n.onset?;
    let since = since?;
    let failing: Vec<&Pod> = pods.iter().filter(|p| p.failure().is_some()).collect();
    if failing.is_empty() {
        return None;
    }
    // A change to what the failures name, closer to the onset, explains them first.
    let named_later = |after: DateTime<Utc>| {
        n.dependencies.iter().any(|d| {
            matches!(d.kind, DepKind::Host | DepKind::Dns)
                && d.changed
                    .as_ref()
                    .is_some_and(|c| c.at > after && c.at <= onset)
        })
    };
    n.dependencies
        .iter()
        .filter_map(|d| {
            let change = d.changed.as_ref()?;
            let read = read_as(d, template)?;
            (n.just_before_onset(change)
                && change.at <= onset
                && change.at - since >= Duration::seconds(SERVED_MIN_SECONDS)
                && !named_later(change.at))
            .then_some((d, change, read))
        })
        // The latest change before the onset first.
        .max_by_key(|(_, c, _)| c.at)
        .and_then(|(d, change, read)| explains(d, change, read, onset, since, &failing, pods))
}

fn explains(
    d: &Dependency,
    change: &Change,
    read: Read,
    onset: DateTime<Utc>,
    since: DateTime<Utc>,
    failing: &[&Pod],
    pods: &[Pod],
) -> Option<ChangeExplains> {
    let started_after: Vec<&str> = failing
        .iter()
        .filter(|p| p.started_since(change.at))
        .map(|p| p.name.as_str())
        .collect();
    let read_line = match read {
        Read::Live => format!(
            "the pods read it as it is now ({})",
            if d.kind == DepKind::Config {
                "mounted as a volume the kubelet keeps in sync"
            } else {
                "it applies to every pod while it runs"
            }
        ),
        Read::AtStart if started_after.is_empty() => return None,
        Read::AtStart => format!(
            "failing pod(s) {} started after it and read it at their start",
            started_after
                .iter()
                .take(3)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let healthy_before = change.at - since;
    let failed_after = onset - change.at;
    let mut evidence = vec![
        format!(
            "{} was {} at {}, and the pods' failures began at {} ({} later)",
            d.object,
            change.what,
            hhmm(change.at),
            hhmm(onset),
            ago(failed_after.max(Duration::zero()))
        ),
        read_line,
        format!(
            "the workload ran {} before the change without this failure",
            ago(healthy_before)
        ),
    ];
    if read == Read::AtStart {
        let contrast: Vec<&str> = pods
            .iter()
            .filter(|p| p.serving() && !p.started_since(change.at))
            .map(|p| p.name.as_str())
            .take(3)
            .collect();
        if !contrast.is_empty() {
            evidence.push(format!(
                "pod(s) {} started before the change, read what it was before, and serve",
                contrast.join(", ")
            ));
        }
    }
    Some(ChangeExplains {
        object: d.object.clone(),
        change: change.clone(),
        evidence,
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 10, 0, 0).unwrap() + Duration::minutes(min)
    }

    /// A template reading ConfigMap `cache` as a volume (`live`) or as environment.
    fn template(live: bool) -> Value {
        if live {
            json!({"spec": {"containers": [{"name": "api", "volumeMounts": [{"name": "conf", "mountPath": "/etc/api"}]}],
                "volumes": [{"name": "conf", "configMap": {"name": "cache"}}]}})
        } else {
            json!({"spec": {"containers": [{"name": "api", "envFrom": [{"configMapRef": {"name": "cache"}}]}]}})
        }
    }

    /// A pod created at `created` minutes, OOM-killed and crash-looping (`failing`) or serving.
    fn pod(name: &str, created: i64, failing: bool) -> Pod {
        let ts = t(created).to_rfc3339();
        let status = if failing {
            json!({"phase": "Running", "containerStatuses": [{"name": "api", "restartCount": 3, "ready": false,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]})
        } else {
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "api", "restartCount": 0, "ready": true, "state": {"running": {}}}]})
        };
        Pod::parse(&json!({"metadata": {"name": name, "creationTimestamp": ts}, "status": status}))
    }

    fn neighbourhood(kind: DepKind, object: &str, changed: i64, onset: i64) -> Neighbourhood {
        Neighbourhood {
            target: "Deployment shop/api".into(),
            onset: Some(t(onset)),
            symptoms: vec![],
            failing_pods_run: false,
            dependencies: vec![{
                // `ConfigMap shop/cache`: the object the text names.
                let (k, rest) = object.split_once(' ').unwrap_or_default();
                let (ns, name) = rest.split_once('/').unwrap_or_default();
                let subject = crate::domain::Target::new(k, name, Some(ns.to_owned()));
                let d = Dependency::of(kind, subject, "configuration the pods read");
                assert_eq!(d.object, object);
                d.changed(Some(Change {
                    at: t(changed),
                    what: "changed by kubectl-edit".into(),
                }))
            }],
        }
    }

    const WEEKS_AGO: i64 = -30 * 24 * 60;

    #[test]
    fn a_write_only_the_failing_pod_read_sets_it_apart_from_its_ready_siblings() {
        let (old, failing) = (pod("api-1", 0, false), pod("api-2", 20, true));
        // Written at 10: the failing pod started after it, the ready one before.
        assert!(read_only_by(&failing, &[&old], t(10)));
        // A ready sibling that started after the write read it and works.
        let new = pod("api-3", 30, false);
        assert!(!read_only_by(&failing, &[&old, &new], t(10)));
        // Written after the failing pod started, and none of its containers started since.
        assert!(!read_only_by(&failing, &[&old], t(25)));
        // The only pod: it ran before the write.
        assert!(read_only_by(&failing, &[], t(25)));
        assert!(!read_only_by(&failing, &[], t(10)));
    }

    #[test]
    fn a_configmap_edited_before_a_restart_whose_pods_fail_explains_the_failures() {
        let n = neighbourhood(DepKind::Config, "ConfigMap shop/cache", -20, -17);
        let pods = [pod("api-b1", -19, true), pod("api-b2", -19, true)];
        let found = change_explains(&n, &template(false), &pods, Some(t(WEEKS_AGO)));
        let found = found.expect("the edit explains the kills");
        assert_eq!(found.object, "ConfigMap shop/cache");
        assert!(found.evidence[1].contains("api-b1"), "{:?}", found.evidence);
    }

    #[test]
    fn a_change_the_failing_pods_never_read_or_that_came_after_the_onset_explains_nothing() {
        let since = Some(t(WEEKS_AGO));
        // Read as environment at start, and the failing pod started days before the edit.
        let n = neighbourhood(DepKind::Config, "ConfigMap shop/cache", -60, -30);
        let old = [pod("api-a1", -3 * 24 * 60, true)];
        assert_eq!(change_explains(&n, &template(false), &old, since), None);
        // The same pod's container restarted after the edit (and crashed): it read its
        // environment again at that start, and that explains.
        let mut restarted = pod("api-a1", -3 * 24 * 60, true).raw;
        restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]["startedAt"] =
            json!(t(-29).to_rfc3339());
        let restarted = [Pod::parse(&restarted)];
        let found = change_explains(&n, &template(false), &restarted, since);
        assert!(
            found.is_some_and(|f| f.evidence[1].contains("api-a1")),
            "a restart after the edit reads it"
        );
        // Mounted as a volume, the same pod reads it: it explains.
        assert!(change_explains(&n, &template(true), &old, since).is_some());
        // Edited after the first kill (the on-call raising the log level).
        let n = neighbourhood(DepKind::Config, "ConfigMap shop/cache", -15, -40);
        assert_eq!(change_explains(&n, &template(true), &old, since), None);
        // Nothing fails.
        let n = neighbourhood(DepKind::Config, "ConfigMap shop/cache", -20, -17);
        let serving = [pod("api-b1", -19, false)];
        assert_eq!(change_explains(&n, &template(true), &serving, since), None);
    }

    #[test]
    fn a_change_to_a_workload_that_had_not_run_yet_or_long_before_the_onset_explains_nothing() {
        let pods = [pod("api-a1", -30, true)];
        // A NetworkPolicy created 30 seconds after the workload: it never ran without it.
        let n = neighbourhood(DepKind::Network, "NetworkPolicy shop/deny", -30, 0);
        let fresh = Some(t(-30) - Duration::seconds(30));
        assert_eq!(change_explains(&n, &template(false), &pods, fresh), None);
        // Two hours before the failures: not just before them.
        let n = neighbourhood(DepKind::Network, "NetworkPolicy shop/deny", -120, 0);
        assert_eq!(
            change_explains(&n, &template(false), &pods, Some(t(WEEKS_AGO))),
            None
        );
        // Ten minutes before, to a workload that ran for weeks: the policy applies live.
        let n = neighbourhood(DepKind::Network, "NetworkPolicy shop/deny", -10, 0);
        let found = change_explains(&n, &template(false), &pods, Some(t(WEEKS_AGO)));
        assert!(found.is_some_and(|f| f.evidence[1].contains("every pod")));
    }

    #[test]
    fn a_later_change_to_what_the_failures_name_explains_them_first() {
        let mut n = neighbourhood(DepKind::Config, "ConfigMap shop/flags", -120, -25);
        n.dependencies.push(
            Dependency::new(DepKind::Host, "Service shop/db", "named in the logs").changed(Some(
                Change {
                    at: t(-30),
                    what: "changed by failover-operator".into(),
                },
            )),
        );
        let pods = [pod("api-a1", -3 * 24 * 60, true)];
        assert_eq!(
            change_explains(&n, &template(true), &pods, Some(t(WEEKS_AGO))),
            None
        );
        // Upstream hosts are never what the workload reads.
        n.dependencies.remove(0);
        assert_eq!(
            change_explains(&n, &template(true), &pods, Some(t(WEEKS_AGO))),
            None
        );
    }
}
