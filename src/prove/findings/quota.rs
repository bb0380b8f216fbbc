//! Whether the namespace's quotas have room for more pods of a template (what a scale-up and an
//! autoscaler's higher maximum need), and a limit raise room in the quota and on a node: asked
//! by the rules that propose them and by their proofs.

use crate::cluster::observed::{Node, PodSpec, QuotaRoom};
use crate::domain::LimitResource;

/// What one more pod of a template needs of a quota: the quota resource, and the amount per pod.
fn per_pod(spec: &PodSpec) -> [(&'static str, u128); 5] {
    [
        ("pods", 1),
        ("requests.cpu", spec.total("requests", "cpu")),
        ("requests.memory", spec.total("requests", "memory")),
        ("limits.cpu", spec.total("limits", "cpu")),
        ("limits.memory", spec.total("limits", "memory")),
    ]
}

/// One quota resource `extra` more pods need room in.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaNeed {
    pub resource: &'static str,
    /// The tightest quota's room for it.
    pub room: QuotaRoom,
    /// What the new pods need of it, in its unit.
    pub need: u128,
}

impl QuotaNeed {
    pub fn fits(&self) -> bool {
        self.room.fits(self.need)
    }
}

/// What `extra` more pods of `spec` need of each resource a quota limits (`room` answers the
/// tightest quota's room for a resource, `None` where none limits it), in a fixed order.
pub fn quota_needs(
    spec: &PodSpec,
    extra: i64,
    room: impl Fn(&str) -> Option<QuotaRoom>,
) -> Vec<QuotaNeed> {
    let extra = extra.max(0) as u128;
    per_pod(spec)
        .into_iter()
        .filter_map(|(resource, each)| {
            Some(QuotaNeed {
                resource,
                room: room(resource)?,
                need: each * extra,
            })
        })
        .collect()
}

/// The pods a raise of their containers' limit applies to: the workload's `spec.replicas`, else
/// its pods counted, at least one.
pub fn raised_replicas(replicas: Option<i64>, pods: usize) -> u128 {
    replicas.unwrap_or(pods as i64).max(1) as u128
}

/// What raising a container's limit of `resource` from `old` to `new` on `replicas` pods needs
/// of the namespace's `limits.<resource>` quota (`room`, the tightest one), `None` where no
/// quota limits it.
pub fn raise_need(
    resource: LimitResource,
    room: Option<QuotaRoom>,
    replicas: u128,
    (old, new): (u128, u128),
) -> Option<QuotaNeed> {
    Some(QuotaNeed {
        resource: match resource {
            LimitResource::Memory => "limits.memory",
            LimitResource::Cpu => "limits.cpu",
        },
        room: room?,
        need: new.saturating_sub(old).saturating_mul(replicas),
    })
}

/// The most of `resource` a node among `nodes` that takes pods of `spec` allocates
/// ([`super::takes`]: ready, not cordoned, its taints tolerated, the pods' node selector and
/// affinity met): what one container's new limit must fit in, `None` when no such node says.
/// A bigger node the pods may not go on holds none of them.
pub fn largest_node(nodes: &[Node], spec: &PodSpec, resource: LimitResource) -> Option<u128> {
    nodes
        .iter()
        .filter(|n| super::takes(spec, n))
        .filter_map(|n| n.allocatable(resource.name()))
        .max()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cluster::observed::tightest_quota;

    #[test]
    fn more_pods_need_room_in_every_quota_resource_their_template_asks_for() {
        let spec = PodSpec::parse(&json!({"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}}]}));
        let quotas = [json!({"metadata": {"name": "team"},
            "status": {"hard": {"pods": "10", "limits.memory": "4Gi"},
                "used": {"pods": "6", "limits.memory": "2Gi"}}})];
        let needs = quota_needs(&spec, 2, |r| tightest_quota(&quotas, r));
        let fits: Vec<(&str, bool)> = needs.iter().map(|n| (n.resource, n.fits())).collect();
        assert_eq!(fits, vec![("pods", true), ("limits.memory", true)]);
        let needs = quota_needs(&spec, 3, |r| tightest_quota(&quotas, r));
        assert!(!needs[1].fits(), "{needs:?}");
    }

    /// Issue 43: the node a raised limit must fit in is one its pods may go on
    /// (`findings::takes`), as every other placement question asks: a bigger node of another
    /// pool, or a cordoned one, holds none of them.
    #[test]
    fn the_largest_node_is_one_the_pods_may_go_on() {
        let node = |name: &str, pool: &str, memory: &str, cordoned: bool| {
            Node::parse(
                &json!({"metadata": {"name": name, "labels": {"pool": pool}},
                "spec": {"unschedulable": cordoned},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "4", "memory": memory, "pods": "110"}}}),
            )
        };
        let nodes = [
            node("small-1", "small", "4Gi", false),
            node("large-1", "large", "16Gi", false),
            node("small-2", "small", "32Gi", true),
        ];
        let spec = PodSpec::parse(&json!({"nodeSelector": {"pool": "small"},
            "containers": [{"name": "api", "resources": {"limits": {"memory": "2Gi"}}}]}));
        assert_eq!(
            largest_node(&nodes, &spec, LimitResource::Memory),
            Some(4 << 30)
        );
        assert_eq!(
            largest_node(&nodes, &PodSpec::default(), LimitResource::Memory),
            Some(16 << 30)
        );
    }
}
