//! Proof obligations against a model that proposes each action type: the real LLM investigator
//! talks to a scripted OpenAI-compatible server over a real socket, on incidents staged on the
//! real API server and captured with kubemedic's own capture. For each of the catalog's action
//! types, once on a cluster where the action is right (its obligations hold and the request
//! reaches the gate) and once where a model proposing it would be wrong (the proof is refuted
//! on a named obligation and the request ends in review, never at the gate).
//!
//! The clusters are the scenarios of tests/scenarios/ and, where none gives a clean case, the
//! incidents of tests/proofs/ (staged by tests/common/proofs.rs, captured with
//! scripts/capture-proofs).
//!
//! Every obligation a proof states is declared (src/domain/obligations.rs), and stated in its
//! declared order (`in_declared_order`): the order is behaviour, since a refusal names the
//! first obligation that failed.
//!
//! A reviewer's proposal (the review takeover: `SignalContext.requested`) is held to the same
//! obligations: the same cases, proposed by a reviewer instead of invocation 2, are proven or
//! refuted alike (`reviewers_proposals_are_proven_and_refuted_like_the_models`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use common::llm::ScriptedLlm;
use common::propose::{Incident, Proposal};
use kubemedic::catalog::Catalog;
use kubemedic::config::reference;
use kubemedic::domain::obligations;
use kubemedic::domain::{OutcomeKind, Phase, ProofVerdict, Proposer, RemediationRequest};
use kubemedic::live::Live;
use kubemedic::prove::Prover;

/// What the proof must say.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Every obligation holds: the request reaches the gate.
    Proven,
    /// Refuted, this obligation among the failed ones: the request ends in review.
    Refuted(&'static str),
}

/// One proposal of one action type on one cluster.
struct Case {
    action_type: &'static str,
    /// `scenarios/<name>` or `proofs/<name>` under tests/.
    cluster: &'static str,
    /// The remediation target the model names: kind and name (the namespace is the alert's).
    target: (&'static str, &'static str),
    /// The workflow's own parameters, as the model submits them.
    parameters: &'static str,
    /// Why the action is right or wrong there, for the failure message.
    why: &'static str,
    want: Want,
}

fn dir(cluster: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(cluster)
}

/// The model (or a reviewer) proposes the case's action on its cluster; the selection stage
/// proves it. Returns the request after selection and how the model was used.
async fn propose(case: &Case, by: Proposer) -> (RemediationRequest, ScriptedLlm) {
    let proposal = Proposal {
        action_type: case.action_type.into(),
        target: (case.target.0.into(), case.target.1.into()),
        parameters: serde_json::from_str(case.parameters).unwrap(),
        why: case.why.into(),
    };
    Incident::load(&dir(case.cluster))
        .propose(&proposal, by)
        .await
}

/// Run the case as the model proposes it and compare with what it wants.
async fn check(case: Case) {
    check_as(case, Proposer::Model).await;
}

