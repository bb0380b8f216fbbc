//! Resource context: what kubemedic needs to know about a target before choosing a remedy.
//!
//! For a `(kind, name, namespace)`: the owner chain to the root owner (Pod → ReplicaSet →
//! Deployment; Pod → StatefulSet / DaemonSet; Pod → Job → CronJob; depth ≤ 10), the root owner's
//! spec hash (see [`spec_hash`] and docs/adr/0004-spec-hash.md), and the detected infrastructure
//! labels with quota details and failed detections. A [`ContextResolver`] lives for one
//! investigation and caches everything it fetched: one GET per owner hop, at most one LIST per
//! detection family per namespace, one GET of the namespace — nothing repeated.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::obj::{self, array, at, str_at};
use super::observed;
use super::{ClusterError, ClusterReader, ErrorKind, ListQuery};
use crate::domain::{DetectedLabels, QuotaUsage, Target, is_cluster_scoped};

/// One object of the owner chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub api_version: String,
    #[serde(default)]
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceContext {
    /// What was asked about.
    pub target: Target,
    /// From the target up to the root owner, target first.
    pub owner_chain: Vec<ChainLink>,
    /// The verified root owner: what a remediation acts on and history is kept for.
    pub root_owner: Target,
    pub root_api_version: String,
    /// `sha256:<hex>` of the root owner's `.spec` in canonical form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
    /// The same without `replicas` ([`drift_hash`]), when an autoscaler sets the root's replica
    /// count (`hpaEnabled`): what the history compares, its scaling being nobody's
    /// change to the configuration. Kept out of what the model reads.
    #[serde(skip)]
    pub autoscaled_drift_hash: Option<String>,
    pub detected_labels: DetectedLabels,
    /// Why the chain stopped early, if it did (an owner not found or not readable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `sha256:<hex>` of `spec` as canonical JSON (docs/adr/0004-spec-hash.md): object keys sorted
/// by their UTF-8 bytes at every depth, no insignificant whitespace, strings and numbers as
/// `serde_json` writes them, array order kept.
pub fn spec_hash(spec: &Value) -> String {
    hash_canonical(spec)
}

/// The spec hash without `replicas`, which autoscalers own: an HPA scaling the target during
/// the verification window is not somebody else changing it (spec drift).
pub fn drift_hash(spec: &Value) -> String {
    match spec {
        Value::Object(o) if o.contains_key("replicas") => {
            let mut without = o.clone();
            without.remove("replicas");
            hash_canonical(&Value::Object(without))
        }
        other => hash_canonical(other),
    }
}

/// Whether `spec`, read now, is still the spec recorded as `full` (its [`spec_hash`]) and
/// `without_replicas` (its [`drift_hash`]): nobody changed it since. Where an autoscaler sets
/// the workload's replicas (`autoscaled`) its scaling is no change by somebody else, so the
/// replicas are left out; elsewhere a changed count is somebody's change (`kubectl scale`).
/// The binding of a proof to its spec, verification's drift and the undo's
/// `undo.unchanged-since` all ask this.
pub fn unchanged_spec(
    full: Option<&str>,
    without_replicas: Option<&str>,
    spec: &Value,
    autoscaled: bool,
) -> bool {
    full == Some(spec_hash(spec).as_str())
        || (autoscaled && without_replicas == Some(drift_hash(spec).as_str()))
}

fn hash_canonical(spec: &Value) -> String {
    let mut canonical = String::new();
    crate::canonical::write(spec, &mut canonical);
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    )
}

type ListResult = Result<Arc<Vec<Value>>, ClusterError>;

/// Per-investigation resolver and cache.
pub struct ContextResolver {
    reader: Arc<dyn ClusterReader>,
    contexts: Mutex<HashMap<(String, String, String), Arc<ResourceContext>>>,
    /// LIST results per (kind, namespace), and namespace objects, fetched at most once.
    lists: Mutex<HashMap<(String, String), ListResult>>,
    namespaces: Mutex<HashMap<String, Result<Arc<Value>, ClusterError>>>,
    /// Objects fetched while walking owner chains, by (kind, namespace, name).
    objects: Mutex<HashMap<(String, String, String), Value>>,
}

