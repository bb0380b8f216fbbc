//! The `Remediation` object of one request, as the mirror writes it: a pure function of the
//! stored request, its audit trail and the settings, so every replica computes the same object
//! (writes are idempotent) and a test needs no cluster.
//!
//! What reaches the cluster is sanitised (`crate::redact`) and bounded: the last
//! [`TIMELINE_LEN`] audit events, each message cut at [`MESSAGE_MAX_CHARS`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::{AuditEvent, Decision, Phase, RemediationRequest, Target};
use crate::redact::sanitize_text;

/// API group, version and kind of the mirrored objects (charts/kubemedic/crds).
pub const GROUP: &str = "kubemedic.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "Remediation";
pub const PLURAL: &str = "remediations";

/// Labels every mirrored object carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubemedic");
pub const REQUEST_ID_LABEL: &str = "kubemedic.io/request-id";
pub const PHASE_LABEL: &str = "kubemedic.io/phase";

/// Audit events kept in an object's timeline: the latest ones.
pub const TIMELINE_LEN: usize = 20;
/// Characters of one timeline message (and of an Event's note).
pub const MESSAGE_MAX_CHARS: usize = 512;
/// Phase-change Events published for one write at most.
pub const EVENTS_PER_WRITE: usize = 10;

/// One request's object: where it goes, what identifies it, and its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Remediation {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub spec: Spec,
    pub status: Status,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub request_id: String,
    pub signal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
}

/// The status subresource. Every field is written (absent ones as `null`), so a merge patch of
/// it replaces what an earlier write left.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub phase: Phase,
    pub reason: Option<String>,
    /// `Kind/name`, or `Kind/namespace/name` when the object is not in the target's namespace.
    pub target: Option<String>,
    /// The selected workflow (the approver's alternative when one was chosen).
    pub workflow: Option<String>,
    /// The approval gate's decision: `AutoApproved`, `ApprovalRequired` or `PolicyDegraded`.
    pub decision: Option<String>,
    /// `Pending`, `NotRequired`, `Approved by …`, `Rejected by …`, `Expired`.
    pub approval: Option<String>,
    /// Whether verification judged the remediation effective.
    pub effective: Option<bool>,
    /// The remediation made its target worse: `Undoing` (the restore is decided, not yet
    /// run), `Undone`, `NotUndone` (refused by its proof, or not decided: a person looks).
    pub undo: Option<String>,
    /// The request's page on the dashboard, when `--public-url` is set.
    pub dashboard: Option<String>,
    /// The request's last change in the store.
    pub updated_at: DateTime<Utc>,
    /// The id of the last audit event this status shows: every change of a request is one,
    /// and ids grow in commit order, so of two writes the one with the higher id is the newer
    /// view (a replica that read the request earlier never overwrites a later one).
    pub audit_event_id: i64,
    pub timeline: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub message: String,
}

/// An Event to publish about a phase the request entered.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseEvent {
    /// The phase entered (the Event's reason).
    pub phase: Phase,
    pub note: String,
    /// A phase that needs someone's attention (failed, blocked, left for review…).
    pub warning: bool,
}

/// The object's name: the request's id (unique, and what the API and the dashboard call it).
pub fn name_of(request: &RemediationRequest) -> String {
    request.id.hyphenated().to_string()
}

/// Where the request's object goes: its target's namespace, or `own` (kubemedic's) for a
/// cluster-scoped target or none.
pub fn namespace_for(request: &RemediationRequest, own: &str) -> String {
    request
        .target
        .as_ref()
        .and_then(|t| t.namespace.clone())
        .unwrap_or_else(|| own.to_owned())
}

