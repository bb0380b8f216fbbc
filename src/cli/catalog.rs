//! `kubemedic catalog list`: the catalog a running daemon has in force — files and
//! `RemediationWorkflow` objects together — with where each workflow comes from.

use std::process::ExitCode;

use serde_json::Value;

pub async fn list(args: super::Remote) -> ExitCode {
    let url = format!("{}/api/v1/catalog", args.url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().get(&url);
    if let Some(k) = &args.api_key {
        req = req.bearer_auth(k.expose());
    }
    let body: Value = match req.send().await {
        Ok(r) if r.status().is_success() => match r.json().await {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {url} answered something that is not the catalog: {e}");
                return ExitCode::FAILURE;
            }
        },
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            eprintln!("error: {url} answered {status}: {text}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: cannot reach {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render(&body));
    ExitCode::SUCCESS
}

/// One line per workflow: id, version, action type, source.
fn render(catalog: &Value) -> String {
    let rows: Vec<[String; 4]> = catalog["workflows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap_or("").to_owned();
            [s("id"), s("version"), s("actionType"), s("source")]
        })
        .collect();
    let header = [
        "WORKFLOW".to_owned(),
        "VERSION".into(),
        "ACTION TYPE".into(),
        "SOURCE".into(),
    ];
    let width = |i: usize| {
        rows.iter()
            .chain(std::iter::once(&header))
            .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let mut out = String::new();
    for r in std::iter::once(&header).chain(rows.iter()) {
        let [a, b, c, d] = r;
        out.push_str(&format!(
            "{a:<w0$}  {b:<w1$}  {c:<w2$}  {d}\n",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workflow_says_where_it_comes_from() {
        let out = render(&serde_json::json!({"workflows": [
            {"id": "restart-rolling", "version": "1.0.0", "actionType": "RestartDeployment",
             "source": "RemediationWorkflow/kubemedic/restart"},
            {"id": "delete-pod", "version": "1.0.0", "actionType": "DeletePod",
             "source": "workflows/delete-pod.yaml"}]}));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("WORKFLOW"));
        assert!(
            lines[1].contains("restart-rolling")
                && lines[1].ends_with("RemediationWorkflow/kubemedic/restart")
        );
        assert!(lines[2].ends_with("workflows/delete-pod.yaml"));
    }
}
