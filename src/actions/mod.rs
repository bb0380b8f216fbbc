//! The built-in actions: the closed set of cluster changes a `builtin` workflow's steps are made
//! of, as one type. Each [`BuiltinAction`] says here, and only here:
//! - its arguments ([`BuiltinAction::args`]: name, kind, required) — the catalog validates every
//!   step against them when it loads, so a misspelt or missing argument is a load error naming
//!   the file and field, not a failed execution at 3 a.m.;
//! - the one object it changes ([`BuiltinAction::object_of`]), so that after a crash the
//!   executor reads that object's stamp instead of repeating the step, or that it only reads;
//! - its write ([`BuiltinAction::run`]), through [`ClusterReader`] + [`ClusterWriter`]; and its
//!   dry run, which is the same code with the API server's `dryRun=All` (execution's dry-run
//!   mode) or through a `cluster::DryRunWriter` (the prover's, to show an approver the change).
//!
//! The proof obligations are per *action type* (`RollbackDeployment`, `ScaleReplicas`, …: what a
//! workflow means), not per step, and live in `prove`; a workflow's steps are what it does.
//!
//! Input of a step: its arguments with `${PARAM}` already substituted, the verified root owner,
//! and a writer that stamps every change. Output: what the step did ([`WriteOutcome`]), or a
//! [`ClusterError`] naming what refused it.

mod steps;
pub mod writes;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

pub use steps::Args;
use steps::{invalid, namespace, node, number, text, timeout};

use crate::cluster::{ClusterError, ClusterReader, ClusterWriter, WriteOutcome};
pub use crate::domain::BuiltinAction;
use crate::domain::{EngineKind, Execution, Target};

/// What an argument holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ArgKind {
    /// Text (a name, a taint key).
    Text,
    /// A whole number, or text that is one (`"3"`).
    WholeNumber,
    /// A Kubernetes quantity as text (`512Mi`, `250m`, `20Gi`).
    Quantity,
}

/// One argument of a built-in action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    pub required: bool,
}

const fn arg(name: &'static str, kind: ArgKind, required: bool) -> Arg {
    Arg {
        name,
        kind,
        required,
    }
}

/// Why restoring the target's spec does not take `execution` back, if it does not.
pub fn not_restorable(execution: &Execution) -> Option<String> {
    if execution.engine != EngineKind::Builtin {
        return Some(format!(
            "{} ran a {} engine, whose effect kubemedic cannot take back",
            execution.workflow_id,
            match execution.engine {
                EngineKind::Job => "Job",
                _ => "proposal",
            }
        ));
    }
    if execution.steps.is_empty() {
        return Some(format!("{} recorded no step", execution.workflow_id));
    }
    let kept: Vec<&str> = execution
        .steps
        .iter()
        .filter(|s| {
            !s.action
                .builtin()
                .is_some_and(BuiltinAction::restored_by_spec)
        })
        .map(|s| s.action.name())
        .collect();
    (!kept.is_empty()).then(|| {
        format!(
            "restoring the spec does not take back {} (it writes beyond the target's spec, or \
             replaces pods that cannot be put back)",
            kept.join(", ")
        )
    })
}

impl BuiltinAction {
    /// Whether restoring the target's spec as it was before this action takes the action back:
    /// it changed only the target's own spec (a rollback, a scale, resources) or nothing.
    /// Not a restart (putting the old template back rolls the pods once more), nor what
    /// deletes, evicts, grows a volume or writes another object than the target.
    pub fn restored_by_spec(self) -> bool {
        match self {
            Self::RolloutUndo
            | Self::Scale
            | Self::SetResources
            | Self::RollbackStatefulset
            | Self::WaitRollout => true,
            Self::RolloutRestart
            | Self::PatchHpaMax
            | Self::RelaxPdb
            | Self::DeletePod
            | Self::Cordon
            | Self::Drain
            | Self::RemoveTaint
            | Self::ExpandPvc => false,
        }
    }

