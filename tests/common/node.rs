//! The real-node tier (scripts/kube-tier/node.sh) and its incidents (tests/node/): a real
//! kubelet, containerd and runc run the pods, so every status, event, restart count and log an
//! incident leaves comes from Kubernetes itself. This module plays an incident's
//! `incident.yaml` (objects, fault, the condition the alert fires on, an optional heal) with
//! Debian's kubectl and builds the alert kube-prometheus-stack's rule would send.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use serde::Deserialize;
use serde_json::{Value, json};

/// How long an incident's alert condition may take to hold.
pub const ALERT_WITHIN: Duration = Duration::from_secs(240);

/// The node tier `scripts/test` started.
#[derive(Clone)]
pub struct NodeTier {
    pub kubeconfig: PathBuf,
    pub state: PathBuf,
    pub node: String,
    /// The node's containerd socket (`ctr -a … -n k8s.io`).
    pub containerd: PathBuf,
    pub client: kube::Client,
}

impl NodeTier {
    /// The running node tier, or the loud skip (a failure in CI).
    pub async fn from_env() -> Option<Self> {
        super::init();
        let kubeconfig = PathBuf::from(super::component(
            "KUBEMEDIC_TEST_NODE_KUBECONFIG",
            "the real-node tier (scripts/kube-tier/node.sh)",
        )?);
        let state = PathBuf::from(super::component(
            "KUBEMEDIC_TEST_NODE_STATE",
            "the real-node tier (scripts/kube-tier/node.sh)",
        )?);
        let node = super::component(
            "KUBEMEDIC_TEST_NODE_NAME",
            "the real-node tier (scripts/kube-tier/node.sh)",
        )?;
        let containerd = PathBuf::from(super::component(
            "KUBEMEDIC_TEST_NODE_CONTAINERD",
            "the real-node tier (scripts/kube-tier/node.sh)",
        )?);
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("node kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config");
        let client = kube::Client::try_from(config).expect("client");
        Some(Self {
            kubeconfig,
            state,
            node,
            containerd,
            client,
        })
    }

