//! [`KubeRemediations`]: the `Remediation` objects through kube-rs, as dynamic objects of the
//! CRD (no generated type). The calls, and so the chart's mirror role
//! (charts/kubemedic/rbac/mirror-rules.yaml): `get` of the object as it is; `create` of a
//! missing one; a merge patch of `remediations/status`, conditional on the version read and
//! only when the content differs and is not older (`auditEventId`); a merge patch of
//! `remediations` for its labels; `list` across namespaces and `delete` for the retention
//! sweep; `create` (and `patch`, for a repeated one) of `events.k8s.io` Events.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;
use tracing::Instrument as _;

use super::object::{
    GROUP, KIND, MANAGED_BY, PHASE_LABEL, PLURAL, PhaseEvent, REQUEST_ID_LABEL, Remediation,
    VERSION,
};
use super::{MirrorError, Mirrored, RemediationObjects, Result, Written};
use crate::cluster::traced::{write_failed, write_span};
use crate::domain::Phase;

/// Who writes the objects, in their managed fields and Events.
const MANAGER: &str = "kubemedic";

pub struct KubeRemediations {
    client: kube::Client,
    resource: ApiResource,
    recorder: Recorder,
}

impl KubeRemediations {
    pub fn new(client: kube::Client) -> Self {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL);
        let reporter = Reporter {
            controller: MANAGER.to_owned(),
            instance: std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            resource,
        }
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.resource)
    }

    fn params() -> PatchParams {
        PatchParams {
            field_manager: Some(MANAGER.to_owned()),
            ..Default::default()
        }
    }
}

/// Run one write to the API server inside its `kube <verb> <Kind>` span (the error's HTTP
/// status code, when it has one, is the span's error type).
async fn traced<T>(
    span: tracing::Span,
    write: impl Future<Output = std::result::Result<T, kube::Error>>,
) -> std::result::Result<T, kube::Error> {
    let done = write.instrument(span.clone()).await;
    if let Err(e) = &done {
        match code_of(e) {
            Some(code) => write_failed(&span, &code),
            None => write_failed(&span, &"transport"),
        }
    }
    done
}