/// The object of `request` in `namespace`, with the last events of `trail` (its audit trail, in
/// order) and the dashboard link under `dashboard` (the public URL).
pub fn remediation(
    request: &RemediationRequest,
    trail: &[AuditEvent],
    namespace: &str,
    dashboard: Option<&str>,
) -> Remediation {
    let name = name_of(request);
    let labels = BTreeMap::from([
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (REQUEST_ID_LABEL.to_owned(), name.clone()),
        (PHASE_LABEL.to_owned(), request.phase.as_str().to_owned()),
    ]);
    let state = &request.state;
    let decision = state.gate.as_ref().map(|g| {
        if g.degraded {
            "PolicyDegraded"
        } else if g.require_approval {
            "ApprovalRequired"
        } else {
            "AutoApproved"
        }
        .to_owned()
    });
    let approval = match (&state.approval, request.phase, &state.gate) {
        (Some(d), _, _) => Some(match d.decision {
            Decision::Approved => format!("Approved by {}", d.decided_by),
            Decision::Rejected => format!("Rejected by {}", d.decided_by),
            Decision::Expired => "Expired".to_owned(),
        }),
        (None, Phase::AwaitingApproval, _) => Some("Pending".to_owned()),
        (None, _, Some(g)) if !g.require_approval => Some("NotRequired".to_owned()),
        _ => None,
    };
    let start = trail.len().saturating_sub(TIMELINE_LEN);
    let timeline = trail
        .iter()
        .skip(start)
        .map(|e| Entry {
            at: e.at,
            kind: e.kind.clone(),
            message: clean(&e.message),
        })
        .collect();
    Remediation {
        spec: Spec {
            request_id: name.clone(),
            signal: request.signal.name.clone(),
            target: request.target.clone(),
        },
        status: Status {
            phase: request.phase,
            reason: request.reason.as_deref().map(clean),
            target: request.target.as_ref().map(|t| target_text(t, namespace)),
            workflow: state
                .selection
                .as_ref()
                .and_then(|s| s.selected.as_ref())
                .map(|w| w.workflow_id.clone()),
            decision,
            approval: approval.map(|a| clean(&a)),
            effective: state.assessment.as_ref().map(|a| a.effective),
            undo: state.undo.as_ref().map(|u| {
                match (u.decided, u.restore.as_ref().map(|r| r.restored)) {
                    (_, Some(true)) => "Undone",
                    (true, None) => "Undoing",
                    _ => "NotUndone",
                }
                .to_owned()
            }),
            dashboard: dashboard.map(|base| format!("{base}/requests/{name}")),
            updated_at: request.updated_at,
            audit_event_id: trail.last().map_or(0, |e| e.id),
            timeline,
        },
        name,
        namespace: namespace.to_owned(),
        labels,
    }
}

fn target_text(t: &Target, namespace: &str) -> String {
    match &t.namespace {
        Some(ns) if ns != namespace => format!("{}/{ns}/{}", t.kind, t.name),
        _ => format!("{}/{}", t.kind, t.name),
    }
}

/// Sanitised and cut to [`MESSAGE_MAX_CHARS`]: secrets never reach the cluster's objects.
fn clean(text: &str) -> String {
    let text = sanitize_text(text);
    if text.chars().nth(MESSAGE_MAX_CHARS).is_none() {
        return text;
    }
    let mut cut: String = text.chars().take(MESSAGE_MAX_CHARS).collect();
    cut.push('…');
    cut
}