/// Run the case as `by` proposes it and compare with what it wants; every mismatch, at once.
async fn check_as(case: Case, by: Proposer) {
    let (req, server) = propose(&case, by).await;
    let name = format!(
        "{} on {} proposed by {by:?}",
        case.action_type, case.cluster
    );
    let mut bad = Vec::new();
    let asked = if by == Proposer::Reviewer { 1 } else { 2 };
    if server.remaining() != 0 || server.requests().len() != asked {
        bad.push(format!(
            "the model was asked {} times, {} replies left",
            server.requests().len(),
            server.remaining()
        ));
    }
    let owner = req
        .state
        .analysis
        .as_ref()
        .and_then(|a| a.root_owner.as_ref());
    if owner.map(|t| (t.kind.as_str(), t.name.as_str())) != Some(case.target) {
        bad.push(format!("root owner {owner:?}, not {:?}", case.target));
    }
    let proof = req.state.proof.as_ref();
    match proof {
        Some(p) if p.action_type == case.action_type && p.proposer == by => {}
        other => bad.push(format!(
            "no proof of {} by {by:?}: {:?}",
            case.action_type,
            other.map(|p| (&p.action_type, p.proposer))
        )),
    }
    // Every obligation stated is declared, with its declared statement, under the action's
    // proof or every proof's.
    for o in proof.map(|p| p.obligations.as_slice()).unwrap_or_default() {
        let declared = obligations::proof_of(&case.action_type.into())
            .into_iter()
            .chain(obligations::PROOFS.iter().filter(|p| p.name == "every"))
            .flat_map(|p| p.obligations.iter())
            .find(|d| d.id == o.id);
        match declared {
            Some(d) if d.statement == o.statement => {}
            Some(d) => bad.push(format!(
                "{} states {:?}, declared {:?}",
                o.id, o.statement, d.statement
            )),
            None => bad.push(format!(
                "{} is not declared for {} (src/domain/obligations.rs)",
                o.id, case.action_type
            )),
        }
    }
    // ... and stated in the declared order, which is the order a refusal names the first
    // failure in.
    if let (Some(p), Some(declared)) = (proof, obligations::proof_of(&case.action_type.into())) {
        let stated: Vec<&str> = p.obligations.iter().map(|o| o.id.as_str()).collect();
        if let Err(e) = in_declared_order(declared, &stated) {
            bad.push(e);
        }
    }
    let reason = req.reason.clone().unwrap_or_default();
    let kind = req.state.selection.as_ref().map(|s| s.outcome.kind);
    match case.want {
        Want::Proven => {
            if req.phase != Phase::Gating {
                bad.push(format!("phase {:?}, not Gating: {reason}", req.phase));
            }
            if proof.map(|p| p.verdict) != Some(ProofVerdict::Proven) {
                bad.push(format!(
                    "verdict {:?}, not proven",
                    proof.map(|p| p.verdict.as_str())
                ));
            }
            // What the approver reads: the dry run's change (or, for a proposal, its text).
            let change = proof.and_then(|p| p.change.as_ref()).map(|c| c.summary());
            if change.as_deref().is_none_or(|c| c == "no change") {
                bad.push(format!("the dry run shows no change: {change:?}"));
            }
        }
        Want::Refuted(id) => {
            if req.phase != Phase::ManualReviewRequired {
                bad.push(format!(
                    "phase {:?}, not ManualReviewRequired: {reason}",
                    req.phase
                ));
            }
            if kind != Some(OutcomeKind::ProofFailed) {
                bad.push(format!("outcome {kind:?}, not proof_failed"));
            }
            if proof.map(|p| p.verdict) != Some(ProofVerdict::Refuted) {
                bad.push(format!(
                    "verdict {:?}, not refuted",
                    proof.map(|p| p.verdict.as_str())
                ));
            }
            if !proof.is_some_and(|p| p.failed().any(|o| o.id == id)) {
                bad.push(format!("{id} is not among the failed obligations"));
            }
            if !(reason.starts_with("proof_failed") && reason.contains(id)) {
                bad.push(format!("the reason does not name {id}: {reason}"));
            }
        }
    }
    if !bad.is_empty() {
        let obligations: Vec<String> = proof
            .map(|p| {
                p.obligations
                    .iter()
                    .map(|o| format!("  {:?} {}: {}", o.status, o.id, o.evidence.join("; ")))
                    .collect()
            })
            .unwrap_or_default();
        panic!(
            "{name} ({}):\n{}\nobligations:\n{}\nreason: {reason}",
            case.why,
            bad.join("\n"),
            obligations.join("\n")
        );
    }
}

/// Whether `stated` follows the declared order of `proof`'s obligations, then every proof's:
/// it is a subsequence of that order. A proof that stops early states a prefix; one that states
/// an obligation only when it fails (`scale.replicas-named`) skips it.
fn in_declared_order(proof: &obligations::ProofSpec, stated: &[&str]) -> Result<(), String> {
    let declared: Vec<&str> = std::iter::once(proof)
        .chain(obligations::PROOFS.iter().filter(|p| p.name == "every"))
        .flat_map(|p| p.obligations.iter().map(|o| o.id))
        .collect();
    let mut rest = declared.iter();
    for id in stated {
        if !rest.any(|d| d == id) {
            return Err(format!(
                "{id} is stated out of its declared order (src/domain/obligations.rs): stated {stated:?}, declared {declared:?}"
            ));
        }
    }
    Ok(())
}

