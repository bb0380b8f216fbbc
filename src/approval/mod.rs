//! The AwaitingApproval stage (DESIGN §3.9): a human decides.
//!
//! Input: a request the gate sent to `AwaitingApproval`, with its selection, verified root
//! owner and gate decision. Output: `Executing` once approved (with the decision in the state,
//! and the alternative workflow if the approver picked one), `Rejected` when denied, `Expired`
//! when nobody decided within `--approval-timeout-seconds`.
//!
//! - The first run creates the [`ApprovalRequest`] in the store, with one notification per
//!   channel and recipient; the [`dispatch::Dispatcher`] delivers them (and retries). Later
//!   runs read the decision. A decision wakes the request at once (the store sets its
//!   `not_before`), expiry is decided by `system` through the same atomic first-wins call, so
//!   an approval clicked a second before expiry and the expiry cannot both win.
//! - [`Approvals`] is shared with the web layer: every way to decide — a signed link's
//!   confirmation form, a Slack button, the API — goes through it, and every refusal (forged,
//!   expired, replayed, wrong approval, wrong decision, wrong recipient, not an approver,
//!   already decided) is audited with why.
//! - Fail closed: anything in doubt is "not approved"; the identity recorded is the link's
//!   recipient, the verified Slack user or the authenticated API caller — never a value the
//!   client sent.
//! - An alternative workflow an approver picks goes through the approval policy too
//!   ([`AlternativeGate`]): the policy answered about the selected workflow, and what runs is
//!   gated like anything else. An alternative the policy cannot decide on is refused; the
//!   decision about the one approved replaces the gate's in the request and the audit trail.
//!
//! Files: this one is [`Approvals`], the service every channel decides through; `stage.rs` the
//! stage; `dispatch.rs` delivers and retries notifications; `links.rs` signs and checks the
//! mail's links; `slack.rs` verifies and reads Slack's button clicks.

pub mod dispatch;
pub mod links;
pub mod slack;
mod stage;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tracing::info;
use uuid::Uuid;

use crate::catalog::{Catalog, SelectionContext};
use crate::clock::Clock;
use crate::domain::{
    ApprovalDecision, ApprovalMessage, ApprovalRequest, AuditDraft, Channel,
    DEFAULT_APPROVAL_TIMEOUT_SECONDS, DecideOutcome, Decision, DeliveryStatus, GateDecision,
    Notification, NotificationKind, Proof, ProofPoint, ProofVerdict, Proposer, RemediationRequest,
    SelectedWorkflow,
};
use crate::live::Live;
use crate::notify::Notifier;
use crate::notify::slack::SlackNotifier;
use crate::prove::{Binding, Claim, ProveError, Prover};
use crate::store::Store;
use crate::telemetry::Metrics;

pub use links::{Claims, LinkDecision, LinkError, LinkSigner};
pub use stage::ApprovalStage;

/// The approval policy, asked about a workflow an approver picks instead of the selected one.
/// The daemon implements it with the gate's own input for the request, as if that workflow
/// had been selected.
#[async_trait]
pub trait AlternativeGate: Send + Sync {
    /// The policy's input and decision for `request` with `chosen` selected; `None` when the
    /// request holds nothing to gate (no selection or analysis).
    async fn decide(
        &self,
        request: &RemediationRequest,
        chosen: &SelectedWorkflow,
    ) -> Option<(crate::policy::GateInput, GateDecision)>;
}

/// Whether a decision was asked to confirm a high-risk change by typing the target's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation<'a> {
    /// The API: an approver's key is deliberate; nothing is asked.
    NotAsked,
    /// The dashboard's form: what was typed (if anything).
    Typed(Option<&'a str>),
}

/// The longest a pending approval's request sleeps before looking at it again.
const RECHECK: chrono::Duration = chrono::Duration::seconds(15);

/// How long an approval without `--approval-timeout-seconds` (0) stays open: in effect forever.
const NO_EXPIRY: chrono::Duration = chrono::Duration::days(3650);

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalSettings {
    /// No decision within this → `Expired` (decided by `system`). `None`: no limit.
    pub timeout: Option<Duration>,
    /// E-mail addresses that may decide (through their signed links, or the API).
    pub approvers: Vec<String>,
    /// Slack user ids that may decide with the buttons.
    pub slack_approvers: Vec<String>,
    /// From this risk score on, the confirmation page asks for the target's name.
    pub high_risk_score: i64,
    /// The base of every link (`https://kubemedic.example.com`), without a trailing slash.
    pub public_url: Option<String>,
}

