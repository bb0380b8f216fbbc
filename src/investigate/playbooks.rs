//! Playbooks: deterministic investigation sequences for the recurring failure modes, from
//! `playbooks/*.yaml` (the KubeIntellect schema plus the action types each one recommends).
//!
//! A playbook matches when any of its triggers matches the pre-fetched snapshot: a pod STATUS
//! (as `kubectl get pods` shows it), a Warning event's reason or message, or the alert name.
//! Both investigators report the names of the matched playbooks in their analysis
//! (`Analysis::playbooks`, recorded in the audit trail). The LLM investigator also puts the
//! matched playbooks' steps into its RCA prompt. The offline investigator does not read the
//! steps: it decides with its own rule table (`offline/rules.rs`), each rule named after the
//! playbook it implements, which a test keeps in step with the built-in playbooks.

use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    #[serde(default)]
    pub pod_status_regex: Option<String>,
    #[serde(default)]
    pub event_reason_regex: Option<String>,
    #[serde(default)]
    pub event_message_regex: Option<String>,
    #[serde(default)]
    pub alertname_regex: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaybookSpec {
    pub name: String,
    pub description: String,
    /// `reactive`, `proactive` or `any`.
    #[serde(default = "any")]
    pub mode: String,
    pub triggers: Vec<Trigger>,
    pub investigation_steps: Vec<String>,
    pub expected_evidence: Vec<String>,
    /// Action types by their names (`RestartDeployment`; a catalog's own type is `Custom`).
    #[serde(default)]
    pub recommended_action_types: Vec<crate::domain::ActionType>,
    #[serde(default)]
    pub recommended_fix_template: String,
}