/// The order check refuses two obligations stated the other way round, and one stated twice;
/// it accepts a proof that stops early or skips one, with the binding after.
#[test]
fn the_order_check_holds_a_proof_to_its_declaration() {
    let restart = obligations::proof_of(&kubemedic::domain::ActionType::RestartDeployment).unwrap();
    let ids: Vec<&str> = restart.obligations.iter().map(|o| o.id).collect();
    let binding = obligations::every::BINDING.id;
    assert!(in_declared_order(restart, &ids).is_ok());
    assert!(in_declared_order(restart, &[ids[0]]).is_ok());
    assert!(in_declared_order(restart, &[ids[1], ids[3], binding]).is_ok());
    assert!(in_declared_order(restart, &[ids[2], ids[1]]).is_err());
    assert!(in_declared_order(restart, &[ids[1], ids[1]]).is_err());
    assert!(in_declared_order(restart, &[binding, ids[1]]).is_err());
    // Another proof's obligation is out of any order of this one.
    assert!(in_declared_order(restart, &[obligations::scale::BOUNDED.id]).is_err());
}

/// "No action needed" is proven on the alerted object of every captured cluster (the
/// scenarios', these proofs' and the unseen incidents'): its obligations, too, are stated in
/// their declared order. (The cases below cover the action types' proofs.)
#[tokio::test]
async fn resolved_states_its_obligations_in_the_declared_order() {
    let resolved = obligations::PROOFS
        .iter()
        .find(|p| p.name == "resolved")
        .unwrap();
    let mut bad = Vec::new();
    let mut proven = 0;
    for set in ["scenarios", "proofs", "unseen"] {
        for entry in std::fs::read_dir(dir(set)).unwrap() {
            let path = entry.unwrap().path();
            let incident = Incident::load(&path);
            let Some(target) = incident.request.target.clone() else {
                continue;
            };
            let prover = Prover::new(
                incident.cluster.clone(),
                None,
                Live::new(Catalog::builtin().unwrap()),
                incident.clock.clone(),
            );
            let proof = prover
                .prove_resolved(&target, &incident.request.signal, Proposer::Offline)
                .await
                .unwrap();
            let stated: Vec<&str> = proof.obligations.iter().map(|o| o.id.as_str()).collect();
            if let Err(e) = in_declared_order(resolved, &stated) {
                bad.push(format!("{}: {e}", path.display()));
            }
            proven += 1;
        }
    }
    assert!(proven > 90, "only {proven} clusters proven");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

macro_rules! cases {
    ($($test:ident => $case:expr),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                check($case).await;
            }
        )*

        /// Every case again, the workflow asked for by a reviewer after review instead of
        /// chosen by invocation 2: a reviewer decides what to try, never what holds.
        #[tokio::test]
        async fn reviewers_proposals_are_proven_and_refuted_like_the_models() {
            for case in [$($case),*] {
                check_as(case, Proposer::Reviewer).await;
            }
        }

        /// Every action type of the catalog is proposed once where it is proven and once where
        /// it is refuted.
        #[test]
        fn every_catalog_action_type_is_proposed_both_ways() {
            let cases = [$($case),*];
            let catalog = Catalog::builtin().unwrap();
            let mut missing = Vec::new();
            for at in catalog.action_types() {
                let of: Vec<&Case> = cases.iter().filter(|c| c.action_type == at.name).collect();
                if !of.iter().any(|c| matches!(c.want, Want::Proven)) {
                    missing.push(format!("{}: no case where it is proven", at.name));
                }
                if !of.iter().any(|c| matches!(c.want, Want::Refuted(_))) {
                    missing.push(format!("{}: no case where it is refuted", at.name));
                }
            }
            // Every obligation a case wants refuted is declared for its action type.
            for c in &cases {
                if let Want::Refuted(id) = c.want {
                    let declared = obligations::proof_of(&c.action_type.into())
                        .is_some_and(|p| p.obligations.iter().any(|o| o.id == id))
                        || obligations::PROOFS
                            .iter()
                            .any(|p| p.name == "every" && p.obligations.iter().any(|o| o.id == id));
                    if !declared {
                        missing.push(format!("{}: {id} is not one of its obligations", c.action_type));
                    }
                }
            }
            // Every incident staged for these cases has its folder and is used.
            let staged: Vec<&str> = common::proofs::all().iter().map(|s| s.name).collect();
            for entry in std::fs::read_dir(dir("proofs")).unwrap() {
                let n = entry.unwrap().file_name().into_string().unwrap();
                if !staged.contains(&n.as_str()) {
                    missing.push(format!("tests/proofs/{n} is not staged by common::proofs::all()"));
                }
            }
            for n in staged {
                let cluster = format!("proofs/{n}");
                if !cases.iter().any(|c| c.cluster == cluster) {
                    missing.push(format!("tests/proofs/{n}: no case uses it"));
                }
            }
            assert!(missing.is_empty(), "{}", missing.join("\n"));
        }
    };
}

