//! The approval's settings (owner: `approval`): who may decide, from which risk on they must
//! type the target's name, and the address and key of the links they decide with. Assembles the
//! channels of [`super::notify`] and checks that a configured channel can reach somebody.

use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::notify::{MailArgs, SlackArgs, text};
use super::{Result, invalid, non_empty};
use crate::approval::ApprovalSettings;
use crate::notify::email::EmailSettings;
use crate::notify::slack::SlackSettings;
use crate::secret::Secret;

settings! {
    /// Human approvals: who decides, and the links they use.
    pub struct ApprovalArgs {
        /// The address approvers reach kubemedic at (`https://kubemedic.example.com`): the base
        /// of every link in an approval mail or Slack message. Required when e-mail or Slack is
        /// set.
        #[arg(long, env = "KUBEMEDIC_PUBLIC_URL", value_name = "URL")]
        pub public_url: Option<String>,

        /// E-mail addresses that may approve, comma-separated; each gets the approval mail with
        /// their own signed links, and may decide through the API.
        #[arg(
            long,
            env = "KUBEMEDIC_APPROVERS",
            value_name = "LIST",
            value_delimiter = ','
        )]
        pub approvers: Option<Vec<String>>,

        /// From this risk score (0-100) on, an approver confirming through a link must type the
        /// target's name.
        #[arg(
            long,
            env = "KUBEMEDIC_HIGH_RISK_SCORE",
            value_name = "0..100",
            help_default = ApprovalSettings::DEFAULT_HIGH_RISK_SCORE
        )]
        pub high_risk_score: Option<i64>,

        /// The key approval links are signed with (HMAC-SHA256) [default: a random key
        /// generated once and kept in the store, so links survive restarts].
        #[arg(
            long,
            env = "KUBEMEDIC_LINK_SIGNING_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub link_signing_key: Option<Secret>,

        /// Let API keys with the approver role decide approvals (on the dashboard, through the
        /// API and in a chat) even when no e-mail or Slack approver is configured; nobody is
        /// notified then. Off by default: without approvers, a change that needs a human ends
        /// in manual review at once.
        #[arg(long, env = "KUBEMEDIC_APPROVE_WITH_KEYS")]
        pub approve_with_keys: bool,
    }
}

/// Approvals as configured: the stage's settings, the link key, and the channels.
#[derive(Debug, Clone, Default)]
pub struct ApprovalConfig {
    pub settings: ApprovalSettings,
    pub link_signing_key: Option<Secret>,
    pub email: Option<EmailSettings>,
    pub slack: Option<SlackSettings>,
    /// Verifies `POST /api/v1/slack/interactions`.
    pub slack_signing_secret: Option<Secret>,
    /// Approver keys decide, with or without notified approvers.
    pub approve_with_keys: bool,
}

impl ApprovalConfig {
    /// Somebody can decide: approvals are on.
    pub fn enabled(&self) -> bool {
        self.approve_with_keys
            || !self.settings.approvers.is_empty()
            || !self.settings.slack_approvers.is_empty()
    }
}

impl ApprovalArgs {
    /// Approvals with their channels; `timeout` is the pipeline's AwaitingApproval limit.
    pub fn settings(
        self,
        mail: MailArgs,
        slack: SlackArgs,
        timeout: Option<Duration>,
    ) -> Result<ApprovalConfig> {
        let approvers: Vec<String> = self
            .approvers
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        for addr in &approvers {
            let ok = addr.split_once('@').is_some_and(|(l, d)| {
                !l.is_empty() && d.contains('.') && !addr.contains(char::is_whitespace)
            });
            if !ok {
                return Err(invalid(
                    "approvers",
                    format!("`{addr}` is not an e-mail address"),
                ));
            }
        }
        let high_risk_score = self
            .high_risk_score
            .unwrap_or(ApprovalSettings::DEFAULT_HIGH_RISK_SCORE);
        if !(0..=100).contains(&high_risk_score) {
            return Err(invalid(
                "high-risk-score",
                format!("{high_risk_score} is outside 0..=100"),
            ));
        }
        let public_url = text(self.public_url);
        if let Some(u) = &public_url {
            let ok = (u.starts_with("https://") || u.starts_with("http://"))
                && !u.contains(char::is_whitespace)
                && !u.contains('?')
                && !u.contains('#');
            if !ok {
                return Err(invalid(
                    "public-url",
                    format!("`{u}` is not an http(s) base URL (no query, no fragment)"),
                ));
            }
        }
        let settings = ApprovalSettings {
            timeout,
            approvers,
            slack_approvers: slack.approvers(),
            high_risk_score,
            public_url: public_url.map(|u| u.trim_end_matches('/').to_owned()),
        };
        let link_signing_key = non_empty(self.link_signing_key);
        if let Some(k) = &link_signing_key
            && k.expose().len() < 32
        {
            return Err(invalid(
                "link-signing-key",
                "shorter than 32 characters; use a long random value".into(),
            ));
        }
        let email = mail.settings(&settings.approvers)?;
        let (slack_signing_secret, slack) = slack.settings()?;
        let config = ApprovalConfig {
            settings,
            link_signing_key,
            email,
            slack,
            slack_signing_secret,
            approve_with_keys: self.approve_with_keys,
        };
        config.check_reachable()?;
        Ok(config)
    }
}

impl ApprovalConfig {
    /// A configured channel must be able to link back and to reach somebody who may decide.
    fn check_reachable(&self) -> Result<()> {
        let notifying = self.email.is_some() || self.slack.is_some();
        if notifying && self.settings.public_url.is_none() {
            return Err(invalid(
                "public-url",
                "approval notifications are configured (e-mail or Slack) but their links need \
                 the address approvers reach kubemedic at"
                    .into(),
            ));
        }
        if notifying && !self.enabled() {
            return Err(invalid(
                "approvers",
                "approval notifications are configured but nobody may approve: set --approvers \
                 and/or --slack-approvers"
                    .into(),
            ));
        }
        let slack_buttons = self
            .slack
            .as_ref()
            .is_some_and(|s| s.bot_token.is_some() && s.signing_secret.is_some());
        if self.slack.is_some() && !slack_buttons && self.settings.approvers.is_empty() {
            return Err(invalid(
                "approvers",
                "Slack without interactive buttons (a webhook, or a bot token without \
                 --slack-signing-secret) only informs: set --approvers so somebody can decide"
                    .into(),
            ));
        }
        if self.slack.as_ref().is_some_and(|s| s.bot_token.is_some())
            && self.settings.slack_approvers.is_empty()
        {
            return Err(invalid(
                "slack-approvers",
                "a Slack bot token posts Approve / Deny buttons, but no Slack user may press them"
                    .into(),
            ));
        }
        Ok(())
    }
}
