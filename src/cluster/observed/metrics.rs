//! A pod's use of CPU and memory as the metrics API (`metrics.k8s.io` `PodMetrics`) reports it,
//! read once: by the `kubectl_top_pods` tool, whose rows are this type serialised (so the
//! offline rules read them back as the same type, not by key), and by the proofs of a raised
//! limit and of more replicas.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::obj::{self, array, str_at};
use crate::cluster::quantity;

/// One pod's use, per container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodMetrics {
    /// The pod's name.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub containers: Vec<ContainerUse>,
}

/// One container's use, as quantities written by the metrics API (`250m`, `200Mi`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerUse {
    pub name: Option<String>,
    pub cpu: Option<String>,
    pub memory: Option<String>,
}

impl ContainerUse {
    /// Its use of `resource` (`cpu` in millicores, `memory` in bytes).
    pub fn used(&self, resource: &str) -> Option<u128> {
        let q = match resource {
            "cpu" => self.cpu.as_deref(),
            "memory" => self.memory.as_deref(),
            _ => None,
        }?;
        quantity::amount(resource, q)
    }
}

impl PodMetrics {
    /// A `PodMetrics` object of the metrics API.
    pub fn parse(m: &Value) -> Self {
        Self {
            name: obj::name(m).to_owned(),
            containers: array(m, &["containers"])
                .iter()
                .map(|c| ContainerUse {
                    name: str_at(c, &["name"]).map(str::to_owned),
                    cpu: str_at(c, &["usage", "cpu"]).map(str::to_owned),
                    memory: str_at(c, &["usage", "memory"]).map(str::to_owned),
                })
                .collect(),
        }
    }

    /// Container `container`'s use of `resource`.
    pub fn used_by(&self, container: &str, resource: &str) -> Option<u128> {
        self.containers
            .iter()
            .find(|c| c.name.as_deref() == Some(container))
            .and_then(|c| c.used(resource))
    }

    /// The pod's use of `resource`, all its containers together.
    pub fn total(&self, resource: &str) -> u128 {
        self.containers
            .iter()
            .filter_map(|c| c.used(resource))
            .sum()
    }
}

/// The highest use of `resource` by container `container` over the pods named in `pods`.
pub fn peak_use<'a>(
    metrics: &[PodMetrics],
    pods: impl IntoIterator<Item = &'a str>,
    container: &str,
    resource: &str,
) -> Option<u128> {
    let pods: Vec<&str> = pods.into_iter().collect();
    metrics
        .iter()
        .filter(|m| pods.contains(&m.name.as_str()))
        .filter_map(|m| m.used_by(container, resource))
        .max()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pods_use_is_read_per_container_and_its_peak_over_the_pods_named() {
        let m = |pod: &str, mem: &str| {
            PodMetrics::parse(&json!({"metadata": {"name": pod},
                "containers": [{"name": "app", "usage": {"cpu": "250m", "memory": mem}},
                    {"name": "proxy", "usage": {"cpu": "50m", "memory": "30Mi"}}]}))
        };
        let all = [
            m("web-1", "200Mi"),
            m("web-2", "300Mi"),
            m("other", "900Mi"),
        ];
        assert_eq!(all[0].used_by("app", "cpu"), Some(250));
        assert_eq!(all[0].total("cpu"), 300);
        assert_eq!(
            peak_use(&all, ["web-1", "web-2"], "app", "memory"),
            Some(300 * 1024 * 1024)
        );
        assert_eq!(peak_use(&all, ["web-1"], "sidecar", "memory"), None);
        // The tool's rows are this type serialised, read back as the same.
        let row = serde_json::to_value(&all[0]).unwrap();
        assert_eq!(
            row["containers"][0],
            json!({"name": "app", "cpu": "250m", "memory": "200Mi"})
        );
        assert_eq!(serde_json::from_value::<PodMetrics>(row).unwrap(), all[0]);
    }
}