impl ApprovalSettings {
    /// From this risk score on, unless configured, the confirmation page asks for the name.
    pub const DEFAULT_HIGH_RISK_SCORE: i64 = 80;
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            timeout: Some(Duration::from_secs(DEFAULT_APPROVAL_TIMEOUT_SECONDS)),
            approvers: vec![],
            slack_approvers: vec![],
            high_risk_score: Self::DEFAULT_HIGH_RISK_SCORE,
            public_url: None,
        }
    }
}

/// Why a decision attempt was refused: shown to whoever tried (an HTTP status and a page or
/// a JSON error) and written to the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub title: &'static str,
    pub detail: String,
}

impl Refusal {
    fn new(status: u16, title: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            title,
            detail: detail.into(),
        }
    }
}

/// What a link's confirmation page shows.
#[derive(Debug, Clone)]
pub struct LinkView {
    pub approval: ApprovalRequest,
    pub claims: Claims,
    /// The approver must type the target's name (a high-risk change).
    pub confirm_target: bool,
}

/// What the approval service keeps in the store: approvals with their notifications and
/// nonces, the audit events it appends, and the requests it reads.
#[derive(Clone)]
pub struct ApprovalStore {
    pub approvals: Arc<dyn crate::store::Approvals>,
    pub audit: Arc<dyn crate::store::Audit>,
    pub requests: Arc<dyn crate::store::Requests>,
}

impl From<Arc<dyn Store>> for ApprovalStore {
    fn from(s: Arc<dyn Store>) -> Self {
        Self {
            approvals: s.clone(),
            audit: s.clone(),
            requests: s,
        }
    }
}

/// Approvals: creating them, delivering them, deciding them. One per daemon, shared by the
/// stage, the dispatcher and the web handlers.
pub struct Approvals {
    pub store: ApprovalStore,
    pub settings: ApprovalSettings,
    pub notifiers: Vec<Arc<dyn Notifier>>,
    pub signer: LinkSigner,
    pub catalog: Arc<Live<Catalog>>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Option<Arc<Metrics>>,
    /// Wakes the dispatcher when there is something to send.
    pub wake: Arc<Notify>,
    /// The Slack notifier (also among `notifiers`), for answering button clicks.
    pub slack: Option<Arc<SlackNotifier>>,
    /// The approval policy, for an alternative an approver picks.
    pub policy: Arc<dyn AlternativeGate>,
    /// Proves an alternative an approver picks against the cluster, like a selection; `None`
    /// (no cluster): alternatives are refused.
    pub prover: Option<Arc<Prover>>,
}

impl Approvals {
    fn notifier(&self, channel: Channel) -> Option<&Arc<dyn Notifier>> {
        self.notifiers.iter().find(|n| n.channel() == channel)
    }

    fn expires_at(&self, from: DateTime<Utc>) -> DateTime<Utc> {
        match self.settings.timeout {
            Some(t) => from + chrono::Duration::from_std(t).unwrap_or(NO_EXPIRY),
            None => from + NO_EXPIRY,
        }
    }

    /// The approval request for `req`, from what the stages before left in its state.
    pub fn build(
        &self,
        req: &RemediationRequest,
        now: DateTime<Utc>,
    ) -> Result<ApprovalRequest, String> {
        let st = &req.state;
        let selection = st
            .selection
            .as_ref()
            .ok_or("the request has no selection to approve")?;
        let selected = selection
            .selected
            .as_ref()
            .ok_or("the request has no selected workflow to approve")?;
        let target = st
            .analysis
            .as_ref()
            .and_then(|a| a.root_owner.clone())
            .or_else(|| req.target.clone())
            .ok_or("the request has no verified target")?;
        let gate = st.gate.as_ref();
        let top = gate.and_then(|g| g.risk_factors.first());
        let rca = &selection.merged.root_cause_analysis;
        let since = st.phase_entered_at.unwrap_or(now);
        Ok(ApprovalRequest {
            id: Uuid::new_v4(),
            request_id: req.id,
            created_at: now,
            expires_at: self.expires_at(since),
            signal_name: req.signal.name.clone(),
            target,
            environment: st.enrichment.as_ref().map(|e| e.environment.clone()),
            summary: rca.summary.clone(),
            evidence: rca.contributing_factors.clone(),
            workflow_id: selected.workflow_id.clone(),
            workflow_version: selected.version.clone(),
            action_type: selected.action_type.clone(),
            parameters: selected.parameters.clone(),
            rationale: selected.rationale.clone(),
            alternatives: selection.alternatives.clone(),
            confidence: selected.confidence,
            risk_score: top.map_or(100, |f| f.score),
            risk_reason: top.map_or_else(
                || gate.map_or("no gate decision recorded".into(), |g| g.reason.clone()),
                |f| f.reason.clone(),
            ),
            required_because: gate
                .map(|g| g.risk_factors.iter().map(|f| f.reason.clone()).collect())
                .unwrap_or_default(),
            policy_revision: gate.and_then(|g| g.policy_revision.clone()),
            approvers: self.settings.approvers.clone(),
            slack_approvers: self.settings.slack_approvers.clone(),
            proof: st.proof.clone(),
            decision: None,
            note: None,
        })
    }