/// The phase changes of `trail` an object whose phase label read `before` has not announced:
/// every transition after the last one into `before` (all of them for a new object, `None`),
/// the latest [`EVENTS_PER_WRITE`] of them.
pub fn phase_events(trail: &[AuditEvent], before: Option<&str>) -> Vec<PhaseEvent> {
    let transitions: Vec<(Phase, &AuditEvent)> = trail
        .iter()
        .filter_map(|e| Some((e.transition()?.to?, e)))
        .collect();
    let from = match before {
        None => 0,
        Some(b) => transitions
            .iter()
            .rposition(|(p, _)| p.as_str() == b)
            .map_or(0, |i| i + 1),
    };
    let new = transitions.get(from..).unwrap_or_default();
    let skip = new.len().saturating_sub(EVENTS_PER_WRITE);
    new.iter()
        .skip(skip)
        .map(|(phase, e)| PhaseEvent {
            phase: *phase,
            note: clean(&e.message),
            warning: matches!(
                phase,
                Phase::Failed
                    | Phase::Blocked
                    | Phase::ManualReviewRequired
                    | Phase::Rejected
                    | Phase::Expired
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        ApprovalDecision, Channel, GateDecision, NewSignal, SignalMode, SignalSource, SignalStatus,
        StageState, transition_event,
    };
    use chrono::TimeZone;

    fn at(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 10, min, 0).unwrap()
    }

    fn request(target: Option<Target>) -> RemediationRequest {
        let signal = NewSignal {
            fingerprint: "fp".into(),
            starts_at: at(0),
            status: SignalStatus::Firing,
            ends_at: None,
            name: "KubePodCrashLooping".into(),
            severity: Some("warning".into()),
            mode: SignalMode::Reactive,
            source: SignalSource::Alertmanager,
            labels: Default::default(),
            annotations: Default::default(),
            generator_url: None,
            external_url: None,
            receiver: None,
            group_key: None,
            target_fingerprint: target.as_ref().map(Target::fingerprint).unwrap_or_default(),
            target,
            target_aliases: vec![],
            requested: None,
            trace: None,
        };
        RemediationRequest::for_signal(&signal, Phase::Received, at(0))
    }

    fn event(id: i64, kind: &str, message: &str, payload: serde_json::Value) -> AuditEvent {
        AuditEvent {
            id,
            request_id: None,
            at: at(id as u32),
            phase: None,
            kind: kind.into(),
            actor: "test".into(),
            message: message.into(),
            payload,
        }
    }

    fn transition(id: i64, from: Phase, to: Phase) -> AuditEvent {
        let d = transition_event(from, to, None, "w");
        event(id, &d.kind, &d.message, d.payload)
    }

    #[test]
    fn a_namespaced_target_names_the_namespace_a_node_or_none_goes_to_kubemedics() {
        let pod = request(Some(Target::new("Pod", "web-1", Some("shop".into()))));
        assert_eq!(namespace_for(&pod, "kubemedic"), "shop");
        let node = request(Some(Target::new("Node", "worker-1", Some("shop".into()))));
        assert_eq!(namespace_for(&node, "kubemedic"), "kubemedic");
        assert_eq!(namespace_for(&request(None), "kubemedic"), "kubemedic");

        let r = remediation(&pod, &[], "shop", None);
        assert_eq!(r.name, pod.id.to_string());
        assert_eq!(r.status.target.as_deref(), Some("Pod/web-1"));
        let elsewhere = remediation(&pod, &[], "kubemedic", None);
        assert_eq!(elsewhere.status.target.as_deref(), Some("Pod/shop/web-1"));
        let n = remediation(&node, &[], "kubemedic", None);
        assert_eq!(n.status.target.as_deref(), Some("Node/worker-1"));
    }

    #[test]
    fn the_status_carries_phase_workflow_decision_approval_and_the_link() {
        let mut r = request(Some(Target::new(
            "Deployment",
            "checkout",
            Some("shop".into()),
        )));
        r.phase = Phase::AwaitingApproval;
        r.state = StageState {
            gate: Some(GateDecision {
                require_approval: true,
                reason: "production".into(),
                risk_factors: vec![],
                degraded: false,
                policy_revision: None,
            }),
            ..Default::default()
        };
        let o = remediation(&r, &[], "shop", Some("https://km.example.com"));
        assert_eq!(o.status.phase, Phase::AwaitingApproval);
        assert_eq!(o.status.decision.as_deref(), Some("ApprovalRequired"));
        assert_eq!(o.status.approval.as_deref(), Some("Pending"));
        assert_eq!(
            o.status.dashboard,
            Some(format!("https://km.example.com/requests/{}", r.id))
        );
        assert_eq!(o.labels[PHASE_LABEL], "AwaitingApproval");
        assert_eq!(o.labels[REQUEST_ID_LABEL], r.id.to_string());
        assert_eq!(o.spec.signal, "KubePodCrashLooping");

        r.phase = Phase::Executing;
        r.state.approval = Some(ApprovalDecision {
            decision: Decision::Approved,
            decided_by: "alice@example.com".into(),
            decided_via: Channel::Email,
            decided_at: at(5),
            message: None,
            alternative: None,
        });
        let o = remediation(&r, &[], "shop", None);
        assert_eq!(
            o.status.approval.as_deref(),
            Some("Approved by alice@example.com")
        );
        assert_eq!(o.status.dashboard, None);

        let json = serde_json::to_value(&o.status).unwrap();
        assert_eq!(json["phase"], "Executing");
        assert!(
            json["workflow"].is_null(),
            "absent fields are written as null"
        );
        assert!(json.get("updatedAt").is_some());
        assert_eq!(json["auditEventId"], 0);
    }

    #[test]
    fn the_status_says_whether_a_remediation_that_made_things_worse_was_undone() {
        let mut r = request(Some(Target::new("Deployment", "web", Some("shop".into()))));
        let health = crate::domain::TargetHealth {
            observed_at: at(1),
            pods: 1,
            ready: 1,
            desired: Some(1),
            failing: vec![],
        };
        let mut undo = crate::domain::Undo {
            worse: vec!["2 failing pod(s), 0 before the remediation".into()],
            before: health.clone(),
            after: health,
            decided: true,
            decision: "undo: policy says".into(),
            decided_at: at(2),
            restore: None,
        };
        r.state.undo = Some(undo.clone());
        assert_eq!(
            remediation(&r, &[], "shop", None).status.undo.as_deref(),
            Some("Undoing")
        );
        undo.restore = Some(crate::domain::Restore {
            restored: true,
            message: "restored".into(),
            proof: None,
            restored_spec_hash: None,
            at: at(3),
        });
        r.state.undo = Some(undo.clone());
        assert_eq!(
            remediation(&r, &[], "shop", None).status.undo.as_deref(),
            Some("Undone")
        );
        undo.restore = None;
        undo.decided = false;
        r.state.undo = Some(undo);
        assert_eq!(
            remediation(&r, &[], "shop", None).status.undo.as_deref(),
            Some("NotUndone")
        );
    }

    #[test]
    fn the_timeline_keeps_the_latest_events_and_no_secret() {
        let r = request(None);
        let mut trail: Vec<AuditEvent> = (1..=30)
            .map(|i| event(i, "note", &format!("step {i}"), serde_json::Value::Null))
            .collect();
        trail.push(event(
            31,
            "note",
            "connected with postgres://kubemedic:hunter2@db:5432/km",
            serde_json::Value::Null,
        ));
        trail.push(event(
            32,
            "note",
            &"x".repeat(2000),
            serde_json::Value::Null,
        ));
        let o = remediation(&r, &trail, "kubemedic", None);
        assert_eq!(o.status.audit_event_id, 32);
        assert_eq!(o.status.timeline.len(), TIMELINE_LEN);
        assert_eq!(o.status.timeline[0].message, "step 13");
        let secret = &o.status.timeline[TIMELINE_LEN - 2].message;
        assert!(!secret.contains("hunter2"), "{secret}");
        let long = &o.status.timeline[TIMELINE_LEN - 1].message;
        assert_eq!(long.chars().count(), MESSAGE_MAX_CHARS + 1);
    }

    #[test]
    fn events_announce_the_phases_entered_since_the_label() {
        let trail = vec![
            event(1, "received", "alert received", serde_json::Value::Null),
            transition(2, Phase::Received, Phase::Enriching),
            transition(3, Phase::Enriching, Phase::Investigating),
            transition(4, Phase::Investigating, Phase::Selecting),
            transition(5, Phase::Selecting, Phase::Failed),
        ];
        let phases = |before| {
            phase_events(&trail, before)
                .into_iter()
                .map(|e| e.phase)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            phases(None),
            [
                Phase::Enriching,
                Phase::Investigating,
                Phase::Selecting,
                Phase::Failed
            ]
        );
        assert_eq!(
            phases(Some("Investigating")),
            [Phase::Selecting, Phase::Failed]
        );
        assert_eq!(phases(Some("Received")), phases(None));
        assert!(phases(Some("Failed")).is_empty());
        let last = phase_events(&trail, Some("Selecting")).remove(0);
        assert!(last.warning);
        assert_eq!(last.note, "Selecting -> Failed");
    }
}
