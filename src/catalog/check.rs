//! Structural checks of one workflow, each a (field, problem) pair that `Catalog::load`
//! reports with the file: identity and version, labels, the parameter schema, and the engine —
//! every builtin step checked against its action's arguments (`crate::actions`), and every
//! parameter a built-in action type's proof reads declared with its type
//! (`crate::domain::params`).

use super::params::references;
use super::schema::ParamType;
use super::select::LABEL_NAMES;
use super::{Engine, Workflow};
use crate::actions::{BuiltinAction, check_args};
use crate::domain::ActionParams;

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
    out.extend(builtin_keys(w));
    match &w.engine {
        Engine::Builtin { steps } => {
            if steps.is_empty() {
                out.push((
                    "engine.steps".into(),
                    "a builtin engine needs at least one step".into(),
                ));
            }
            for (i, s) in steps.iter().enumerate() {
                match s.action.builtin() {
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

/// A workflow of a built-in action type declares every parameter that type's proof cannot do
/// without, and requires it; every one it declares has the type the proof reads: a workflow that called the
/// revision `REVISION` would otherwise load, and every rollback it proposed be refused for a
/// missing `TO_REVISION`.
fn builtin_keys(w: &Workflow) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in ActionParams::keys(&w.action_type) {
        let field = format!("parameters.properties.{}", key.name);
        let Some(p) = w.parameters.properties.get(key.name) else {
            if key.required {
                out.push((
                    field,
                    format!(
                        "action type {} needs `{}`: its proof reads it",
                        w.action_type, key.name
                    ),
                ));
            }
            continue;
        };
        let expected = if key.number {
            ParamType::Integer
        } else {
            ParamType::String
        };
        if p.kind != expected {
            out.push((
                format!("{field}.type"),
                format!(
                    "`{}` is read as type {} by action type {}'s proof, not {}",
                    key.name,
                    type_name(expected),
                    w.action_type,
                    type_name(p.kind)
                ),
            ));
        }
        if key.required && !w.parameters.required.iter().any(|r| r == key.name) {
            out.push((
                "parameters.required".into(),
                format!(
                    "action type {}'s workflows must require `{}`: its proof refuses without it",
                    w.action_type, key.name
                ),
            ));
        }
    }
    out
}

fn type_name(t: ParamType) -> &'static str {
    match t {
        ParamType::String => "string",
        ParamType::Integer => "integer",
        ParamType::Number => "number",
        ParamType::Boolean => "boolean",
    }
}