    /// One offer per channel and recipient.
    pub fn offers(&self, approval: &ApprovalRequest) -> Vec<Notification> {
        let mut out = Vec::new();
        for n in &self.notifiers {
            for recipient in n.recipients(approval) {
                out.push(Notification {
                    id: Uuid::new_v4(),
                    approval_id: approval.id,
                    channel: n.channel(),
                    recipient,
                    kind: NotificationKind::Offer,
                    status: DeliveryStatus::Pending,
                    attempts: 0,
                    next_attempt_at: Some(approval.created_at),
                    last_error: None,
                    external_ref: None,
                    created_at: approval.created_at,
                    updated_at: approval.created_at,
                });
            }
        }
        out
    }

    fn url(&self, path: &str) -> Option<String> {
        self.settings
            .public_url
            .as_deref()
            .map(|base| format!("{}{path}", base.trim_end_matches('/')))
    }

    /// What `recipient` is sent on `channel`. An e-mail carries Approve / Deny links signed
    /// for that approver. A Slack message carries none: a channel is not a person, so a link
    /// for it would let anyone who reads the channel decide — Slack decides through its
    /// interactive buttons (signed by Slack, pressed by a listed Slack approver), or, without
    /// them, the message only informs and approvers use their mail or the API.
    pub fn message(
        &self,
        approval: &ApprovalRequest,
        recipient: &str,
        channel: Channel,
    ) -> ApprovalMessage {
        let link = |d: LinkDecision| {
            let token = self
                .signer
                .sign(approval.id, recipient, d, approval.expires_at);
            self.url(&format!(
                "/approvals/{}/{}?t={token}",
                approval.id,
                d.as_str()
            ))
        };
        let (approve_url, deny_url) = if channel == Channel::Email {
            (link(LinkDecision::Approve), link(LinkDecision::Deny))
        } else {
            (None, None)
        };
        ApprovalMessage {
            approval: approval.clone(),
            recipient: recipient.to_owned(),
            approve_url,
            deny_url,
            // The request's page on the dashboard: its analysis, proof, policy decision and
            // timeline, behind the dashboard's login. Links to it decide nothing.
            view_url: self.url(&format!("/requests/{}", approval.request_id)),
        }
    }

    async fn refuse(
        &self,
        request_id: Option<Uuid>,
        actor: &str,
        via: Channel,
        refusal: Refusal,
    ) -> Refusal {
        let draft = AuditDraft::new(
            crate::domain::audit::APPROVAL_REFUSED,
            actor,
            format!("{} via {via}: {}", refusal.title, refusal.detail),
        );
        if let Err(e) = self
            .store
            .audit
            .append_audit(request_id, None, &draft)
            .await
        {
            tracing::warn!(error = %e, "cannot audit a refused approval decision");
        }
        if let Some(m) = &self.metrics {
            m.approval_decision("none", via.as_str(), "refused");
        }
        refusal
    }

    /// The request an approval belongs to, if it can be read (for auditing a refusal).
    async fn request_of(&self, approval: Uuid) -> Option<Uuid> {
        self.load(approval)
            .await
            .ok()
            .flatten()
            .map(|a| a.request_id)
    }

