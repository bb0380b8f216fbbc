//! The Job engine's primitives: create a Job, and wait until it finished.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::obj::{self, array, str_at};
use super::{ClusterReader, ClusterWriter, Result, WriteOutcome};

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
        action: "create_job".into(),
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

/// Wait for a Job to finish (Complete or Failed condition), polling every `every`.
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
        for c in array(&job, &["status", "conditions"]) {
            if str_at(c, &["status"]) == Some("True") {
                match str_at(c, &["type"]) {
                    Some("Complete") => return Ok((JobResult::Succeeded, job)),
                    Some("Failed") => return Ok((JobResult::Failed, job)),
                    _ => {}
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok((JobResult::TimedOut, job));
        }
        tokio::time::sleep(every).await;
    }
}
