//! The read-only cluster tools of invocation 1, with the names and arguments of the LLM
//! contract: `kubectl_describe`, `kubectl_get`, `kubectl_get_yaml`, `kubectl_find_resource`,
//! `kubectl_events`, `kubectl_count`, `kubectl_logs`, `kubectl_previous_logs`,
//! `kubectl_top_pods`, `get_namespaced_resource_context`, `get_cluster_resource_context`.
//!
//! Every call returns a [`ToolResult`]: structured `data` (what tests and the offline
//! investigator read) and a compact `text` (what the LLM reads). Both are sanitised, and the text
//! is capped with a `[TRUNCATED]` marker. Errors are results too, with a hint — the model
//! reasons about a 403 instead of the loop crashing on it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use regex::RegexBuilder;
use serde::Serialize;
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::context::ContextResolver;
use super::obj::{self, at};
use super::render::{self, event_time, strip_noise};
use super::{ClusterError, ClusterReader, ErrorKind, ListQuery, LogQuery, ResourceInfo};
use crate::clock::Clock;
use crate::redact::{sanitize_text, sanitize_value};

/// Caps on what one tool call may return.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    /// Characters of text per result; more is cut and marked `[TRUNCATED]`.
    pub max_output_chars: usize,
    pub max_list_items: usize,
    pub max_events: usize,
    pub default_tail_lines: i64,
    pub max_tail_lines: i64,
}

impl ToolLimits {
    /// Characters of one tool result before it is cut, unless configured.
    pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 12_000;
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_output_chars: Self::DEFAULT_MAX_OUTPUT_CHARS,
            max_list_items: 50,
            max_events: 30,
            default_tail_lines: 80,
            max_tail_lines: 1000,
        }
    }
}

pub const TRUNCATED: &str = "[TRUNCATED]";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    pub ok: bool,
    /// What the model reads: sanitised, cut at `max_output_chars`.
    pub text: String,
    pub data: Value,
    pub truncated: bool,
    /// When `text` was cut: the text before the cut, sanitised, up to
    /// [`crate::domain::TOOL_OUTPUT_BYTES`] (what a person is shown; the model is not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whole: Option<String>,
}

impl ToolResult {
    /// A tool's output as every tool hands it on: `text` and `data` sanitised, the text cut at
    /// `max_output_chars` and marked [`TRUNCATED`] (the whole kept for a person). The cluster
    /// tools and the MCP servers' tools both end here.
    pub fn bounded(ok: bool, text: &str, data: &Value, max_output_chars: usize) -> Self {
        let text = sanitize_text(text);
        let data = sanitize_value(data);
        let max = max_output_chars;
        let (text, truncated, whole) = if text.len() > max {
            let cut = text.floor_char_boundary(max);
            (
                format!("{}\n{TRUNCATED}", &text[..cut]),
                true,
                Some(crate::domain::whole_output(&text)),
            )
        } else {
            (text, false, None)
        };
        ToolResult {
            ok,
            text,
            data,
            truncated,
            whole,
        }
    }

    /// The output as a person reads it: whole (up to 64 KiB), not cut for the model.
    pub fn whole_text(&self) -> &str {
        self.whole.as_deref().unwrap_or(&self.text)
    }
}

impl ToolResult {
    /// The array under `key` in its data (`items` of a listing, `events` of `kubectl_events`);
    /// empty when there is none.
    pub fn list(&self, key: &str) -> Vec<Value> {
        self.data
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }
}

/// A tool as offered to an LLM: name, description, JSON-Schema parameters.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