    /// `kubectl --kubeconfig … ARGS` with `stdin`; its stdout, or its stderr as the error.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("kubectl: {e}"))?;
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .map_err(|e| format!("kubectl stdin: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("kubectl: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Run `node.sh SUBCOMMAND STATE` (kubelet-stop, kubelet-start).
    pub fn node_sh(&self, sub: &str) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kube-tier/node.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg(sub)
            .arg(&self.state)
            .output()
            .expect("node.sh");
        assert!(
            out.status.success(),
            "node.sh {sub}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The node's pressure conditions that hold (`DiskPressure`, `MemoryPressure`, `PIDPressure`)
    /// with the free space where the node keeps its state, or `None`. The kubelet taints a node
    /// under pressure and nothing schedules, so an incident would wait minutes for pods that
    /// never come: [`Incident::play_in`] says so at once instead.
    pub async fn pressure(&self) -> Option<String> {
        let node = Api::<Node>::all(self.client.clone())
            .get(&self.node)
            .await
            .ok()?;
        let held: Vec<String> = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_.ends_with("Pressure") && c.status == "True")
            .map(|c| format!("{}: {}", c.type_, c.message.unwrap_or_default()))
            .collect();
        if held.is_empty() {
            return None;
        }
        let df = Command::new("df")
            .arg("-h")
            .arg(&self.state)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        Some(format!(
            "the test node {} is under pressure, so nothing schedules on it: {}\n{df}",
            self.node,
            held.join("; ")
        ))
    }

    pub async fn node_ip(&self) -> String {
        let node: Node = Api::<Node>::all(self.client.clone())
            .get(&self.node)
            .await
            .expect("node");
        node.status
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .into_iter()
            .find(|a| a.type_ == "InternalIP")
            .map(|a| a.address)
            .unwrap_or_default()
    }
}

/// One step of a fault or a heal.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    Apply(String),
    Patch {
        kind: String,
        name: String,
        patch: Value,
    },
    Scale {
        kind: String,
        name: String,
        replicas: u32,
    },
    Delete {
        kind: String,
        name: String,
    },
    StopKubelet(bool),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodWhen {
    /// `Kind/name` of the pod's owner (through its ReplicaSet for a Deployment).
    pub of: String,
    pub container: Option<String>,
    pub waiting_reason: Option<String>,
    pub last_terminated_reason: Option<String>,
    pub restarts_at_least: Option<i32>,
    pub phase: Option<String>,
    pub unschedulable: Option<bool>,
    pub not_ready_for_seconds: Option<i64>,
    pub newest: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimWhen {
    pub name: String,
    pub seconds: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    pub pod: Option<PodWhen>,
    pub node_not_ready: Option<bool>,
    pub job_failed: Option<String>,
    pub rollout_stuck: Option<String>,
    pub claim_pending_for_seconds: Option<ClaimWhen>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertSpec {
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub class: String,
    #[serde(default)]
    pub environment: Option<String>,
    pub objects: String,
    #[serde(default = "yes")]
    pub settle: bool,
    #[serde(default)]
    pub fault: Vec<Step>,
    pub alert_when: When,
    #[serde(default)]
    pub heal: Vec<Step>,
    pub alert: AlertSpec,
}

/// An incident folder of tests/node/.
#[derive(Debug, Clone)]
pub struct Incident {
    pub name: String,
    pub dir: PathBuf,
    pub spec: Spec,
    pub expected: Value,
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Every incident of tests/node/, by name.
pub fn incidents() -> Vec<Incident> {
    let mut names: Vec<String> = std::fs::read_dir(root())
        .expect("tests/node")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().expect("utf-8 name"))
        .collect();
    names.sort();
    names.into_iter().map(|n| load(&n)).collect()
}

pub fn load(name: &str) -> Incident {
    let dir = root().join(name);
    let text = std::fs::read_to_string(dir.join("incident.yaml"))
        .unwrap_or_else(|e| panic!("{name}/incident.yaml: {e}"));
    let spec: Spec =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}/incident.yaml: {e}"));
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json"))
            .unwrap_or_else(|e| panic!("{name}/expected.json: {e}")),
    )
    .unwrap_or_else(|e| panic!("{name}/expected.json: {e}"));
    Incident {
        name: name.to_owned(),
        dir,
        spec,
        expected,
    }
}

/// What the alert condition matched: the values of the alert's placeholders.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    pub values: BTreeMap<String, String>,
}

impl Bindings {
    pub fn fill(&self, template: &str) -> String {
        let mut out = template.to_owned();
        for (k, v) in &self.values {
            out = out.replace(&format!("${{{k}}}"), v);
        }
        out
    }
}

/// An incident being played in its own namespace.
pub struct Played {
    pub incident: Incident,
    pub ns: String,
    pub bindings: Bindings,
    /// When the alert condition first held (the alert's startsAt).
    pub fired_at: DateTime<Utc>,
    /// The alert as Alertmanager's API v2 takes it (labels, annotations, startsAt, …).
    pub alert: Value,
}

impl Incident {
    pub fn namespace(&self) -> String {
        let mut ns = format!("kmn-{}", self.name);
        ns.truncate(63);
        ns.trim_end_matches('-').to_owned()
    }

    pub fn node_level(&self) -> bool {
        self.spec.alert_when.node_not_ready.is_some()
            || self
                .spec
                .fault
                .iter()
                .any(|s| matches!(s, Step::StopKubelet(true)))
    }

    /// Create the namespace, apply the objects, let them settle, break them, wait for the alert
    /// condition, heal if the incident heals itself; the alert to post.
    pub async fn play(&self, tier: &NodeTier) -> Result<Played, String> {
        self.play_in(tier, &self.namespace()).await
    }