    /// Every name, for error messages (`rollout_undo, rollout_restart, …`).
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// The arguments a step of this action takes.
    pub fn args(self) -> &'static [Arg] {
        use ArgKind::{Quantity, Text, WholeNumber};
        match self {
            Self::RolloutUndo | Self::RollbackStatefulset => {
                const { &[arg("toRevision", WholeNumber, true)] }
            }
            Self::RolloutRestart | Self::Cordon => &[],
            Self::Drain => const { &[arg("timeoutSeconds", WholeNumber, false)] },
            Self::Scale => const { &[arg("replicas", WholeNumber, true)] },
            Self::SetResources => {
                const {
                    &[
                        arg("container", Text, true),
                        arg("memoryLimit", Quantity, false),
                        arg("cpuLimit", Quantity, false),
                        arg("memoryRequest", Quantity, false),
                        arg("cpuRequest", Quantity, false),
                    ]
                }
            }
            Self::PatchHpaMax => {
                const {
                    &[
                        arg("hpa", Text, true),
                        arg("maxReplicas", WholeNumber, true),
                    ]
                }
            }
            Self::RelaxPdb => {
                const {
                    &[
                        arg("pdb", Text, true),
                        arg("maxUnavailable", WholeNumber, true),
                    ]
                }
            }
            Self::DeletePod => const { &[arg("pod", Text, true)] },
            Self::RemoveTaint => const { &[arg("key", Text, true), arg("effect", Text, false)] },
            Self::ExpandPvc => const { &[arg("pvc", Text, true), arg("size", Quantity, true)] },
            Self::WaitRollout => const { &[arg("timeoutSeconds", WholeNumber, false)] },
        }
    }

    /// Whether a step reads only (nothing to reconcile after a crash: it is simply run again).
    pub fn is_read_only(self) -> bool {
        self == Self::WaitRollout
    }

    /// The object a step changes (kind, namespace, name), when it changes one object that can
    /// carry the stamp. `None` for steps that only read (`wait_rollout`) or name no object.
    pub fn object_of(self, args: &Args, target: &Target) -> Option<Target> {
        let ns = target.namespace.clone();
        let named = |kind: &str, key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(|n| Target::new(kind, n, ns.clone()))
        };
        match self {
            Self::RolloutUndo
            | Self::RolloutRestart
            | Self::Scale
            | Self::SetResources
            | Self::RollbackStatefulset
            | Self::Cordon
            | Self::RemoveTaint
            | Self::Drain => Some(target.clone()),
            Self::PatchHpaMax => named("HorizontalPodAutoscaler", "hpa"),
            Self::RelaxPdb => named("PodDisruptionBudget", "pdb"),
            Self::ExpandPvc => named("PersistentVolumeClaim", "pvc"),
            Self::DeletePod => named("Pod", "pod"),
            Self::WaitRollout => None,
        }
    }

    /// Run one step on `target` (with the API server's dry run when `dry_run`).
    pub async fn run(
        self,
        r: &dyn ClusterReader,
        w: &dyn ClusterWriter,
        args: &Args,
        target: &Target,
        now: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<WriteOutcome, ClusterError> {
        let action = self.name();
        match self {
            Self::RolloutUndo => {
                if target.kind != "Deployment" {
                    return Err(invalid(format!(
                        "rollout_undo works on a Deployment, not {target}"
                    )));
                }
                let to = number(args, "toRevision", action)?;
                let ns = namespace(target, action)?;
                writes::rollout_undo(r, w, ns, &target.name, Some(to), dry_run).await
            }
            Self::RolloutRestart => {
                let ns = namespace(target, action)?;
                writes::rollout_restart(r, w, &target.kind, ns, &target.name, now, dry_run).await
            }
            Self::Scale => {
                let replicas = number(args, "replicas", action)?;
                let ns = namespace(target, action)?;
                writes::scale(r, w, &target.kind, ns, &target.name, replicas, dry_run).await
            }
            Self::SetResources => set_resources(r, w, args, target, dry_run).await,
            Self::PatchHpaMax => {
                let hpa = text(args, "hpa", action)?;
                let max = number(args, "maxReplicas", action)?;
                writes::patch_hpa_max(r, w, namespace(target, action)?, hpa, max, dry_run).await
            }
            Self::RelaxPdb => {
                let pdb = text(args, "pdb", action)?;
                let max = number(args, "maxUnavailable", action)?;
                writes::relax_pdb(r, w, namespace(target, action)?, pdb, max, dry_run).await
            }
            Self::DeletePod => {
                let pod = text(args, "pod", action)?;
                writes::delete_pod(r, w, namespace(target, action)?, pod, dry_run).await
            }
            Self::Cordon => writes::cordon(r, w, &node(target, action)?, dry_run).await,
            Self::Drain => {
                let timeout = timeout(args, action, writes::DRAIN_TIMEOUT_SECONDS)?;
                writes::drain(r, w, &node(target, action)?, timeout, dry_run).await
            }
            Self::RemoveTaint => {
                let key = text(args, "key", action)?;
                let effect = args
                    .get("effect")
                    .and_then(Value::as_str)
                    .filter(|e| !e.is_empty());
                writes::remove_taint(r, w, &node(target, action)?, key, effect, dry_run).await
            }
            Self::ExpandPvc => {
                let pvc = text(args, "pvc", action)?;
                let size = text(args, "size", action)?;
                let ns = namespace(target, action)?;
                steps::check_expandable(r, ns, pvc).await?;
                writes::expand_pvc(r, w, ns, pvc, size, dry_run).await
            }
            Self::RollbackStatefulset => {
                let to = number(args, "toRevision", action)?;
                steps::rollback_statefulset(r, w, target, to, dry_run).await
            }
            Self::WaitRollout => {
                let timeout = timeout(args, action, steps::ROLLOUT_TIMEOUT_SECONDS)?;
                steps::wait_rollout(r, target, timeout, dry_run).await
            }
        }
    }
}

