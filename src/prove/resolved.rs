//! The obligations of "no action needed, the problem is resolved": the desired state is met,
//! nothing failed to be created or scheduled since the alert began, and the pods run.

use serde_json::Value;

use super::findings::resolved as window;
use super::scene::{Read, Scene, hhmm};
use crate::cluster::obj::{self, str_at};
use crate::cluster::observed::{Event, Pod, Workload};
use crate::domain::Obligation;
use crate::domain::obligations as ob;
use crate::monitoring::PrometheusClient;

/// PromQL words that are not metric names (operators, modifiers, aggregations, which may be
/// followed by a grouping clause instead of their parenthesis).
const PROMQL_WORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// The metric names a PromQL expression reads: identifiers outside label matchers, strings,
/// ranges and grouping clauses that are not followed by `(` (functions, aggregations).
pub(super) fn metrics_of(expr: &str) -> Vec<String> {
    // Blank out what holds no metric names: "strings", {matchers}, [ranges].
    let mut text = String::with_capacity(expr.len());
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut quote: Option<char> = None;
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                text.push(' ');
            }
            (Some(_), _) => text.push(' '),
            (None, '"' | '\'' | '`') => {
                quote = Some(c);
                text.push(' ');
            }
            (None, '{') => {
                depth_brace += 1;
                text.push(' ');
            }
            (None, '}') => {
                depth_brace -= 1;
                text.push(' ');
            }
            (None, '[') => {
                depth_bracket += 1;
                text.push(' ');
            }
            (None, ']') => {
                depth_bracket -= 1;
                text.push(' ');
            }
            (None, _) if depth_brace > 0 || depth_bracket > 0 => text.push(' '),
            (None, c) => text.push(c),
        }
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let call = chars.get(j) == Some(&'(');
            let lower = word.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
            ) {
                // Its parenthesised label list follows.
                skip_group = call;
                continue;
            }
            if skip_group || call || PROMQL_WORDS.contains(&lower.as_str()) {
                continue;
            }
            if !out.contains(&word) {
                out.push(word);
            }
            continue;
        }
        if c == ')' {
            skip_group = false;
        }
        i += 1;
    }
    out
}

/// Whether a PromQL expression fires on changes of a series over a window (`changes(…) > 2`,
/// `resets(…) >= 1`): a flapping condition, which a state read now may catch in its good
/// phase. A guard that asks for no change (`changes(…) == 0`: stuck) is not one.
fn counts_changes(expr: &str) -> bool {
    let c: Vec<char> = expr.chars().collect();
    let word_at = |i: usize, w: &str| -> bool {
        let w: Vec<char> = w.chars().collect();
        c.len() >= i + w.len()
            && c[i..i + w.len()] == w[..]
            && (i == 0 || !(c[i - 1].is_ascii_alphanumeric() || c[i - 1] == '_' || c[i - 1] == ':'))
    };
    let skip_ws = |mut i: usize| {
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        i
    };
    // The index after the parenthesised group opening at `i`.
    let close = |i: usize| {
        let mut depth = 0;
        for (j, ch) in c.iter().enumerate().skip(i) {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
        }
        c.len()
    };
    (0..c.len()).any(|i| {
        let Some(f) = ["changes", "resets"].into_iter().find(|f| word_at(i, f)) else {
            return false;
        };
        let open = skip_ws(i + f.len());
        if c.get(open) != Some(&'(') {
            return false;
        }
        // Past the call, the aggregations around it and their groupings, to the comparison.
        let mut j = close(open);
        loop {
            j = skip_ws(j);
            if c.get(j) == Some(&')') {
                j += 1;
            } else if let Some(g) = ["by", "without"].into_iter().find(|g| word_at(j, g)) {
                let open = skip_ws(j + g.len());
                j = if c.get(open) == Some(&'(') {
                    close(open)
                } else {
                    open
                };
            } else {
                break;
            }
        }
        c.get(j) == Some(&'>') || (c.get(j) == Some(&'!') && c.get(j + 1) == Some(&'='))
    })
}

