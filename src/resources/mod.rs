//! kubemedic's configuration as Kubernetes objects (docs/kubernetes-resources.md): the
//! `kubemedic.io/v1alpha1` kinds `RemediationWorkflow`, `InvestigationPlaybook`,
//! `ClusterContext` and `ApprovalPolicy`, watched with kube-runtime and put in force without a
//! restart.
//!
//! One watch per kind, cluster-wide so that an object in the wrong namespace can be reported,
//! but only objects in kubemedic's own namespace are read: whoever may write an
//! `ApprovalPolicy` may approve everything, and a `RemediationWorkflow` with the Job engine runs
//! an image of its author's choice. On every change of a kind, every object of it is checked
//! with the same validation as `kubemedic catalog validate` / `policy test`, together with the
//! files (an object wins over a file of the same action type, playbook name or policy module):
//!
//! - a valid object is in force (`Ready=True`, reason `Loaded`);
//! - an invalid one gets `Ready=False` with the message naming the field, and a Warning event;
//!   its last good version (seen by this process) stays in force;
//! - an object elsewhere gets `Ready=False`, reason `Ignored`, and a Warning event.
//!
//! Every change of an object's condition is audited once across replicas (the store's nonce)
//! with the object's UID, generation, the writer the API server recorded (the last field
//! manager) and the resulting catalog hash or policy revision. `ClusterContext` objects are the
//! cluster-wide pinned context: they are written into the store's memory (one store of truth,
//! the objects win; the memory API refuses to change it while they exist).

mod kinds;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

pub use kinds::Kind;

use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::domain::{AuditDraft, CLUSTER_CONTEXT_WRITER, MAX_MEMORY_CHARS, PINNED_CLUSTER};
use crate::investigate::playbooks::{Playbook, PlaybookSpec, Playbooks};
use crate::live::Live;
use crate::policy::{Overlay, RegoGate};
use crate::store::Store;

/// What kubemedic reads its configuration objects into.
pub struct Resources {
    pub client: Client,
    /// kubemedic's own namespace: the only one objects are read from.
    pub namespace: String,
    pub catalog_dir: Option<PathBuf>,
    pub playbooks_dir: Option<PathBuf>,
    pub catalog: Arc<Live<Catalog>>,
    pub playbooks: Arc<Live<Playbooks>>,
    pub policy: Arc<RegoGate>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    /// The last good version of each object (by `kind/name`): what stays in force while a
    /// newer version is invalid.
    good: Mutex<HashMap<String, Value>>,
    /// The missing CRDs or permissions were reported (once for all kinds).
    warned: std::sync::atomic::AtomicBool,
}

/// What an object's `Ready` condition says.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    ready: bool,
    reason: &'static str,
    message: String,
    /// Extra status fields (`workflows`, `catalogHash`, `revision`…).
    extra: Value,
}

impl Verdict {
    fn loaded(message: String, extra: Value) -> Self {
        Self {
            ready: true,
            reason: "Loaded",
            message,
            extra,
        }
    }
    fn invalid(message: String) -> Self {
        Self {
            ready: false,
            reason: "Invalid",
            // One line, as `kubectl get` and `describe` show it.
            message: message.replace("):\n", "): ").replace('\n', "; "),
            extra: json!({}),
        }
    }
}