use Want::{Proven, Refuted};

cases! {
    rollback_deployment_after_a_bad_rollout => Case {
        action_type: "RollbackDeployment",
        cluster: "scenarios/crashloop-rollout",
        target: ("Deployment", "checkout"),
        parameters: r#"{"TO_REVISION": 1}"#,
        why: "revision 2 (1.4.2) crash-loops; revision 1 (1.4.1) serves ready",
        want: Proven,
    },
    rollback_deployment_when_the_failure_predates_the_rollout => Case {
        action_type: "RollbackDeployment",
        cluster: "scenarios/failure-predates-rollout",
        target: ("Deployment", "quotes"),
        parameters: r#"{"TO_REVISION": 1}"#,
        why: "revision 1 crash-looped too: the database is unreachable",
        want: Refuted("rollback.target-revision-healthy"),
    },
    rollback_statefulset_after_a_bad_update => Case {
        action_type: "RollbackStatefulSet",
        cluster: "scenarios/statefulset-update",
        target: ("StatefulSet", "ledger"),
        parameters: r#"{"TO_REVISION": 1}"#,
        why: "ledger-2 on the update crash-loops; ledger-0 and ledger-1 serve the old revision",
        want: Proven,
    },
    rollback_statefulset_to_a_revision_that_crashes_too => Case {
        action_type: "RollbackStatefulSet",
        cluster: "proofs/statefulset-failure-predates-update",
        target: ("StatefulSet", "ledger"),
        parameters: r#"{"TO_REVISION": 1}"#,
        why: "ledger-0 and ledger-1 crash-loop on revision 1 as ledger-2 does on the update",
        want: Refuted("rollback.target-revision-healthy"),
    },
    restart_wedged_pods => Case {
        action_type: "RestartDeployment",
        cluster: "scenarios/wedged-connection-pool",
        target: ("Deployment", "orders-api"),
        parameters: "{}",
        why: "the pods run but their connection pool is exhausted",
        want: Proven,
    },
    restart_pods_that_crash_on_start => Case {
        action_type: "RestartDeployment",
        cluster: "scenarios/crashloop-rollout",
        target: ("Deployment", "checkout"),
        parameters: "{}",
        why: "the new revision crashes on start: a restart changes nothing",
        want: Refuted("restart.pods-run-but-wedged"),
    },
    restart_pods_cut_off_by_a_network_policy => Case {
        action_type: "RestartDeployment",
        cluster: "unseen/networkpolicy-egress-blocks-backend",
        target: ("Deployment", "orders-api"),
        parameters: "{}",
        why: "its pods are not ready while an egress NetworkPolicy cuts them off: new pods meet the same policy",
        want: Refuted("restart.no-broken-dependency"),
    },
    scale_up_a_deployment_scaled_to_zero => Case {
        action_type: "ScaleReplicas",
        cluster: "scenarios/scaled-to-zero",
        target: ("Deployment", "checkout"),
        parameters: r#"{"REPLICAS": 3}"#,
        why: "checkout was scaled to zero",
        want: Proven,
    },
    delete_a_pod_whose_configmap_was_edited_after_its_siblings_started => Case {
        action_type: "DeletePod",
        cluster: "unseen/configmap-edited-in-place",
        target: ("Deployment", "pricing-api"),
        parameters: r#"{"POD_NAME": "pricing-api-85479f445d-6lnzv"}"#,
        why: "its replacement reads the edited ConfigMap as it is now",
        want: Refuted("delete.config-unchanged-since-siblings"),
    },
    delete_an_evicted_pod_already_replaced => Case {
        action_type: "DeletePod",
        cluster: "unseen/evicted-pod-tombstone",
        target: ("Deployment", "catalog-search"),
        parameters: r#"{"POD_NAME": "catalog-search-59b8749cff-r2xjj"}"#,
        why: "the pod has ended; its controller replaced it long ago",
        want: Refuted("delete.pod-still-running"),
    },
    delete_a_pod_on_a_node_with_a_read_only_root_filesystem => Case {
        action_type: "DeletePod",
        cluster: "unseen/node-readonly-rootfs",
        target: ("Deployment", "cart"),
        parameters: r#"{"POD_NAME": "cart-5467c9f68d-n6qg4"}"#,
        why: "the node is at fault and still takes pods: the replacement may land there again",
        want: Refuted("delete.node-not-at-fault"),
    },
    scale_up_a_redis_whose_memory_is_full => Case {
        action_type: "ScaleReplicas",
        cluster: "unseen/redis-maxmemory-noeviction",
        target: ("StatefulSet", "cart-redis"),
        parameters: r#"{"REPLICAS": 3}"#,
        why: "all its replicas are ready and nothing shows load: more replicas are not what it lacks",
        want: Refuted("scale.short-of-replicas"),
    },
    scale_up_pods_that_cannot_be_scheduled => Case {
        action_type: "ScaleReplicas",
        cluster: "scenarios/pending-insufficient-resources",
        target: ("Deployment", "batch-worker"),
        parameters: r#"{"REPLICAS": 3}"#,
        why: "its pods are already Pending for memory: more will not schedule",
        want: Refuted("scale.schedulable"),
    },
    raise_the_memory_limit_of_a_container_oom_killed_since_its_configmap_changed => Case {
        action_type: "IncreaseMemoryLimits",
        cluster: "unseen/configmap-cache-raised-oomkill",
        target: ("Deployment", "tile-server"),
        parameters: r#"{"CONTAINER": "tile-server", "MEMORY_LIMIT": "768Mi"}"#,
        why: "its ConfigMap was edited and the pods restarted just before the kills began: the change, not the limit, explains them",
        want: Refuted("memory.no-change-explains"),
    },
    raise_the_memory_limit_when_the_configmap_changed_after_the_first_kill => Case {
        action_type: "IncreaseMemoryLimits",
        cluster: "unseen/oomkill-organic-growth-config-edited-after",
        target: ("Deployment", "suggest-api"),
        parameters: r#"{"CONTAINER": "suggest-api", "MEMORY_LIMIT": "1536Mi"}"#,
        why: "the ConfigMap edit came after the first OOM kill: it explains nothing, the raise stands",
        want: Proven,
    },
    restart_pods_that_read_an_edited_configmap_at_their_start => Case {
        action_type: "RestartDeployment",
        cluster: "unseen/upstream-url-edited-then-restarted",
        target: ("Deployment", "rate-shopper"),
        parameters: "{}",
        why: "the pods started after the upstream URL was edited and fail on it: new pods read the same",
        want: Refuted("restart.no-change-explains"),
    },
    restart_pods_whose_database_failed_over_after_an_unread_configmap_edit => Case {
        action_type: "RestartDeployment",
        cluster: "unseen/stale-connections-after-unrelated-configmap-edit",
        target: ("Deployment", "subscription-api"),
        parameters: "{}",
        why: "the pods hold connections to the old primary; the edited ConfigMap was never read by a running pod",
        want: Proven,
    },
    raise_the_memory_limit_of_the_container_oom_killed => Case {
        action_type: "IncreaseMemoryLimits",
        cluster: "scenarios/oomkilled",
        target: ("Deployment", "api"),
        parameters: r#"{"CONTAINER": "api", "MEMORY_LIMIT": "384Mi"}"#,
        why: "container api is OOMKilled at its 256Mi limit",
        want: Proven,
    },
    raise_the_memory_limit_on_an_alert_that_says_oom_when_it_is_not => Case {
        action_type: "IncreaseMemoryLimits",
        cluster: "scenarios/misleading-alert",
        target: ("Deployment", "checkout"),
        parameters: r#"{"CONTAINER": "checkout", "MEMORY_LIMIT": "384Mi"}"#,
        why: "the alert says OOMKilled, but the container exits 1 on a missing setting",
        want: Refuted("memory.container-was-killed"),
    },
    raise_the_cpu_limit_of_a_throttled_container => Case {
        action_type: "IncreaseCPULimits",
        cluster: "scenarios/cpu-throttling",
        target: ("Deployment", "thumbnailer"),
        parameters: r#"{"CONTAINER": "thumbnailer", "CPU_LIMIT": "750m"}"#,
        why: "thumbnailer is throttled at its CPU limit",
        want: Proven,
    },
    raise_the_cpu_limit_of_a_container_oom_killed_since_its_configmap_changed => Case {
        action_type: "IncreaseCPULimits",
        cluster: "unseen/configmap-cache-raised-oomkill",
        target: ("Deployment", "tile-server"),
        parameters: r#"{"CONTAINER": "tile-server", "CPU_LIMIT": "2"}"#,
        why: "its ConfigMap was edited and the pods restarted just before the kills began: the change, not a limit, explains them",
        want: Refuted("cpu.no-change-explains"),
    },
    scale_up_pods_that_fail_on_an_edited_upstream_url => Case {
        action_type: "ScaleReplicas",
        cluster: "unseen/upstream-url-edited-then-restarted",
        target: ("Deployment", "rate-shopper"),
        parameters: r#"{"REPLICAS": 4}"#,
        why: "the pods started after the upstream URL was edited and fail on it: more pods read the same",
        want: Refuted("scale.no-change-explains"),
    },
    raise_the_cpu_limit_of_pods_waiting_for_a_node => Case {
        action_type: "IncreaseCPULimits",
        cluster: "scenarios/pending-no-scheduler-event",
        target: ("Deployment", "trainer"),
        parameters: r#"{"CONTAINER": "trainer", "CPU_LIMIT": "20"}"#,
        why: "its pods wait for a node with 16 CPUs: nothing is throttled",
        want: Refuted("cpu.container-throttled"),
    },
    expand_a_filling_volume => Case {
        action_type: "ExpandPVC",
        cluster: "scenarios/pvc-fill-predicted",
        target: ("PersistentVolumeClaim", "data-postgres-0"),
        parameters: r#"{"PVC_NAME": "data-postgres-0", "NEW_SIZE": "15Gi"}"#,
        why: "the volume fills up and its StorageClass expands",
        want: Proven,
    },
    expand_a_volume_whose_class_cannot_expand => Case {
        action_type: "ExpandPVC",
        cluster: "scenarios/pvc-fill-predicted-not-expandable",
        target: ("PersistentVolumeClaim", "data-mysql-0"),
        parameters: r#"{"PVC_NAME": "data-mysql-0", "NEW_SIZE": "15Gi"}"#,
        why: "its StorageClass does not allow expansion",
        want: Refuted("pvc.class-expandable"),
    },
    drain_a_node_that_is_not_ready => Case {
        action_type: "CordonDrainNode",
        cluster: "scenarios/node-not-ready",
        target: ("Node", "scn-node-not-ready-worker-7"),
        parameters: "{}",
        why: "the node is NotReady and its pods suffer",
        want: Proven,
    },
    // A finding: one node not ready of two used to count as a cluster-wide problem (a third or
    // more of the nodes), refuting the right drain of a small cluster (fixed in
    // src/prove/node.rs).
    drain_the_not_ready_one_of_two_nodes => Case {
        action_type: "CordonDrainNode",
        cluster: "proofs/one-of-two-nodes-not-ready",
        target: ("Node", "prf-one-of-two-nodes-not-ready-worker-1"),
        parameters: "{}",
        why: "worker-1 is NotReady; worker-2 is healthy with room for tiles' pod",
        want: Proven,
    },
    drain_the_only_healthy_node => Case {
        action_type: "CordonDrainNode",
        cluster: "proofs/one-of-two-nodes-not-ready",
        target: ("Node", "prf-one-of-two-nodes-not-ready-worker-2"),
        parameters: "{}",
        why: "worker-1 is NotReady; the model names worker-2, the only node left to run tiles",
        want: Refuted("drain.not-last-schedulable-node"),
    },
    // A finding: one failing pod used to make a Ready node "the common factor" (fixed in
    // src/prove/node.rs); deleting the pod is the fix here (the scenario's expected action).
    drain_a_ready_node_for_one_pods_fault => Case {
        action_type: "CordonDrainNode",
        cluster: "scenarios/lone-pod-crashloop",
        target: ("Node", "scn-lone-pod-crashloop-worker-2"),
        parameters: "{}",
        why: "one render pod crash-loops on a corrupt cache while its siblings run; nothing else fails on its Ready node",
        want: Refuted("drain.node-is-the-common-factor"),
    },
    // The only replica: no sibling to compare with, so its own history must show the failure
    // is state it keeps (a probe kill it never recovered from, an emptyDir).
    delete_the_only_pod_stuck_on_what_its_emptydir_keeps => Case {
        action_type: "DeletePod",
        cluster: "unseen/stale-pidfile-emptydir",
        target: ("Deployment", "celery-beat"),
        parameters: r#"{"POD_NAME": "celery-beat-7fc4d579bc-n57pw"}"#,
        why: "killed once by its liveness probe, every start since finds the old pidfile in its emptyDir",
        want: Proven,
    },
    delete_the_only_pod_of_a_crash_loop_nothing_local_explains => Case {
        action_type: "DeletePod",
        cluster: "scenarios/crashloop-no-recent-change",
        target: ("Deployment", "ledger"),
        parameters: r#"{"POD_NAME": "ledger-d69bfdf4-v7ffd"}"#,
        why: "the only ledger pod crash-loops with no kill and no emptyDir: a new pod from the same template fails alike",
        want: Refuted("delete.failure-not-in-the-template"),
    },
    // A node Ready at this moment whose readiness keeps dropping.
    drain_a_node_whose_readiness_flaps => Case {
        action_type: "CordonDrainNode",
        cluster: "unseen/node-readiness-flapping",
        target: ("Node", "ip-10-20-40-12.eu-west-1.compute.internal"),
        parameters: "{}",
        why: "it went NotReady 9 times in two hours; the other nodes are stable and have room",
        want: Proven,
    },
    delete_the_one_pod_stuck_creating => Case {
        action_type: "DeletePod",
        cluster: "scenarios/container-creating-stuck",
        target: ("Deployment", "cache"),
        parameters: r#"{"POD_NAME": "cache-7478db49f8-v95dg"}"#,
        why: "one pod is stuck creating its containers while its siblings run",
        want: Proven,
    },
    delete_one_of_the_pods_that_all_crash => Case {
        action_type: "DeletePod",
        cluster: "scenarios/all-replicas-crash",
        target: ("Deployment", "mailer"),
        parameters: r#"{"POD_NAME": "mailer-54744c9c47-h6txj"}"#,
        why: "every pod of mailer crash-loops the same way: the SMTP relay refuses them",
        want: Refuted("delete.failure-not-shared"),
    },
    relax_a_budget_that_blocks_a_drain => Case {
        action_type: "RelaxPDB",
        cluster: "scenarios/pdb-blocks-drain",
        target: ("Deployment", "reports"),
        parameters: r#"{"PDB_NAME": "reports", "MAX_UNAVAILABLE": 1}"#,
        why: "a single-replica budget with minAvailable 1 blocks the drain",
        want: Proven,
    },
    relax_a_budget_that_guards_a_quorum => Case {
        action_type: "RelaxPDB",
        cluster: "scenarios/pdb-quorum",
        target: ("Deployment", "consensus"),
        parameters: r#"{"PDB_NAME": "consensus-quorum", "MAX_UNAVAILABLE": 1}"#,
        why: "the budget keeps a majority of a consensus group",
        want: Refuted("pdb.guards-no-quorum"),
    },
    raise_the_maximum_of_a_maxed_out_autoscaler => Case {
        action_type: "PatchHPAMaxReplicas",
        cluster: "scenarios/hpa-maxed-out",
        target: ("Deployment", "storefront"),
        parameters: r#"{"HPA_NAME": "storefront", "MAX_REPLICAS": 6}"#,
        why: "the autoscaler sits at its maximum with CPU above target",
        want: Proven,
    },
    raise_the_maximum_when_pods_already_wait_for_a_node => Case {
        action_type: "PatchHPAMaxReplicas",
        cluster: "scenarios/hpa-maxed-out-no-capacity",
        target: ("Deployment", "storefront"),
        parameters: r#"{"HPA_NAME": "storefront", "MAX_REPLICAS": 6}"#,
        why: "its pods are already Pending: more replicas will not schedule",
        want: Refuted("hpa.room-to-schedule"),
    },
    remove_a_taint_left_by_maintenance => Case {
        action_type: "RemoveNodeTaint",
        cluster: "scenarios/pending-untolerated-taint",
        target: ("Node", "scn-pending-untolerated-taint-pool-a"),
        parameters: r#"{"TAINT_KEY": "maintenance", "TAINT_EFFECT": "NoSchedule"}"#,
        why: "the maintenance taint is all that keeps the pending pods off the node",
        want: Proven,
    },
    remove_a_taint_that_is_not_all_that_keeps_the_pods_off => Case {
        action_type: "RemoveNodeTaint",
        cluster: "proofs/taint-not-the-only-blocker",
        target: ("Node", "prf-taint-not-the-only-blocker-pool-a"),
        parameters: r#"{"TAINT_KEY": "maintenance", "TAINT_EFFECT": "NoSchedule"}"#,
        why: "the pending pods require a node in pool gpu, which the node is not: without the taint they still cannot go there",
        want: Refuted("taint.only-blocker"),
    },
    remove_a_role_taint => Case {
        action_type: "RemoveNodeTaint",
        cluster: "scenarios/pending-role-taint",
        target: ("Node", "scn-pending-role-taint-infra-1"),
        parameters: r#"{"TAINT_KEY": "node-role.kubernetes.io/infra", "TAINT_EFFECT": "NoSchedule"}"#,
        why: "the infra role taint reserves the node on purpose",
        want: Refuted("taint.not-set-by-kubernetes"),
    },
    propose_a_git_revert_of_a_gitops_managed_rollout => Case {
        action_type: "GitRevert",
        cluster: "scenarios/gitops-managed",
        target: ("Deployment", "checkout"),
        parameters: r#"{"PROPOSED_CHANGE": "revert the image bump of checkout from shop/checkout:1.4.2 to shop/checkout:1.4.1"}"#,
        why: "Argo CD manages checkout: a direct rollback would be reverted",
        want: Proven,
    },
    // The catalog offers git-revert-proposal only for targets detected as GitOps-managed, so a
    // model cannot reach gitrevert.gitops-managed through it: what a model can get wrong is the
    // change itself.
    propose_a_git_revert_that_names_no_change => Case {
        action_type: "GitRevert",
        cluster: "scenarios/gitops-managed",
        target: ("Deployment", "checkout"),
        parameters: r#"{"PROPOSED_CHANGE": "revert"}"#,
        why: "Argo CD manages checkout, but \"revert\" tells a human nothing to change",
        want: Refuted("gitrevert.change-identified"),
    },
}