impl std::fmt::Display for BuiltinAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Run the step a workflow names `action` (an unknown name is refused, naming the known ones).
pub async fn run(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    action: &str,
    args: &Args,
    target: &Target,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    let Some(a) = BuiltinAction::parse(action) else {
        return Err(invalid(format!(
            "unknown builtin action `{action}`; known: {}",
            BuiltinAction::names()
        )));
    };
    a.run(r, w, args, target, now, dry_run).await
}

/// A step's arguments checked against its action, before any `${PARAM}` is substituted:
/// (argument, problem) pairs. An argument that is a `${PARAM}` reference is checked once it is
/// substituted, when the step runs.
pub fn check_args(action: BuiltinAction, with: &Args) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let spec = action.args();
    for (key, value) in with {
        let Some(a) = spec.iter().find(|a| a.name == *key) else {
            let known: Vec<&str> = spec.iter().map(|a| a.name).collect();
            out.push((
                key.clone(),
                if known.is_empty() {
                    format!("{action} takes no arguments")
                } else {
                    format!("{action} takes no `{key}`; it takes {}", known.join(", "))
                },
            ));
            continue;
        };
        let reference = value.as_str().is_some_and(|s| s.contains("${"));
        let fits = match (a.kind, value) {
            (_, _) if reference => true,
            (ArgKind::WholeNumber, Value::Number(n)) => n.as_i64().is_some(),
            (ArgKind::WholeNumber, Value::String(s)) => s.trim().parse::<i64>().is_ok(),
            (ArgKind::Text | ArgKind::Quantity, Value::String(s)) => !s.trim().is_empty(),
            _ => false,
        };
        if !fits {
            let wanted = match a.kind {
                ArgKind::Text => "non-empty text",
                ArgKind::WholeNumber => "a whole number",
                ArgKind::Quantity => "a quantity like 512Mi or 250m",
            };
            out.push((key.clone(), format!("{value} is not {wanted}")));
        }
    }
    for a in spec.iter().filter(|a| a.required) {
        if !with.contains_key(a.name) {
            out.push((
                a.name.to_owned(),
                format!("{action} needs `{}` ({})", a.name, kind_word(a.kind)),
            ));
        }
    }
    out
}

fn kind_word(k: ArgKind) -> &'static str {
    match k {
        ArgKind::Text => "text",
        ArgKind::WholeNumber => "a whole number",
        ArgKind::Quantity => "a quantity",
    }
}

/// Set a container's limits and requests; the container must exist (a strategic merge would
/// otherwise add a new, empty one).
async fn set_resources(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    args: &Args,
    target: &Target,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    let container = text(args, "container", "set_resources")?;
    let mut limits = serde_json::Map::new();
    let mut requests = serde_json::Map::new();
    for (key, is_limit, field) in [
        ("memoryLimit", true, "memory"),
        ("cpuLimit", true, "cpu"),
        ("memoryRequest", false, "memory"),
        ("cpuRequest", false, "cpu"),
    ] {
        if let Some(v) = args
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            let into = if is_limit { &mut limits } else { &mut requests };
            into.insert(field.into(), json!(v));
        }
    }
    if limits.is_empty() && requests.is_empty() {
        return Err(invalid("set_resources: no limit or request to set"));
    }
    let mut resources = serde_json::Map::new();
    if !limits.is_empty() {
        resources.insert("limits".into(), Value::Object(limits));
    }
    if !requests.is_empty() {
        resources.insert("requests".into(), Value::Object(requests));
    }
    let res = r.resource(&target.kind).await?;
    let current = r
        .get(&res, target.namespace.as_deref(), &target.name)
        .await?;
    // An init container killed for memory is raised where it is declared.
    let Some(list) = crate::cluster::observed::PodSpec::of_template(&current).list_of(container)
    else {
        return Err(invalid(format!(
            "set_resources: {target} has no container `{container}`"
        )));
    };
    writes::set_resources(
        r,
        w,
        target,
        (list, container),
        &Value::Object(resources),
        dry_run,
    )
    .await
}

