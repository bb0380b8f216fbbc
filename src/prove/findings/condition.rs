//! Whether the cluster's objects can show an alert's condition gone: what its expression reads
//! (kube-state-metrics' object series, or measurements only Prometheus holds), whether it counts
//! changes over a window, and — without an expression — whether its name is about an object's
//! state.

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
pub fn metrics_of(expr: &str) -> Vec<String> {
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

/// Whether the cluster's objects show the condition of the alert `name` (whose generator URL
/// is `generator_url`), so that their state can prove it gone, with why: its expression reads
/// only kube-state-metrics' object series (`kube_…`) and counts no changes, or — without an
/// expression — its name is about an object's state. Anything else only Prometheus can judge.
/// The resolved proof's `condition-observable` asks it (and Prometheus, when it has one); the
/// rules that find a target healthy again ask it before they call the problem resolved.
pub fn objects_show(name: &str, generator_url: Option<&str>) -> (bool, String) {
    let expr = generator_url.and_then(crate::monitoring::prometheus::expression);
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
        None if name.contains("Flapping") => (
            false,
            format!(
                "{} is about a condition that comes and goes: the objects' state now cannot show it stopped",
                name
            ),
        ),
        None if about_object_state(name) => (true, format!("{} is about an object's state", name)),
        None => (
            false,
            format!(
                "{} carries no expression and is not about an object's state: the cluster cannot show its condition gone",
                name
            ),
        ),
    };
    (observable, how)
}

/// Why the cluster's objects cannot show the alert's condition gone ([`objects_show`]), when
/// they cannot: what the offline evidence carries for the rules.
pub fn unseen_by_objects(name: &str, generator_url: Option<&str>) -> Option<String> {
    match objects_show(name, generator_url) {
        (false, why) => Some(why),
        (true, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_application_s_measurement_is_not_shown_by_the_objects() {
        let url = |e: &str| {
            format!(
                "http://prometheus:9090/graph?g0.expr={}",
                e.replace(' ', "%20")
            )
        };
        let (shows, why) = objects_show(
            "RedisOutOfConfiguredMaxmemory",
            Some(&url(
                "redis_memory_used_bytes / redis_memory_max_bytes * 100 > 90",
            )),
        );
        assert!(!shows);
        assert!(why.contains("redis_memory_used_bytes"), "{why}");
        assert!(objects_show("KubePodCrashLooping", None).0);
        assert!(!objects_show("KubeNodeReadinessFlapping", None).0);
        assert!(objects_show("X", Some(&url("kube_deployment_spec_replicas > 0"))).0);
    }
}