/// Alert names whose condition is an object's state (kube-prometheus-stack's kubernetes-apps
/// and node readiness rules, and the usual custom spellings of the same).
fn about_object_state(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "CrashLoop",
        "NotReady",
        "PodNotReady",
        "OOMKilled",
        "ImagePull",
        "ContainerWaiting",
        "Pending",
        "Unschedulable",
        "Restart",
        "ReplicasMismatch",
        "GenerationMismatch",
        "RolloutStuck",
        "Unavailable",
        "NotScheduled",
        "MisScheduled",
        "JobFailed",
        "JobNotCompleted",
        "HpaMaxedOut",
        "HpaReplicasMismatch",
        "NodeUnreachable",
        "CurrentReplicas",
        "UpdateNotRolledOut",
        "PodDisruptionBudget",
        "NodePressure",
        "NodeReadinessFlapping",
    ];
    WORDS.iter().any(|w| name.contains(w))
}

/// Whether the alert's condition can be seen gone. The cluster's objects show it when the
/// alert's expression (in its generator URL) reads only kube-state-metrics' object series
/// (`kube_…`) and counts no changes, or — without an expression — when its name is about an
/// object's state ([`objects_show`]). Any other expression (`up`, an application's own series,
/// changes over a window) only Prometheus can judge: when it is configured, it evaluates the
/// alert's own expression now, and the condition is gone when no series of it is the alert's
/// while Prometheus does hold series of every metric it reads ([`unscraped`]). Prometheus
/// unreachable, still finding the alert's series, or holding none of a metric: not gone.
async fn condition_observable(
    signal: &crate::domain::SignalContext,
    prometheus: Option<&PrometheusClient>,
) -> Obligation {
    let obligation = &ob::resolved::CONDITION_OBSERVABLE;
    let (observable, how) = objects_show(signal);
    let expr = signal
        .generator_url
        .as_deref()
        .and_then(crate::monitoring::prometheus::expression);
    let (Some(prometheus), Some(expr), false) = (prometheus, expr, observable) else {
        return obligation.check(observable, vec![how]);
    };
    let line = match still_holding(prometheus, &expr, &signal.labels).await {
        Ok(Holding::Gone) => {
            return obligation.holds(vec![
                how,
                format!(
                    "Prometheus, asked now, evaluates the alert's expression `{expr}` to no series of this alert: its condition no longer holds"
                ),
            ]);
        }
        // Nothing anywhere also comes from a Prometheus that never scrapes what the
        // expression reads (another Prometheus than the alert's): that proves nothing.
        Ok(Holding::Unscraped(why)) => format!(
            "Prometheus evaluates the alert's expression `{expr}` to nothing, but {why}: it cannot be the Prometheus that evaluates this alert"
        ),
        Ok(Holding::Series(n)) => format!(
            "Prometheus, asked now, still finds the alert's expression `{expr}` holding for {n} series of this alert"
        ),
        Err(e) => format!("Prometheus could not say whether the condition still holds: {e}"),
    };
    obligation.fails(vec![how, line])
}

/// Why `prometheus` cannot judge an expression over `metrics`: it names no metric, or
/// Prometheus holds no series of one of them; `None` when it holds series of each.
/// What Prometheus says of an alert's expression now.
enum Holding {
    /// It holds for this many series of the alert.
    Series(usize),
    /// It holds for none, but Prometheus holds no series of a metric it reads: why.
    Unscraped(String),
    /// It holds for none, and Prometheus scrapes every metric it reads.
    Gone,
}

async fn still_holding(
    prometheus: &PrometheusClient,
    expr: &str,
    alert: &std::collections::BTreeMap<String, String>,
) -> crate::monitoring::Result<Holding> {
    Ok(match prometheus.holding(expr, alert).await? {
        0 => match unscraped(prometheus, &metrics_of(expr)).await? {
            Some(why) => Holding::Unscraped(why),
            None => Holding::Gone,
        },
        n => Holding::Series(n),
    })
}

async fn unscraped(
    prometheus: &PrometheusClient,
    metrics: &[String],
) -> crate::monitoring::Result<Option<String>> {
    if metrics.is_empty() {
        return Ok(Some("the expression names no metric".into()));
    }
    for m in metrics {
        if !prometheus.has_series(m).await? {
            return Ok(Some(format!("Prometheus holds no series of `{m}` at all")));
        }
    }
    Ok(None)
}