#[cfg(test)]
mod tests {
    use crate::domain::{ExecutionOutcome, ExecutionStep, StepStatus};

    fn execution(engine: EngineKind, steps: &[&str]) -> Execution {
        let at = Utc::now();
        Execution {
            workflow_id: "w".into(),
            workflow_version: "1".into(),
            action_type: "ScaleReplicas".into(),
            engine,
            target: Target::new("Deployment", "web", Some("shop".into())),
            parameters: Default::default(),
            dry_run: false,
            pre_spec_hash: None,
            pre_drift_hash: None,
            before: None,
            post_spec_hash: None,
            post_drift_hash: None,
            started_at: at,
            finished_at: at,
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, a)| ExecutionStep {
                    index: i as u32 + 1,
                    action: (*a).into(),
                    status: StepStatus::Applied,
                    detail: Default::default(),
                    at,
                })
                .collect(),
            outcome: ExecutionOutcome::Succeeded,
            message: String::new(),
            proposal: None,
        }
    }

    #[test]
    fn only_what_the_spec_holds_is_restorable() {
        assert_eq!(
            not_restorable(&execution(EngineKind::Builtin, &["scale"])),
            None
        );
        assert_eq!(
            not_restorable(&execution(
                EngineKind::Builtin,
                &["rollout_undo", "wait_rollout"]
            )),
            None
        );
        let restart = not_restorable(&execution(EngineKind::Builtin, &["rollout_restart"]));
        assert!(restart.is_some_and(|w| w.contains("rollout_restart")));
        assert!(
            not_restorable(&execution(EngineKind::Builtin, &["scale", "delete_pod"])).is_some()
        );
        assert!(not_restorable(&execution(EngineKind::Job, &["job"])).is_some());
        assert!(not_restorable(&execution(EngineKind::Builtin, &[])).is_some());
    }

    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for a in BuiltinAction::ALL {
            assert_eq!(BuiltinAction::parse(a.name()), Some(a));
            assert_eq!(serde_json::to_value(a).ok(), Some(json!(a.name())));
        }
        assert_eq!(BuiltinAction::parse("rollout-undo"), None);
    }

    #[test]
    fn steps_name_the_object_they_change() {
        let t = Target::new("Deployment", "checkout", Some("shop".into()));
        let mut args = Args::new();
        args.insert("hpa".into(), json!("checkout-hpa"));
        assert_eq!(
            BuiltinAction::PatchHpaMax.object_of(&args, &t),
            Some(Target::new(
                "HorizontalPodAutoscaler",
                "checkout-hpa",
                Some("shop".into())
            ))
        );
        assert_eq!(
            BuiltinAction::RolloutUndo.object_of(&args, &t),
            Some(t.clone())
        );
        assert_eq!(BuiltinAction::WaitRollout.object_of(&args, &t), None);
    }

    #[test]
    fn arguments_are_checked_by_name_kind_and_presence() {
        let with = |pairs: &[(&str, Value)]| -> Args {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        // References are checked when substituted; literals now.
        assert!(check_args(BuiltinAction::Scale, &with(&[("replicas", json!("${N}"))])).is_empty());
        assert!(check_args(BuiltinAction::Scale, &with(&[("replicas", json!(3))])).is_empty());
        let bad = check_args(
            BuiltinAction::Scale,
            &with(&[("replica", json!(3)), ("x", json!(1))]),
        );
        assert!(
            bad.iter()
                .any(|(k, m)| k == "replica" && m.contains("it takes replicas")),
            "{bad:?}"
        );
        assert!(
            bad.iter()
                .any(|(k, m)| k == "replicas" && m.contains("needs `replicas`")),
            "{bad:?}"
        );
        let bad = check_args(
            BuiltinAction::PatchHpaMax,
            &with(&[("hpa", json!("web")), ("maxReplicas", json!("ten"))]),
        );
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].1.contains("not a whole number"), "{bad:?}");
        let bad = check_args(BuiltinAction::Cordon, &with(&[("force", json!(true))]));
        assert_eq!(bad[0].1, "cordon takes no arguments");
        let bad = check_args(BuiltinAction::Drain, &with(&[("force", json!(true))]));
        assert_eq!(bad[0].1, "drain takes no `force`; it takes timeoutSeconds");
    }
}
