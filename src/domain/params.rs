//! The parameters of the built-in action types, typed: what a rule proposes, what the prover
//! checks and what the catalog's built-in workflows must declare, each key named here once.
//!
//! On the wire (a selection, a stored request, a workflow's `${PARAM}`) parameters stay the map
//! the catalog's JSON schemas describe (`{"TO_REVISION": 3}`), so nothing stored changes. Code
//! converts at the boundary: [`ActionParams::read`] when it reads a map for a built-in action
//! type, [`ActionParams::to_map`] when it writes one, and [`ActionParams::keys`] for the
//! catalog's load-time check that a built-in type's workflow declares what its proof reads.
//!
//! Reading is lenient on purpose: a value that is missing or of the wrong shape reads as `None`,
//! and the proof that needs it refuses with an obligation saying which (a proof is where "not
//! given" is decided, with evidence; a parse error here would hide which obligation failed).

use serde_json::{Map, Value, json};

use super::ActionType;

/// A container resource whose limit a built-in action raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitResource {
    Memory,
    Cpu,
}

impl LimitResource {
    /// The resource's name in a pod spec (`memory`, `cpu`).
    pub fn name(self) -> &'static str {
        match self {
            LimitResource::Memory => "memory",
            LimitResource::Cpu => "cpu",
        }
    }

    /// The parameter holding the new limit.
    pub fn limit_key(self) -> ParamKey {
        match self {
            LimitResource::Memory => MEMORY_LIMIT,
            LimitResource::Cpu => CPU_LIMIT,
        }
    }

    /// The parameter holding the new request (optional).
    pub fn request_key(self) -> ParamKey {
        match self {
            LimitResource::Memory => MEMORY_REQUEST,
            LimitResource::Cpu => CPU_REQUEST,
        }
    }
}

/// One parameter a built-in action type reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamKey {
    pub name: &'static str,
    /// Whether its proof refuses without it (the workflow must list it in `required`).
    pub required: bool,
    /// Whether it is a whole number (else text).
    pub number: bool,
}

const fn key(name: &'static str, required: bool, number: bool) -> ParamKey {
    ParamKey {
        name,
        required,
        number,
    }
}

pub const TO_REVISION: ParamKey = key("TO_REVISION", true, true);
pub const REPLICAS: ParamKey = key("REPLICAS", true, true);
pub const CONTAINER: ParamKey = key("CONTAINER", true, false);
pub const MEMORY_LIMIT: ParamKey = key("MEMORY_LIMIT", true, false);
pub const MEMORY_REQUEST: ParamKey = key("MEMORY_REQUEST", false, false);
pub const CPU_LIMIT: ParamKey = key("CPU_LIMIT", true, false);
pub const CPU_REQUEST: ParamKey = key("CPU_REQUEST", false, false);
pub const PVC_NAME: ParamKey = key("PVC_NAME", true, false);
pub const NEW_SIZE: ParamKey = key("NEW_SIZE", true, false);
pub const POD_NAME: ParamKey = key("POD_NAME", true, false);
pub const PDB_NAME: ParamKey = key("PDB_NAME", true, false);
pub const MAX_UNAVAILABLE: ParamKey = key("MAX_UNAVAILABLE", true, true);
pub const HPA_NAME: ParamKey = key("HPA_NAME", true, false);
pub const MAX_REPLICAS: ParamKey = key("MAX_REPLICAS", true, true);
pub const TAINT_KEY: ParamKey = key("TAINT_KEY", true, false);
pub const TAINT_EFFECT: ParamKey = key("TAINT_EFFECT", false, false);
pub const PROPOSED_CHANGE: ParamKey = key("PROPOSED_CHANGE", true, false);