    async fn load(&self, id: Uuid) -> Result<Option<ApprovalRequest>, Refusal> {
        self.store
            .approvals
            .get_approval(id)
            .await
            .map_err(|e| store_unavailable(&e))
    }

    /// Check a link for its confirmation page (a GET: decides nothing, uses nothing).
    pub async fn view_link(
        &self,
        path_id: Uuid,
        path_decision: &str,
        token: &str,
    ) -> Result<LinkView, Refusal> {
        let now = self.clock.now();
        let claims = match self.signer.verify(token, now) {
            Ok(c) => c,
            Err(e) => {
                let (status, title) = match e {
                    LinkError::Expired(_) => (410, "Link expired"),
                    _ => (403, "Link not valid"),
                };
                let request = self.request_of(path_id).await;
                return Err(self
                    .refuse(
                        request,
                        "link",
                        Channel::Email,
                        Refusal::new(status, title, e.to_string()),
                    )
                    .await);
            }
        };
        if claims.approval != path_id {
            // A genuine link, pointed at another approval: audit it on the one it was for.
            let request = self.request_of(claims.approval).await;
            return Err(self
                .refuse(
                    request,
                    &claims.recipient,
                    Channel::Email,
                    Refusal::new(
                        403,
                        "Link not valid",
                        format!(
                            "this link was issued for approval {}, not {path_id}",
                            claims.approval
                        ),
                    ),
                )
                .await);
        }
        let Some(approval) = self.load(path_id).await? else {
            return Err(self
                .refuse(
                    None,
                    &claims.recipient,
                    Channel::Email,
                    Refusal::new(
                        404,
                        "No such approval",
                        format!("approval {path_id} does not exist"),
                    ),
                )
                .await);
        };
        let wrong = if claims.decision.as_str() != path_decision {
            Some(format!(
                "this link was issued to {} it, not to {path_decision} it",
                claims.decision.as_str()
            ))
        } else if !self.may_decide_by_link(&approval, &claims.recipient).await {
            Some(format!(
                "{} is not an approver of this request",
                claims.recipient
            ))
        } else {
            None
        };
        if let Some(detail) = wrong {
            return Err(self
                .refuse(
                    Some(approval.request_id),
                    &claims.recipient,
                    Channel::Email,
                    Refusal::new(403, "Link not valid", detail),
                )
                .await);
        }
        let confirm_target = approval.risk_score >= self.settings.high_risk_score;
        Ok(LinkView {
            approval,
            claims,
            confirm_target,
        })
    }

    /// Whether a link's recipient may decide: an approver of this request who is still an
    /// approver now (removing someone from `--approvers` takes their links away).
    async fn may_decide_by_link(&self, approval: &ApprovalRequest, recipient: &str) -> bool {
        let listed = |list: &[String]| list.iter().any(|a| a.eq_ignore_ascii_case(recipient));
        listed(&approval.approvers) && listed(&self.settings.approvers)
    }

    /// Decide through a link's confirmation form (a POST). The link is checked again, the
    /// typed target name for high-risk changes, then its nonce is used — once.
    pub async fn decide_link(
        &self,
        path_id: Uuid,
        path_decision: &str,
        token: &str,
        typed_target: Option<&str>,
        message: Option<&str>,
    ) -> Result<ApprovalRequest, Refusal> {
        let view = self.view_link(path_id, path_decision, token).await?;
        let LinkView {
            approval, claims, ..
        } = &view;
        let via = Channel::Email;
        if view.confirm_target && typed_target.map(str::trim) != Some(approval.target.name.as_str())
        {
            return Err(self
                .refuse(
                    Some(approval.request_id),
                    &claims.recipient,
                    via,
                    Refusal::new(
                        422,
                        "Confirmation needed",
                        format!(
                            "this change has risk {}: type the name of the target ({}) to confirm",
                            approval.risk_score, approval.target
                        ),
                    ),
                )
                .await);
        }
        if let Some(d) = &approval.decision {
            return Err(self
                .refuse(
                    Some(approval.request_id),
                    &claims.recipient,
                    via,
                    Refusal::new(
                        409,
                        "Already decided",
                        format!("{} by {} via {}", d.decision, d.decided_by, d.decided_via),
                    ),
                )
                .await);
        }
        let fresh = self
            .store
            .approvals
            .consume_nonce(&format!("link:{}", claims.nonce), Some(approval.id))
            .await
            .map_err(|e| store_unavailable(&e))?;
        if !fresh {
            return Err(self
                .refuse(
                    Some(approval.request_id),
                    &claims.recipient,
                    via,
                    Refusal::new(409, "Link already used", "each link works once"),
                )
                .await);
        }
        let decision = ApprovalDecision {
            decision: match claims.decision {
                LinkDecision::Approve => Decision::Approved,
                LinkDecision::Deny => Decision::Rejected,
            },
            decided_by: claims.recipient.clone(),
            decided_via: via,
            decided_at: self.clock.now(),
            message: message.map(str::trim).filter(|m| !m.is_empty()).map(clip),
            alternative: None,
        };
        self.decide(approval, decision).await
    }

