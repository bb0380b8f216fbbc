//! The configuration as MCP resources, read from the live values on every read (a catalog
//! or policy changed by an `ApprovalPolicy`/`RemediationWorkflow` object, or a reloaded policy
//! directory, shows at the next read, without a restart):
//!
//! | URI | what |
//! | --- | --- |
//! | `kubemedic://catalog` | the action types and the workflows' ids, versions and sources |
//! | `kubemedic://catalog/<action_type>` | one action type and its workflows, each with its source (file or object) |
//! | `kubemedic://playbooks/<name>` | one investigation playbook |
//! | `kubemedic://policy` | the approval policy: revision, origin, state, and every module's source |
//!
//! All are JSON. An unknown URI is an MCP "resource not found" error naming it.

use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents};
use serde_json::{Value, json};

use super::Parts;

pub const CATALOG: &str = "kubemedic://catalog";
pub const PLAYBOOKS: &str = "kubemedic://playbooks";
pub const POLICY: &str = "kubemedic://policy";
const JSON: &str = "application/json";

fn resource(uri: String, name: String, description: String) -> Resource {
    Resource::new(uri, name)
        .with_description(description)
        .with_mime_type(JSON)
}

/// Every resource there is now.
pub fn list(parts: &Parts) -> Vec<Resource> {
    let mut out = Vec::new();
    if let Some(catalog) = parts.catalog.as_ref().map(|c| c.get()) {
        out.push(resource(
            CATALOG.into(),
            "catalog".into(),
            "The remediation catalog: its action types, and each workflow's id, version and source"
                .into(),
        ));
        for a in catalog.action_types() {
            out.push(resource(
                format!("{CATALOG}/{}", a.name),
                format!("catalog/{}", a.name),
                format!(
                    "Action type {}: {} — and the workflows that implement it",
                    a.name, a.what
                ),
            ));
        }
    }
    if let Some(books) = parts.playbooks.as_ref().map(|p| p.get()) {
        for b in books.all() {
            out.push(resource(
                format!("{PLAYBOOKS}/{}", b.spec.name),
                format!("playbooks/{}", b.spec.name),
                format!(
                    "Investigation playbook {}: {}",
                    b.spec.name, b.spec.description
                ),
            ));
        }
    }
    if parts.policy.is_some() {
        out.push(resource(
            POLICY.into(),
            "policy".into(),
            "The approval policy in force: revision, origin (directory, built-in or ApprovalPolicy objects), state and the Rego modules".into(),
        ));
    }
    out
}

fn contents(uri: &str, body: &Value) -> ReadResourceResult {
    ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(JSON.into()),
        text: serde_json::to_string_pretty(body).unwrap_or_default(),
        meta: None,
    }])
}

fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("{uri}: {why}; resources/list names the resources there are"),
        Some(json!({"uri": uri})),
    )
}

/// The resource `uri`, as it is now.
pub fn read(parts: &Parts, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    if uri == CATALOG || uri.starts_with(&format!("{CATALOG}/")) {
        let Some(catalog) = parts.catalog.as_ref().map(|c| c.get()) else {
            return Err(not_found(uri, "the catalog did not load on this kubemedic"));
        };
        let Some(name) = uri.strip_prefix(&format!("{CATALOG}/")) else {
            let workflows: Vec<Value> = catalog
                .workflows()
                .iter()
                .map(|w| {
                    json!({"id": w.id, "version": w.version, "action_type": w.action_type,
                           "source": w.source, "uri": format!("{CATALOG}/{}", w.action_type)})
                })
                .collect();
            return Ok(contents(
                uri,
                &json!({"action_types": catalog.action_types(), "workflows": workflows}),
            ));
        };
        let Some(action) = catalog.action_type(name) else {
            return Err(not_found(
                uri,
                &format!("no action type `{name}` in the catalog"),
            ));
        };
        let workflows: Vec<_> = catalog
            .workflows()
            .iter()
            .filter(|w| w.action_type == name)
            .collect();
        return Ok(contents(
            uri,
            &json!({"action_type": action, "workflows": workflows}),
        ));
    }
    if let Some(name) = uri.strip_prefix(&format!("{PLAYBOOKS}/")) {
        let Some(books) = parts.playbooks.as_ref().map(|p| p.get()) else {
            return Err(not_found(
                uri,
                "the playbooks did not load on this kubemedic",
            ));
        };
        let Some(book) = books.all().iter().find(|b| b.spec.name == name) else {
            return Err(not_found(uri, &format!("no playbook `{name}`")));
        };
        return Ok(contents(uri, &json!(book.spec)));
    }
    if uri == POLICY {
        let Some(gate) = &parts.policy else {
            return Err(not_found(
                uri,
                "no approval policy is loaded on this kubemedic",
            ));
        };
        let snapshot = gate.snapshot();
        let overlay: Vec<String> = gate
            .overlay()
            .map(|o| o.files.into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default();
        let (modules, sources_revision, sources_error) = match gate.modules() {
            Ok(s) => {
                let modules: Vec<Value> = s
                    .files
                    .iter()
                    .map(|(name, text)| {
                        json!({"name": name, "from_object": overlay.contains(name), "source": text})
                    })
                    .collect();
                (modules, Some(s.revision), None)
            }
            Err(e) => (vec![], None, Some(e.to_string())),
        };
        let loaded = snapshot.revision().map(str::to_owned);
        return Ok(contents(
            uri,
            &json!({
                "revision": loaded,
                "origin": gate.origin(),
                "directory": snapshot.dir().display().to_string(),
                "state": match gate.problem() {
                    None => "deciding".to_owned(),
                    Some(p) => format!("degraded — every change needs approval: {p}"),
                },
                "modules": modules,
                "modules_revision": sources_revision,
                "modules_error": sources_error,
                "note": (sources_revision.is_some() && sources_revision != loaded).then_some(
                    "the sources differ from the loaded revision: they are picked up at the next reload"),
            }),
        ));
    }
    Err(not_found(uri, "no such resource"))
}
