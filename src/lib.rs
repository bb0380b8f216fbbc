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
//! web, pipeline, chat, mirror
//!                      HTTP (the only axum/hyper code); the durable worker driving the Stage
//!                      trait; the chat; the requests mirrored as Remediation objects
//! stages               ingest, enrich, investigate, gate, approval, execute, verify — never
//!                      importing each other
//! prove               the proof obligations of every action type, checked against the
//!                      cluster for every proposer (below both investigators)
//! store, cluster, llm, catalog, history, policy, monitoring, notify, actions, mcp_client
//!                      the outside world behind traits, the Rego engine, the
//!                      Alertmanager / Prometheus APIs verification reads, the
//!                      e-mail and Slack notifiers, and the built-in actions (one type:
//!                      arguments, write, dry run) the catalog validates against,
//!                      and the other teams' MCP servers whose tools the model may use
//! telemetry, readiness, secret, redact, clock, canonical
//!                      leaves every layer may use
//! domain               the values that flow between stages; imports nothing of the crate
//! ```
//!
//! Stages meet in `domain` (the values) and `daemon` (the wiring). The investigator receives
//! a `ClusterReader` only, so it cannot change the cluster by construction.

// `clippy::indexing_slicing` (house style; docs/adr/0022) is denied on each module below that
// has no indexing outside its tests, so it stays that way. A module without the attribute still
// indexes where a length was just checked: clean it, then add the attribute.

// Commands, assembly and configuration.
#[deny(clippy::indexing_slicing)]
pub mod cli;
#[deny(clippy::indexing_slicing)]
pub mod demo;

#[deny(clippy::indexing_slicing)]
pub mod daemon;

#[deny(clippy::indexing_slicing)]
pub mod config;

// The HTTP face and the durable worker.
#[deny(clippy::indexing_slicing)]
pub mod chat;
#[deny(clippy::indexing_slicing)]
pub mod mcp;
#[deny(clippy::indexing_slicing)]
pub mod mirror;
#[deny(clippy::indexing_slicing)]
pub mod pipeline;
pub mod resources;
pub mod web;

// Stages.
#[deny(clippy::indexing_slicing)]
pub mod approval;
#[deny(clippy::indexing_slicing)]
pub mod enrich;
pub mod execute;
#[deny(clippy::indexing_slicing)]
pub mod gate;
#[deny(clippy::indexing_slicing)]
pub mod ingest;
pub mod investigate;
#[deny(clippy::indexing_slicing)]
pub mod verify;

// Proof obligations: below the stages, above what they stand on.
pub mod prove;

// What the stages stand on.
#[deny(clippy::indexing_slicing)]
pub mod actions;
pub mod catalog;
pub mod cluster;
pub mod history;
pub mod llm;
#[deny(clippy::indexing_slicing)]
pub mod mcp_client;
#[deny(clippy::indexing_slicing)]
pub mod monitoring;
#[deny(clippy::indexing_slicing)]
pub mod notify;
#[deny(clippy::indexing_slicing)]
pub mod policy;
#[deny(clippy::indexing_slicing)]
pub mod store;

// Leaves.
#[deny(clippy::indexing_slicing)]
pub mod canonical;
#[deny(clippy::indexing_slicing)]
pub mod clock;
pub mod live;
#[deny(clippy::indexing_slicing)]
pub mod readiness;
pub mod redact;
#[deny(clippy::indexing_slicing)]
pub mod secret;
#[deny(clippy::indexing_slicing)]
pub mod telemetry;

// The bottom.
#[deny(clippy::indexing_slicing)]
pub mod domain;