fn object_params(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The schemas of the cluster tools (invocation 1).
pub fn specs() -> Vec<ToolSpec> {
    let kind = json!({"type": "string", "description": "Kind, e.g. Pod, Deployment, Node"});
    let name = json!({"type": "string"});
    let namespace = json!({"type": "string"});
    let selector =
        json!({"type": "string", "description": "Label selector, e.g. app=web,tier!=db"});
    let pattern = json!({"type": "string", "description": "Case-insensitive regex on the name"});
    let logs = object_params(
        json!({"name": {"type": "string", "description": "Pod name"}, "namespace": namespace,
               "container": {"type": "string"}, "tail_lines": {"type": "integer", "minimum": 1, "maximum": 1000},
               "since_seconds": {"type": "integer", "minimum": 1}}),
        &["name", "namespace"],
    );
    vec![
        ToolSpec {
            name: "kubectl_describe",
            description: "Describe one object: status, containers (state, last state, exit codes, restarts, resources), conditions, and its events.",
            parameters: object_params(
                json!({"kind": kind, "name": name, "namespace": namespace}),
                &["kind", "name"],
            ),
        },
        ToolSpec {
            name: "kubectl_get",
            description: "List objects of a kind as a table (one object with `name`). Without a namespace, lists all namespaces.",
            parameters: object_params(
                json!({"kind": kind, "name": name, "namespace": namespace, "label_selector": selector}),
                &["kind"],
            ),
        },
        ToolSpec {
            name: "kubectl_get_yaml",
            description: "The full YAML of one object (managed fields removed, credentials redacted).",
            parameters: object_params(
                json!({"kind": kind, "name": name, "namespace": namespace}),
                &["kind", "name"],
            ),
        },
        ToolSpec {
            name: "kubectl_find_resource",
            description: "Find objects of a kind by label selector and/or name pattern.",
            parameters: object_params(
                json!({"kind": kind, "namespace": namespace, "label_selector": selector, "name_pattern": pattern}),
                &["kind"],
            ),
        },
        ToolSpec {
            name: "kubectl_events",
            description: "Events for an object (kind+name), a node, or a whole namespace; newest last, Warnings kept first when capped.",
            parameters: object_params(
                json!({"namespace": namespace, "kind": kind, "name": name, "node": {"type": "string"}}),
                &[],
            ),
        },
        ToolSpec {
            name: "kubectl_count",
            description: "Count objects of a kind matching a selector / name pattern (pods: by status).",
            parameters: object_params(
                json!({"kind": kind, "namespace": namespace, "label_selector": selector, "name_pattern": pattern}),
                &["kind"],
            ),
        },
        ToolSpec {
            name: "kubectl_logs",
            description: "Current logs of a pod's container (tail).",
            parameters: logs.clone(),
        },
        ToolSpec {
            name: "kubectl_previous_logs",
            description: "Logs of the previous (crashed) instance of a pod's container.",
            parameters: logs,
        },
        ToolSpec {
            name: "kubectl_top_pods",
            description: "CPU and memory usage of pods (metrics.k8s.io), next to their limits.",
            parameters: object_params(
                json!({"namespace": namespace, "label_selector": selector}),
                &["namespace"],
            ),
        },
        ToolSpec {
            name: "get_namespaced_resource_context",
            description: "For a namespaced object: owner chain to the root owner, the root's spec hash, detected infrastructure labels (GitOps, Helm, PDB, HPA, stateful, NetworkPolicy, mesh, quota) and remediation history. Call it once you know the affected resource.",
            parameters: object_params(
                json!({"kind": kind, "name": name, "namespace": namespace}),
                &["kind", "name", "namespace"],
            ),
        },
        ToolSpec {
            name: "get_cluster_resource_context",
            description: "Like get_namespaced_resource_context, for cluster-scoped objects (Node, PersistentVolume, ClusterRole…).",
            parameters: object_params(json!({"kind": kind, "name": name}), &["kind", "name"]),
        },
    ]
}

/// Tool arguments as the model sent them, read leniently (numbers may arrive as strings).
struct Args<'a>(&'a Value);

impl Args<'_> {
    fn str(&self, key: &str) -> Option<String> {
        self.0
            .get(key)
            .and_then(|v| match v {
                Value::String(s) => Some(s.trim().to_owned()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
    }
    fn required(&self, key: &str) -> Result<String, ClusterError> {
        self.str(key).ok_or_else(|| {
            ClusterError::new(ErrorKind::Invalid, format!("missing argument `{key}`"))
        })
    }
    fn int(&self, key: &str) -> Result<Option<i64>, ClusterError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| {
                ClusterError::new(ErrorKind::Invalid, format!("`{key}` must be an integer"))
            }),
            Some(_) => Err(ClusterError::new(
                ErrorKind::Invalid,
                format!("`{key}` must be an integer"),
            )),
        }
    }
}

pub struct ClusterTools {
    reader: Arc<dyn ClusterReader>,
    contexts: Arc<ContextResolver>,
    clock: Arc<dyn Clock>,
    limits: ToolLimits,
    /// Whether the structured data carries every item and whole objects
    /// ([`ClusterTools::for_decisions`]); the text is what a model reads either way.
    whole: bool,
}

