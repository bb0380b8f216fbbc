//! The investigation's read-only cluster tools as MCP tools: exactly the tools, names,
//! descriptions and JSON schemas the model is offered ([`crate::cluster::tools::specs`]), run
//! by the same [`ClusterTools`] on the same reader. So the same read policy refuses Secrets
//! and blocked namespaces, the same sanitiser redacts what looks like a credential, the same
//! caps cut the output — and the client gets the text the model would read, no more: not the
//! structured data behind it, not the uncut output a person is shown on the dashboard.
//!
//! A refusal or a failure is a tool result with `isError` and the hint the model gets ("…is
//! blocked by kubemedic's read policy"), as the model gets it, so an agent reasons about it
//! the same way.

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::Value;

use super::ClusterAccess;
use crate::cluster::tools::{ClusterTools, specs};

/// The cluster tools, as `tools/list` gives them.
pub fn tools() -> Vec<Tool> {
    specs()
        .into_iter()
        .map(|spec| {
            let schema = match spec.parameters {
                Value::Object(map) => map,
                // Every spec's parameters are an object schema (a unit test holds it).
                _ => serde_json::Map::new(),
            };
            Tool::new(spec.name, spec.description, schema).with_annotations(
                ToolAnnotations::new()
                    .read_only(true)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false),
            )
        })
        .collect()
}

/// Run tool `name` on the cluster, as the investigation does: a fresh resource-context cache,
/// the investigation's output limits and its per-call timeout.
pub async fn call(access: &ClusterAccess, name: &str, args: &Value) -> CallToolResult {
    let tools = ClusterTools::new(
        access.reader.clone(),
        access.clock.clone(),
        access.limits.clone(),
    );
    match tokio::time::timeout(access.timeout, tools.call(name, args)).await {
        Ok(r) if r.ok => CallToolResult::success(vec![ContentBlock::text(r.text)]),
        Ok(r) => CallToolResult::error(vec![ContentBlock::text(r.text)]),
        Err(_) => CallToolResult::error(vec![ContentBlock::text(format!(
            "Error (Timeout): {name} did not finish within {}s; try a narrower call.",
            access.timeout.as_secs()
        ))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cluster_tool_is_served_with_the_models_schema_and_description() {
        let served = tools();
        let offered = specs();
        assert_eq!(served.len(), offered.len());
        for (tool, spec) in served.iter().zip(&offered) {
            assert_eq!(tool.name, spec.name);
            assert_eq!(tool.description.as_deref(), Some(spec.description));
            assert_eq!(Value::Object((*tool.input_schema).clone()), spec.parameters);
            assert_eq!(
                tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                Some(true)
            );
        }
    }
}
