//! The configuration kinds of `kubemedic.io/v1alpha1` (charts/kubemedic/crds).

use kube::core::{ApiResource, GroupVersionKind};

pub const GROUP: &str = "kubemedic.io";
pub const VERSION: &str = "v1alpha1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Workflow,
    Playbook,
    Context,
    Policy,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Workflow, Kind::Playbook, Kind::Context, Kind::Policy];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Workflow => "RemediationWorkflow",
            Kind::Playbook => "InvestigationPlaybook",
            Kind::Context => "ClusterContext",
            Kind::Policy => "ApprovalPolicy",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::Workflow => "remediationworkflows",
            Kind::Playbook => "investigationplaybooks",
            Kind::Context => "clustercontexts",
            Kind::Policy => "approvalpolicies",
        }
    }

    pub fn api_resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, VERSION, self.name()),
            self.plural(),
        )
    }
}
