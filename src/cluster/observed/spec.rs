//! A pod spec (a pod's own, or a workload's template's), as far as decisions read it: what its
//! containers ask for and are limited to, and where the scheduler may place it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::host_ports;
use crate::cluster::obj::{array, at, i64_at, map_pairs, str_at};
use crate::cluster::quantity;
use crate::cluster::selector::Selector;

/// One container of a pod spec, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    /// `resources.requests` and `resources.limits`, as written (`memory: 256Mi`).
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

/// A container's probe, with the kubelet's defaults for what it leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub initial_delay: i64,
    pub period: i64,
    pub failure_threshold: i64,
    pub timeout: i64,
}

/// The API server's defaults for a probe's fields left unset: its period, the failures that
/// fail it, its timeout (seconds; `initialDelaySeconds` defaults to 0).
pub const PROBE_DEFAULT_PERIOD_SECONDS: i64 = 10;
pub const PROBE_DEFAULT_FAILURE_THRESHOLD: i64 = 3;
pub const PROBE_DEFAULT_TIMEOUT_SECONDS: i64 = 1;

impl Probe {
    /// The kinds of probe, in the order the kubelet starts them.
    pub const KINDS: [&'static str; 3] = ["startupProbe", "readinessProbe", "livenessProbe"];

    /// Container `c`'s probe `kind` (`startupProbe`, `readinessProbe`, `livenessProbe`).
    pub fn of(c: &Value, kind: &str) -> Option<Self> {
        at(c, &[kind]).map(Self::parse)
    }

    pub fn parse(p: &Value) -> Self {
        Self {
            initial_delay: i64_at(p, &["initialDelaySeconds"]).unwrap_or(0),
            period: i64_at(p, &["periodSeconds"]).unwrap_or(PROBE_DEFAULT_PERIOD_SECONDS),
            failure_threshold: i64_at(p, &["failureThreshold"])
                .unwrap_or(PROBE_DEFAULT_FAILURE_THRESHOLD),
            timeout: i64_at(p, &["timeoutSeconds"]).unwrap_or(PROBE_DEFAULT_TIMEOUT_SECONDS),
        }
    }

    /// How long, in seconds, it lets a container start before it fails it: its initial delay
    /// and its failures, a period apart.
    pub fn budget(&self) -> i64 {
        self.initial_delay + self.period * self.failure_threshold
    }
}

/// A toleration, as written; `operator` defaults to `Equal` as the API server's does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toleration {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
}

impl Toleration {
    /// Whether it tolerates the taint `key=value:effect`, as the scheduler matches them: an
    /// empty key with `Exists` tolerates every taint, an empty effect every effect, and
    /// `Exists` any value.
    pub fn tolerates(&self, key: &str, value: &str, effect: &str) -> bool {
        let exists = self.operator == "Exists";
        (self.key.is_empty() && exists || self.key == key)
            && (self.effect.is_empty() || self.effect == effect)
            && (exists || self.value == value)
    }
}

/// A required pod anti-affinity term: no two pods it selects in one topology domain (nodes
/// sharing the value of the label `topology_key`).
#[derive(Debug, Clone, Default)]
pub struct AntiAffinityTerm {
    /// `labelSelector`; `None` selects no pod.
    pub selector: Option<Selector>,
    pub topology_key: String,
    /// `namespaces`; empty with no `namespaceSelector` means the pod's own.
    pub namespaces: Vec<String>,
    /// Whether it names a `namespaceSelector`: the namespaces' labels are not read, so it is
    /// taken to select pods of every namespace (more pods kept away: no room is proven on it).
    pub any_namespace: bool,
}

impl AntiAffinityTerm {
    fn parse(t: &Value) -> Self {
        Self {
            selector: at(t, &["labelSelector"]).and_then(Selector::from_object),
            topology_key: str_at(t, &["topologyKey"]).unwrap_or_default().to_owned(),
            namespaces: array(t, &["namespaces"])
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            any_namespace: at(t, &["namespaceSelector"]).is_some_and(Value::is_object),
        }
    }