const MAX_DEPTH: usize = 10;

impl ContextResolver {
    pub fn new(reader: Arc<dyn ClusterReader>) -> Self {
        Self {
            reader,
            contexts: Mutex::new(HashMap::new()),
            lists: Mutex::new(HashMap::new()),
            namespaces: Mutex::new(HashMap::new()),
            objects: Mutex::new(HashMap::new()),
        }
    }

    /// GET an object once per investigation.
    async fn get_once(
        &self,
        res: &super::ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ClusterError> {
        let key = (
            res.kind.clone(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        if let Some(o) = self.objects.lock().await.get(&key) {
            return Ok(o.clone());
        }
        let o = self.reader.get(res, namespace, name).await?;
        self.objects.lock().await.insert(key, o.clone());
        Ok(o)
    }

    /// Every context resolved so far in this investigation.
    pub async fn resolved(&self) -> Vec<Arc<ResourceContext>> {
        self.contexts.lock().await.values().cloned().collect()
    }

    /// Resolve (or return the cached) context of an object. Cluster-scoped kinds ignore the
    /// namespace.
    pub async fn resolve(
        &self,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Arc<ResourceContext>, ClusterError> {
        let res = self.reader.resource(kind).await?;
        let namespace = if res.namespaced {
            match namespace.filter(|n| !n.is_empty()) {
                Some(ns) => Some(ns.to_owned()),
                None => {
                    return Err(ClusterError::new(
                        ErrorKind::Invalid,
                        format!("{} is namespaced: a namespace is required", res.kind),
                    ));
                }
            }
        } else {
            None
        };
        let key = (
            res.kind.clone(),
            name.to_owned(),
            namespace.clone().unwrap_or_default(),
        );
        if let Some(c) = self.contexts.lock().await.get(&key) {
            return Ok(c.clone());
        }
        let first = self.get_once(&res, namespace.as_deref(), name).await?;
        let mut chain_objects = vec![first];
        let mut warnings = Vec::new();
        while chain_objects.len() < MAX_DEPTH {
            let Some(current) = chain_objects.last() else {
                break;
            };
            let owners = array(current, &["metadata", "ownerReferences"]);
            let Some(owner) = owners
                .iter()
                .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
                .or_else(|| owners.first())
            else {
                break;
            };
            let owner_kind = str_at(owner, &["kind"]).unwrap_or("");
            let owner_name = str_at(owner, &["name"]).unwrap_or("");
            let owner_res = match self.reader.resource(owner_kind).await {
                Ok(r) => r,
                Err(e) => {
                    warnings.push(format!(
                        "owner {owner_kind}/{owner_name} cannot be resolved: {e}"
                    ));
                    break;
                }
            };
            let owner_ns = if owner_res.namespaced {
                namespace.as_deref()
            } else {
                None
            };
            match self.get_once(&owner_res, owner_ns, owner_name).await {
                Ok(o) => chain_objects.push(o),
                Err(e) if e.is_unreachable() => return Err(e),
                Err(e) => {
                    warnings.push(format!("owner {owner_kind}/{owner_name} not readable: {e}"));
                    break;
                }
            }
        }
        let owner_chain: Vec<ChainLink> = chain_objects
            .iter()
            .map(|o| ChainLink {
                kind: obj::kind(o).to_owned(),
                name: obj::name(o).to_owned(),
                namespace: obj::namespace(o).map(str::to_owned),
                api_version: str_at(o, &["apiVersion"]).unwrap_or("").to_owned(),
                uid: str_at(o, &["metadata", "uid"]).unwrap_or("").to_owned(),
            })
            .collect();
        let root = chain_objects.last().cloned().unwrap_or(Value::Null);
        let root_kind = obj::kind(&root).to_owned();
        let root_owner = Target::new(
            root_kind.clone(),
            obj::name(&root).to_owned(),
            obj::namespace(&root).map(str::to_owned),
        );
        let detected_labels = self
            .detect(&root, &chain_objects, namespace.as_deref())
            .await?;
        // An autoscaler sets its count (not known: every field of the spec counts, as for a
        // target nothing scales).
        let autoscaled = detected_labels.hpa_enabled;
        let context = Arc::new(ResourceContext {
            target: Target::new(res.kind.clone(), name, namespace.clone()),
            root_api_version: str_at(&root, &["apiVersion"]).unwrap_or("").to_owned(),
            spec_hash: root.get("spec").map(spec_hash),
            autoscaled_drift_hash: root.get("spec").filter(|_| autoscaled).map(drift_hash),
            root_owner,
            owner_chain,
            detected_labels,
            warnings,
        });
        self.contexts.lock().await.insert(key, context.clone());
        Ok(context)
    }

    async fn list_once(
        &self,
        kind: &str,
        namespace: &str,
    ) -> Result<Arc<Vec<Value>>, ClusterError> {
        let key = (kind.to_owned(), namespace.to_owned());
        if let Some(r) = self.lists.lock().await.get(&key) {
            return r.clone();
        }
        let result = async {
            let res = self.reader.resource(kind).await?;
            let items = self
                .reader
                .list(&res, Some(namespace), &ListQuery::default())
                .await?;
            Ok(Arc::new(items))
        }
        .await;
        self.lists.lock().await.insert(key, result.clone());
        result
    }

    async fn namespace_once(&self, namespace: &str) -> Result<Arc<Value>, ClusterError> {
        if let Some(r) = self.namespaces.lock().await.get(namespace) {
            return r.clone();
        }
        let result = async {
            let res = self.reader.resource("Namespace").await?;
            Ok(Arc::new(self.reader.get(&res, None, namespace).await?))
        }
        .await;
        self.namespaces
            .lock()
            .await
            .insert(namespace.to_owned(), result.clone());
        result
    }

    async fn detect(
        &self,
        root: &Value,
        chain: &[Value],
        namespace: Option<&str>,
    ) -> Result<DetectedLabels, ClusterError> {
        let mut labels = DetectedLabels::default();
        let kind = obj::kind(root);
        let template = pod_template(root);
        let template_labels = match kind {
            "Pod" => at(root, &["metadata", "labels"]),
            _ => template.and_then(|t| at(t, &["metadata", "labels"])),
        };

        // Helm markers on any object of the chain.
        for o in chain.iter().rev() {
            if obj::label(o, "app.kubernetes.io/managed-by")
                .is_some_and(|m| m.eq_ignore_ascii_case("helm"))
                || obj::label(o, "helm.sh/chart").is_some()
                || obj::annotation(o, "meta.helm.sh/release-name").is_some()
            {
                labels.helm_managed = true;
            }
        }
        // GitOps on the root only: what a revert in Git changes is the root's manifest, and the
        // revert's proof (`gitrevert.gitops-managed`) asks the same of the same object.
        if let Some((tool, _)) = observed::gitops_marker(root) {
            labels.git_ops_managed = true;
            labels.git_ops_tool = Some(tool.to_owned());
        }
        // A claim its pods name outlives them; one made for a generic ephemeral volume not.
        let spec = if kind == "Pod" {
            observed::PodSpec::of_pod(root)
        } else {
            observed::PodSpec::of_template(root)
        };
        labels.stateful = kind == "StatefulSet"
            || !array(root, &["spec", "volumeClaimTemplates"]).is_empty()
            || !spec.claims.is_empty();
        if let Some(mesh) = mesh_marker(root, template, chain.first()) {
            labels.service_mesh = true;
            labels.service_mesh_type = Some(mesh.to_owned());
        }

        let Some(ns) = namespace.filter(|_| !is_cluster_scoped(kind)) else {
            return Ok(labels);
        };
        let mut failures: Vec<String> = Vec::new();
        let failed = |failures: &mut Vec<String>, label: &str, e: &ClusterError| {
            if e.is_unreachable() {
                return Err(e.clone());
            }
            failures.push(label.to_owned());
            Ok(())
        };
        let mut found = DetectedLabels::default();

        match self.list_once("PodDisruptionBudget", ns).await {
            Ok(pdbs) => {
                found.pdb_protected = pdbs
                    .iter()
                    .any(|pdb| observed::Pdb::parse(pdb).selects_labels(template_labels));
            }
            Err(e) => failed(&mut failures, "pdbProtected", &e)?,
        }
        match self.list_once("HorizontalPodAutoscaler", ns).await {
            Ok(hpas) => {
                found.hpa_enabled = hpas
                    .iter()
                    .any(|h| observed::Hpa::parse(h).scales(kind, obj::name(root)));
            }
            Err(e) => failed(&mut failures, "hpaEnabled", &e)?,
        }
        match self.list_once("NetworkPolicy", ns).await {
            Ok(policies) => found.network_isolated = !policies.is_empty(),
            Err(e) => failed(&mut failures, "networkIsolated", &e)?,
        }
        match self.list_once("ResourceQuota", ns).await {
            Ok(quotas) => {
                found.resource_quota_constrained = !quotas.is_empty();
                // Per resource, the quota that leaves the least room: every quota applies.
                for resource in observed::quota_limited(&quotas) {
                    if let Some(q) = observed::tightest_quota(&quotas, &resource) {
                        found.quota_details.insert(
                            resource,
                            QuotaUsage {
                                hard: q.hard_text,
                                used: q.used_text,
                            },
                        );
                    }
                }
            }
            Err(e) => failed(&mut failures, "resourceQuotaConstrained", &e)?,
        }
        // Namespace-level markers: sidecar injection, GitOps ownership of the namespace.
        match self.namespace_once(ns).await {
            Ok(ns_obj) => {
                if !labels.service_mesh
                    && let Some(mesh) = namespace_mesh(&ns_obj)
                {
                    labels.service_mesh = true;
                    labels.service_mesh_type = Some(mesh.to_owned());
                }
            }
            Err(e) => {
                if !labels.service_mesh {
                    failed(&mut failures, "serviceMesh", &e)?;
                }
            }
        }
        labels.pdb_protected = found.pdb_protected;
        labels.hpa_enabled = found.hpa_enabled;
        labels.network_isolated = found.network_isolated;
        labels.resource_quota_constrained = found.resource_quota_constrained;
        labels.quota_details = found.quota_details;
        labels.failed_detections = failures;
        Ok(labels)
    }
}

/// The pod template of a workload (CronJob: its job template's).
fn pod_template(root: &Value) -> Option<&Value> {
    super::observed::pod_template(root)
}

fn mesh_marker(
    root: &Value,
    template: Option<&Value>,
    pod: Option<&Value>,
) -> Option<&'static str> {
    let candidates = [template, pod, Some(root)];
    for o in candidates.into_iter().flatten() {
        let ann = |k: &str| str_at(o, &["metadata", "annotations", k]);
        let lab = |k: &str| str_at(o, &["metadata", "labels", k]);
        if ann("sidecar.istio.io/inject") == Some("true")
            || lab("sidecar.istio.io/inject") == Some("true")
            || ann("sidecar.istio.io/status").is_some()
        {
            return Some("istio");
        }
        if ann("linkerd.io/inject") == Some("enabled") || ann("linkerd.io/proxy-version").is_some()
        {
            return Some("linkerd");
        }
        for c in array(o, &["spec", "containers"]) {
            match str_at(c, &["name"]) {
                Some("istio-proxy") => return Some("istio"),
                Some("linkerd-proxy") => return Some("linkerd"),
                _ => {}
            }
        }
    }
    None
}

fn namespace_mesh(ns: &Value) -> Option<&'static str> {
    if obj::label(ns, "istio-injection") == Some("enabled")
        || obj::label(ns, "istio.io/rev").is_some()
    {
        return Some("istio");
    }
    if obj::annotation(ns, "linkerd.io/inject") == Some("enabled") {
        return Some("linkerd");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The history compares an autoscaled root's configuration without `replicas`: the
    /// resolver gives its hash so, and none for a root nothing scales.
    #[tokio::test]
    async fn an_autoscaled_roots_context_carries_its_hash_without_replicas() {
        let yaml = |hpa: &str| {
            format!(
                "apiVersion: kubemedic.io/v1alpha1\nkind: SnapshotInfo\ncapturedAt: \"2026-11-21T12:00:00Z\"\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\nspec: {{replicas: 3, selector: {{matchLabels: {{app: web}}}}, template: {{metadata: {{labels: {{app: web}}}}, spec: {{containers: [{{name: web, image: web:1}}]}}}}}}\n{hpa}"
            )
        };
        let hpa = "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web, namespace: shop}\nspec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, minReplicas: 2, maxReplicas: 6}\n";
        let spec = serde_json::json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "web:1"}]}}});
        for (hpa, want) in [(hpa, Some(drift_hash(&spec))), ("", None)] {
            let Ok(snap) = crate::cluster::SnapshotCluster::from_yaml(&yaml(hpa)) else {
                panic!("snapshot");
            };
            let resolver = ContextResolver::new(Arc::new(snap));
            let Ok(ctx) = resolver.resolve("Deployment", "web", Some("shop")).await else {
                panic!("resolve");
            };
            assert_eq!(ctx.spec_hash, Some(spec_hash(&spec)));
            assert_eq!(ctx.autoscaled_drift_hash, want, "hpa: {hpa:?}");
        }
    }

    #[test]
    fn an_autoscaler_changing_replicas_is_not_drift_but_a_new_template_is() {
        let spec = serde_json::json!({"replicas": 2, "template": {"spec": {"image": "a:1"}}});
        let scaled = serde_json::json!({"replicas": 7, "template": {"spec": {"image": "a:1"}}});
        let edited = serde_json::json!({"replicas": 2, "template": {"spec": {"image": "a:2"}}});
        assert_ne!(
            spec_hash(&spec),
            spec_hash(&scaled),
            "the spec hash sees replicas"
        );
        assert_eq!(drift_hash(&spec), drift_hash(&scaled));
        assert_ne!(drift_hash(&spec), drift_hash(&edited));
        // Unchanged since: a count an autoscaler set is nobody's change; without one, a
        // count set by hand is, and a new template always is.
        let (full, without) = (spec_hash(&spec), drift_hash(&spec));
        let same = |now: &Value, autoscaled: bool| {
            unchanged_spec(Some(&full), Some(&without), now, autoscaled)
        };
        assert!(same(&spec, false) && same(&spec, true));
        assert!(same(&scaled, true));
        assert!(!same(&scaled, false));
        assert!(!same(&edited, true) && !same(&edited, false));
        // A record with only the whole-spec hash (older executions) counts every field.
        assert!(!unchanged_spec(Some(&full), None, &scaled, true));
    }
    use serde_json::json;

    #[test]
    fn spec_hash_is_order_independent_and_field_sensitive() {
        let a = json!({"replicas": 2, "template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}});
        let b: Value = serde_json::from_str(
            r#"{"template": {"spec": {"containers": [{"image": "x:1", "name": "a"}]}}, "replicas": 2}"#,
        )
        .unwrap();
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert!(spec_hash(&a).starts_with("sha256:"));
        assert_eq!(spec_hash(&a).len(), 7 + 64);
        let c = json!({"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}});
        assert_ne!(spec_hash(&a), spec_hash(&c));
        let mut canonical = String::new();
        crate::canonical::write(&b, &mut canonical);
        assert_eq!(
            canonical,
            r#"{"replicas":2,"template":{"spec":{"containers":[{"image":"x:1","name":"a"}]}}}"#
        );
        // A fixed vector, so the canonical form cannot drift unnoticed:
        // printf '%s' '{"a":[1,"x"],"b":{"c":true}}' | sha256sum
        assert_eq!(
            spec_hash(&json!({"b": {"c": true}, "a": [1, "x"]})),
            "sha256:7bc1d4c77305c3b7a6c9baf4eb98ea1a5c613dfad39c54d270608be4f47c693d"
        );
    }
}
