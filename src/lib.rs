//! kubemedic: Prometheus Alertmanager alerts in, safe and audited Kubernetes remediations out.
//!
//! The pipeline (DESIGN §1): ingest → enrich → investigate (RCA) → select a workflow → gate →
//! approve → execute → verify → remember. Each stage sits in its own module and reaches the
//! outside world only through the traits in `pipeline::stages`, `store::Store`,
//! `clock::Clock` and the cluster/LLM traits of their modules.

pub mod catalog;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod gate;
pub mod history;
pub mod ingest;
pub mod investigate;
pub mod llm;
pub mod pipeline;
pub mod store;
pub mod target;
pub mod telemetry;
pub mod web;