/// docs/investigation.md lists every declared obligation, generated from the declaration.
#[test]
fn docs_list_every_declared_obligation() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/investigation.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let want = reference::splice_between(
        &doc,
        (obligations::DOC_BEGIN, obligations::DOC_END),
        &obligations::markdown(),
    )
    .unwrap_or_else(|| panic!("docs/investigation.md lacks the markers of the obligations"));
    assert!(
        doc == want,
        "docs/investigation.md's table of obligations differs from src/domain/obligations.rs: \
         regenerate it with\n\n    cargo run -- policy obligations --update docs/investigation.md\n"
    );
}

/// Every obligation id the policies, their cases, the notifications, the pages, the tests and
/// the docs name is declared: renaming one in the table fails here, not in an empty field.
#[test]
fn every_obligation_id_named_anywhere_is_declared() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let prefixes: Vec<&str> = obligations::PROOFS
        .iter()
        .flat_map(|p| p.obligations.iter())
        .filter_map(|o| o.id.split_once('.').map(|(p, _)| p))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // `<prefix>.<fact-with-hyphens>`, not inside a longer name or path, nor cut short (`…`).
    let pattern = regex::Regex::new(&format!(
        r"(?:^|[^\w./-])((?:{})\.[a-z0-9]+(?:-[a-z0-9]+)+)(?:$|[^\w./…-])",
        prefixes
            .iter()
            .map(|p| regex::escape(p))
            .collect::<Vec<_>>()
            .join("|")
    ))
    .unwrap();
    let mut files = Vec::new();
    let mut dirs = vec![
        root.join("policies"),
        root.join("src"),
        root.join("tests"),
        root.join("docs"),
        root.join("charts"),
    ];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| {
                ["rs", "rego", "yaml", "md", "html", "js"].contains(&e.to_str().unwrap_or(""))
            }) {
                files.push(path);
            }
        }
    }
    let mut unknown = Vec::new();
    let mut named = 0;
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for c in pattern.captures_iter(line) {
                let id = &c[1];
                named += 1;
                if obligations::find(id).is_none() {
                    unknown.push(format!(
                        "{}:{}: {id}",
                        f.strip_prefix(root).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        named > 50,
        "only {named} obligation ids found: the pattern is wrong"
    );
    assert!(
        unknown.is_empty(),
        "obligation ids not declared in src/domain/obligations.rs:\n{}",
        unknown.join("\n")
    );
}