impl PlaybookSpec {
    /// The recommended action types' names, comma-separated.
    pub fn recommended_actions(&self) -> String {
        self.recommended_action_types
            .iter()
            .map(crate::domain::ActionType::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn any() -> String {
    "any".into()
}

#[derive(Clone)]
struct CompiledTrigger {
    pod_status: Option<Regex>,
    event_reason: Option<Regex>,
    event_message: Option<Regex>,
    alertname: Option<Regex>,
}

#[derive(Clone)]
pub struct Playbook {
    pub spec: PlaybookSpec,
    triggers: Vec<CompiledTrigger>,
}

/// What playbooks are matched against.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub alertname: String,
    pub proactive: bool,
    /// STATUS column of the pods of the namespace.
    pub pod_statuses: Vec<String>,
    /// (reason, message) of Warning events.
    pub warning_events: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PlaybookError {
    pub file: String,
    pub message: String,
}

impl Playbook {
    pub fn compile(spec: PlaybookSpec) -> Result<Self, String> {
        let re = |field: &str, p: &Option<String>| -> Result<Option<Regex>, String> {
            p.as_ref()
                .map(|p| Regex::new(p).map_err(|e| format!("{field} `{p}`: {e}")))
                .transpose()
        };
        let triggers = spec
            .triggers
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let c = CompiledTrigger {
                    pod_status: re(
                        &format!("triggers[{i}].pod_status_regex"),
                        &t.pod_status_regex,
                    )?,
                    event_reason: re(
                        &format!("triggers[{i}].event_reason_regex"),
                        &t.event_reason_regex,
                    )?,
                    event_message: re(
                        &format!("triggers[{i}].event_message_regex"),
                        &t.event_message_regex,
                    )?,
                    alertname: re(
                        &format!("triggers[{i}].alertname_regex"),
                        &t.alertname_regex,
                    )?,
                };
                if c.pod_status.is_none()
                    && c.event_reason.is_none()
                    && c.event_message.is_none()
                    && c.alertname.is_none()
                {
                    return Err(format!("triggers[{i}] has no condition"));
                }
                Ok(c)
            })
            .collect::<Result<Vec<_>, String>>()?;
        if !["reactive", "proactive", "any"].contains(&spec.mode.as_str()) {
            return Err(format!(
                "mode `{}` is not reactive, proactive or any",
                spec.mode
            ));
        }
        Ok(Self { spec, triggers })
    }

    /// A trigger matches when every condition it names matches something in the snapshot.
    pub fn matches(&self, s: &Snapshot) -> bool {
        let mode_ok = match self.spec.mode.as_str() {
            "reactive" => !s.proactive,
            "proactive" => s.proactive,
            _ => true,
        };
        mode_ok
            && self.triggers.iter().any(|t| {
                t.pod_status
                    .as_ref()
                    .is_none_or(|r| s.pod_statuses.iter().any(|p| r.is_match(p)))
                    && t.event_reason.as_ref().is_none_or(|r| {
                        s.warning_events
                            .iter()
                            .any(|(reason, _)| r.is_match(reason))
                    })
                    && t.event_message
                        .as_ref()
                        .is_none_or(|r| s.warning_events.iter().any(|(_, m)| r.is_match(m)))
                    && t.alertname
                        .as_ref()
                        .is_none_or(|r| r.is_match(&s.alertname))
            })
    }

    /// The playbook as the RCA prompt shows it.
    pub fn prompt_text(&self) -> String {
        let mut out = format!(
            "### Playbook {}: {}\nSteps:\n",
            self.spec.name, self.spec.description
        );
        for (i, step) in self.spec.investigation_steps.iter().enumerate() {
            out.push_str(&format!("{}. {step}\n", i + 1));
        }
        out.push_str("Evidence to look for: ");
        out.push_str(&self.spec.expected_evidence.join("; "));
        if !self.spec.recommended_action_types.is_empty() {
            out.push_str(&format!(
                "\nUsual remedies: {}",
                self.spec.recommended_actions()
            ));
        }
        out.push('\n');
        out
    }
}

/// The playbooks shipped in the binary (the repository's `playbooks/`).
const BUILTIN: &[(&str, &str)] = &[
    (
        "playbooks/containercreating-stuck.yaml",
        include_str!("../../playbooks/containercreating-stuck.yaml"),
    ),
    (
        "playbooks/crashloopbackoff.yaml",
        include_str!("../../playbooks/crashloopbackoff.yaml"),
    ),
    (
        "playbooks/createcontainerconfigerror.yaml",
        include_str!("../../playbooks/createcontainerconfigerror.yaml"),
    ),
    (
        "playbooks/imagepullbackoff.yaml",
        include_str!("../../playbooks/imagepullbackoff.yaml"),
    ),
    (
        "playbooks/memory-exhaustion-predicted.yaml",
        include_str!("../../playbooks/memory-exhaustion-predicted.yaml"),
    ),
    (
        "playbooks/oomkilled.yaml",
        include_str!("../../playbooks/oomkilled.yaml"),
    ),
    (
        "playbooks/pending-insufficient-resources.yaml",
        include_str!("../../playbooks/pending-insufficient-resources.yaml"),
    ),
    (
        "playbooks/pending-scheduling-constraints.yaml",
        include_str!("../../playbooks/pending-scheduling-constraints.yaml"),
    ),
    (
        "playbooks/pvc-fill-predicted.yaml",
        include_str!("../../playbooks/pvc-fill-predicted.yaml"),
    ),
    (
        "playbooks/readiness-probe-failing.yaml",
        include_str!("../../playbooks/readiness-probe-failing.yaml"),
    ),
    (
        "playbooks/service-unreachable.yaml",
        include_str!("../../playbooks/service-unreachable.yaml"),
    ),
    (
        "playbooks/terminating-stuck.yaml",
        include_str!("../../playbooks/terminating-stuck.yaml"),
    ),
];

pub struct Playbooks(Vec<Playbook>);

impl Playbooks {
    pub fn load(dir: &Path) -> Result<Self, Vec<PlaybookError>> {
        let mut errors = Vec::new();
        let mut books = Vec::new();
        let mut files: Vec<_> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .collect(),
            Err(e) => {
                return Err(vec![PlaybookError {
                    file: dir.display().to_string(),
                    message: e.to_string(),
                }]);
            }
        };
        files.sort();
        for f in files {
            let file = f.display().to_string();
            let parsed = std::fs::read_to_string(&f)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_saphyr::from_str::<PlaybookSpec>(&t).map_err(|e| e.to_string()))
                .and_then(Playbook::compile);
            match parsed {
                Ok(p) => books.push(p),
                Err(message) => errors.push(PlaybookError { file, message }),
            }
        }
        if errors.is_empty() {
            Ok(Self(books))
        } else {
            Err(errors)
        }
    }

    /// The playbooks compiled into the binary.
    pub fn builtin() -> Result<Self, Vec<PlaybookError>> {
        let mut errors = Vec::new();
        let mut books = Vec::new();
        for (file, text) in BUILTIN {
            match serde_saphyr::from_str::<PlaybookSpec>(text)
                .map_err(|e| e.to_string())
                .and_then(Playbook::compile)
            {
                Ok(p) => books.push(p),
                Err(message) => errors.push(PlaybookError {
                    file: (*file).to_owned(),
                    message,
                }),
            }
        }
        if errors.is_empty() {
            Ok(Self(books))
        } else {
            Err(errors)
        }
    }

    pub fn empty() -> Self {
        Self(vec![])
    }

    pub fn all(&self) -> &[Playbook] {
        &self.0
    }

    /// These playbooks with `extra` added, each replacing the playbook of its name.
    pub fn with(&self, extra: &[Playbook]) -> Self {
        let mut books: Vec<Playbook> = self
            .0
            .iter()
            .filter(|b| !extra.iter().any(|e| e.spec.name == b.spec.name))
            .cloned()
            .collect();
        books.extend(extra.iter().cloned());
        Self(books)
    }

    pub fn matching(&self, s: &Snapshot) -> Vec<&Playbook> {
        self.0.iter().filter(|p| p.matches(s)).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Playbook> {
        self.0.iter().find(|p| p.spec.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> Playbooks {
        Playbooks::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks")).unwrap()
    }

    #[test]
    fn builtin_matches_the_directory() {
        assert_eq!(
            Playbooks::builtin().unwrap().all().len(),
            shipped().all().len()
        );
    }

    #[test]
    fn the_ten_failure_modes_and_the_proactive_ones_ship() {
        let p = shipped();
        for name in [
            "CrashLoopBackOff",
            "OOMKilled",
            "ImagePullBackOff",
            "PendingInsufficientResources",
            "PendingSchedulingConstraints",
            "CreateContainerConfigError",
            "ContainerCreatingStuck",
            "TerminatingStuck",
            "ReadinessProbeFailing",
            "ServiceUnreachable",
            "MemoryExhaustionPredicted",
            "PVCFillPredicted",
        ] {
            assert!(p.get(name).is_some(), "{name}");
        }
    }

    #[test]
    fn matching_on_status_events_and_mode() {
        let p = shipped();
        let crash = Snapshot {
            alertname: "KubePodCrashLooping".into(),
            pod_statuses: vec!["CrashLoopBackOff".into(), "Running".into()],
            warning_events: vec![(
                "BackOff".into(),
                "Back-off restarting failed container".into(),
            )],
            ..Default::default()
        };
        let names: Vec<&str> = p
            .matching(&crash)
            .iter()
            .map(|b| b.spec.name.as_str())
            .collect();
        assert!(names.contains(&"CrashLoopBackOff"), "{names:?}");
        assert!(!names.contains(&"PVCFillPredicted"), "{names:?}");
        let pending = Snapshot {
            pod_statuses: vec!["Pending".into()],
            warning_events: vec![(
                "FailedScheduling".into(),
                "0/3 nodes are available: 3 Insufficient memory.".into(),
            )],
            ..Default::default()
        };
        let names: Vec<&str> = p
            .matching(&pending)
            .iter()
            .map(|b| b.spec.name.as_str())
            .collect();
        assert!(
            names.contains(&"PendingInsufficientResources")
                && !names.contains(&"PendingSchedulingConstraints"),
            "{names:?}"
        );
        let predicted = Snapshot {
            alertname: "PredictedMemoryExhaustion".into(),
            proactive: true,
            ..Default::default()
        };
        let names: Vec<&str> = p
            .matching(&predicted)
            .iter()
            .map(|b| b.spec.name.as_str())
            .collect();
        assert_eq!(names, ["MemoryExhaustionPredicted"]);
    }
}
