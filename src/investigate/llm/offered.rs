//! The tools of invocation 1 and 2 as the model is offered them, and how a turn's calls run:
//! the cluster's read-only tools, the allowlisted tools of the configured MCP servers (routed,
//! refused or withdrawn, and noted for the trail) and the remediation history.

use super::*;

/// The MCP servers' tools in one investigation: what was offered, the servers withdrawn since
/// (a call failed), and what to audit.
#[derive(Default)]
pub(super) struct RemoteUse {
    pub(super) offer: Offer,
    pub(super) withdrawn: BTreeSet<String>,
    pub(super) notes: Vec<RemoteToolNote>,
}

impl RemoteUse {
    pub(super) fn note(
        &mut self,
        kind: RemoteToolNoteKind,
        server: &str,
        tool: Option<&str>,
        message: &str,
    ) {
        self.notes.push(RemoteToolNote {
            kind,
            server: server.to_owned(),
            tool: tool.map(str::to_owned),
            message: crate::redact::sanitize_text(message),
        });
    }

    /// The remote tools still on offer, as the model sees them.
    pub(super) fn defs(&self) -> Vec<ToolDef> {
        self.offer
            .tools
            .iter()
            .filter(|t| !self.withdrawn.contains(&t.server))
            .map(|t| ToolDef {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            })
            .collect()
    }
}

pub(super) fn tool_defs_rca(remote: &RemoteUse) -> Vec<ToolDef> {
    let mut defs: Vec<ToolDef> = tools::specs()
        .into_iter()
        .map(|s| ToolDef {
            name: s.name.into(),
            description: s.description.into(),
            parameters: s.parameters,
        })
        .collect();
    defs.extend(remote.defs());
    defs.push(ToolDef {
        name: "submit_result".into(),
        description: "Finish the investigation with the root cause analysis.".into(),
        parameters: prompt::submit_result_schema(),
    });
    defs
}

pub(super) fn tool_defs_selection() -> Vec<ToolDef> {
    prompt::catalog_tool_schemas()
        .into_iter()
        .map(|(name, description, parameters)| ToolDef {
            name: name.into(),
            description: description.into(),
            parameters,
        })
        .collect()
}

pub(super) fn args_of(call: &ToolCall) -> Result<Value, String> {
    let trimmed = call.arguments.trim();
    if trimmed.is_empty() {
        return Ok(json!({}));
    }
    repair::extract_json(trimmed)
        .filter(Value::is_object)
        .ok_or_else(|| format!("the arguments of {} are not a JSON object", call.name))
}

impl LlmInvestigator {
    /// Where a call of an MCP server's tool goes: to the server (allowlisted, offered, the
    /// server still up), or refused with the reason the model reads. Refusals of policy (not
    /// allowlisted, no such server) are noted for the trail; nothing is sent for any refusal.
    pub(super) fn route_remote(
        &self,
        name: &str,
        remote: &mut RemoteUse,
    ) -> Result<(String, String), String> {
        let route = match &self.remote {
            Some(r) => r.route(name),
            None => Route::Refused {
                server: mcp_client::split(name)
                    .map(|(s, _)| s.to_owned())
                    .unwrap_or_default(),
                message: format!("Refused: `{name}`: no MCP server is configured."),
            },
        };
        match route {
            Route::Refused { server, message } => {
                warn!(tool = %name, %server, "refused a call of an MCP tool that is not allowlisted");
                remote.note(RemoteToolNoteKind::Refused, &server, Some(name), &message);
                Err(message)
            }
            Route::Call { server, .. } if remote.withdrawn.contains(&server) => Err(format!(
                "Error: the MCP server `{server}` failed earlier in this investigation; its tools are withdrawn. Use other evidence."
            )),
            Route::Call { server, .. } if remote.offer.tool(name).is_none() => Err(format!(
                "Error: `{name}` is not offered now (the MCP server `{server}` is unavailable or does not list it). Use other evidence."
            )),
            Route::Call { server, tool } => Ok((server, tool)),
        }
    }