/// A built-in action type's parameters (beyond the target, which kubemedic fills from the
/// verified root owner). `Custom` carries a custom action type's map as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionParams {
    /// `RollbackDeployment`, `RollbackStatefulSet`: the revision to return to.
    Rollback { to_revision: Option<i64> },
    /// `RestartDeployment`: nothing beyond the target.
    Restart,
    /// `CordonDrainNode`: nothing beyond the target (the node).
    Drain,
    /// `ScaleReplicas`.
    Scale { replicas: Option<i64> },
    /// `IncreaseMemoryLimits`, `IncreaseCPULimits`.
    Limit {
        resource: LimitResource,
        container: Option<String>,
        limit: Option<String>,
        request: Option<String>,
    },
    /// `ExpandPVC`.
    ExpandPvc {
        pvc: Option<String>,
        new_size: Option<String>,
    },
    /// `DeletePod`.
    DeletePod { pod: Option<String> },
    /// `RelaxPDB`.
    RelaxPdb {
        pdb: Option<String>,
        max_unavailable: Option<i64>,
    },
    /// `PatchHPAMaxReplicas`.
    HpaMax {
        hpa: Option<String>,
        max_replicas: Option<i64>,
    },
    /// `RemoveNodeTaint`.
    RemoveTaint {
        key: Option<String>,
        effect: Option<String>,
    },
    /// `GitRevert`: the change a human should make in Git.
    GitRevert { proposed_change: Option<String> },
    /// A custom action type's parameters, as given.
    Custom(Map<String, Value>),
}

impl ActionParams {
    /// Roll back to revision `n`.
    pub fn rollback(n: i64) -> Self {
        ActionParams::Rollback {
            to_revision: Some(n),
        }
    }

    /// Scale to `n` replicas.
    pub fn scale(n: i64) -> Self {
        ActionParams::Scale { replicas: Some(n) }
    }

    /// Raise `container`'s limit of `resource` to `limit`.
    pub fn limit(resource: LimitResource, container: &str, limit: &str) -> Self {
        ActionParams::Limit {
            resource,
            container: Some(container.to_owned()),
            limit: Some(limit.to_owned()),
            request: None,
        }
    }

    /// Grow claim `pvc` to `new_size`.
    pub fn expand_pvc(pvc: &str, new_size: &str) -> Self {
        ActionParams::ExpandPvc {
            pvc: Some(pvc.to_owned()),
            new_size: Some(new_size.to_owned()),
        }
    }

    /// Delete pod `pod`.
    pub fn delete_pod(pod: &str) -> Self {
        ActionParams::DeletePod {
            pod: Some(pod.to_owned()),
        }
    }

    /// Set budget `pdb`'s `maxUnavailable` to `n`.
    pub fn relax_pdb(pdb: &str, n: i64) -> Self {
        ActionParams::RelaxPdb {
            pdb: Some(pdb.to_owned()),
            max_unavailable: Some(n),
        }
    }

    /// Raise autoscaler `hpa`'s `maxReplicas` to `n`.
    pub fn hpa_max(hpa: &str, n: i64) -> Self {
        ActionParams::HpaMax {
            hpa: Some(hpa.to_owned()),
            max_replicas: Some(n),
        }
    }

    /// Remove taint `key` (with `effect`, when one is named).
    pub fn remove_taint(key: &str, effect: Option<&str>) -> Self {
        ActionParams::RemoveTaint {
            key: Some(key.to_owned()),
            effect: effect.map(str::to_owned),
        }
    }

