//! The investigation's settings (owner: `investigate`, with `llm`): which investigator runs,
//! the model it asks, the catalog and playbooks it reads, and the caps on what it may spend.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::declare::{HelpDefault, enum_name, settings};
use super::{Result, invalid, non_empty};
use crate::investigate::{InvestigateSettings, LlmInvestigatorSettings};
use crate::llm::{OpenAiSettings, Provider};
use crate::secret::{Secret, redact_url};

/// Which investigator runs invocation 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LlmMode {
    /// The deterministic offline investigator: no model, no network.
    Offline,
    /// OpenAI, or any OpenAI-compatible server given with --llm-base-url (Ollama, vLLM, llama.cpp).
    Openai,
    /// Azure OpenAI (--llm-base-url is the resource endpoint).
    Azure,
}

/// The investigator unless configured.
pub const DEFAULT_LLM: LlmMode = LlmMode::Offline;
/// The Azure OpenAI API version unless configured.
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";
/// Seconds one model request may take unless configured.
pub const DEFAULT_LLM_TIMEOUT_SECONDS: u64 = 120;
/// Retries of a model request unless configured.
pub const DEFAULT_LLM_MAX_RETRIES: u32 = 4;
/// Tokens one investigation may spend unless configured.
pub const DEFAULT_TOKEN_BUDGET: u64 = 60_000;
/// Tokens all investigations may spend per UTC day unless configured.
pub const DEFAULT_DAILY_TOKEN_BUDGET: u64 = 2_000_000;
/// The first retry's delay (doubled each attempt); not configurable.
const LLM_BACKOFF: Duration = Duration::from_millis(500);

settings! {
    /// How investigations run: the model (or none), the catalog and playbooks, the caps.
    pub struct InvestigateArgs {
        /// Investigator: offline (no LLM), openai or azure.
        #[arg(long, env = "KUBEMEDIC_LLM", value_enum, help_default = enum_name(&DEFAULT_LLM))]
        pub llm: Option<LlmMode>,
        /// Base URL of the model API (OpenAI-compatible server, or the Azure resource endpoint).
        #[arg(long, env = "KUBEMEDIC_LLM_BASE_URL", value_name = "URL")]
        pub llm_base_url: Option<String>,
        /// API key of the model provider.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_API_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub llm_api_key: Option<Secret>,
        /// Model for invocation 1 (and 2, unless --llm-selection-model is given).
        #[arg(long, env = "KUBEMEDIC_LLM_MODEL", value_name = "MODEL")]
        pub llm_model: Option<String>,
        /// Model for invocation 2 (workflow selection) [default: --llm-model].
        #[arg(long, env = "KUBEMEDIC_LLM_SELECTION_MODEL", value_name = "MODEL")]
        pub llm_selection_model: Option<String>,
        /// Azure deployment name [default: --llm-model].
        #[arg(long, env = "KUBEMEDIC_LLM_AZURE_DEPLOYMENT", value_name = "NAME")]
        pub llm_azure_deployment: Option<String>,
        /// Azure API version.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_AZURE_API_VERSION",
            value_name = "VERSION",
            help_default = DEFAULT_AZURE_API_VERSION
        )]
        pub llm_azure_api_version: Option<String>,
        /// Seconds one model request may take.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = DEFAULT_LLM_TIMEOUT_SECONDS
        )]
        pub llm_timeout_seconds: Option<u64>,
        /// Retries on 429/5xx/network errors, with exponential backoff.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_MAX_RETRIES",
            value_name = "N",
            help_default = DEFAULT_LLM_MAX_RETRIES
        )]
        pub llm_max_retries: Option<u32>,
        /// Ask the model for whole answers instead of streamed ones. Streaming (the default)
        /// shows the model's text in the chat as it arrives; a server that ignores it is read
        /// whole either way.
        #[arg(long, env = "KUBEMEDIC_LLM_NO_STREAM")]
        pub llm_no_stream: bool,
        /// Tokens one investigation (both invocations) may spend.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_TOKEN_BUDGET",
            value_name = "TOKENS",
            help_default = DEFAULT_TOKEN_BUDGET
        )]
        pub llm_token_budget: Option<u64>,
        /// Tokens all investigations may spend per UTC day.
        #[arg(
            long,
            env = "KUBEMEDIC_LLM_DAILY_TOKEN_BUDGET",
            value_name = "TOKENS",
            help_default = DEFAULT_DAILY_TOKEN_BUDGET
        )]
        pub llm_daily_token_budget: Option<u64>,
        /// Workflow catalog directory [default: the catalog built into the binary].
        #[arg(long, env = "KUBEMEDIC_CATALOG_DIR", value_name = "DIR")]
        pub catalog_dir: Option<PathBuf>,
        /// Playbook directory [default: the playbooks built into the binary].
        #[arg(long, env = "KUBEMEDIC_PLAYBOOKS_DIR", value_name = "DIR")]
        pub playbooks_dir: Option<PathBuf>,
        /// Model turns of invocation 1.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_TURNS",
            value_name = "N",
            help_default = LlmInvestigatorSettings::DEFAULT_MAX_TURNS
        )]
        pub max_turns: Option<usize>,
        /// Tool calls per investigation.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_TOOL_CALLS",
            value_name = "N",
            help_default = LlmInvestigatorSettings::DEFAULT_MAX_TOOL_CALLS
        )]
        pub max_tool_calls: Option<usize>,
        /// Calls of one tool per investigation.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_CALLS_PER_TOOL",
            value_name = "N",
            help_default = LlmInvestigatorSettings::DEFAULT_MAX_CALLS_PER_TOOL
        )]
        pub max_calls_per_tool: Option<usize>,
        /// Seconds one tool call may take.
        #[arg(
            long,
            env = "KUBEMEDIC_TOOL_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = LlmInvestigatorSettings::DEFAULT_TOOL_TIMEOUT_SECONDS
        )]
        pub tool_timeout_seconds: Option<u64>,
    }
}

