//! The action types: the 13 built-ins kubemedic knows how to prove, run and verify, and the
//! custom ones a catalog may add. Serialised as the names the catalog, the policies and stored
//! requests have always used, so nothing stored or written by hand changes.

/// An action type, as a workflow declares it and a proposal, proof, approval and execution
/// carry it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionType {
    RollbackDeployment,
    RollbackStatefulSet,
    RestartDeployment,
    ScaleReplicas,
    IncreaseMemoryLimits,
    IncreaseCPULimits,
    ExpandPVC,
    CordonDrainNode,
    DeletePod,
    RelaxPDB,
    PatchHPAMaxReplicas,
    RemoveNodeTaint,
    GitRevert,
    /// No action: the subject of the proof of a "no action needed" claim (the problem
    /// resolved), whose obligations say the desired state is met. Never a workflow's action
    /// type (the catalog refuses the name), never run.
    NoAction,
    /// A catalog's own action type: kubemedic knows no obligations for it (its proof is
    /// `unverified`, and the shipped policy asks a human).
    Custom(String),
}

impl ActionType {
    /// The built-ins, in the catalog's order.
    pub const BUILTIN: [ActionType; 13] = [
        ActionType::RollbackDeployment,
        ActionType::RollbackStatefulSet,
        ActionType::RestartDeployment,
        ActionType::ScaleReplicas,
        ActionType::IncreaseMemoryLimits,
        ActionType::IncreaseCPULimits,
        ActionType::ExpandPVC,
        ActionType::CordonDrainNode,
        ActionType::DeletePod,
        ActionType::RelaxPDB,
        ActionType::PatchHPAMaxReplicas,
        ActionType::RemoveNodeTaint,
        ActionType::GitRevert,
    ];

    /// The type named `name`: a built-in when it is one's name exactly, else custom.
    pub fn parse(name: &str) -> Self {
        if name == ActionType::NoAction.as_str() {
            return ActionType::NoAction;
        }
        Self::BUILTIN
            .iter()
            .find(|b| b.as_str() == name)
            .cloned()
            .unwrap_or_else(|| ActionType::Custom(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        match self {
            ActionType::RollbackDeployment => "RollbackDeployment",
            ActionType::RollbackStatefulSet => "RollbackStatefulSet",
            ActionType::RestartDeployment => "RestartDeployment",
            ActionType::ScaleReplicas => "ScaleReplicas",
            ActionType::IncreaseMemoryLimits => "IncreaseMemoryLimits",
            ActionType::IncreaseCPULimits => "IncreaseCPULimits",
            ActionType::ExpandPVC => "ExpandPVC",
            ActionType::CordonDrainNode => "CordonDrainNode",
            ActionType::DeletePod => "DeletePod",
            ActionType::RelaxPDB => "RelaxPDB",
            ActionType::PatchHPAMaxReplicas => "PatchHPAMaxReplicas",
            ActionType::RemoveNodeTaint => "RemoveNodeTaint",
            ActionType::GitRevert => "GitRevert",
            ActionType::NoAction => "NoAction",
            ActionType::Custom(name) => name,
        }
    }

    /// Whether the action writes what a GitOps tool declares from Git: a workload's template or
    /// replicas, its autoscaler, budget or claim. On a GitOps-managed target such a change goes
    /// to Git as a proposal ([`ActionType::GitRevert`]), never as a direct write the next sync
    /// undoes or fights: the offline selection turns it into one, and the catalog never offers
    /// a workflow of it there. Deleting a pod and the node actions write nothing Git declares.
    /// A catalog's own action type is its author's to label (`excludes: [gitOpsManaged]`).
    pub fn writes_declared_state(&self) -> bool {
        matches!(
            self,
            ActionType::RollbackDeployment
                | ActionType::RollbackStatefulSet
                | ActionType::RestartDeployment
                | ActionType::ScaleReplicas
                | ActionType::IncreaseMemoryLimits
                | ActionType::IncreaseCPULimits
                | ActionType::ExpandPVC
                | ActionType::RelaxPDB
                | ActionType::PatchHPAMaxReplicas
        )
    }

    /// One of the 13 actions kubemedic knows how to prove, run and verify.
    pub fn is_builtin(&self) -> bool {
        !matches!(self, ActionType::Custom(_) | ActionType::NoAction)
    }
}

/// The traits of a type read from and written as its name, with a fallback variant for any
/// other name (`ActionType::Custom`, `Severity::Other`): shown, compared with text, and
/// serialised as exactly that name. The type provides `parse(&str) -> Self` and
/// `as_str(&self) -> &str`.
macro_rules! named_text {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $t {
            fn from(name: &str) -> Self {
                Self::parse(name)
            }
        }

        impl From<String> for $t {
            fn from(name: String) -> Self {
                Self::parse(&name)
            }
        }

        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(Self::parse(&<String as serde::Deserialize>::deserialize(
                    d,
                )?))
            }
        }
    };
}
pub(super) use named_text;

named_text!(ActionType);

impl From<&String> for ActionType {
    fn from(name: &String) -> Self {
        Self::parse(name)
    }
}

impl PartialEq<String> for ActionType {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<ActionType> for &str {
    fn eq(&self, other: &ActionType) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<ActionType> for String {
    fn eq(&self, other: &ActionType) -> bool {
        self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_types_are_stored_and_read_as_their_names() {
        for b in ActionType::BUILTIN {
            let json = serde_json::to_value(&b).unwrap();
            assert_eq!(json, serde_json::Value::String(b.as_str().to_owned()));
            assert_eq!(serde_json::from_value::<ActionType>(json).unwrap(), b);
            assert!(b.is_builtin());
        }
        let custom: ActionType = serde_json::from_str("\"FlushCache\"").unwrap();
        assert_eq!(custom, ActionType::Custom("FlushCache".into()));
        assert!(!custom.is_builtin());
        // A name differing only in case is not the built-in: the catalog's names are exact.
        assert!(!ActionType::parse("deletepod").is_builtin());
        assert!(ActionType::DeletePod == "DeletePod");
        // The subject of a "no action needed" proof, as stored proofs have always named it.
        let none: ActionType = serde_json::from_str("\"NoAction\"").unwrap();
        assert_eq!(none, ActionType::NoAction);
        assert!(!none.is_builtin());
        assert_eq!(serde_json::to_string(&none).unwrap(), "\"NoAction\"");
    }
}