impl ClusterTools {
    /// Tools for one investigation (the resource-context cache lives as long as this value).
    pub fn new(reader: Arc<dyn ClusterReader>, clock: Arc<dyn Clock>, limits: ToolLimits) -> Self {
        Self {
            contexts: Arc::new(ContextResolver::new(reader.clone())),
            reader,
            clock,
            limits,
            whole: false,
        }
    }

    /// The same tools for a caller that decides on what they return (the offline
    /// investigation): the data holds every item of a list and every event, and whole objects
    /// (their field managers and last-applied configuration, which say who wrote what), as the
    /// proofs read them. The caps and the trimming are for what a model is shown, which the text
    /// still is; deciding on a capped list would answer "how many nodes are not ready" or "was
    /// it scaled" differently from the proof of the same action.
    pub fn for_decisions(self) -> Self {
        Self {
            whole: true,
            ..self
        }
    }

    /// An object as the data carries it: whole for decisions, else as the text shows it.
    fn data_of(&self, o: &Value) -> Value {
        if self.whole {
            sanitize_value(o)
        } else {
            clean(o)
        }
    }

    pub fn contexts(&self) -> &Arc<ContextResolver> {
        &self.contexts
    }

    pub fn reader(&self) -> &Arc<dyn ClusterReader> {
        &self.reader
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// The same tools — reader, clock and resource-context cache — with other output limits:
    /// for a caller that reads a whole namespace and caps what it shows itself.
    pub fn with_limits(&self, limits: ToolLimits) -> Self {
        Self {
            reader: self.reader.clone(),
            contexts: self.contexts.clone(),
            clock: self.clock.clone(),
            limits,
            whole: self.whole,
        }
    }

    pub fn is_tool(name: &str) -> bool {
        specs().iter().any(|s| s.name == name)
    }

    /// Run a tool. Never panics; every failure is a result with `ok: false` and a hint.
    ///
    /// Each call is one span (`execute_tool <name>`, the GenAI conventions' tool span): the
    /// tool's name when it is one of ours, whether it worked and how much it returned — never
    /// its arguments or output, which are the model's and the cluster's text.
    pub async fn call(&self, name: &str, args: &Value) -> ToolResult {
        let known = specs().iter().find(|s| s.name == name).map(|s| s.name);
        let tool = known.unwrap_or("unknown");
        let span = tracing::info_span!(
            target: crate::telemetry::TRACE_TARGET,
            "execute_tool",
            otel.name = %format_args!("execute_tool {tool}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            kubemedic.tool.ok = tracing::field::Empty,
            kubemedic.tool.truncated = tracing::field::Empty,
            kubemedic.tool.output_chars = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = self
            .call_untraced(name, args)
            .instrument(span.clone())
            .await;
        span.record("kubemedic.tool.ok", result.ok);
        span.record("kubemedic.tool.truncated", result.truncated);
        span.record(
            "kubemedic.tool.output_chars",
            i64::try_from(result.text.len()).unwrap_or(i64::MAX),
        );
        if !result.ok {
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    async fn call_untraced(&self, name: &str, args: &Value) -> ToolResult {
        let now = self.clock.now();
        let outcome = match name {
            "kubectl_describe" => self.describe(&Args(args), now).await,
            "kubectl_get" => self.get(&Args(args), now).await,
            "kubectl_get_yaml" => self.get_yaml(&Args(args)).await,
            "kubectl_find_resource" => self.find(&Args(args), now, false).await,
            "kubectl_count" => self.find(&Args(args), now, true).await,
            "kubectl_events" => self.events(&Args(args), now).await,
            "kubectl_logs" => self.logs(&Args(args), false).await,
            "kubectl_previous_logs" => self.logs(&Args(args), true).await,
            "kubectl_top_pods" => self.top_pods(&Args(args)).await,
            "get_namespaced_resource_context" => self.context(&Args(args), true).await,
            "get_cluster_resource_context" => self.context(&Args(args), false).await,
            other => Err(ClusterError::new(
                ErrorKind::Invalid,
                format!("unknown tool `{other}`"),
            )),
        };
        match outcome {
            Ok((text, data)) => self.finish(true, &text, &data),
            Err(e) => self.finish(false, &e.tool_text(), &json!({"error": e})),
        }
    }

    fn finish(&self, ok: bool, text: &str, data: &Value) -> ToolResult {
        ToolResult::bounded(ok, text, data, self.limits.max_output_chars)
    }

    async fn scoped(
        &self,
        kind: &str,
        namespace: Option<String>,
    ) -> Result<(ResourceInfo, Option<String>), ClusterError> {
        let res = self.reader.resource(kind).await?;
        let ns = if res.namespaced { namespace } else { None };
        Ok((res, ns))
    }

    async fn object(&self, a: &Args<'_>) -> Result<(ResourceInfo, Value), ClusterError> {
        let (res, ns) = self
            .scoped(&a.required("kind")?, a.str("namespace"))
            .await?;
        if res.namespaced && ns.is_none() {
            return Err(ClusterError::new(
                ErrorKind::Invalid,
                format!("{} is namespaced: pass `namespace`", res.kind),
            ));
        }
        let name = a.required("name")?;
        let o = self.reader.get(&res, ns.as_deref(), &name).await?;
        Ok((res, o))
    }

    async fn events_for(&self, o: &Value) -> Vec<Value> {
        let Ok(res) = self.reader.resource("Event").await else {
            return vec![];
        };
        let selector = format!(
            "involvedObject.name={},involvedObject.kind={}",
            obj::name(o),
            obj::kind(o)
        );
        let ns = obj::namespace(o).or(Some("default"));
        let mut events = self
            .reader
            .list(&res, ns, &ListQuery::fields(selector))
            .await
            .unwrap_or_default();
        sort_events(&mut events);
        cap_events(events, self.limits.max_events)
            .iter()
            .map(clean)
            .collect()
    }

    async fn describe(
        &self,
        a: &Args<'_>,
        now: DateTime<Utc>,
    ) -> Result<(String, Value), ClusterError> {
        let (_, raw) = self.object(a).await?;
        // Clean before anything renders it.
        let o = clean(&raw);
        let events = self.events_for(&o).await;
        let text = render::describe(&o, &events, now);
        Ok((
            text,
            json!({"object": self.data_of(&raw), "events": events}),
        ))
    }

    async fn get(&self, a: &Args<'_>, now: DateTime<Utc>) -> Result<(String, Value), ClusterError> {
        if a.str("name").is_some() {
            let (res, raw) = self.object(a).await?;
            let text = render::table(&res.kind, &[clean(&raw)], now, false);
            return Ok((text, json!({"items": [self.data_of(&raw)]})));
        }
        self.find(a, now, false).await
    }

    async fn get_yaml(&self, a: &Args<'_>) -> Result<(String, Value), ClusterError> {
        let (_, raw) = self.object(a).await?;
        Ok((render::to_yaml(&clean(&raw)), self.data_of(&raw)))
    }

    async fn find(
        &self,
        a: &Args<'_>,
        now: DateTime<Utc>,
        count_only: bool,
    ) -> Result<(String, Value), ClusterError> {
        let (res, ns) = self
            .scoped(&a.required("kind")?, a.str("namespace"))
            .await?;
        let query = ListQuery {
            label_selector: a.str("label_selector"),
            field_selector: None,
        };
        let mut items: Vec<Value> = self.reader.list(&res, ns.as_deref(), &query).await?;
        if let Some(pattern) = a.str("name_pattern") {
            let re = RegexBuilder::new(&pattern)
                .case_insensitive(true)
                .build()
                .unwrap_or_else(|_| {
                    #[allow(clippy::expect_used)]
                    RegexBuilder::new(&regex::escape(&pattern))
                        .case_insensitive(true)
                        .build()
                        .expect("an escaped pattern is a valid regex")
                });
            items.retain(|o| re.is_match(obj::name(o)));
        }
        items.sort_by(|x, y| {
            (obj::namespace(x), obj::name(x)).cmp(&(obj::namespace(y), obj::name(y)))
        });
        if res.kind == "Node" {
            // Nodes that need attention first, so a capped list of a large cluster still
            // shows the NotReady, cordoned and tainted ones.
            items.sort_by_key(node_attention);
        }
        let total = items.len();
        let where_ = ns
            .as_deref()
            .map_or("all namespaces".to_owned(), |n| format!("namespace {n}"));
        if count_only {
            let mut by_status = std::collections::BTreeMap::<String, usize>::new();
            if res.kind == "Pod" {
                for p in &items {
                    *by_status.entry(render::pod_status(p)).or_default() += 1;
                }
            }
            let mut text = format!("{total} {} in {where_}", res.plural);
            if !by_status.is_empty() {
                let parts: Vec<String> =
                    by_status.iter().map(|(s, n)| format!("{s}: {n}")).collect();
                text.push_str(&format!(" ({})", parts.join(", ")));
            }
            return Ok((text, json!({"count": total, "by_status": by_status})));
        }
        if items.is_empty() {
            return Ok((
                format!("No {} found in {where_}.", res.plural),
                json!({"items": [], "total": 0}),
            ));
        }
        let shown: Vec<&Value> = items.iter().take(self.limits.max_list_items).collect();
        let rows: Vec<Value> = shown.iter().map(|o| clean(o)).collect();
        let mut text = render::table(&res.kind, &rows, now, ns.is_none() && res.namespaced);
        if total > shown.len() {
            text.push_str(&format!("\n(showing {} of {total}; narrow with a namespace, label_selector or name_pattern)", shown.len()));
        }
        let data: Vec<Value> = if self.whole {
            items.iter().map(|o| self.data_of(o)).collect()
        } else {
            rows
        };
        Ok((text, json!({"items": data, "total": total})))
    }

    async fn events(
        &self,
        a: &Args<'_>,
        now: DateTime<Utc>,
    ) -> Result<(String, Value), ClusterError> {
        let res = self.reader.resource("Event").await?;
        let (ns, selector) = if let Some(node) = a.str("node") {
            (
                None,
                Some(format!(
                    "involvedObject.kind=Node,involvedObject.name={node}"
                )),
            )
        } else if let Some(name) = a.str("name") {
            let mut sel = format!("involvedObject.name={name}");
            if let Some(kind) = a.str("kind") {
                let kind = self
                    .reader
                    .resource(&kind)
                    .await
                    .map(|r| r.kind)
                    .unwrap_or(kind);
                sel.push_str(&format!(",involvedObject.kind={kind}"));
            }
            (a.str("namespace"), Some(sel))
        } else {
            (a.str("namespace"), None)
        };
        let query = ListQuery {
            label_selector: None,
            field_selector: selector,
        };
        let mut events = self.reader.list(&res, ns.as_deref(), &query).await?;
        sort_events(&mut events);
        let total = events.len();
        let every: Vec<Value> = if self.whole {
            events.iter().map(|e| self.data_of(e)).collect()
        } else {
            vec![]
        };
        let events: Vec<Value> = cap_events(events, self.limits.max_events)
            .iter()
            .map(clean)
            .collect();
        if events.is_empty() {
            return Ok(("No events found.".into(), json!({"events": [], "total": 0})));
        }
        let mut text = format!(
            "Events (newest last):\n{}",
            render::events_lines(&events, now, true)
        );
        if total > events.len() {
            text.push_str(&format!(
                "({} of {total} shown; Warnings kept first)\n",
                events.len()
            ));
        }
        let data = if self.whole { every } else { events };
        Ok((text, json!({"events": data, "total": total})))
    }

    async fn logs(&self, a: &Args<'_>, previous: bool) -> Result<(String, Value), ClusterError> {
        let pod = a.required("name")?;
        let ns = a.required("namespace")?;
        let tail = a
            .int("tail_lines")?
            .unwrap_or(self.limits.default_tail_lines)
            .clamp(1, self.limits.max_tail_lines);
        let query = LogQuery {
            container: a.str("container"),
            previous,
            tail_lines: Some(tail),
            since_seconds: a.int("since_seconds")?.filter(|s| *s > 0),
        };
        let text = self.reader.logs(&ns, &pod, &query).await?;
        let lines = text.lines().count();
        let shown = if text.trim().is_empty() {
            format!("(no {}log lines)", if previous { "previous " } else { "" })
        } else {
            text.clone()
        };
        Ok((
            shown,
            json!({"lines": lines, "text": text, "previous": previous, "container": query.container}),
        ))
    }

    async fn top_pods(&self, a: &Args<'_>) -> Result<(String, Value), ClusterError> {
        let ns = a.required("namespace")?;
        let metrics = match self.reader.resource("PodMetrics").await {
            Ok(r) => r,
            Err(e) if matches!(e.kind, ErrorKind::NotServed | ErrorKind::NotFound) => {
                return Ok((
                    "metrics API not available: metrics.k8s.io is not served by this cluster (no metrics-server); use container states, restarts and events instead.".into(),
                    json!({"available": false}),
                ));
            }
            Err(e) => return Err(e),
        };
        let query = ListQuery {
            label_selector: a.str("label_selector"),
            field_selector: None,
        };
        let items = match self.reader.list(&metrics, Some(&ns), &query).await {
            Ok(i) => i,
            Err(e) if matches!(e.kind, ErrorKind::NotServed | ErrorKind::NotFound) => {
                return Ok((
                    "metrics API not available.".into(),
                    json!({"available": false}),
                ));
            }
            Err(e) => return Err(e),
        };
        let mut rows = Vec::new();
        let mut text = String::from("NAME   CPU   MEMORY   (per container)\n");
        for m in items.iter().map(super::observed::PodMetrics::parse) {
            let parts: Vec<String> = m
                .containers
                .iter()
                .map(|c| {
                    format!(
                        "{} cpu={} memory={}",
                        c.name.as_deref().unwrap_or("?"),
                        c.cpu.as_deref().unwrap_or("?"),
                        c.memory.as_deref().unwrap_or("?")
                    )
                })
                .collect();
            text.push_str(&format!("{}   {}\n", m.name, parts.join("; ")));
            rows.push(m);
        }
        if items.is_empty() {
            text = format!("No pod metrics in namespace {ns}.");
        }
        Ok((text, json!({"available": true, "pods": rows})))
    }

    async fn context(
        &self,
        a: &Args<'_>,
        namespaced: bool,
    ) -> Result<(String, Value), ClusterError> {
        let kind = a.required("kind")?;
        let name = a.required("name")?;
        let ns = if namespaced {
            Some(a.required("namespace")?)
        } else {
            None
        };
        let ctx = self.contexts.resolve(&kind, &name, ns.as_deref()).await?;
        let data = serde_json::to_value(ctx.as_ref())
            .map_err(|e| ClusterError::new(ErrorKind::Other, e.to_string()))?;
        let chain: Vec<String> = ctx
            .owner_chain
            .iter()
            .map(|l| format!("{}/{}", l.kind, l.name))
            .collect();
        let mut text = format!(
            "Root owner: {} (apiVersion {})\nOwner chain: {}\nSpec hash: {}\nDetected: {}\n",
            ctx.root_owner,
            ctx.root_api_version,
            chain.join(" -> "),
            ctx.spec_hash.as_deref().unwrap_or("(no spec)"),
            ctx.detected_labels.describe()
        );
        if !ctx.detected_labels.quota_details.is_empty() {
            let q: Vec<String> = ctx
                .detected_labels
                .quota_details
                .iter()
                .map(|(r, u)| format!("{r}: used {} of {}", u.used, u.hard))
                .collect();
            text.push_str(&format!("Quota: {}\n", q.join(", ")));
        }
        if !ctx.detected_labels.failed_detections.is_empty() {
            text.push_str(&format!(
                "Failed detections (unknown, not false): {}\n",
                ctx.detected_labels.failed_detections.join(", ")
            ));
        }
        for w in &ctx.warnings {
            text.push_str(&format!("Warning: {w}\n"));
        }
        Ok((text, data))
    }
}

/// 0 NotReady, 1 cordoned, 2 tainted, 3 the rest (a stable sort keeps names in order).
fn node_attention(n: &Value) -> u8 {
    let ready = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    if !ready {
        0
    } else if n["spec"]["unschedulable"] == true {
        1
    } else if n["spec"]["taints"]
        .as_array()
        .is_some_and(|t| !t.is_empty())
    {
        2
    } else {
        3
    }
}

/// Strip noise and sanitise an object before anything renders it.
fn clean(o: &Value) -> Value {
    sanitize_value(&strip_noise(o))
}

/// Oldest first, so the newest is last.
pub fn sort_events(events: &mut [Value]) {
    events.sort_by(|a, b| event_time(a).cmp(&event_time(b)));
}

/// Keep at most `max` events: the newest Warnings first, then the newest others; result is
/// still oldest first.
pub fn cap_events(events: Vec<Value>, max: usize) -> Vec<Value> {
    if events.len() <= max {
        return events;
    }
    let is_warning = |e: &Value| at(e, &["type"]).and_then(Value::as_str) == Some("Warning");
    let mut keep: Vec<usize> = (0..events.len())
        .rev()
        .filter(|i| is_warning(&events[*i]))
        .take(max)
        .collect();
    let room = max - keep.len();
    keep.extend(
        (0..events.len())
            .rev()
            .filter(|i| !is_warning(&events[*i]))
            .take(room),
    );
    keep.sort_unstable();
    keep.into_iter()
        .filter_map(|i| events.get(i).cloned())
        .collect()
}

#[cfg(test)]
mod tests;