/// Whether the cluster's objects show the alert's condition, so that their state can prove it
/// gone ([`condition_observable`]), with why.
fn objects_show(signal: &crate::domain::SignalContext) -> (bool, String) {
    let expr = signal
        .generator_url
        .as_deref()
        .and_then(crate::monitoring::prometheus::expression);
    let (observable, how) = match expr {
        Some(e) if counts_changes(&e) => (
            false,
            format!(
                "its expression `{e}` counts changes over a window: the objects' state now cannot show that they stopped changing"
            ),
        ),
        Some(e) => {
            let metrics = metrics_of(&e);
            let foreign: Vec<&String> =
                metrics.iter().filter(|m| !m.starts_with("kube_")).collect();
            if metrics.is_empty() {
                (false, format!("its expression `{e}` names no series"))
            } else if foreign.is_empty() {
                (
                    true,
                    format!(
                        "its expression reads object state only ({})",
                        metrics.join(", ")
                    ),
                )
            } else {
                (
                    false,
                    format!(
                        "its expression reads {} — measurements the cluster's objects do not show: only Prometheus can say the condition is gone",
                        foreign
                            .iter()
                            .map(|m| m.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            }
        }
        None if signal.name.contains("Flapping") => (
            false,
            format!(
                "{} is about a condition that comes and goes: the objects' state now cannot show it stopped",
                signal.name
            ),
        ),
        None if about_object_state(&signal.name) => {
            (true, format!("{} is about an object's state", signal.name))
        }
        None => (
            false,
            format!(
                "{} carries no expression and is not about an object's state: the cluster cannot show its condition gone",
                signal.name
            ),
        ),
    };
    (observable, how)
}

/// How an ended pod ended: its phase, and the kubelet's reason and message when it gave them.
fn ended_how(p: &Pod) -> String {
    if p.deleting {
        return format!("being deleted, {}", p.phase);
    }
    let reason = str_at(&p.raw, &["status", "reason"]);
    let message = str_at(&p.raw, &["status", "message"]);
    match (reason, message) {
        (Some(r), Some(m)) => format!("{}, {r}: {}", p.phase, text_head(m)),
        (Some(r), None) => format!("{}, {r}", p.phase),
        _ => p.phase.clone(),
    }
}

/// The first sentence of a kubelet message, at most 120 characters.
fn text_head(m: &str) -> String {
    let first = m.split(". ").next().unwrap_or(m).trim_end_matches('.');
    let mut s: String = first.chars().take(120).collect();
    if first.chars().count() > 120 {
        s.push('…');
    }
    s
}

/// The obligations of "resolved", in their declared order, judged on the target, its pods and
/// the events about them, read once.
/// `prometheus`, when configured, judges an alert condition the objects cannot show.
pub(super) async fn resolved(
    scene: &Scene,
    prometheus: Option<&PrometheusClient>,
) -> Read<Vec<Obligation>> {
    let o = scene.target_obj().await?;
    let pods = match scene.target.kind.as_str() {
        "PersistentVolumeClaim" | "HorizontalPodAutoscaler" | "Service" | "Node" => vec![],
        _ => scene.target_pods().await?,
    };
    let events = match scene.target.namespace {
        Some(_) => scene.events(None).await?,
        None => scene.node_events(&scene.target.name).await?,
    };
    let mut out = vec![
        condition_observable(&scene.signal, prometheus).await,
        desired_state_met(scene, &o),
    ];
    out.extend(alerted_objects_met(scene, &o, &pods, &events).await?);
    let replaced = replaced_revisions(scene, &o).await?;
    let recovery = window::recovery(
        (&scene.target.kind, &scene.target.name),
        &pods,
        &events,
        &replaced,
        scene.now,
        Some(scene.signal.starts_at),
    );
    out.extend([pods_healthy(&recovery), no_failures_since_onset(&recovery)]);
    Ok(out)
}

/// Whether the target's desired state is met, from its status ([`window::desired_state`]).
fn desired_state_met(scene: &Scene, o: &Value) -> Obligation {
    let obligation = &ob::resolved::DESIRED_STATE_MET;
    match window::desired_state(o) {
        Some((ok, how)) => obligation.check(ok, vec![format!("{}: {how}", scene.target)]),
        None => obligation.fails(vec![format!(
            "kubemedic knows no desired state of a {} to check",
            obj::kind(o)
        )]),
    }
}

/// Whether every object the alert names, besides the target, shows its desired state met, from
/// the objects as they are now; `None` when the alert names no other object that can be read
/// and judged. Whoever claims the problem gone may have named another object as the target (the
/// autoscaler at its maximum, the Deployment short of replicas, the pod not ready).
async fn alerted_objects_met(
    scene: &Scene,
    o: &Value,
    pods: &[Pod],
    events: &[Event],
) -> Read<Option<Obligation>> {
    let mut met = Vec::new();
    let mut unmet = Vec::new();
    let target_state = window::desired_state(o);
    for t in crate::domain::targets_from_labels(&scene.signal.labels) {
        if t == scene.target {
            continue;
        }
        let named = match scene.get(&t.kind, t.namespace.as_deref(), &t.name).await {
            Ok(o) => o,
            Err(e) if e.is_unreachable() => return Err(e),
            // A pod replaced since, an object deleted: nothing left to show the condition.
            Err(_) => continue,
        };
        // A pod of the target's that ended (evicted, shut down with its node) and that its
        // controller replaced: the object stays until the pod garbage collector's threshold,
        // and alerts that count pods by phase keep firing on it. What it was for is the
        // target's replicas, whose desired state is checked above.
        if t.kind == "Pod"
            && let Some(p) = pods.iter().find(|p| {
                p.name == t.name
                    && window::ended_and_replaced(&scene.target.kind, p, events, scene.now)
            })
        {
            let line = format!(
                "{t}: ended ({}) and replaced by its controller {}; {}",
                ended_how(p),
                p.controller
                    .as_ref()
                    .map(|(k, n)| format!("{k} {n}"))
                    .unwrap_or_default(),
                match &target_state {
                    Some((_, how)) => format!("{}: {how}", scene.target),
                    None => format!("nothing shows {} met", scene.target),
                }
            );
            if target_state.as_ref().is_some_and(|(ok, _)| *ok) {
                met.push(line);
            } else {
                unmet.push(line);
            }
            continue;
        }
        if let Some((ok, how)) = window::desired_state(&named) {
            let line = format!("{t}: {how}");
            if ok { met.push(line) } else { unmet.push(line) }
        }
    }
    if met.is_empty() && unmet.is_empty() {
        return Ok(None);
    }
    Ok(Some(ob::resolved::ALERTED_OBJECTS_MET.check(
        unmet.is_empty(),
        if unmet.is_empty() { met } else { unmet },
    )))
}

/// A Deployment's earlier revisions scaled to zero ([`window::replaced_revisions`]).
async fn replaced_revisions(scene: &Scene, o: &Value) -> Read<Vec<String>> {
    if obj::kind(o) != "Deployment" {
        return Ok(vec![]);
    }
    let revisions = scene.revisions(o).await?;
    Ok(window::replaced_revisions(&Workload::parse(o), &revisions))
}

/// Whether every pod of the target runs and is ready, with no exit since the alert began (or
/// for as long as the rule that claims "healthy again" looks back); pods that ended and were
/// replaced are not its replicas ([`window::recovery`]).
fn pods_healthy(r: &window::Recovery) -> Obligation {
    ob::resolved::PODS_HEALTHY.check(
        r.unhealthy.is_empty(),
        if r.unhealthy.is_empty() {
            let mut lines = vec![format!("{} pod(s), all ready", r.live.len())];
            lines.extend(r.ended.iter().map(|p| {
                format!(
                    "pod {} ended ({}) and was replaced: not one of the replicas",
                    p.name,
                    ended_how(p)
                )
            }));
            lines
        } else {
            r.unhealthy.iter().take(3).cloned().collect()
        },
    )
}

/// Whether nothing failed to be created, scheduled or started since the alert began (or for as
/// long as the rule that claims "healthy again" looks back), from the warnings about the
/// target, its ReplicaSets and its pods — not about a pod that ended and was replaced, nor one
/// of a Deployment's replaced revision ([`window::recovery`]).
fn no_failures_since_onset(r: &window::Recovery) -> Obligation {
    ob::resolved::NO_FAILURES_SINCE_ONSET.check(
        r.failures.is_empty(),
        if r.failures.is_empty() {
            vec![format!("no failure recorded since {}", hhmm(r.since))]
        } else {
            r.failures.iter().take(3).map(|e| e.line()).collect()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_resolved_when_ready_without_trouble_and_not_for_want_of_a_condition() {
        let node = |conditions: serde_json::Value| {
            window::desired_state(
                &serde_json::json!({"kind": "Node", "metadata": {"name": "w1"},
                "status": {"conditions": conditions}}),
            )
            .unwrap()
        };
        let ready = serde_json::json!({"type": "Ready", "status": "True"});
        assert!(node(serde_json::json!([ready])).0);
        assert_eq!(
            node(serde_json::json!([])),
            (false, "reports no Ready condition".into())
        );
        let (met, how) = node(serde_json::json!([ready,
            {"type": "DiskPressure", "status": "True", "message": "low on disk"}]));
        assert!(!met);
        assert_eq!(how, "conditions DiskPressure (low on disk)");
    }

    #[test]
    fn a_statefulset_update_held_by_its_partition_is_not_met_and_says_why() {
        let o = serde_json::json!({
            "kind": "StatefulSet", "metadata": {"name": "solr"},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}},
            "status": {"readyReplicas": 3, "updatedReplicas": 1, "currentRevision": "solr-a", "updateRevision": "solr-b"}
        });
        let (met, how) = window::desired_state(&o).unwrap();
        assert!(!met);
        assert!(how.contains("partition 2"), "{how}");
        let mut on_delete = o.clone();
        on_delete["spec"]["updateStrategy"] = serde_json::json!({"type": "OnDelete"});
        let (met, how) = window::desired_state(&on_delete).unwrap();
        assert!(!met);
        assert!(how.contains("OnDelete"), "{how}");
    }

    #[test]
    fn an_expression_that_counts_changes_is_told_apart_from_one_that_reads_state() {
        assert!(counts_changes(
            "sum(changes(kube_node_status_condition{status=\"true\",condition=\"Ready\"}[15m])) by (cluster, node) > 2"
        ));
        assert!(counts_changes(
            "resets (kube_pod_container_status_restarts_total[1h]) > 0"
        ));
        assert!(!counts_changes(
            "kube_deployment_spec_replicas > kube_deployment_status_replicas_available"
        ));
        // A label value or a metric name that contains the word is no call.
        assert!(!counts_changes(
            "kube_config_changes_total{reason=\"changes\"} > 0"
        ));
        // A guard that asks for no change: stuck, not flapping.
        assert!(!counts_changes(
            "(kube_deployment_spec_replicas > kube_deployment_status_replicas_available) and (changes(kube_deployment_status_replicas_updated[10m]) == 0)"
        ));
    }

    #[test]
    fn metric_names_are_read_from_promql_without_labels_functions_or_groupings() {
        assert_eq!(
            metrics_of(
                "max_over_time(kube_pod_container_status_waiting_reason{reason=\"CrashLoopBackOff\", job=\"kube-state-metrics\"}[5m]) >= 1"
            ),
            vec!["kube_pod_container_status_waiting_reason"]
        );
        assert_eq!(
            metrics_of(
                "redis_memory_used_bytes / redis_memory_max_bytes * 100 > 90 and on (instance) redis_memory_max_bytes > 0"
            ),
            vec!["redis_memory_used_bytes", "redis_memory_max_bytes"]
        );
        assert_eq!(
            metrics_of(
                "sum by (namespace, pod) (kube_pod_status_phase{phase=~\"Pending|Unknown\"} * on (namespace, pod) group_left(owner_kind) topk by (namespace, pod) (1, max by (namespace, pod, owner_kind) (kube_pod_owner{owner_kind!=\"Job\"}))) > 0"
            ),
            vec!["kube_pod_status_phase", "kube_pod_owner"]
        );
    }
}
