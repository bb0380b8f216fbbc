//! The logs' settings (owner: `telemetry`).

use super::declare::{HelpDefault, enum_name, settings};
use super::{Result, invalid};
use crate::telemetry::LogFormat;

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
    }
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