    /// Record a decision (first wins), or say who was first.
    pub async fn decide(
        &self,
        approval: &ApprovalRequest,
        decision: ApprovalDecision,
    ) -> Result<ApprovalRequest, Refusal> {
        let outcome = self
            .store
            .approvals
            .decide_approval(approval.id, &decision)
            .await
            .map_err(|e| store_unavailable(&e))?;
        match outcome {
            DecideOutcome::Decided(a) => {
                info!(
                    approval = %a.id,
                    request_id = %a.request_id,
                    decision = decision.decision.as_str(),
                    by = %decision.decided_by,
                    via = decision.decided_via.as_str(),
                    "approval decided"
                );
                if let Some(m) = &self.metrics {
                    m.approval_decision(
                        decision.decision.as_str(),
                        decision.decided_via.as_str(),
                        "decided",
                    );
                }
                self.wake.notify_one();
                Ok(a)
            }
            DecideOutcome::AlreadyDecided(a) => {
                if let Some(m) = &self.metrics {
                    m.approval_decision(
                        decision.decision.as_str(),
                        decision.decided_via.as_str(),
                        "refused",
                    );
                }
                let first = a.decision.as_ref();
                Err(Refusal::new(
                    409,
                    "Already decided",
                    first.map_or("decided".into(), |d| {
                        format!("{} by {} via {}", d.decision, d.decided_by, d.decided_via)
                    }),
                ))
            }
            DecideOutcome::NotFound => Err(Refusal::new(
                404,
                "No such approval",
                format!("approval {} does not exist", approval.id),
            )),
        }
    }

    /// [`Approvals::decide`], with a decision that came too late audited as refused (in the
    /// name and channel of whoever tried).
    async fn decide_audited(
        &self,
        approval: &ApprovalRequest,
        decision: ApprovalDecision,
    ) -> Result<ApprovalRequest, Refusal> {
        let (actor, via) = (decision.decided_by.clone(), decision.decided_via);
        match self.decide(approval, decision).await {
            Err(r) if r.status == 409 => {
                Err(self.refuse(Some(approval.request_id), &actor, via, r).await)
            }
            other => other,
        }
    }

    /// The risk score from which approving asks for the target's name to be typed.
    pub fn high_risk_score(&self) -> i64 {
        self.settings.high_risk_score
    }