    /// The keys `action_type` reads, in the order its workflows list them; empty for a custom
    /// type (kubemedic reads none of its parameters).
    pub fn keys(action_type: &ActionType) -> &'static [ParamKey] {
        match action_type {
            ActionType::RollbackDeployment | ActionType::RollbackStatefulSet => &[TO_REVISION],
            ActionType::RestartDeployment | ActionType::CordonDrainNode => &[],
            ActionType::ScaleReplicas => &[REPLICAS],
            ActionType::IncreaseMemoryLimits => &[CONTAINER, MEMORY_LIMIT, MEMORY_REQUEST],
            ActionType::IncreaseCPULimits => &[CONTAINER, CPU_LIMIT, CPU_REQUEST],
            ActionType::ExpandPVC => &[PVC_NAME, NEW_SIZE],
            ActionType::DeletePod => &[POD_NAME],
            ActionType::RelaxPDB => &[PDB_NAME, MAX_UNAVAILABLE],
            ActionType::PatchHPAMaxReplicas => &[HPA_NAME, MAX_REPLICAS],
            ActionType::RemoveNodeTaint => &[TAINT_KEY, TAINT_EFFECT],
            ActionType::GitRevert => &[PROPOSED_CHANGE],
            ActionType::NoAction | ActionType::Custom(_) => &[],
        }
    }

    /// `action_type`'s parameters read from `map` (keys not its own are ignored).
    pub fn read(action_type: &ActionType, map: &Map<String, Value>) -> Self {
        let t = |k: ParamKey| text(map, k.name);
        let n = |k: ParamKey| number(map, k.name);
        let limit = |resource: LimitResource| ActionParams::Limit {
            resource,
            container: t(CONTAINER),
            limit: t(resource.limit_key()),
            request: t(resource.request_key()),
        };
        match action_type {
            ActionType::RollbackDeployment | ActionType::RollbackStatefulSet => {
                ActionParams::Rollback {
                    to_revision: n(TO_REVISION),
                }
            }
            ActionType::RestartDeployment => ActionParams::Restart,
            ActionType::CordonDrainNode => ActionParams::Drain,
            ActionType::ScaleReplicas => ActionParams::Scale {
                replicas: n(REPLICAS),
            },
            ActionType::IncreaseMemoryLimits => limit(LimitResource::Memory),
            ActionType::IncreaseCPULimits => limit(LimitResource::Cpu),
            ActionType::ExpandPVC => ActionParams::ExpandPvc {
                pvc: t(PVC_NAME),
                new_size: t(NEW_SIZE),
            },
            ActionType::DeletePod => ActionParams::DeletePod { pod: t(POD_NAME) },
            ActionType::RelaxPDB => ActionParams::RelaxPdb {
                pdb: t(PDB_NAME),
                max_unavailable: n(MAX_UNAVAILABLE),
            },
            ActionType::PatchHPAMaxReplicas => ActionParams::HpaMax {
                hpa: t(HPA_NAME),
                max_replicas: n(MAX_REPLICAS),
            },
            ActionType::RemoveNodeTaint => ActionParams::RemoveTaint {
                key: t(TAINT_KEY),
                effect: t(TAINT_EFFECT),
            },
            ActionType::GitRevert => ActionParams::GitRevert {
                proposed_change: t(PROPOSED_CHANGE),
            },
            ActionType::NoAction | ActionType::Custom(_) => ActionParams::Custom(map.clone()),
        }
    }

    /// The parameters as the map a selection and a workflow's `${PARAM}` read (unset values
    /// left out).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: ParamKey, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.name.to_owned(), v);
            }
        };
        let s = |v: &Option<String>| v.as_ref().map(|s| json!(s));
        let n = |v: &Option<i64>| v.map(|n| json!(n));
        match self {
            ActionParams::Rollback { to_revision } => put(TO_REVISION, n(to_revision)),
            ActionParams::Restart | ActionParams::Drain => {}
            ActionParams::Scale { replicas } => put(REPLICAS, n(replicas)),
            ActionParams::Limit {
                resource,
                container,
                limit,
                request,
            } => {
                put(CONTAINER, s(container));
                put(resource.limit_key(), s(limit));
                put(resource.request_key(), s(request));
            }
            ActionParams::ExpandPvc { pvc, new_size } => {
                put(PVC_NAME, s(pvc));
                put(NEW_SIZE, s(new_size));
            }
            ActionParams::DeletePod { pod } => put(POD_NAME, s(pod)),
            ActionParams::RelaxPdb {
                pdb,
                max_unavailable,
            } => {
                put(PDB_NAME, s(pdb));
                put(MAX_UNAVAILABLE, n(max_unavailable));
            }
            ActionParams::HpaMax { hpa, max_replicas } => {
                put(HPA_NAME, s(hpa));
                put(MAX_REPLICAS, n(max_replicas));
            }
            ActionParams::RemoveTaint { key, effect } => {
                put(TAINT_KEY, s(key));
                put(TAINT_EFFECT, s(effect));
            }
            ActionParams::GitRevert { proposed_change } => put(PROPOSED_CHANGE, s(proposed_change)),
            ActionParams::Custom(map) => return map.clone(),
        }
        m
    }
}