    /// Whether it, a term of a pod of namespace `own`, selects a pod of namespace `ns`
    /// labelled `labels`.
    pub fn selects(&self, own: &str, ns: &str, labels: Option<&Value>) -> bool {
        let in_scope = self.any_namespace
            || if self.namespaces.is_empty() {
                ns == own
            } else {
                self.namespaces.iter().any(|n| n == ns)
            };
        in_scope
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches_value(labels))
    }

    /// The term as a line: `one per kubernetes.io/hostname among pods app=web`.
    pub fn text(&self) -> String {
        format!(
            "one per {} among pods {}",
            self.topology_key,
            self.selector
                .as_ref()
                .map(Selector::to_query)
                .unwrap_or_default()
        )
    }
}

/// A pod spec, as observed.
#[derive(Debug, Clone, Default)]
pub struct PodSpec {
    /// The app containers (not the init containers), in order.
    pub containers: Vec<ContainerSpec>,
    /// The init containers, in order.
    pub init_containers: Vec<ContainerSpec>,
    pub tolerations: Vec<Toleration>,
    /// `nodeSelector`: labels a node must carry, each with its value.
    pub node_selector: BTreeMap<String, String>,
    /// The required node affinity's terms, as written: a node must match one of them.
    pub required_terms: Vec<Value>,
    /// The host ports its containers bind ([`host_ports`]).
    pub host_ports: Vec<(i64, String)>,
    /// Its required pod anti-affinity's terms.
    pub anti_affinity: Vec<AntiAffinityTerm>,
    /// The labels its pods carry: a template's, a pod's own; none when read from a spec alone.
    pub labels: Value,
    /// The PersistentVolumeClaims its volumes name (`persistentVolumeClaim.claimName`).
    pub claims: Vec<String>,
    /// Its generic ephemeral volumes' names: each pod gets a claim made for it
    /// ([`PodSpec::claims_of`]).
    pub ephemeral: Vec<String>,
}