impl Resources {
    #[allow(clippy::too_many_arguments)] // the daemon's wiring, named at its one call site
    pub fn new(
        client: Client,
        namespace: String,
        (catalog_dir, playbooks_dir): (Option<PathBuf>, Option<PathBuf>),
        (catalog, playbooks): crate::investigate::LiveConfig,
        policy: Arc<RegoGate>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            namespace,
            catalog_dir,
            playbooks_dir,
            catalog,
            playbooks,
            policy,
            store,
            clock,
            good: Mutex::new(HashMap::new()),
            warned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Watch every kind until the process ends.
    pub fn spawn(self: &Arc<Self>) {
        for kind in Kind::ALL {
            let me = self.clone();
            tokio::spawn(async move { me.watch(kind).await });
        }
    }

    async fn watch(self: Arc<Self>, kind: Kind) {
        let ar = kind.api_resource();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let writer = reflector::store::Writer::new(ar.clone());
        let reader = writer.as_reader();
        let events = reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
        futures::pin_mut!(events);
        let mut failing = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => {
                    if failing {
                        info!(kind = kind.name(), "watching custom resources again");
                        failing = false;
                    }
                    let mut objects: Vec<Arc<DynamicObject>> = reader.state();
                    objects.sort_by_key(|o| (o.namespace(), o.name_any()));
                    self.reconcile(kind, &objects).await;
                }
                Ok(_) => {}
                Err(e) => {
                    if !failing {
                        failing = true;
                        // An unreachable API server is the cluster's to report (once, on
                        // /readyz and in the log); missing CRDs or permissions are ours, said
                        // once for all the kinds.
                        let refused = matches!(
                            &e,
                            watcher::Error::InitialListFailed(kube::Error::Api(_))
                                | watcher::Error::WatchStartFailed(kube::Error::Api(_))
                        );
                        if refused && !self.warned.swap(true, std::sync::atomic::Ordering::AcqRel) {
                            warn!(kind = kind.name(), error = %e,
                                "cannot watch kubemedic's custom resources (are the CRDs installed and may kubemedic list them?); files stay in force, retrying");
                        } else {
                            tracing::debug!(kind = kind.name(), error = %e, "watch of custom resources interrupted; retrying");
                        }
                    }
                }
            }
        }
    }

    /// Check every object of `kind`, put what is valid in force, report on each.
    async fn reconcile(&self, kind: Kind, objects: &[Arc<DynamicObject>]) {
        let (ours, elsewhere): (Vec<_>, Vec<_>) = objects
            .iter()
            .partition(|o| o.namespace().as_deref() == Some(self.namespace.as_str()));
        for o in elsewhere {
            // Another kubemedic, in that namespace, may own it: never contradict it. Reported
            // ignored already for this generation (by this kubemedic or another, each naming
            // its own namespace): leave it, or two installations would rewrite each other's
            // report for ever.
            let generation = o.metadata.generation.unwrap_or(0);
            let reported = o
                .data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["reason"] != "Ignored" || c["observedGeneration"] == generation);
            if reported {
                continue;
            }
            let v = Verdict {
                ready: false,
                reason: "Ignored",
                message: format!(
                    "kubemedic reads {} objects only from its own namespace {}: this one has no effect",
                    kind.name(),
                    self.namespace
                ),
                extra: json!({}),
            };
            self.report(kind, o, &v, None).await;
        }
        let verdicts = match kind {
            Kind::Workflow => self.workflows(&ours),
            Kind::Playbook => self.playbooks(&ours),
            Kind::Context => self.context(&ours).await,
            Kind::Policy => self.policy(&ours),
        };
        let effect = verdicts.1;
        for (o, v) in ours.iter().zip(verdicts.0) {
            self.report(kind, o, &v, effect.as_deref()).await;
        }
    }

    /// The version of `o` to use: its spec if `valid`, else its last good one.
    fn pick(&self, kind: Kind, o: &DynamicObject, valid: bool) -> Option<Value> {
        let key = format!("{}/{}", kind.name(), o.name_any());
        let mut good = self.good.lock().unwrap_or_else(|p| p.into_inner());
        let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
        if valid {
            good.insert(key, spec.clone());
            Some(spec)
        } else {
            good.get(&key).cloned()
        }
    }

    // ---- RemediationWorkflow -------------------------------------------------------------

    /// The catalog files with `objects` over them; each object's verdict and the catalog hash.
    fn workflows(&self, objects: &[&Arc<DynamicObject>]) -> (Vec<Verdict>, Option<String>) {
        let files = match Catalog::file_sources(self.catalog_dir.as_deref()) {
            Ok(f) => f,
            Err(e) => {
                let v = Verdict::invalid(format!("the catalog files do not load: {e}"));
                return (objects.iter().map(|_| v.clone()).collect(), None);
            }
        };
        let file_types: Vec<(PathBuf, String)> = files
            .iter()
            .filter_map(|(p, t)| action_type_of(t).map(|a| (p.clone(), a)))
            .collect();
        // Each object alone over the files.
        let mut verdicts = Vec::new();
        let mut chosen: Vec<(PathBuf, String, String)> = Vec::new(); // path, text, action type
        for o in objects {
            let path = PathBuf::from(format!(
                "RemediationWorkflow/{}/{}",
                self.namespace,
                o.name_any()
            ));
            let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
            let text = spec.to_string();
            let alone = with_objects(&files, &file_types, &[(path.clone(), text)]);
            let verdict = Catalog::from_sources(&alone).err().map(|e| e.to_string());
            let valid = verdict.is_none();
            match (self.pick(Kind::Workflow, o, valid), verdict) {
                (Some(v), None) => {
                    let at = action_type_of(&v.to_string()).unwrap_or_default();
                    chosen.push((path, v.to_string(), at));
                    verdicts.push(None);
                }
                (Some(v), Some(e)) => {
                    let at = action_type_of(&v.to_string()).unwrap_or_default();
                    chosen.push((path, v.to_string(), at));
                    verdicts.push(Some(format!("{e}; the last good version stays in force")));
                }
                (None, Some(e)) => verdicts.push(Some(format!("{e}; not in force"))),
                (None, None) => verdicts.push(None),
            }
        }
        let extra: Vec<(PathBuf, String)> = chosen
            .iter()
            .map(|(p, t, _)| (p.clone(), t.clone()))
            .collect();
        let all = with_objects(&files, &file_types, &extra);
        match Catalog::from_sources(&all) {
            Ok(catalog) => {
                let hash = digest(&all);
                self.catalog.set(Arc::new(catalog));
                let out = objects
                    .iter()
                    .zip(verdicts)
                    .map(|(o, bad)| {
                        let path = format!("RemediationWorkflow/{}/{}", self.namespace, o.name_any());
                        let at = chosen
                            .iter()
                            .find(|(p, _, _)| p.display().to_string() == path)
                            .map(|(_, _, a)| a.clone())
                            .unwrap_or_default();
                        let shadows: Vec<String> = file_types
                            .iter()
                            .filter(|(_, a)| *a == at)
                            .map(|(p, _)| p.display().to_string())
                            .collect();
                        let workflows: Vec<String> = self
                            .catalog
                            .get()
                            .workflows()
                            .iter()
                            .filter(|w| w.source == path)
                            .map(|w| w.id.clone())
                            .collect();
                        match bad {
                            Some(e) => Verdict::invalid(e),
                            None => Verdict::loaded(
                                format!(
                                    "in force: {} (catalog {hash}){}",
                                    workflows.join(", "),
                                    if shadows.is_empty() {
                                        String::new()
                                    } else {
                                        format!("; overrides {}", shadows.join(", "))
                                    }
                                ),
                                json!({"workflows": workflows, "shadows": shadows, "catalogHash": hash}),
                            ),
                        }
                    })
                    .collect();
                (out, Some(format!("catalog {hash}")))
            }
            Err(e) => {
                // The objects conflict with each other: nothing changes.
                let v = Verdict::invalid(format!(
                    "together with the other RemediationWorkflows: {e}; the catalog in force is unchanged"
                ));
                (objects.iter().map(|_| v.clone()).collect(), None)
            }
        }
    }

    // ---- InvestigationPlaybook -----------------------------------------------------------

    fn playbooks(&self, objects: &[&Arc<DynamicObject>]) -> (Vec<Verdict>, Option<String>) {
        let files = match crate::investigate::load_playbooks(self.playbooks_dir.as_deref()) {
            Ok(f) => f,
            Err(e) => {
                let v = Verdict::invalid(format!("the playbook files do not load: {e}"));
                return (objects.iter().map(|_| v.clone()).collect(), None);
            }
        };
        let mut books: Vec<Playbook> = Vec::new();
        let mut verdicts = Vec::new();
        for o in objects {
            let compiled = compile_playbook(o);
            let valid = compiled.is_ok();
            let used = self
                .pick(Kind::Playbook, o, valid)
                .and_then(|spec| compile_spec(&o.name_any(), spec).ok());
            let name = used.as_ref().map(|b| b.spec.name.clone());
            if let Some(b) = used {
                if books.iter().any(|x| x.spec.name == b.spec.name) {
                    verdicts.push(Verdict::invalid(format!(
                        "playbook `{}` is defined by another InvestigationPlaybook too; not in force",
                        b.spec.name
                    )));
                    continue;
                }
                books.push(b);
            }
            verdicts.push(match compiled {
                Ok(b) => Verdict::loaded(
                    format!(
                        "in force: playbook `{}`{}",
                        b.spec.name,
                        if files.all().iter().any(|f| f.spec.name == b.spec.name) {
                            " (overrides the file of that name)"
                        } else {
                            ""
                        }
                    ),
                    json!({}),
                ),
                Err(e) => Verdict::invalid(match name {
                    Some(_) => format!("{e}; the last good version stays in force"),
                    None => format!("{e}; not in force"),
                }),
            });
        }
        let count = books.len();
        self.playbooks.set(Arc::new(files.with(&books)));
        (
            verdicts,
            Some(format!("{count} playbook object(s) in force")),
        )
    }

    // ---- ClusterContext ------------------------------------------------------------------

    async fn context(&self, objects: &[&Arc<DynamicObject>]) -> (Vec<Verdict>, Option<String>) {
        let mut parts: Vec<(String, String)> = Vec::new();
        let mut verdicts = Vec::new();
        for o in objects {
            let content = o
                .data
                .pointer("/spec/content")
                .and_then(Value::as_str)
                .map(str::trim)
                .unwrap_or_default();
            let check = if content.is_empty() {
                Err("spec.content: must not be empty".to_owned())
            } else if content.chars().count() > MAX_MEMORY_CHARS {
                Err(format!(
                    "spec.content: {} characters, more than {MAX_MEMORY_CHARS}",
                    content.chars().count()
                ))
            } else {
                Ok(())
            };
            let used = self
                .pick(Kind::Context, o, check.is_ok())
                .and_then(|s| s.get("content").and_then(Value::as_str).map(str::to_owned));
            if let Some(c) = &used {
                parts.push((o.name_any(), crate::redact::sanitize_text(c.trim())));
            }
            verdicts.push(match check {
                Ok(()) => Verdict::loaded(
                    "in force: pinned for every investigation (the cluster-wide memory)".into(),
                    json!({}),
                ),
                Err(e) if used.is_some() => {
                    Verdict::invalid(format!("{e}; the last good version stays in force"))
                }
                Err(e) => Verdict::invalid(format!("{e}; not in force")),
            });
        }
        let text = match parts.len() {
            0 => None,
            1 => parts.first().map(|(_, c)| c.clone()),
            _ => Some(
                parts
                    .iter()
                    .map(|(n, c)| format!("[{n}] {c}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        }
        .map(|t| t.chars().take(MAX_MEMORY_CHARS).collect::<String>());
        let actor = format!(
            "{CLUSTER_CONTEXT_WRITER}{}/{}",
            self.namespace,
            parts
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        let current = self.store.memory(PINNED_CLUSTER).await.ok().flatten();
        let ours = current
            .as_ref()
            .is_some_and(|m| m.updated_by.starts_with(CLUSTER_CONTEXT_WRITER));
        let write = match (&text, &current) {
            (Some(t), Some(m)) => m.content != *t || !ours,
            (Some(_), None) => true,
            // The objects are gone: what they wrote goes with them; a person's note stays.
            (None, _) => ours,
        };
        if write
            && let Err(e) = self
                .store
                .set_memory(PINNED_CLUSTER, text.as_deref(), &actor)
                .await
        {
            warn!(error = %e, "the cluster context cannot be written to the store; retrying on the next change");
            let v = Verdict::invalid(format!("the store cannot take it now: {e}"));
            return (objects.iter().map(|_| v.clone()).collect(), None);
        }
        (verdicts, Some("cluster-wide pinned context".into()))
    }

    // ---- ApprovalPolicy ------------------------------------------------------------------

    fn policy(&self, objects: &[&Arc<DynamicObject>]) -> (Vec<Verdict>, Option<String>) {
        if objects.is_empty() {
            if self.policy.overlay().is_some()
                && let Err(e) = self.policy.set_overlay(None, vec![])
            {
                warn!(error = %e, "going back to the policy directory failed; the objects' policy stays");
            }
            return (vec![], None);
        }
        let mut files: Vec<(String, String)> = Vec::new();
        let mut cases = Vec::new();
        let mut problems: Vec<Option<String>> = Vec::new();
        for o in objects {
            let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
            match policy_parts(&o.name_any(), &spec) {
                Ok((mods, tests)) => {
                    let clash = mods
                        .iter()
                        .find(|(n, _)| files.iter().any(|(f, _)| f == n))
                        .map(|(n, _)| n.clone());
                    match clash {
                        Some(n) => problems.push(Some(format!(
                            "spec.modules.{n}: another ApprovalPolicy defines this module too"
                        ))),
                        None => {
                            files.extend(mods);
                            cases.extend(tests);
                            problems.push(None);
                        }
                    }
                }
                Err(e) => problems.push(Some(e)),
            }
        }
        let names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{} (generation {})",
                    self.namespace,
                    o.name_any(),
                    o.metadata.generation.unwrap_or(0)
                )
            })
            .collect();
        if problems.iter().any(Option::is_some) {
            let verdicts = problems
                .into_iter()
                .map(|p| match p {
                    Some(e) => Verdict::invalid(format!(
                        "{e}; the policy in force is unchanged ({})",
                        self.policy.origin()
                    )),
                    None => Verdict::invalid(format!(
                        "not applied: another ApprovalPolicy is invalid; the policy in force is unchanged ({})",
                        self.policy.origin()
                    )),
                })
                .collect();
            return (verdicts, None);
        }
        let overlay = Overlay {
            files,
            origin: format!("ApprovalPolicy {}", names.join(", ")),
        };
        let unchanged = self.policy.overlay().as_ref() == Some(&overlay);
        let result = if unchanged {
            Ok(self
                .policy
                .snapshot()
                .revision()
                .unwrap_or_default()
                .to_owned())
        } else {
            self.policy.set_overlay(Some(overlay), cases)
        };
        match result {
            Ok(revision) => {
                let v = Verdict::loaded(
                    format!(
                        "in force: policy revision {revision} ({})",
                        self.policy.origin()
                    ),
                    json!({"revision": revision}),
                );
                (
                    objects.iter().map(|_| v.clone()).collect(),
                    Some(format!("policy {revision}")),
                )
            }
            Err(e) => {
                let v = Verdict::invalid(format!(
                    "{e}; the policy in force is unchanged ({})",
                    self.policy.origin()
                ));
                (objects.iter().map(|_| v.clone()).collect(), None)
            }
        }
    }

    // ---- Reporting -----------------------------------------------------------------------

    /// Write `v` into the object's status (when it changed), with an event and an audit event.
    async fn report(&self, kind: Kind, o: &DynamicObject, v: &Verdict, effect: Option<&str>) {
        let generation = o.metadata.generation.unwrap_or(0);
        let status = if v.ready { "True" } else { "False" };
        let current = o
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
        let same = current.is_some_and(|c| {
            c["status"] == status
                && c["reason"] == v.reason
                && c["message"] == v.message.as_str()
                && c["observedGeneration"] == generation
        });
        if same {
            return;
        }
        let since = match current {
            Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
            _ => json!(
                self.clock
                    .now()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        };
        let mut body = json!({
            "observedGeneration": generation,
            "conditions": [{
                "type": "Ready", "status": status, "reason": v.reason, "message": v.message,
                "observedGeneration": generation, "lastTransitionTime": since,
            }],
        });
        if let (Some(b), Some(extra)) = (body.as_object_mut(), v.extra.as_object()) {
            b.extend(extra.clone());
        }
        let ns = o.namespace().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &kind.api_resource());
        let patch = Patch::Merge(json!({"status": body}));
        for attempt in 1..=3 {
            match api
                .patch_status(&o.name_any(), &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => break,
                Err(e) if attempt == 3 => {
                    warn!(kind = kind.name(), name = %o.name_any(), error = %e,
                        "cannot write the object's status; it is written again on the next change");
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await,
            }
        }
        let uid = o.metadata.uid.clone().unwrap_or_default();
        // One replica audits and records the event for each (object, generation, verdict).
        let once = format!("cr:{uid}:{generation}:{}:{}", v.reason, short(&v.message));
        if !self.store.consume_nonce(&once, None).await.unwrap_or(false) {
            return;
        }
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "kubemedic".into(),
                instance: std::env::var("HOSTNAME").ok(),
            },
        );
        let reference = o.object_ref(&kind.api_resource());
        let event = Event {
            type_: if v.ready {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: v.reason.into(),
            note: Some(v.message.chars().take(1000).collect()),
            action: "Load".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &reference).await {
            warn!(kind = kind.name(), name = %o.name_any(), error = %e, "cannot record the event");
        }
        let writer = writer(o);
        let draft = AuditDraft::new(
            "config_object",
            &writer,
            format!(
                "{} {ns}/{} generation {generation} by {writer}: {} — {}",
                kind.name(),
                o.name_any(),
                v.reason,
                v.message
            ),
        )
        .with_payload(json!({
            "kind": kind.name(),
            "namespace": ns,
            "name": o.name_any(),
            "uid": uid,
            "generation": generation,
            "writer": writer,
            "ready": v.ready,
            "reason": v.reason,
            "message": v.message,
            "in_force": effect,
        }));
        if let Err(e) = self.store.append_audit(None, None, &draft).await {
            warn!(error = %e, "the configuration change is not in the audit trail");
        }
    }
}

/// `actionType.name` of a catalog source (YAML or JSON text).
fn action_type_of(text: &str) -> Option<String> {
    let v: Value = serde_saphyr::from_str(text).ok()?;
    v.pointer("/actionType/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The files without those whose action type an object defines, then the objects.
fn with_objects(
    files: &[(PathBuf, String)],
    file_types: &[(PathBuf, String)],
    objects: &[(PathBuf, String)],
) -> Vec<(PathBuf, String)> {
    let taken: Vec<String> = objects
        .iter()
        .filter_map(|(_, t)| action_type_of(t))
        .collect();
    let mut out: Vec<(PathBuf, String)> = files
        .iter()
        .filter(|(p, _)| {
            !file_types
                .iter()
                .any(|(fp, a)| fp == p && taken.contains(a))
        })
        .cloned()
        .collect();
    out.extend(objects.iter().cloned());
    out
}

/// `sha256:` and 16 hex digits over sources.
fn digest(sources: &[(PathBuf, String)]) -> String {
    let mut h = Sha256::new();
    for (p, t) in sources {
        h.update(p.display().to_string().as_bytes());
        h.update([0]);
        h.update(t.as_bytes());
        h.update([0]);
    }
    let hex = hex::encode(h.finalize());
    format!("sha256:{}", hex.get(..16).unwrap_or(&hex))
}

fn compile_playbook(o: &DynamicObject) -> Result<Playbook, String> {
    compile_spec(
        &o.name_any(),
        o.data.get("spec").cloned().unwrap_or(Value::Null),
    )
}

/// A playbook from an object's spec (its `name` defaults to the object's).
fn compile_spec(name: &str, mut spec: Value) -> Result<Playbook, String> {
    if let Some(m) = spec.as_object_mut() {
        m.entry("name").or_insert_with(|| json!(name));
    }
    let spec: PlaybookSpec = serde_path_to_error::deserialize(spec)
        .map_err(|e| format!("spec.{}: {}", e.path(), e.inner()))?;
    Playbook::compile(spec).map_err(|e| format!("spec: {e}"))
}

/// Rego modules (file name, source) and the policy's test cases.
type PolicyParts = (Vec<(String, String)>, Vec<crate::policy::cases::Case>);

/// An ApprovalPolicy's modules (`spec.data` as one more module, package `kubemedic.data`)
/// and test cases.
fn policy_parts(object: &str, spec: &Value) -> Result<PolicyParts, String> {
    let mut files = Vec::new();
    let modules = spec
        .get("modules")
        .and_then(Value::as_object)
        .ok_or("spec.modules: a map of file names to Rego is required")?;
    for (name, text) in modules {
        if !name.ends_with(".rego") || name.contains('/') || name.starts_with('.') {
            return Err(format!(
                "spec.modules.{name}: a module's name is a file name ending in .rego"
            ));
        }
        let text = text
            .as_str()
            .ok_or_else(|| format!("spec.modules.{name}: must be Rego source text"))?;
        files.push((name.clone(), text.to_owned()));
    }
    if let Some(data) = spec.get("data").and_then(Value::as_object)
        && !data.is_empty()
    {
        let mut module = String::from("package kubemedic.data\n\n");
        for (key, value) in data {
            let ident = key
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident {
                return Err(format!(
                    "spec.data.{key}: keys must be Rego identifiers (letters, digits, _)"
                ));
            }
            module.push_str(&format!("{key} := {value}\n"));
        }
        files.push((format!("zz-data-{object}.rego"), module));
    }
    let mut cases = Vec::new();
    for (i, t) in spec
        .get("tests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let case: crate::policy::cases::Case = serde_path_to_error::deserialize(t.clone())
            .map_err(|e| format!("spec.tests[{i}].{}: {}", e.path(), e.inner()))?;
        cases.push(case);
    }
    Ok((files, cases))
}

/// Who last wrote the object, as the API server recorded it: the field manager of its latest
/// managed-fields entry (and the operation).
fn writer(o: &DynamicObject) -> String {
    o.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() != Some("status"))
        .max_by_key(|m| m.time.as_ref().map(|t| t.0.to_string()))
        .map(|m| {
            format!(
                "{} ({})",
                m.manager.as_deref().unwrap_or("unknown manager"),
                m.operation.as_deref().unwrap_or("?")
            )
        })
        .unwrap_or_else(|| "unknown writer".into())
}

fn short(s: &str) -> String {
    let mut h = Sha256::new();
    h.update(s.as_bytes());
    hex::encode(h.finalize()).chars().take(12).collect()
}
