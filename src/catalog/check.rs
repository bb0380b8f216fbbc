//! Structural checks of one workflow, each a (field, problem) pair that `Catalog::load`
//! reports with the file: identity and version, labels, the parameter schema, and the engine —
//! every builtin step checked against its action's arguments (`crate::actions`).

use super::params::references;
use super::select::LABEL_NAMES;
use super::{Engine, Workflow};
use crate::actions::{BuiltinAction, check_args};

/// Structural checks of one workflow: (field, message) pairs.
pub(super) fn check_workflow(w: &Workflow) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if w.id.trim().is_empty()
        || !w
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        out.push((
            "id".into(),
            format!("`{}` must be non-empty, letters, digits, `-` and `.`", w.id),
        ));
    }
    let parts: Vec<&str> = w.version.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.parse::<u32>().is_err()) {
        out.push((
            "version".into(),
            format!("`{}` is not MAJOR.MINOR.PATCH", w.version),
        ));
    }
    if w.description.trim().is_empty() {
        out.push(("description".into(), "must not be empty".into()));
    }
    for (field, list) in [
        ("labels.requires", &w.labels.requires),
        ("labels.excludes", &w.labels.excludes),
    ] {
        for l in list {
            if !LABEL_NAMES.contains(&l.as_str()) {
                out.push((
                    field.into(),
                    format!(
                        "unknown detected label `{l}`; known: {}",
                        LABEL_NAMES.join(", ")
                    ),
                ));
            }
        }
    }
    for m in &w.labels.signal_modes {
        if m != "reactive" && m != "proactive" {
            out.push((
                "labels.signalModes".into(),
                format!("`{m}` is neither reactive nor proactive"),
            ));
        }
    }
    for (field, message) in w.parameters.check() {
        out.push((format!("parameters.{field}"), message));
    }
    match &w.engine {
        Engine::Builtin { steps } => {
            if steps.is_empty() {
                out.push((
                    "engine.steps".into(),
                    "a builtin engine needs at least one step".into(),
                ));
            }
            for (i, s) in steps.iter().enumerate() {
                match BuiltinAction::parse(&s.action) {
                    None => out.push((
                        format!("engine.steps[{i}].action"),
                        format!(
                            "unknown action `{}`; known: {}",
                            s.action,
                            BuiltinAction::names()
                        ),
                    )),
                    Some(action) => {
                        for (arg, problem) in check_args(action, &s.with) {
                            out.push((format!("engine.steps[{i}].with.{arg}"), problem));
                        }
                    }
                }
                for (k, v) in &s.with {
                    if let Some(text) = v.as_str() {
                        for name in references(text) {
                            if !w.parameters.properties.contains_key(&name) {
                                out.push((
                                    format!("engine.steps[{i}].with.{k}"),
                                    format!("references `${{{name}}}`, which is not a parameter"),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Engine::Job {
            image,
            service_account,
            ..
        } => {
            if image.trim().is_empty() {
                out.push(("engine.image".into(), "must not be empty".into()));
            }
            if service_account.trim().is_empty() {
                out.push((
                    "engine.serviceAccount".into(),
                    "a job runs with its own service account".into(),
                ));
            }
        }
        Engine::Proposal { template } => {
            if template.trim().is_empty() {
                out.push(("engine.template".into(), "must not be empty".into()));
            }
        }
    }
    out
}
