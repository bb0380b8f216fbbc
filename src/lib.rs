//! kubemedic: Prometheus Alertmanager alerts in, safe and audited Kubernetes remediations out.
//!
//! The pipeline (DESIGN §1): ingest → enrich → investigate (RCA) → select a workflow → gate →
//! approve → execute → verify → remember. The modules are layers, and every import points
//! down (`tests/layers.rs` enforces it, docs/adr/0007-one-way-layers.md explains it):
//!
//! ```text
//! cli, demo            the commands
//! daemon               assembles the stages and serves
//! config               flags + env + file → each module's own Settings type; read only by
//!                      cli, demo and daemon
//! web, pipeline        HTTP (the only axum/hyper code); the durable worker driving the Stage trait
//! stages               ingest, enrich, investigate, gate, approval, execute, verify — never
//!                      importing each other
//! prove               the proof obligations of every action type, checked against the
//!                      cluster for every proposer (below both investigators)
//! store, cluster, llm, catalog, history, policy, monitoring, notify, actions
//!                      the outside world behind traits, the Rego engine, the
//!                      Alertmanager / Prometheus APIs verification reads, the
//!                      e-mail and Slack notifiers, and the built-in actions (one type:
//!                      arguments, write, dry run) the catalog validates against
//! telemetry, readiness, secret, redact, clock, canonical
//!                      leaves every layer may use
//! domain               the values that flow between stages; imports nothing of the crate
//! ```
//!
//! Stages meet in `domain` (the values) and `daemon` (the wiring). The investigator receives
//! a `ClusterReader` only, so it cannot change the cluster by construction.

// Commands, assembly and configuration.
pub mod cli;
pub mod demo;

pub mod daemon;

pub mod config;

// The HTTP face and the durable worker.
pub mod pipeline;
pub mod web;

// Stages.
pub mod approval;
pub mod enrich;
pub mod execute;
pub mod gate;
pub mod ingest;
pub mod investigate;
pub mod verify;

// Proof obligations: below the stages, above what they stand on.
pub mod prove;

// What the stages stand on.
pub mod actions;
pub mod catalog;
pub mod cluster;
pub mod history;
pub mod llm;
pub mod monitoring;
pub mod notify;
pub mod policy;
pub mod store;

// Leaves.
pub mod canonical;
pub mod clock;
pub mod readiness;
pub mod redact;
pub mod secret;
pub mod telemetry;

// The bottom.
pub mod domain;