/// A whole number given as a number or a numeric string (`"3"`).
fn number(map: &Map<String, Value>, key: &str) -> Option<i64> {
    match map.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Text, trimmed; empty reads as not given.
fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_reads_back_what_it_writes() {
        let cases = [
            (ActionType::RollbackDeployment, ActionParams::rollback(3)),
            (ActionType::RollbackStatefulSet, ActionParams::rollback(1)),
            (ActionType::RestartDeployment, ActionParams::Restart),
            (ActionType::CordonDrainNode, ActionParams::Drain),
            (ActionType::ScaleReplicas, ActionParams::scale(4)),
            (
                ActionType::IncreaseMemoryLimits,
                ActionParams::limit(LimitResource::Memory, "app", "384Mi"),
            ),
            (
                ActionType::IncreaseCPULimits,
                ActionParams::limit(LimitResource::Cpu, "app", "750m"),
            ),
            (
                ActionType::ExpandPVC,
                ActionParams::expand_pvc("data", "15Gi"),
            ),
            (ActionType::DeletePod, ActionParams::delete_pod("api-3")),
            (ActionType::RelaxPDB, ActionParams::relax_pdb("api", 1)),
            (
                ActionType::PatchHPAMaxReplicas,
                ActionParams::hpa_max("api", 8),
            ),
            (
                ActionType::RemoveNodeTaint,
                ActionParams::remove_taint("disk", Some("NoSchedule")),
            ),
        ];
        for (t, p) in cases {
            let map = p.to_map();
            assert_eq!(ActionParams::read(&t, &map), p, "{t}");
            // Every key written is one the type declares.
            for k in map.keys() {
                assert!(
                    ActionParams::keys(&t).iter().any(|d| d.name == k),
                    "{t} writes {k}, which it does not declare"
                );
            }
        }
    }

    #[test]
    fn a_value_of_the_wrong_shape_reads_as_not_given() {
        let map = json!({"TO_REVISION": "three", "REPLICAS": "4", "POD_NAME": "  "});
        let map = map.as_object().unwrap();
        assert_eq!(
            ActionParams::read(&ActionType::RollbackDeployment, map),
            ActionParams::Rollback { to_revision: None }
        );
        assert_eq!(
            ActionParams::read(&ActionType::ScaleReplicas, map),
            ActionParams::scale(4),
            "a numeric string is a number"
        );
        assert_eq!(
            ActionParams::read(&ActionType::DeletePod, map),
            ActionParams::DeletePod { pod: None }
        );
    }

    #[test]
    fn every_builtin_declares_its_keys_and_a_custom_type_none() {
        for t in ActionType::BUILTIN {
            let keys = ActionParams::keys(&t);
            let names: std::collections::HashSet<_> = keys.iter().map(|k| k.name).collect();
            assert_eq!(names.len(), keys.len(), "{t} names a key twice");
        }
        let custom = ActionType::Custom("FlushRedisCache".into());
        assert!(ActionParams::keys(&custom).is_empty());
        let map = json!({"DB": "cache"}).as_object().cloned().unwrap();
        assert_eq!(ActionParams::read(&custom, &map).to_map(), map);
    }
}