fn strings(v: Option<&Value>) -> BTreeMap<String, String> {
    map_pairs(v)
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl ContainerSpec {
    fn parse(c: &Value) -> Self {
        Self {
            name: str_at(c, &["name"]).unwrap_or_default().to_owned(),
            image: str_at(c, &["image"]).unwrap_or_default().to_owned(),
            requests: strings(at(c, &["resources", "requests"])),
            limits: strings(at(c, &["resources", "limits"])),
        }
    }
}

impl PodSpec {
    /// The spec at `spec` (a pod's `spec`, a template's `spec`); an absent spec is empty.
    pub fn parse(spec: &Value) -> Self {
        Self {
            containers: array(spec, &["containers"])
                .iter()
                .map(ContainerSpec::parse)
                .collect(),
            init_containers: array(spec, &["initContainers"])
                .iter()
                .map(ContainerSpec::parse)
                .collect(),
            tolerations: array(spec, &["tolerations"])
                .iter()
                .map(|t| {
                    let s = |k: &str| str_at(t, &[k]).unwrap_or_default().to_owned();
                    Toleration {
                        key: s("key"),
                        operator: str_at(t, &["operator"]).unwrap_or("Equal").to_owned(),
                        value: s("value"),
                        effect: s("effect"),
                    }
                })
                .collect(),
            node_selector: strings(at(spec, &["nodeSelector"])),
            required_terms: array(
                spec,
                &[
                    "affinity",
                    "nodeAffinity",
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    "nodeSelectorTerms",
                ],
            )
            .to_vec(),
            host_ports: host_ports(spec),
            anti_affinity: array(
                spec,
                &[
                    "affinity",
                    "podAntiAffinity",
                    "requiredDuringSchedulingIgnoredDuringExecution",
                ],
            )
            .iter()
            .map(AntiAffinityTerm::parse)
            .collect(),
            labels: Value::Null,
            claims: array(spec, &["volumes"])
                .iter()
                .filter_map(|v| str_at(v, &["persistentVolumeClaim", "claimName"]))
                .map(str::to_owned)
                .collect(),
            ephemeral: array(spec, &["volumes"])
                .iter()
                .filter(|v| at(v, &["ephemeral", "volumeClaimTemplate"]).is_some())
                .filter_map(|v| str_at(v, &["name"]))
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The claims a pod named `pod` with this spec mounts: those its volumes name, and the one
    /// made for it per generic ephemeral volume (`<pod>-<volume>`, as the ephemeral volume
    /// controller names it). A template's (no pod yet): those its volumes name.
    pub fn claims_of(&self, pod: Option<&str>) -> Vec<String> {
        let mut out = self.claims.clone();
        if let Some(pod) = pod {
            out.extend(self.ephemeral.iter().map(|v| format!("{pod}-{v}")));
        }
        out
    }

    /// A pod's spec, with its labels.
    pub fn of_pod(pod: &Value) -> Self {
        Self::with_labels(pod)
    }

    /// A workload's pod template's spec ([`super::pod_template`]: a CronJob's too), with the
    /// template's labels.
    pub fn of_template(workload: &Value) -> Self {
        super::pod_template(workload).map_or_else(Self::default, Self::with_labels)
    }

    /// The spec and labels of `o`, a pod or a pod template.
    fn with_labels(o: &Value) -> Self {
        Self {
            labels: at(o, &["metadata", "labels"]).cloned().unwrap_or_default(),
            ..Self::parse(at(o, &["spec"]).unwrap_or(&Value::Null))
        }
    }

    /// What the containers ask for of `resource` in all (`section` is `requests` or
    /// `limits`), in the resource's unit; what does not parse counts nothing.
    pub fn total(&self, section: &str, resource: &str) -> u128 {
        self.containers
            .iter()
            .filter_map(|c| match section {
                "limits" => c.limits.get(resource),
                _ => c.requests.get(resource),
            })
            .filter_map(|q| quantity::amount(resource, q))
            .sum()
    }

    /// Every resource the containers request, with the sum and how to show it: as written
    /// when one container asks for it, the sum formatted otherwise.
    pub fn requests(&self) -> BTreeMap<String, (u128, String)> {
        let mut out: BTreeMap<String, (u128, String)> = BTreeMap::new();
        for c in &self.containers {
            for (k, q) in &c.requests {
                let Some(v) = quantity::amount(k, q) else {
                    continue;
                };
                out.entry(k.clone())
                    .and_modify(|(sum, text)| {
                        *sum += v;
                        *text = quantity::format_amount(k, *sum);
                    })
                    .or_insert_with(|| (v, q.clone()));
            }
        }
        out
    }

    /// Whether one of its tolerations tolerates the taint `key=value:effect`.
    pub fn tolerates(&self, key: &str, value: &str, effect: &str) -> bool {
        self.tolerations
            .iter()
            .any(|t| t.tolerates(key, value, effect))
    }

    /// The `nodeSelector` entries a node with `labels` does not carry.
    pub fn selector_misses<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = (&'a String, &'a String)> {
        self.node_selector
            .iter()
            .filter(move |(k, v)| labels.get(*k) != Some(v))
    }

    /// Whether a node with `labels` satisfies the required node affinity (no terms: any node).
    pub fn affinity_admits(&self, labels: &BTreeMap<String, String>) -> bool {
        self.required_terms.is_empty()
            || self
                .required_terms
                .iter()
                .any(|t| Selector::from_object(t).is_some_and(|s| s.matches_map(labels)))
    }

    /// The required node affinity as text: `zone In a,b; disk Exists`.
    pub fn affinity_text(&self) -> String {
        self.required_terms
            .iter()
            .flat_map(|t| array(t, &["matchExpressions"]))
            .map(|e| {
                format!(
                    "{} {} {}",
                    str_at(e, &["key"]).unwrap_or("?"),
                    str_at(e, &["operator"]).unwrap_or("?"),
                    at(e, &["values"])
                        .and_then(Value::as_array)
                        .map(|v| v
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(","))
                        .unwrap_or_default()
                )
                .trim()
                .to_owned()
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The named container's (an app container's, else an init container's) limit of
    /// `resource`, as written.
    pub fn limit(&self, container: &str, resource: &str) -> Option<&str> {
        self.containers
            .iter()
            .chain(&self.init_containers)
            .find(|c| c.name == container)
            .and_then(|c| c.limits.get(resource))
            .map(String::as_str)
    }

    /// Which list of the pod spec holds the named container: `containers` (an app
    /// container's name wins) or `initContainers`; `None` when neither does. The limit raise's
    /// proof, its parameters' check and its write all find a container by this.
    pub fn list_of(&self, container: &str) -> Option<&'static str> {
        if self.containers.iter().any(|c| c.name == container) {
            Some("containers")
        } else if self.init_containers.iter().any(|c| c.name == container) {
            Some("initContainers")
        } else {
            None
        }
    }

    /// The first app container's name.
    pub fn first_container(&self) -> Option<&str> {
        self.containers.first().map(|c| c.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Issue 43: a pod's claims are the ones its volumes name and the ones made for its
    /// generic ephemeral volumes, read in one place.
    #[test]
    fn a_pod_mounts_the_claims_it_names_and_those_made_for_its_ephemeral_volumes() {
        let spec = PodSpec::of_pod(&json!({"metadata": {"name": "build-7"},
            "spec": {"volumes": [
                {"name": "cache", "persistentVolumeClaim": {"claimName": "shared-cache"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "spec": {"accessModes": ["ReadWriteOnce"]}}}},
                {"name": "tmp", "emptyDir": {}}]}}));
        assert_eq!(
            spec.claims_of(Some("build-7")),
            vec!["shared-cache".to_owned(), "build-7-scratch".to_owned()]
        );
        assert_eq!(spec.claims_of(None), vec!["shared-cache".to_owned()]);
    }

    #[test]
    fn requests_sum_over_containers_and_keep_a_lone_request_as_written() {
        let spec = PodSpec::parse(&json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "750m"}}}]}));
        let r = spec.requests();
        assert_eq!(r["cpu"].0, 1000);
        assert_eq!(r["memory"].1, "1Gi");
        assert_eq!(spec.total("requests", "cpu"), 1000);
        assert_eq!(spec.total("limits", "cpu"), 0);
    }

    #[test]
    fn a_toleration_matches_as_the_scheduler_does() {
        let spec = PodSpec::parse(&json!({"tolerations": [
            {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Exists"}]}));
        assert!(spec.tolerates("gpu", "yes", "NoSchedule"));
        assert!(!spec.tolerates("gpu", "no", "NoSchedule"));
        assert!(!spec.tolerates("gpu", "yes", "NoExecute"));
        assert!(spec.tolerates("dedicated", "db", "NoExecute"));
        assert!(!spec.tolerates("other", "", "NoSchedule"));
        let all = PodSpec::parse(&json!({"tolerations": [{"operator": "Exists"}]}));
        assert!(all.tolerates("anything", "x", "NoExecute"));
        let no_key = PodSpec::parse(&json!({"tolerations": [{"value": "x"}]}));
        assert!(!no_key.tolerates("anything", "x", "NoExecute"));
    }

    #[test]
    fn node_selector_and_required_affinity_decide_which_nodes_admit_the_pod() {
        let spec = PodSpec::parse(&json!({
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}}));
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let good = labels(&[("disk", "ssd"), ("zone", "a")]);
        assert_eq!(spec.selector_misses(&good).count(), 0);
        assert!(spec.affinity_admits(&good));
        let bad = labels(&[("disk", "hdd"), ("zone", "c")]);
        assert_eq!(spec.selector_misses(&bad).count(), 1);
        assert!(!spec.affinity_admits(&bad));
        assert_eq!(spec.affinity_text(), "zone In a,b");
    }
}
