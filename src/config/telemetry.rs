//! The logs' and traces' settings (owner: `telemetry`).

use super::declare::{HelpDefault, enum_name, settings};
use super::{Result, invalid};
use crate::telemetry::{LogFormat, TraceSettings};

/// The service name traces carry unless configured (`--otlp-service-name`, `OTEL_SERVICE_NAME`).
pub const DEFAULT_SERVICE_NAME: &str = "kubemedic";

/// The log format unless configured.
pub const DEFAULT_LOG_FORMAT: LogFormat = LogFormat::Auto;
/// The log filter unless configured.
pub const DEFAULT_LOG_LEVEL: &str = "info";

settings! {
    /// How the daemon logs.
    pub struct TelemetryArgs {
        /// Log format: auto (text on a terminal, JSON otherwise), json or text.
        #[arg(
            long,
            env = "KUBEMEDIC_LOG_FORMAT",
            value_enum,
            help_default = enum_name(&DEFAULT_LOG_FORMAT)
        )]
        pub log_format: Option<LogFormat>,

        /// Log filter in `tracing` syntax, e.g. `info,kubemedic=debug`.
        #[arg(
            long,
            env = "KUBEMEDIC_LOG_LEVEL",
            value_name = "FILTER",
            help_default = DEFAULT_LOG_LEVEL
        )]
        pub log_level: Option<String>,

        /// Send traces (OTLP over HTTP, protobuf) to this collector: its base URL, to which
        /// `/v1/traces` is added, e.g. `http://otel-collector:4318`. Unset, the standard
        /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as given) or `OTEL_EXPORTER_OTLP_ENDPOINT`
        /// (`/v1/traces` added) count, in that order; with none of them, tracing is off.
        #[arg(long, env = "KUBEMEDIC_OTLP_ENDPOINT", value_name = "URL")]
        pub otlp_endpoint: Option<String>,

        /// The `service.name` of the traces; unset, `OTEL_SERVICE_NAME` counts.
        #[arg(
            long,
            env = "KUBEMEDIC_OTLP_SERVICE_NAME",
            value_name = "NAME",
            help_default = DEFAULT_SERVICE_NAME
        )]
        pub otlp_service_name: Option<String>,

        /// Record the prompts sent to the model and its answers as span events, after the
        /// sanitiser that protects the model and the logs. Off by default: spans then carry the
        /// model, the token counts and the finish reason, never text.
        #[arg(long, env = "KUBEMEDIC_OTLP_RECORD_PROMPTS")]
        pub otlp_record_prompts: bool,
    }
}

/// The standard variables (OpenTelemetry's environment variable specification).
const OTEL_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const OTEL_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";

impl TelemetryArgs {
    /// Where traces go, if anywhere: `--otlp-endpoint`, else the standard variables (read from
    /// `env`, the process environment in the daemon).
    pub fn traces(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<TraceSettings>> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let (setting, endpoint) = match (&self.otlp_endpoint, env(OTEL_TRACES_ENDPOINT)) {
            (Some(base), _) => ("otlp-endpoint", signal_url(base)),
            (None, Some(full)) => (OTEL_TRACES_ENDPOINT, full),
            (None, None) => match env(OTEL_ENDPOINT) {
                Some(base) => (OTEL_ENDPOINT, signal_url(&base)),
                None => return Ok(None),
            },
        };
        // Every source is checked as the setting, the message naming a standard variable.
        let from = if setting == "otlp-endpoint" {
            String::new()
        } else {
            format!("{setting}: ")
        };
        let url = url::Url::parse(endpoint.trim()).map_err(|e| {
            invalid(
                "otlp-endpoint",
                format!("{from}`{endpoint}` is not a URL: {e}"),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid(
                "otlp-endpoint",
                format!("{from}`{endpoint}` is not an http:// or https:// URL with a host"),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "otlp-endpoint",
                format!("{from}the URL must not carry credentials (they would be shown in logs)"),
            ));
        }
        let service_name = self
            .otlp_service_name
            .clone()
            .or_else(|| env(OTEL_SERVICE_NAME))
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
        Ok(Some(TraceSettings {
            endpoint: url,
            service_name,
            record_prompts: self.otlp_record_prompts,
        }))
    }
}

/// A base URL with OTLP's path for traces added (`http://c:4318` → `http://c:4318/v1/traces`).
fn signal_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim().trim_end_matches('/'))
}

impl TelemetryArgs {
    /// The log format and filter, the filter checked.
    pub fn settings(self) -> Result<(LogFormat, String)> {
        let log_format = self.log_format.unwrap_or(DEFAULT_LOG_FORMAT);
        let log_level = self
            .log_level
            .unwrap_or_else(|| DEFAULT_LOG_LEVEL.to_owned());
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
            return Err(invalid(
                "log-level",
                format!("`{log_level}` is not a valid filter: {e}"),
            ));
        }
        Ok((log_format, log_level))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn ours_wins_then_the_signal_variable_then_the_base_one() {
        let all = [
            (OTEL_TRACES_ENDPOINT, "http://signal:4318/custom/traces"),
            (OTEL_ENDPOINT, "http://base:4318/"),
            (OTEL_SERVICE_NAME, "checkout-medic"),
        ];
        let ours = TelemetryArgs {
            otlp_endpoint: Some("http://ours:4318/".into()),
            ..Default::default()
        };
        let t = ours.traces(env(&all)).unwrap().unwrap();
        assert_eq!(t.endpoint.as_str(), "http://ours:4318/v1/traces");
        assert_eq!(t.service_name, "checkout-medic");
        assert!(!t.record_prompts);
        let unset = TelemetryArgs::default();
        let t = unset.traces(env(&all)).unwrap().unwrap();
        assert_eq!(t.endpoint.as_str(), "http://signal:4318/custom/traces");
        let t = unset.traces(env(&all[1..])).unwrap().unwrap();
        assert_eq!(t.endpoint.as_str(), "http://base:4318/v1/traces");
        assert_eq!(
            unset
                .traces(env(&all[2..]))
                .unwrap()
                .map(|t| t.service_name),
            None,
            "no endpoint: tracing is off"
        );
        let t = TelemetryArgs {
            otlp_endpoint: Some("http://ours:4318".into()),
            otlp_service_name: Some("mine".into()),
            ..Default::default()
        }
        .traces(env(&[]))
        .unwrap()
        .unwrap();
        assert_eq!(t.service_name, "mine");
    }

    #[test]
    fn a_bad_endpoint_is_refused_naming_where_it_came_from() {
        for (args, vars, named) in [
            (Some("collector:4318"), vec![], "otlp-endpoint"),
            (Some("http://u:p@collector:4318"), vec![], "otlp-endpoint"),
            (None, vec![(OTEL_ENDPOINT, "ftp://x")], OTEL_ENDPOINT),
        ] {
            let e = TelemetryArgs {
                otlp_endpoint: args.map(str::to_owned),
                ..Default::default()
            }
            .traces(env(&vars))
            .unwrap_err();
            assert!(e.to_string().contains(named), "{e}");
        }
    }
}