/// The status as the API server keeps it: a merge patch's `null`s remove fields.
fn without_nulls(status: &serde_json::Value) -> serde_json::Value {
    match status {
        serde_json::Value::Object(fields) => serde_json::Value::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn labels_of(o: &DynamicObject) -> BTreeMap<String, String> {
    o.metadata.labels.clone().unwrap_or_default()
}

fn code_of(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The API's answer as the mirror's error: the CRD missing, the namespace missing, or what the
/// server said (a 403 names the verb and resource the role lacks).
fn classify(e: kube::Error, namespace: &str) -> MirrorError {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            let about_namespace = s.details.as_ref().is_some_and(|d| d.kind == "namespaces")
                || s.message.starts_with("namespaces \"");
            if about_namespace {
                MirrorError::NoNamespace(namespace.to_owned())
            } else {
                MirrorError::NotInstalled(format!("{} ({}): {}", s.reason, s.code, s.message))
            }
        }
        kube::Error::Api(s) => {
            MirrorError::Api(format!("{} ({}): {}", s.reason, s.code, s.message))
        }
        other => MirrorError::Api(other.to_string()),
    }
}

#[async_trait]
impl RemediationObjects for KubeRemediations {
    async fn write(&self, o: &Remediation) -> Result<Written> {
        let api = self.api(&o.namespace);
        let status = serde_json::to_value(&o.status)
            .map_err(|e| MirrorError::Api(format!("the status does not serialise: {e}")))?;
        let stored = without_nulls(&status);
        // A write is conditional on the version read: another replica's write in between is
        // a conflict, and the object is read again.
        let mut read_before: Option<Option<String>> = None;
        for _ in 0..3 {
            let (current, created) = match api.get_opt(&o.name).await {
                Ok(Some(c)) => (c, false),
                Ok(None) => {
                    let mut fresh = DynamicObject::new(&o.name, &self.resource)
                        .within(&o.namespace)
                        .data(json!({ "spec": o.spec }));
                    fresh.metadata.labels = Some(o.labels.clone());
                    let post = PostParams {
                        dry_run: false,
                        field_manager: Some(MANAGER.to_owned()),
                    };
                    let span = write_span("create", KIND, Some(&o.namespace), Some(&o.name), false);
                    match traced(span, api.create(&post, &fresh)).await {
                        Ok(c) => (c, true),
                        // Another replica made it first.
                        Err(e) if code_of(&e) == Some(409) => continue,
                        Err(e) => return Err(classify(e, &o.namespace)),
                    }
                }
                Err(e) => return Err(classify(e, &o.namespace)),
            };
            let labels = labels_of(&current);
            let written = Written {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                uid: current.metadata.uid.clone(),
                // As first read: a retry after this call's own label write still reports
                // the phase the object had.
                before: read_before
                    .get_or_insert_with(|| {
                        (!created)
                            .then(|| labels.get(PHASE_LABEL).cloned())
                            .flatten()
                    })
                    .clone(),
                outdated: false,
            };
            let theirs = current.data.get("status");
            let their_event = theirs
                .and_then(|s| s.get("auditEventId"))
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0);
            if their_event > o.status.audit_event_id {
                // A later view of the request is there already.
                return Ok(Written {
                    outdated: true,
                    ..written
                });
            }
            // Both writes are conditional on the version read, so an older view from another
            // replica never lands between them. The labels go first: whoever reads the status
            // as final finds the labels final too.
            let mut version = current.metadata.resource_version.clone();
            if o.labels.iter().any(|(k, v)| labels.get(k) != Some(v)) {
                let patch = json!({
                    "metadata": { "resourceVersion": version, "labels": o.labels },
                });
                let span = write_span("patch", KIND, Some(&o.namespace), Some(&o.name), false);
                match traced(
                    span,
                    api.patch(&o.name, &Self::params(), &Patch::Merge(&patch)),
                )
                .await
                {
                    Ok(after) => version = after.metadata.resource_version,
                    Err(e) if code_of(&e) == Some(409) => continue,
                    Err(e) => return Err(classify(e, &o.namespace)),
                }
            }
            if theirs != Some(&stored) {
                let patch = json!({
                    "metadata": { "resourceVersion": version },
                    "status": status,
                });
                let span = write_span(
                    "patch",
                    "Remediation/status",
                    Some(&o.namespace),
                    Some(&o.name),
                    false,
                );
                match traced(
                    span,
                    api.patch_status(&o.name, &Self::params(), &Patch::Merge(&patch)),
                )
                .await
                {
                    Ok(_) => {}
                    Err(e) if code_of(&e) == Some(409) => continue,
                    Err(e) => return Err(classify(e, &o.namespace)),
                }
            }
            return Ok(written);
        }
        Err(MirrorError::Api(format!(
            "{}/{} kept changing while it was written (3 tries); next round",
            o.namespace, o.name
        )))
    }

    async fn list(&self) -> Result<Vec<Mirrored>> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.resource);
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let mut params = ListParams::default().labels(&selector).limit(500);
        let mut out = Vec::new();
        loop {
            let page = api.list(&params).await.map_err(|e| classify(e, ""))?;
            for o in &page.items {
                let labels = labels_of(o);
                let status = o.data.get("status");
                let text = |field: &str| status.and_then(|s| s.get(field)?.as_str());
                out.push(Mirrored {
                    namespace: o.metadata.namespace.clone().unwrap_or_default(),
                    name: o.metadata.name.clone().unwrap_or_default(),
                    request_id: labels
                        .get(REQUEST_ID_LABEL)
                        .and_then(|id| uuid::Uuid::parse_str(id).ok()),
                    phase: text("phase").and_then(Phase::parse),
                    updated_at: text("updatedAt")
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&chrono::Utc)),
                });
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(out),
            }
        }
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        let span = write_span("delete", KIND, Some(namespace), Some(name), false);
        let api = self.api(namespace);
        match traced(span, api.delete(name, &DeleteParams::default())).await {
            Ok(_) => Ok(()),
            Err(e) if code_of(&e) == Some(404) => Ok(()),
            Err(e) => Err(classify(e, namespace)),
        }
    }

    async fn publish(&self, about: &Written, event: &PhaseEvent) -> Result<()> {
        let reference = ObjectReference {
            api_version: Some(format!("{GROUP}/{VERSION}")),
            kind: Some(KIND.to_owned()),
            name: Some(about.name.clone()),
            namespace: Some(about.namespace.clone()),
            uid: about.uid.clone(),
            ..Default::default()
        };
        let event = Event {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.phase.as_str().to_owned(),
            note: Some(event.note.clone()),
            action: "Transition".to_owned(),
            secondary: None,
        };
        let span = write_span("create", "Event", Some(&about.namespace), None, false);
        traced(span, self.recorder.publish(&event, &reference))
            .await
            .map_err(|e| classify(e, &about.namespace))
    }
}