    /// Decide through the API or the dashboard (`via`) as `caller`, an authenticated approver.
    ///
    /// `confirm` is what the dashboard's approver typed where a high-risk change asks for the
    /// target's name (as the e-mail link's confirmation does); the API does not ask. The risk
    /// is the higher of the policy's scores on the selected workflow and on the alternative.
    #[allow(clippy::too_many_arguments)]
    pub async fn decide_api(
        &self,
        id: Uuid,
        approve: bool,
        alternative: Option<&str>,
        message: Option<&str>,
        caller: &str,
        via: Channel,
        confirm: Confirmation<'_>,
    ) -> Result<ApprovalRequest, Refusal> {
        let Some(approval) = self.load(id).await? else {
            return Err(Refusal::new(
                404,
                "No such approval",
                format!("approval {id} does not exist"),
            ));
        };
        let mut risk = approval.risk_score;
        let alternative = match alternative.map(str::trim).filter(|a| !a.is_empty()) {
            Some(alt) if !approve => {
                return Err(Refusal::new(
                    400,
                    "Not a decision",
                    format!("an alternative ({alt}) can only be approved, not denied"),
                ));
            }
            Some(alt) => {
                let req = self
                    .store
                    .requests
                    .get_request(approval.request_id)
                    .await
                    .map_err(|e| store_unavailable(&e))?
                    .ok_or_else(|| Refusal::new(404, "No such request", "the request is gone"))?;
                let gated = match self.alternative(&approval, &req, alt) {
                    Ok(chosen) => self.gate_alternative(&req, &chosen).await,
                    Err(why) => Err(Refusal::new(400, "Alternative refused", why)),
                };
                match gated {
                    Ok((_, decision, _)) => risk = risk.max(decision.top_score().unwrap_or(0)),
                    Err(refusal) => {
                        return Err(self
                            .refuse(Some(approval.request_id), caller, via, refusal)
                            .await);
                    }
                }
                Some(alt.to_owned())
            }
            None => None,
        };
        if let Confirmation::Typed(typed) = confirm
            && approve
            && risk >= self.settings.high_risk_score
            && typed.map(str::trim) != Some(approval.target.name.as_str())
        {
            let refusal = Refusal::new(
                422,
                "Confirmation needed",
                format!(
                    "this change has risk {risk}: type the name of the target ({}) to approve it",
                    approval.target.name
                ),
            );
            return Err(self
                .refuse(Some(approval.request_id), caller, via, refusal)
                .await);
        }
        let decision = ApprovalDecision {
            decision: if approve {
                Decision::Approved
            } else {
                Decision::Rejected
            },
            decided_by: caller.to_owned(),
            decided_via: via,
            decided_at: self.clock.now(),
            message: message.map(str::trim).filter(|m| !m.is_empty()).map(clip),
            alternative,
        };
        self.decide_audited(&approval, decision).await
    }

    /// Decide through a Slack button, as the Slack user Slack vouched for.
    pub async fn decide_slack(
        &self,
        id: Uuid,
        approve: bool,
        user_id: &str,
        user_name: &str,
    ) -> Result<ApprovalRequest, Refusal> {
        let Some(approval) = self.load(id).await? else {
            return Err(Refusal::new(
                404,
                "No such approval",
                format!("approval {id} does not exist"),
            ));
        };
        let who = if user_name.is_empty() {
            format!("slack:{user_id}")
        } else {
            format!("slack:{user_id} ({user_name})")
        };
        let listed = |list: &[String]| list.iter().any(|u| u == user_id);
        if !(listed(&approval.slack_approvers) && listed(&self.settings.slack_approvers)) {
            return Err(self
                .refuse(
                    Some(approval.request_id),
                    &who,
                    Channel::Slack,
                    Refusal::new(
                        403,
                        "Not an approver",
                        format!("Slack user {user_id} may not decide this request"),
                    ),
                )
                .await);
        }
        let decision = ApprovalDecision {
            decision: if approve {
                Decision::Approved
            } else {
                Decision::Rejected
            },
            decided_by: who.clone(),
            decided_via: Channel::Slack,
            decided_at: self.clock.now(),
            message: None,
            alternative: None,
        };
        self.decide_audited(&approval, decision).await
    }

    /// The alternative workflow an approver picked, checked like a selection: one of the
    /// alternatives the selection offered, in the catalog, fitting the target, its parameters
    /// valid for it.
    /// Ask the policy about `chosen` for `req`. Fail closed: a policy that cannot decide (a
    /// degraded decision: it did not load, or failed on this input) refuses the alternative.
    async fn gate_alternative(
        &self,
        req: &RemediationRequest,
        chosen: &SelectedWorkflow,
    ) -> Result<(crate::policy::GateInput, GateDecision, Proof), Refusal> {
        let proof = self.prove_alternative(req, chosen).await?;
        let mut proven = req.clone();
        proven.state.proof = Some(proof.clone());
        match self.policy.decide(&proven, chosen).await {
            Some((input, decision)) if !decision.degraded => Ok((input, decision, proof)),
            Some((_, decision)) => Err(Refusal::new(
                409,
                "Alternative refused",
                format!(
                    "the approval policy cannot decide on {} ({}): approve the selected \
                     workflow, or deny",
                    chosen.workflow_id, decision.reason
                ),
            )),
            None => Err(Refusal::new(
                409,
                "Alternative refused",
                format!(
                    "the request holds nothing the approval policy can decide on for {}",
                    chosen.workflow_id
                ),
            )),
        }
    }