/// A count or a duration that must be at least 1.
fn positive(value: Option<u64>, default: u64, key: &str) -> Result<u64> {
    match value.unwrap_or(default) {
        0 => Err(invalid(key, "must be greater than 0".into())),
        v => Ok(v),
    }
}

impl InvestigateArgs {
    /// The investigation settings, checked (also for commands without a daemon config file).
    pub fn settings(&self) -> Result<InvestigateSettings> {
        let a = self.clone();
        let mode = a.llm.unwrap_or(DEFAULT_LLM);
        let base_url = a.llm_base_url.filter(|u| !u.trim().is_empty());
        let api_key = non_empty(a.llm_api_key);
        let model = a.llm_model.filter(|m| !m.trim().is_empty());
        let selection_model = a.llm_selection_model.filter(|m| !m.trim().is_empty());
        let timeout = positive(
            a.llm_timeout_seconds,
            DEFAULT_LLM_TIMEOUT_SECONDS,
            "llm-timeout-seconds",
        )?;
        let token_budget = positive(a.llm_token_budget, DEFAULT_TOKEN_BUDGET, "llm-token-budget")?;
        let daily_token_budget = positive(
            a.llm_daily_token_budget,
            DEFAULT_DAILY_TOKEN_BUDGET,
            "llm-daily-token-budget",
        )?;
        let tool_timeout = positive(
            a.tool_timeout_seconds,
            LlmInvestigatorSettings::DEFAULT_TOOL_TIMEOUT_SECONDS,
            "tool-timeout-seconds",
        )?;
        let count = |v: Option<usize>, default: usize, key: &str| -> Result<usize> {
            Ok(positive(v.map(|v| v as u64), default as u64, key)? as usize)
        };
        let max_turns = count(
            a.max_turns,
            LlmInvestigatorSettings::DEFAULT_MAX_TURNS,
            "max-turns",
        )?;
        let max_tool_calls = count(
            a.max_tool_calls,
            LlmInvestigatorSettings::DEFAULT_MAX_TOOL_CALLS,
            "max-tool-calls",
        )?;
        let max_calls_per_tool = count(
            a.max_calls_per_tool,
            LlmInvestigatorSettings::DEFAULT_MAX_CALLS_PER_TOOL,
            "max-calls-per-tool",
        )?;
        let openai = match mode {
            LlmMode::Offline => None,
            LlmMode::Openai | LlmMode::Azure => {
                let Some(model) = model.clone() else {
                    return Err(invalid(
                        "llm-model",
                        format!("required with --llm {}", enum_name(&mode)),
                    ));
                };
                if mode == LlmMode::Azure && base_url.is_none() {
                    return Err(invalid(
                        "llm-base-url",
                        "Azure OpenAI needs the resource endpoint, e.g. \
                         https://NAME.openai.azure.com"
                            .into(),
                    ));
                }
                if base_url.is_none() && api_key.is_none() {
                    return Err(invalid(
                        "llm-api-key",
                        "required for api.openai.com (or give --llm-base-url for a compatible \
                         server)"
                            .into(),
                    ));
                }
                if let Some(u) = &base_url
                    && !(u.starts_with("http://") || u.starts_with("https://"))
                {
                    return Err(invalid(
                        "llm-base-url",
                        format!("`{}` is not an http(s) URL", redact_url(u)),
                    ));
                }
                Some(OpenAiSettings {
                    provider: if mode == LlmMode::Azure {
                        Provider::Azure
                    } else {
                        Provider::OpenAi
                    },
                    base_url: base_url.clone(),
                    api_key: api_key.clone(),
                    azure_deployment: a.llm_azure_deployment.or(Some(model)),
                    azure_api_version: a
                        .llm_azure_api_version
                        .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.into()),
                    timeout: Duration::from_secs(timeout),
                    max_retries: a.llm_max_retries.unwrap_or(DEFAULT_LLM_MAX_RETRIES),
                    backoff: LLM_BACKOFF,
                    stream: !a.llm_no_stream,
                })
            }
        };
        let rca_model = model.unwrap_or_else(|| "offline".into());
        Ok(InvestigateSettings {
            openai,
            llm: LlmInvestigatorSettings {
                selection_model: selection_model.unwrap_or_else(|| rca_model.clone()),
                rca_model,
                max_turns,
                max_tool_calls,
                max_calls_per_tool,
                tool_timeout: Duration::from_secs(tool_timeout),
                ..Default::default()
            },
            token_budget,
            daily_token_budget,
            catalog_dir: a.catalog_dir,
            playbooks_dir: a.playbooks_dir,
        })
    }
}
