//! The Job engine's primitives: create a Job, and wait until it finished.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::obj::{self, array, str_at};
use super::{ClusterReader, ClusterWriter, Result, WriteOutcome};
use crate::domain::StepDone;

/// Create a Job.
pub async fn create_job(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    namespace: &str,
    job: &Value,
    dry_run: bool,
) -> Result<WriteOutcome> {
    let res = r.resource("Job").await?;
    let created = w.create(&res, Some(namespace), job, dry_run).await?;
    Ok(WriteOutcome {
        action: StepDone::Job,
        target: format!("{namespace}/Job/{}", obj::name(&created)),
        dry_run,
        detail: json!({"name": obj::name(&created)}),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JobResult {
    Succeeded,
    Failed,
    TimedOut,
}

/// How a Job finished, by its controller's conditions: `Complete` (also reached by a success
/// policy, with fewer pods succeeded than `completions`) or `Failed` True. `None` while it runs.
pub fn finished(job: &Value) -> Option<JobResult> {
    array(job, &["status", "conditions"])
        .iter()
        .filter(|c| str_at(c, &["status"]) == Some("True"))
        .find_map(|c| match str_at(c, &["type"]) {
            Some("Complete") => Some(JobResult::Succeeded),
            Some("Failed") => Some(JobResult::Failed),
            _ => None,
        })
}

/// Wait for a Job to finish ([`finished`]), polling every `every`.
pub async fn wait_job(
    r: &dyn ClusterReader,
    namespace: &str,
    name: &str,
    timeout: Duration,
    every: Duration,
) -> Result<(JobResult, Value)> {
    let res = r.resource("Job").await?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let job = r.get(&res, Some(namespace), name).await?;
        if let Some(result) = finished(&job) {
            return Ok((result, job));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok((JobResult::TimedOut, job));
        }
        tokio::time::sleep(every).await;
    }
}
