//! Sanitiser throughput (docs/adr/0009-secret-rules-from-gitleaks.md): how long
//! `sanitize_value` and `sanitize_text` take on what the investigator reads — the objects of
//! the captured incident scenarios (tests/scenarios/*/snapshot.yaml) as values and as YAML
//! text, a container log, and the planted-credential corpus — and what the first call pays
//! to compile the rules. Figures go in docs/benchmarks.md ("Sanitiser").
//!
//!   CARGO_TARGET_DIR=/work/target-bench cargo bench --bench redact
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed assumption fails the run

use std::hint::black_box;
use std::time::{Duration, Instant};

use kubemedic::redact::{gitleaks_rules, sanitize_text, sanitize_value};
use serde_json::Value;

fn main() {
    let root = env!("CARGO_MANIFEST_DIR");
    let t = Instant::now();
    let rules = gitleaks_rules();
    black_box(sanitize_text("warm-up: password=x"));
    println!(
        "first use (compile {} gitleaks + own rules): {:.1} ms",
        rules.loaded,
        t.elapsed().as_secs_f64() * 1e3
    );

    let mut objects: Vec<Value> = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(format!("{root}/tests/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let text = std::fs::read_to_string(dir.join("snapshot.yaml")).unwrap();
        for doc in text.split("\n---\n") {
            if let Ok(v) = serde_saphyr::from_str::<Value>(doc)
                && v.get("kind").and_then(Value::as_str) != Some("SnapshotInfo")
            {
                objects.push(v);
            }
        }
    }
    let pods: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Pod").collect();
    let yaml: Vec<String> = objects
        .iter()
        .map(|o| serde_saphyr::to_string(o).unwrap())
        .collect();
    let log: String = (0..120)
        .map(|i| {
            format!(
                "2026-11-21T23:31:{:02}.{i:03}Z INFO checkout handled GET /api/v1/orders/{i} status=200 duration=12ms trace_id=4bf92f3577b34da6a3ce929d0e0e{i:04}\n",
                i % 60
            )
        })
        .collect();
    let corpus =
        std::fs::read_to_string(format!("{root}/tests/fixtures/redact/corpus.yaml")).unwrap();

    println!(
        "{} objects ({} pods) from the scenario snapshots\n",
        objects.len(),
        pods.len()
    );
    println!("| input | calls | bytes per call (mean) | time per call (mean) | per 10 KB |");
    println!("|---|---:|---:|---:|---:|");
    let pod_bytes: Vec<usize> = pods.iter().map(|p| p.to_string().len()).collect();
    row("Pod objects, sanitize_value", &pod_bytes, || {
        for p in &pods {
            black_box(sanitize_value(p));
        }
    });
    let obj_bytes: Vec<usize> = objects.iter().map(|o| o.to_string().len()).collect();
    row("all objects, sanitize_value", &obj_bytes, || {
        for o in &objects {
            black_box(sanitize_value(o));
        }
    });
    let yaml_bytes: Vec<usize> = yaml.iter().map(String::len).collect();
    row("all objects as YAML, sanitize_text", &yaml_bytes, || {
        for y in &yaml {
            black_box(sanitize_text(y));
        }
    });
    row("container log, 120 lines", &[log.len()], || {
        black_box(sanitize_text(&log));
    });
    // What ingest redacts per alert: every label value and annotation of the shipped alerts.
    let mut alert_texts: Vec<Vec<String>> = Vec::new();
    for entry in std::fs::read_dir(format!("{root}/tests/fixtures/alertmanager")).unwrap() {
        let body: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap())
                .unwrap_or(Value::Null);
        for alert in body["alerts"].as_array().into_iter().flatten() {
            let texts = ["labels", "annotations"]
                .iter()
                .filter_map(|k| alert[*k].as_object())
                .flat_map(|m| m.values().filter_map(Value::as_str).map(str::to_owned))
                .collect();
            alert_texts.push(texts);
        }
    }
    let alert_bytes: Vec<usize> = alert_texts
        .iter()
        .map(|t| t.iter().map(String::len).sum())
        .collect();
    row(
        "one alert's labels and annotations (ingest)",
        &alert_bytes,
        || {
            for texts in &alert_texts {
                for t in texts {
                    black_box(sanitize_text(t));
                }
            }
        },
    );
    row(
        "the corpus file (dense with credentials)",
        &[corpus.len()],
        || {
            black_box(sanitize_text(&corpus));
        },
    );
}

/// Run `pass` (one call per entry of `bytes`) until a second has gone by; print a table row.
fn row(name: &str, bytes: &[usize], mut pass: impl FnMut()) {
    pass();
    let mut passes = 0u32;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(1) || passes < 3 {
        pass();
        passes += 1;
    }
    let calls = bytes.len() as f64 * f64::from(passes);
    let per_call = t.elapsed().as_secs_f64() / calls;
    let mean = bytes.iter().sum::<usize>() as f64 / bytes.len() as f64;
    println!(
        "| {name} | {} | {:.0} | {:.0} µs | {:.0} µs |",
        bytes.len(),
        mean,
        per_call * 1e6,
        per_call * 1e6 * 10_240.0 / mean
    );
}
