//! Whether a rolling restart of a workload keeps some of its pods serving: the restart's proof
//! holds it to this, and the rules ask it before they propose a restart.

use serde_json::Value;

use crate::cluster::obj;
use crate::cluster::observed::{Hold, Pod, Workload};

/// A Deployment's `maxUnavailable` when its rolling update leaves it unset (the API's default).
pub const DEFAULT_MAX_UNAVAILABLE_PERCENT: i64 = 25;

/// How many of `replicas` a rolling replacement may take down at once (`maxUnavailable`,
/// rounded down like the controller), and the strategy's name.
pub fn max_unavailable(w: &Value) -> (i64, String) {
    let workload = Workload::parse(w);
    let replicas = workload.wanted();
    let ty = workload.strategy.as_deref().unwrap_or("RollingUpdate");
    let resolve = |v: Option<&Value>, default: i64| match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) if s.ends_with('%') => s
            .trim_end_matches('%')
            .parse::<i64>()
            .map(|p| replicas * p / 100)
            .unwrap_or(default),
        _ => default,
    };
    let written = workload.max_unavailable.as_ref();
    match workload.kind.as_str() {
        "StatefulSet" | "DaemonSet" => (resolve(written, 1), ty.to_owned()),
        _ if ty == "Recreate" => (replicas, ty.to_owned()),
        _ => (
            resolve(written, replicas * DEFAULT_MAX_UNAVAILABLE_PERCENT / 100),
            ty.to_owned(),
        ),
    }
}

/// A Deployment's `maxSurge` when its rolling update leaves it unset (the API's default).
pub const DEFAULT_MAX_SURGE_PERCENT: i64 = 25;

/// The fewest replicas a StatefulSet needs for a rolling restart to keep one serving: it
/// replaces one pod at a time, so with one replica the only pod goes down.
pub const STATEFUL_RESTART_MIN_REPLICAS: i64 = 2;

/// Whether a change to the workload's pod template reaches its pods: `Err` naming the hold when
/// its own spec keeps them on the template they run (a paused Deployment, an `OnDelete` update
/// strategy, a StatefulSet's partition: the ordinals below it stay, a canary someone holds on
/// purpose), `Ok` otherwise. A restart and a raised limit are both template changes: the
/// restart's proof, the raises' proofs and the rules that propose a raise ask it.
pub fn template_reaches_pods(w: &Workload) -> Result<(), String> {
    match w.hold() {
        Some(Hold::OnDelete) => {
            Err("updateStrategy OnDelete: changing the template replaces no pod".into())
        }
        Some(Hold::Paused) => Err(
            "the Deployment is paused (spec.paused): changing the template replaces no pod until someone resumes it"
                .into(),
        ),
        Some(Hold::Partition(p)) => Err(format!(
            "rollingUpdate partition {p}: changing the template replaces no pod with an ordinal below {p}"
        )),
        None => Ok(()),
    }
}

/// Whether replacing the workload's pods keeps some ready, from its update strategy and its
/// pods' readiness: `Ok` or `Err` with the line that shows it. With no pod ready, there is
/// nothing to lose. A workload updated `OnDelete` replaces no pod when its template changes.
pub fn restart_keeps_ready(w: &Value, pods: &[Pod]) -> Result<String, String> {
    // Ready now, terminating or not: a pod on its way out still serves until it stops, and
    // counting it keeps "no ready pod to lose" from holding while one serves.
    let ready = pods.iter().filter(|p| p.ready).count() as i64;
    let replicas = Workload::parse(w).wanted();
    let (unavailable, strategy) = max_unavailable(w);
    template_reaches_pods(&Workload::parse(w))?;
    let (ok, why) = match obj::kind(w) {
        "DaemonSet" => (
            true,
            format!("a DaemonSet replaces its pods node by node (maxUnavailable {unavailable})"),
        ),
        "StatefulSet" => (
            ready == 0 || replicas >= STATEFUL_RESTART_MIN_REPLICAS,
            format!(
                "{strategy} replaces one pod at a time and waits for it to be ready; {ready} of {replicas} ready now"
            ),
        ),
        _ => (
            ready == 0 || (strategy != "Recreate" && replicas - unavailable >= 1),
            if strategy == "Recreate" {
                format!("strategy Recreate stops all {replicas} pods first; {ready} ready now")
            } else {
                format!(
                    "{strategy} keeps at least {} of {replicas} available (maxUnavailable {unavailable}); {ready} ready now",
                    (replicas - unavailable).max(0)
                )
            },
        ),
    };
    if ok { Ok(why) } else { Err(why) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A restart writes the template; a spec that holds updates replaces no pod with it: a
    /// paused Deployment as much as a workload updated `OnDelete`.
    #[test]
    fn a_restart_of_a_held_workload_replaces_no_pod() {
        let deploy = |spec: serde_json::Value| {
            let mut d = json!({"kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": 3}});
            d["spec"]
                .as_object_mut()
                .unwrap()
                .extend(spec.as_object().unwrap().clone());
            d
        };
        assert!(restart_keeps_ready(&deploy(json!({})), &[]).is_ok());
        let paused = restart_keeps_ready(&deploy(json!({"paused": true})), &[]).unwrap_err();
        assert!(paused.contains("paused"), "{paused}");
        let ds = json!({"kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"updateStrategy": {"type": "OnDelete"}}});
        assert!(
            restart_keeps_ready(&ds, &[])
                .unwrap_err()
                .contains("OnDelete")
        );
        // A StatefulSet canary held at its partition: the ordinals below it keep their
        // template, so a restart or a raised limit does not reach them.
        let sts = |partition: i64| {
            json!({"kind": "StatefulSet", "metadata": {"name": "kafka"},
                "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"partition": partition}}}})
        };
        assert!(template_reaches_pods(&Workload::parse(&sts(0))).is_ok());
        let held = template_reaches_pods(&Workload::parse(&sts(2))).unwrap_err();
        assert!(held.contains("partition 2"), "{held}");
    }

    /// The rolling update's `maxUnavailable` as the workload model reads it, per kind: a count,
    /// a percentage rounded down, the API's defaults, all replicas for Recreate.
    #[test]
    fn a_rolling_update_takes_down_what_its_strategy_allows() {
        let deployment = |strategy: serde_json::Value| serde_json::json!({"kind": "Deployment", "spec": {"replicas": 4, "strategy": strategy}});
        let rolling = |v: serde_json::Value| {
            deployment(
                serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": v}}),
            )
        };
        assert_eq!(max_unavailable(&rolling(serde_json::json!("50%"))).0, 2);
        assert_eq!(max_unavailable(&rolling(serde_json::json!(3))).0, 3);
        assert_eq!(
            max_unavailable(&deployment(serde_json::json!({}))).0,
            1,
            "25% of 4"
        );
        assert_eq!(
            max_unavailable(&deployment(serde_json::json!({"type": "Recreate"}))),
            (4, "Recreate".to_owned())
        );
        let sts = serde_json::json!({"kind": "StatefulSet", "spec": {"replicas": 5,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}}});
        assert_eq!(max_unavailable(&sts).0, 2);
        let ds = serde_json::json!({"kind": "DaemonSet", "spec": {"updateStrategy": {"type": "RollingUpdate"}}});
        assert_eq!(max_unavailable(&ds).0, 1);
    }
}