    /// The alternative's obligations against the cluster, bound to the spec that was
    /// investigated: an approver's choice is proven like anyone's. Refused when it does not
    /// hold, or when nothing can prove it (fail closed).
    async fn prove_alternative(
        &self,
        req: &RemediationRequest,
        chosen: &SelectedWorkflow,
    ) -> Result<Proof, Refusal> {
        let Some(prover) = &self.prover else {
            return Err(Refusal::new(
                409,
                "Alternative refused",
                "no cluster to prove an alternative against: approve the selected workflow, or deny",
            ));
        };
        let target = req
            .state
            .analysis
            .as_ref()
            .and_then(|a| a.root_owner.clone())
            .ok_or_else(|| {
                Refusal::new(
                    409,
                    "Alternative refused",
                    "the request has no verified target",
                )
            })?;
        let bound = req
            .state
            .proof
            .as_ref()
            .and_then(|p| Binding::of(p, "at investigation"))
            .or_else(|| {
                req.state
                    .analysis
                    .as_ref()
                    .and_then(|a| a.spec_hash.clone())
                    .map(|h| Binding {
                        spec_hash: h,
                        drift_hash: None,
                        when: "at investigation",
                    })
            });
        let claim = Claim {
            action_type: &chosen.action_type,
            workflow_id: &chosen.workflow_id,
            parameters: &chosen.parameters,
            target: &target,
            proposer: Proposer::Approver,
            signal: &req.signal,
            bound_to: bound,
        };
        let proof = match prover.prove(&claim, ProofPoint::Selection).await {
            Ok(p) => p,
            Err(ProveError::Unavailable(m)) => {
                return Err(Refusal::new(
                    503,
                    "Try again",
                    format!("the cluster cannot be read to prove the alternative: {m}"),
                ));
            }
        };
        if proof.verdict == ProofVerdict::Refuted {
            return Err(Refusal::new(
                409,
                "Alternative refused",
                format!(
                    "{} ({}) on {target} is not proven right and safe: {}",
                    chosen.workflow_id,
                    chosen.action_type,
                    proof.refutation()
                ),
            ));
        }
        Ok(proof)
    }

    pub fn alternative(
        &self,
        approval: &ApprovalRequest,
        req: &RemediationRequest,
        workflow_id: &str,
    ) -> Result<SelectedWorkflow, String> {
        if !approval
            .alternatives
            .iter()
            .any(|a| a.workflow_id == workflow_id)
        {
            return Err(format!(
                "{workflow_id} is not one of the alternatives offered ({})",
                approval
                    .alternatives
                    .iter()
                    .map(|a| a.workflow_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let analysis = req.state.analysis.as_ref();
        let ctx = SelectionContext {
            severity: req.signal.severity.clone(),
            environment: req.state.enrichment.as_ref().map(|e| e.environment.clone()),
            signal_mode: Some(req.signal.mode.as_str().into()),
            target_kind: Some(approval.target.kind.clone()),
            detected: analysis
                .and_then(|a| a.detected_labels.clone())
                .unwrap_or_default(),
        };
        let catalog = self.catalog.get();
        let Some(w) = catalog.workflow(workflow_id) else {
            return Err(format!("workflow `{workflow_id}` is not in the catalog"));
        };
        // The selection's parameters that the alternative takes (a rollback's revision means
        // nothing to a restart).
        let offered: serde_json::Map<String, serde_json::Value> = approval
            .parameters
            .iter()
            .filter(|(k, _)| w.parameters.properties.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let params = self
            .catalog
            .get()
            .validate_selection(workflow_id, &offered, Some(&approval.target), &ctx)
            .map_err(|e| format!("{}: {}", e.code, e.errors.join("; ")))?;
        Ok(SelectedWorkflow {
            workflow_id: w.id.clone(),
            action_type: w.action_type.clone(),
            version: w.version.clone(),
            confidence: approval.confidence,
            rationale: format!("chosen by the approver instead of {}", approval.workflow_id),
            parameters: params,
        })
    }
}

/// The store cannot answer: the page says so in general terms (it is shown to whoever holds a
/// link, authenticated or not); the detail goes to the log.
fn store_unavailable(e: &dyn std::fmt::Display) -> Refusal {
    tracing::warn!(error = %e, "approval: the store is unavailable");
    Refusal::new(
        503,
        "Try again",
        "kubemedic cannot reach its database right now; nothing was decided. Try again in a minute.",
    )
}

fn clip(s: &str) -> String {
    s.chars().take(2000).collect()
}