    /// Run the tools of one turn concurrently, within the caps: the cluster's, and the MCP
    /// servers' allowlisted ones.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_tools(
        &self,
        tools: &ClusterTools,
        remote: &mut RemoteUse,
        calls: &[&ToolCall],
        per_tool: &mut HashMap<String, usize>,
        total: &mut usize,
        records: &mut Vec<ToolCallRecord>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, String)>, InvestigateError> {
        enum Plan<'a> {
            Run(&'a ToolCall, Value),
            Remote(&'a ToolCall, String, String, Value),
            Refuse(&'a ToolCall, String),
        }
        let mut plans = Vec::new();
        for call in calls {
            let target = if call.name.starts_with(mcp_client::PREFIX) {
                self.route_remote(&call.name, remote).map(Some)
            } else if ClusterTools::is_tool(&call.name) {
                Ok(None)
            } else {
                Err(format!("Error: unknown tool `{}`.", call.name))
            };
            let plan = if let Err(refusal) = target {
                Plan::Refuse(call, refusal)
            } else if *total >= self.settings.max_tool_calls {
                Plan::Refuse(
                    call,
                    format!(
                        "Error: the investigation's tool call limit ({}) is reached. Conclude now with submit_result.",
                        self.settings.max_tool_calls
                    ),
                )
            } else if per_tool.get(&call.name).copied().unwrap_or(0)
                >= self.settings.max_calls_per_tool
            {
                Plan::Refuse(
                    call,
                    format!(
                        "Error: the call limit for {} ({}) is reached; use other evidence.",
                        call.name, self.settings.max_calls_per_tool
                    ),
                )
            } else {
                match (args_of(call), target) {
                    (Ok(args), Ok(target)) => {
                        *total += 1;
                        *per_tool.entry(call.name.clone()).or_default() += 1;
                        match target {
                            Some((server, tool)) => Plan::Remote(call, server, tool, args),
                            None => Plan::Run(call, args),
                        }
                    }
                    (Err(e), _) => Plan::Refuse(call, format!("Error: {e}.")),
                    (_, Err(refusal)) => Plan::Refuse(call, refusal),
                }
            };
            plans.push(plan);
        }
        let timeout = self.settings.tool_timeout;
        let futures = plans.iter().map(|plan| async move {
            match plan {
                Plan::Refuse(call, text) => {
                    if call.name.starts_with(mcp_client::PREFIX) {
                        // A refused remote call is a span too: nothing was sent.
                        let span = mcp_client::call_span(&call.name);
                        mcp_client::end_call_span(&span, 0, Some("refused"));
                    }
                    Ran {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        args: Value::Null,
                        text: text.clone(),
                        whole: None,
                        ok: false,
                        truncated: false,
                        unreachable: None,
                        withdrawn: None,
                        duration_ms: None,
                    }
                }
                Plan::Remote(call, server, tool, args) => {
                    self.run_remote(call, server, tool, args, timeout).await
                }
                Plan::Run(call, args) => {
                    let started = std::time::Instant::now();
                    let result = tokio::time::timeout(timeout, tools.call(&call.name, args)).await;
                    let duration_ms = u64::try_from(started.elapsed().as_millis()).ok();
                    match result {
                        Ok(r) => {
                            let unreachable = r.data.pointer("/error/kind").and_then(Value::as_str) == Some("unreachable");
                            let mut text = r.text.clone();
                            let mut whole = r.whole.clone();
                            if r.ok && call.name.ends_with("_resource_context") {
                                let history = self.history_text(&r.data, now).await;
                                text.push_str(&history);
                                if let Some(w) = &mut whole {
                                    w.push_str(&history);
                                }
                            }
                            Ran {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                args: args.clone(),
                                text,
                                whole,
                                ok: r.ok,
                                truncated: r.truncated,
                                unreachable: unreachable.then(|| r.text.clone()),
                                withdrawn: None,
                                duration_ms,
                            }
                        }
                        Err(_) => Ran {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            args: args.clone(),
                            text: format!("Error (Timeout): {} did not finish within {}s; try a narrower call.", call.name, timeout.as_secs()),
                            whole: None,
                            ok: false,
                            truncated: false,
                            unreachable: None,
                            withdrawn: None,
                            duration_ms,
                        },
                    }
                }
            }
        });
        let results = futures::future::join_all(futures).await;
        let mut kept: usize = records
            .iter()
            .filter_map(|r| r.output.as_ref())
            .map(String::len)
            .sum();
        let mut out = Vec::new();
        for ran in results {
            if let Some(message) = ran.unreachable {
                return Err(InvestigateError::Unavailable {
                    dependency: "cluster".into(),
                    message,
                });
            }
            if let Some((server, why)) = &ran.withdrawn
                && remote.withdrawn.insert(server.clone())
            {
                remote.note(
                    RemoteToolNoteKind::Unavailable,
                    server,
                    Some(&ran.name),
                    &format!(
                        "the MCP server `{server}` failed during the investigation ({why}): its tools were withdrawn"
                    ),
                );
            }
            // The model reads `text` (cut at the tool limit); the trail keeps the whole
            // output for the chat's `tool_result`, within the investigation's allowance.
            let whole = ran.whole.as_deref().unwrap_or(&ran.text);
            let output = (kept + whole.len() <= TOOL_OUTPUTS_BYTES)
                .then(|| whole_output(&crate::redact::sanitize_text(whole)));
            kept += output.as_ref().map_or(0, String::len);
            records.push(ToolCallRecord {
                tool: ran.name,
                arguments: ran.args,
                ok: ran.ok,
                output_chars: ran.text.len(),
                truncated: ran.truncated,
                excerpt: Some(crate::redact::sanitize_text(&crate::domain::excerpt(
                    &ran.text,
                ))),
                output,
                duration_ms: ran.duration_ms,
            });
            out.push((ran.id, ran.text));
        }
        Ok(out)
    }

    /// One call of an MCP server's tool: its output sanitised and cut like every tool's; a
    /// failure or a timeout withdraws the server's tools.
    pub(super) async fn run_remote(
        &self,
        call: &ToolCall,
        server: &str,
        tool: &str,
        args: &Value,
        timeout: Duration,
    ) -> Ran {
        let started = std::time::Instant::now();
        let arguments = args.as_object().cloned().unwrap_or_default();
        let span = mcp_client::call_span(&call.name);
        let result = async {
            match &self.remote {
                Some(r) => r.call(server, tool, arguments, timeout).await,
                None => Err(mcp_client::CallError::Unavailable {
                    server: server.to_owned(),
                    message: "no MCP server is configured".into(),
                }),
            }
        }
        .instrument(span.clone())
        .await;
        match &result {
            Ok(a) if a.is_error => {
                mcp_client::end_call_span(&span, a.text.len(), Some("tool_error"))
            }
            Ok(a) => mcp_client::end_call_span(&span, a.text.len(), None),
            Err(mcp_client::CallError::Timeout { .. }) => {
                mcp_client::end_call_span(&span, 0, Some("timeout"))
            }
            Err(mcp_client::CallError::Unavailable { .. }) => {
                mcp_client::end_call_span(&span, 0, Some("unavailable"))
            }
        }
        let duration_ms = u64::try_from(started.elapsed().as_millis()).ok();
        let max = self.tool_limits.max_output_chars;
        let (r, withdrawn) = match result {
            Ok(answer) => {
                let text = if answer.is_error {
                    format!("Error from the MCP server `{server}`: {}", answer.text)
                } else {
                    answer.text
                };
                (
                    ToolResult::bounded(!answer.is_error, &text, &Value::Null, max),
                    None,
                )
            }
            Err(e) => {
                let why = e.to_string();
                (
                    ToolResult::bounded(
                        false,
                        &format!(
                            "Error: {why}. Its tools are withdrawn for the rest of this investigation; use other evidence."
                        ),
                        &Value::Null,
                        max,
                    ),
                    Some((e.server().to_owned(), why)),
                )
            }
        };
        Ran {
            id: call.id.clone(),
            name: call.name.clone(),
            args: args.clone(),
            text: r.text,
            whole: r.whole,
            ok: r.ok,
            truncated: r.truncated,
            unreachable: None,
            withdrawn,
            duration_ms,
        }
    }

    /// The history section appended to a resource-context tool result.
    pub(super) async fn history_text(
        &self,
        data: &Value,
        now: chrono::DateTime<chrono::Utc>,
    ) -> String {
        let Ok(ctx) =
            serde_json::from_value::<crate::cluster::context::ResourceContext>(data.clone())
        else {
            return String::new();
        };
        match gather::history(self.history.as_ref(), &ctx, now).await {
            Some(h) if !h.is_empty() => {
                let chain = serde_json::to_string(&h).unwrap_or_default();
                format!("Remediation history: {chain}\n{}", prompt_section(&h))
            }
            Some(_) => "Remediation history: none for this target.\n".into(),
            None => "Remediation history: unavailable.\n".into(),
        }
    }
}