    /// [`Incident::play`] in namespace `ns`.
    pub async fn play_in(&self, tier: &NodeTier, ns: &str) -> Result<Played, String> {
        if let Some(pressure) = tier.pressure().await {
            return Err(pressure);
        }
        let ns = ns.to_owned();
        let env = self.spec.environment.as_deref().unwrap_or("staging");
        tier.kubectl(
            &["apply", "-f", "-"],
            Some(
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
                    "labels": {"kubemedic.io/environment": env}}})
                .to_string(),
            ),
        )?;
        wait_default_token(tier, &ns).await?;
        tier.kubectl(&["-n", &ns, "apply", "-f", "-"], Some(&self.spec.objects))?;
        if self.spec.settle {
            settle(tier, &ns, &self.spec.objects)?;
        }
        for step in &self.spec.fault {
            run_step(tier, &ns, step)?;
        }
        let (fired_at, bindings) = wait_when(tier, &ns, &self.spec.alert_when).await?;
        if !self.spec.heal.is_empty() {
            for step in &self.spec.heal {
                run_step(tier, &ns, step)?;
            }
            settle(tier, &ns, &self.spec.objects)?;
        }
        self.fired(tier, ns, fired_at, bindings).await
    }

    /// The incident as its alert fires at `fired_at` for what `bindings` matched.
    async fn fired(
        &self,
        tier: &NodeTier,
        ns: String,
        fired_at: DateTime<Utc>,
        mut bindings: Bindings,
    ) -> Result<Played, String> {
        bindings.values.insert("namespace".into(), ns.clone());
        bindings.values.insert("node".into(), tier.node.clone());
        bindings
            .values
            .insert("node_ip".into(), tier.node_ip().await);
        let labels: BTreeMap<String, String> = self
            .spec
            .alert
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), bindings.fill(v)))
            .collect();
        let annotations: BTreeMap<String, String> = self
            .spec
            .alert
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), bindings.fill(v)))
            .collect();
        for (k, v) in labels.iter().chain(annotations.iter()) {
            if v.contains("${") {
                return Err(format!(
                    "{}: {k}={v} has a placeholder nothing filled",
                    self.name
                ));
            }
        }
        let alert = json!({
            "labels": labels,
            "annotations": annotations,
            "startsAt": fired_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "generatorURL": "http://prometheus-kube-prometheus-prometheus.monitoring:9090/graph",
        });
        Ok(Played {
            incident: self.clone(),
            ns,
            bindings,
            fired_at,
            alert,
        })
    }
}

impl Played {
    /// The alert as Prometheus fires it again after a remediation that did not help: once the
    /// condition holds again for the newest pod (a new pod is a new alert), with the labels of
    /// what it matches now. `None` when that is the same alert (still firing: Alertmanager
    /// sends nothing new).
    pub async fn refire(&self, tier: &NodeTier) -> Result<Option<Played>, String> {
        let mut when = self.incident.spec.alert_when.clone();
        if let Some(p) = when.pod.as_mut() {
            p.newest = Some(true);
        }
        let (fired_at, bindings) = wait_when(tier, &self.ns, &when).await?;
        let again = self
            .incident
            .fired(tier, self.ns.clone(), fired_at, bindings)
            .await?;
        Ok((again.alert["labels"] != self.alert["labels"]).then_some(again))
    }
}

