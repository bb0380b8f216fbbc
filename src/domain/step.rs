//! The steps of a workflow, by name: the built-in actions (their arguments, writes and proofs
//! live in `actions` and `prove`; here only the vocabulary every layer shares), a catalog
//! step's action, and what a recorded execution step did. On the wire each is the name a
//! workflow writes (`rollout_undo`), as it always was: stored requests and trails read back.

use serde::{Deserialize, Serialize};

/// A step's action, as a workflow names it (`action: rollout_undo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinAction {
    /// `kubectl rollout undo --to-revision` of a Deployment.
    RolloutUndo,
    /// `kubectl rollout restart` of a Deployment, StatefulSet or DaemonSet.
    RolloutRestart,
    /// Set a workload's replicas.
    Scale,
    /// Set a container's limits and requests.
    SetResources,
    /// Raise (or lower) an HPA's `maxReplicas`.
    PatchHpaMax,
    /// Set a PodDisruptionBudget's `maxUnavailable`.
    RelaxPdb,
    /// Delete one pod (its controller replaces it).
    DeletePod,
    /// Mark a node unschedulable.
    Cordon,
    /// Cordon a node and evict its pods, honouring disruption budgets.
    Drain,
    /// Remove a taint from a node.
    RemoveTaint,
    /// Grow a PersistentVolumeClaim (its StorageClass must allow it).
    ExpandPvc,
    /// Roll a StatefulSet back to an earlier ControllerRevision.
    RollbackStatefulset,
    /// Wait until a workload's rollout completed; changes nothing.
    WaitRollout,
}

impl BuiltinAction {
    /// Every built-in action.
    pub const ALL: [BuiltinAction; 13] = [
        Self::RolloutUndo,
        Self::RolloutRestart,
        Self::Scale,
        Self::SetResources,
        Self::PatchHpaMax,
        Self::RelaxPdb,
        Self::DeletePod,
        Self::Cordon,
        Self::Drain,
        Self::RemoveTaint,
        Self::ExpandPvc,
        Self::RollbackStatefulset,
        Self::WaitRollout,
    ];

    /// The name a workflow uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::RolloutUndo => "rollout_undo",
            Self::RolloutRestart => "rollout_restart",
            Self::Scale => "scale",
            Self::SetResources => "set_resources",
            Self::PatchHpaMax => "patch_hpa_max",
            Self::RelaxPdb => "relax_pdb",
            Self::DeletePod => "delete_pod",
            Self::Cordon => "cordon",
            Self::Drain => "drain",
            Self::RemoveTaint => "remove_taint",
            Self::ExpandPvc => "expand_pvc",
            Self::RollbackStatefulset => "rollback_statefulset",
            Self::WaitRollout => "wait_rollout",
        }
    }

    /// The action a workflow names, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// A step's action as a workflow names it: a built-in action, or a name that is none of them.
/// An unknown name is kept as written rather than refused by serde, where the error would
/// surface inside the engine's tagged form (`workflows[0].engine`) and hide the workflow's other
/// problems; the load-time check refuses it, naming the step and every known action. On the
/// wire it is the name (`rollout_undo`), as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum StepAction {
    Builtin(BuiltinAction),
    Unknown(String),
}

impl StepAction {
    /// The built-in action, when the name is one.
    pub fn builtin(&self) -> Option<BuiltinAction> {
        match self {
            Self::Builtin(a) => Some(*a),
            Self::Unknown(_) => None,
        }
    }

    /// The name as the workflow writes it.
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(a) => a.name(),
            Self::Unknown(name) => name,
        }
    }
}

impl From<String> for StepAction {
    fn from(name: String) -> Self {
        BuiltinAction::parse(&name).map_or(Self::Unknown(name), Self::Builtin)
    }
}

impl From<&str> for StepAction {
    fn from(name: &str) -> Self {
        Self::from(name.to_owned())
    }
}

impl From<BuiltinAction> for StepAction {
    fn from(a: BuiltinAction) -> Self {
        Self::Builtin(a)
    }
}

impl From<StepAction> for String {
    fn from(a: StepAction) -> Self {
        a.name().to_owned()
    }
}

impl std::fmt::Display for StepAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a recorded execution step did: a built-in action, the workflow's Kubernetes Job, or a
/// name this version does not know (a trail written by another one: kept, shown as written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum StepDone {
    Builtin(BuiltinAction),
    Job,
    Other(String),
}

impl StepDone {
    /// The name, as the trail and the request page show it.
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(a) => a.name(),
            Self::Job => JOB_STEP,
            Self::Other(name) => name,
        }
    }

    /// The built-in action, when the step was one.
    pub fn builtin(&self) -> Option<BuiltinAction> {
        match self {
            Self::Builtin(a) => Some(*a),
            _ => None,
        }
    }
}

/// A step of a trail that names none (read leniently): shown as an empty name.
impl Default for StepDone {
    fn default() -> Self {
        Self::Other(String::new())
    }
}

/// The name a Job engine's step is recorded under.
pub const JOB_STEP: &str = "job";

impl From<String> for StepDone {
    fn from(name: String) -> Self {
        match BuiltinAction::parse(&name) {
            Some(a) => Self::Builtin(a),
            None if name == JOB_STEP => Self::Job,
            None => Self::Other(name),
        }
    }
}

impl From<&str> for StepDone {
    fn from(name: &str) -> Self {
        Self::from(name.to_owned())
    }
}

impl From<StepDone> for String {
    fn from(s: StepDone) -> Self {
        s.name().to_owned()
    }
}

impl From<BuiltinAction> for StepDone {
    fn from(a: BuiltinAction) -> Self {
        Self::Builtin(a)
    }
}

impl std::fmt::Display for StepDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_step_reads_back_as_the_name_it_was_stored_under() {
        for name in ["rollout_undo", "job", "an_action_of_another_version"] {
            let step: StepDone = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(
                serde_json::to_value(&step).unwrap(),
                serde_json::json!(name)
            );
        }
        assert_eq!(
            StepDone::from("scale".to_owned()),
            StepDone::Builtin(BuiltinAction::Scale)
        );
        assert_eq!(StepDone::from("job".to_owned()), StepDone::Job);
        for a in BuiltinAction::ALL {
            assert_eq!(BuiltinAction::parse(a.name()), Some(a));
            assert_eq!(StepAction::from(a.name()), StepAction::Builtin(a));
        }
    }
}
