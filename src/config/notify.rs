//! The approval channels' settings (owner: `notify`): the mail server and sender, and Slack.
//! Who may approve, and the links they use, are the approval's ([`super::approval`]).

use std::path::PathBuf;
use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{ConfigError, Result, invalid, non_empty};
use crate::notify::SettingsError;
use crate::notify::email::EmailSettings;
use crate::notify::slack::{DEFAULT_API_URL, SlackSettings};
use crate::secret::Secret;

/// Seconds one SMTP command (and the connection) may take; not configurable.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);

settings! {
    /// Approval mail.
    pub struct MailArgs {
        /// SMTP server: `smtp://HOST[:PORT]` (plain), `smtp+starttls://HOST[:PORT]` (STARTTLS)
        /// or `smtps://HOST[:PORT]` (implicit TLS).
        #[arg(long, env = "KUBEMEDIC_SMTP_URL", value_name = "URL")]
        pub smtp_url: Option<String>,

        /// SMTP user name (authentication is used only when set).
        #[arg(long, env = "KUBEMEDIC_SMTP_USERNAME", value_name = "USER")]
        pub smtp_username: Option<String>,

        /// SMTP password.
        #[arg(
            long,
            env = "KUBEMEDIC_SMTP_PASSWORD",
            value_name = "PASSWORD",
            hide_env_values = true
        )]
        pub smtp_password: Option<Secret>,

        /// A PEM file of extra CA certificates to trust for the SMTP server's TLS (a private
        /// relay); the Mozilla roots are always trusted.
        #[arg(long, env = "KUBEMEDIC_SMTP_CA_FILE", value_name = "FILE")]
        pub smtp_ca_file: Option<PathBuf>,

        /// The sender of approval mail (`kubemedic <kubemedic@example.com>`).
        #[arg(long, env = "KUBEMEDIC_EMAIL_FROM", value_name = "MAILBOX")]
        pub email_from: Option<String>,
    }
}

settings! {
    /// Approvals in Slack.
    pub struct SlackArgs {
        /// Slack bot token (`xoxb-…`): approvals are posted with Approve / Deny buttons.
        #[arg(
            long,
            env = "KUBEMEDIC_SLACK_BOT_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        pub slack_bot_token: Option<Secret>,

        /// The Slack channel approvals are posted to (with a bot token).
        #[arg(long, env = "KUBEMEDIC_SLACK_CHANNEL", value_name = "CHANNEL")]
        pub slack_channel: Option<String>,

        /// A Slack incoming webhook URL (no buttons: the message links to the confirmation
        /// pages).
        #[arg(
            long,
            env = "KUBEMEDIC_SLACK_WEBHOOK_URL",
            value_name = "URL",
            hide_env_values = true
        )]
        pub slack_webhook_url: Option<Secret>,

        /// Slack's signing secret: verifies `POST /api/v1/slack/interactions` (the buttons).
        #[arg(
            long,
            env = "KUBEMEDIC_SLACK_SIGNING_SECRET",
            value_name = "SECRET",
            hide_env_values = true
        )]
        pub slack_signing_secret: Option<Secret>,

        /// Slack's Web API base.
        #[arg(
            long,
            env = "KUBEMEDIC_SLACK_API_URL",
            value_name = "URL",
            help_default = DEFAULT_API_URL
        )]
        pub slack_api_url: Option<String>,

        /// Slack user ids that may approve with the buttons, comma-separated.
        #[arg(
            long,
            env = "KUBEMEDIC_SLACK_APPROVERS",
            value_name = "LIST",
            value_delimiter = ','
        )]
        pub slack_approvers: Option<Vec<String>>,
    }
}

/// A value given as blanks is not given.
pub(super) fn text(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// A notifier setting refused, as the flag / variable / key it came from.
fn refused(e: SettingsError) -> ConfigError {
    invalid(e.setting.trim_start_matches("--"), e.message)
}

impl MailArgs {
    /// Approval mail to `approvers`, when an SMTP server is set.
    pub fn settings(self, approvers: &[String]) -> Result<Option<EmailSettings>> {
        let Some(smtp_url) = text(self.smtp_url) else {
            return Ok(None);
        };
        let e = EmailSettings {
            smtp_url,
            username: text(self.smtp_username),
            password: non_empty(self.smtp_password),
            from: text(self.email_from).unwrap_or_default(),
            approvers: approvers.to_vec(),
            timeout: SMTP_TIMEOUT,
            ca_file: self.smtp_ca_file,
        };
        e.validate().map_err(refused)?;
        Ok(Some(e))
    }
}

impl SlackArgs {
    /// The Slack user ids that may press the buttons.
    pub fn approvers(&self) -> Vec<String> {
        self.slack_approvers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The signing secret, and Slack when a bot token or a webhook is set.
    pub fn settings(self) -> Result<(Option<Secret>, Option<SlackSettings>)> {
        let approvers = self.approvers();
        let signing_secret = non_empty(self.slack_signing_secret);
        let bot_token = non_empty(self.slack_bot_token);
        let webhook_url = non_empty(self.slack_webhook_url);
        if bot_token.is_none() && webhook_url.is_none() {
            return Ok((signing_secret, None));
        }
        let mut slack = SlackSettings {
            bot_token,
            channel: text(self.slack_channel),
            webhook_url,
            signing_secret: signing_secret.clone(),
            approvers,
            ..SlackSettings::default()
        };
        if let Some(api) = text(self.slack_api_url) {
            slack.api_url = api;
        }
        slack.validate().map_err(refused)?;
        Ok((signing_secret, Some(slack)))
    }
}