pub async fn wait_default_token(tier: &NodeTier, ns: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = tier.kubectl(&["-n", ns, "get", "secrets", "-o", "name"], None)?;
        if out.contains("secret/default-token") {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{ns}: no default service account token after 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Wait until every Deployment, StatefulSet and DaemonSet among `objects` has rolled out.
fn settle(tier: &NodeTier, ns: &str, objects: &str) -> Result<(), String> {
    for doc in objects.split("\n---") {
        let Ok(v) = serde_saphyr::from_str::<Value>(doc) else {
            continue;
        };
        let kind = v["kind"].as_str().unwrap_or("");
        if matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet") {
            let name = v["metadata"]["name"].as_str().unwrap_or("");
            tier.kubectl(
                &[
                    "-n",
                    ns,
                    "rollout",
                    "status",
                    &format!("{}/{name}", kind.to_lowercase()),
                    "--timeout=120s",
                ],
                None,
            )?;
        }
    }
    Ok(())
}

fn run_step(tier: &NodeTier, ns: &str, step: &Step) -> Result<(), String> {
    match step {
        Step::Apply(yaml) => tier.kubectl(&["-n", ns, "apply", "-f", "-"], Some(yaml))?,
        Step::Patch { kind, name, patch } => tier.kubectl(
            &[
                "-n",
                ns,
                "patch",
                &kind.to_lowercase(),
                name,
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
            None,
        )?,
        Step::Scale {
            kind,
            name,
            replicas,
        } => tier.kubectl(
            &[
                "-n",
                ns,
                "scale",
                &format!("{}/{name}", kind.to_lowercase()),
                &format!("--replicas={replicas}"),
            ],
            None,
        )?,
        Step::Delete { kind, name } => tier.kubectl(
            &[
                "-n",
                ns,
                "delete",
                &kind.to_lowercase(),
                name,
                "--wait=false",
            ],
            None,
        )?,
        Step::StopKubelet(stop) => {
            if *stop {
                tier.node_sh("kubelet-stop");
            }
            String::new()
        }
    };
    Ok(())
}

/// Poll until `when` holds; the time it first held and what it matched.
async fn wait_when(
    tier: &NodeTier,
    ns: &str,
    when: &When,
) -> Result<(DateTime<Utc>, Bindings), String> {
    let deadline = Instant::now() + ALERT_WITHIN;
    let mut last = String::new();
    loop {
        match holds(tier, ns, when).await {
            Ok(Some(b)) => return Ok((Utc::now(), b)),
            Ok(None) => {}
            Err(e) => last = e,
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{ns}: the alert condition {when:?} did not hold within {ALERT_WITHIN:?} {last}\n{}{}",
                tier.pressure().await.unwrap_or_default(),
                tier.kubectl(&["-n", ns, "get", "pods,events", "-o", "wide"], None)
                    .unwrap_or_default()
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Pods owned by `of` (`Kind/name`), oldest first.
pub async fn pods_of(tier: &NodeTier, ns: &str, of: &str) -> Result<Vec<Pod>, String> {
    let (kind, name) = of
        .split_once('/')
        .ok_or_else(|| format!("`of: {of}` is not Kind/name"))?;
    let pods = Api::<Pod>::namespaced(tier.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let owners: Vec<String> = if kind == "Deployment" {
        Api::<ReplicaSet>::namespaced(tier.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|rs| {
                rs.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "Deployment" && o.name == name)
            })
            .filter_map(|rs| rs.metadata.name)
            .map(|n| format!("ReplicaSet/{n}"))
            .collect()
    } else {
        vec![of.to_owned()]
    };
    let mut mine: Vec<Pod> = pods
        .into_iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| owners.contains(&format!("{}/{}", o.kind, o.name)))
                || (kind == "Pod" && p.metadata.name.as_deref() == Some(name))
        })
        .collect();
    mine.sort_by_key(|p| {
        p.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
    });
    Ok(mine)
}

fn pod_matches(p: &Pod, w: &PodWhen) -> Option<String> {
    let status = p.status.as_ref()?;
    let statuses = status.container_statuses.clone().unwrap_or_default();
    let container = statuses
        .iter()
        .find(|c| w.container.as_ref().is_none_or(|want| &c.name == want));
    if let Some(want) = &w.phase
        && status.phase.as_deref() != Some(want.as_str())
    {
        return None;
    }
    if let Some(want) = &w.waiting_reason {
        let got = container?
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .reason
            .clone()?;
        if &got != want {
            return None;
        }
    }
    if let Some(want) = &w.last_terminated_reason {
        let c = container?;
        let last = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .or_else(|| c.state.as_ref().and_then(|s| s.terminated.as_ref()))?;
        if last.reason.as_deref() != Some(want.as_str()) {
            return None;
        }
    }
    if let Some(n) = w.restarts_at_least
        && container?.restart_count < n
    {
        return None;
    }
    if w.unschedulable == Some(true) {
        let cond = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled")?;
        if cond.status != "False" || cond.reason.as_deref() != Some("Unschedulable") {
            return None;
        }
    }
    if let Some(secs) = w.not_ready_for_seconds {
        if status.phase.as_deref() != Some("Running") {
            return None;
        }
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")?;
        let since = ready.last_transition_time.as_ref()?.0.as_second();
        if ready.status != "False" || Utc::now().timestamp() - since < secs {
            return None;
        }
    }
    Some(
        container
            .map(|c| c.name.clone())
            .or_else(|| w.container.clone())
            .unwrap_or_default(),
    )
}

async fn holds(tier: &NodeTier, ns: &str, when: &When) -> Result<Option<Bindings>, String> {
    let mut b = Bindings::default();
    if let Some(w) = &when.pod {
        // A pod being deleted is leaving: a remediation that deleted a crash-looping pod does
        // not leave its alert holding while the pod's last status is still listed.
        let mut pods: Vec<Pod> = pods_of(tier, ns, &w.of)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if w.newest == Some(true) {
            pods = pods.into_iter().rev().take(1).collect();
        }
        for p in pods {
            if let Some(container) = pod_matches(&p, w) {
                b.values
                    .insert("pod".into(), p.metadata.name.clone().unwrap_or_default());
                b.values
                    .insert("pod_uid".into(), p.metadata.uid.clone().unwrap_or_default());
                b.values.insert("container".into(), container);
                return Ok(Some(b));
            }
        }
        return Ok(None);
    }
    if when.node_not_ready == Some(true) {
        let node: Node = Api::<Node>::all(tier.client.clone())
            .get(&tier.node)
            .await
            .map_err(|e| e.to_string())?;
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        return Ok(ready.filter(|c| c.status != "True").map(|_| b));
    }
    if let Some(name) = &when.job_failed {
        let job: Job = Api::<Job>::namespaced(tier.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| e.to_string())?;
        let failed = job
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True");
        b.values.insert("job".into(), name.clone());
        return Ok(failed.then_some(b));
    }
    if let Some(name) = &when.rollout_stuck {
        let d: Deployment = Api::<Deployment>::namespaced(tier.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| e.to_string())?;
        let stuck = d
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| {
                c.type_ == "Progressing"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
            });
        return Ok(stuck.then_some(b));
    }
    if let Some(c) = &when.claim_pending_for_seconds {
        let pvc: PersistentVolumeClaim =
            Api::<PersistentVolumeClaim>::namespaced(tier.client.clone(), ns)
                .get(&c.name)
                .await
                .map_err(|e| e.to_string())?;
        let pending = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
        let age = pvc
            .metadata
            .creation_timestamp
            .map(|t| Utc::now().timestamp() - t.0.as_second())
            .unwrap_or(0);
        b.values.insert("claim".into(), c.name.clone());
        return Ok((pending && age >= c.seconds).then_some(b));
    }
    Err("alert_when names no condition".into())
}

/// Does the alert's condition still hold (Prometheus's rule, evaluated on the cluster as
/// kube-state-metrics would show it)? Used to resolve the alert after a remediation.
pub async fn still_holds(tier: &NodeTier, played: &Played) -> bool {
    matches!(
        holds(tier, &played.ns, &played.incident.spec.alert_when).await,
        Ok(Some(_))
    )
}
