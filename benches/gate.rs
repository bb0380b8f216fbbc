//! Gate decision latency: kubemedic's in-process regorus gate beside real OPA, on the same
//! policy (`policies/`) and the same inputs, in the same run. Run it with `scripts/bench-gate`,
//! which also provides OPA (PyPI opa-golib-python-bindings, the OPA Go library); figures go in
//! docs/benchmarks.md ("Gate").
//!
//! Every sample is one evaluation of `data.kubemedic.approval.decision` for one of N distinct
//! inputs (environments, kinds, missing targets, failed detections, warnings varied), timed on
//! its own; p50 / p99 over all samples. What each row includes:
//!
//! - `RegoGate::decide` — the daemon's path, called from a task on a runtime worker:
//!   `block_in_place`, a VM from the pool, input conversion, RVM execution, decision parsing.
//! - `RegoGate::decide_blocking` — the same on the calling thread.
//! - regorus interpreter, engine cloned per call / one engine reused — the tree-walking
//!   interpreter on a prepared engine (input pre-converted).
//! - regorus RVM — the policy compiled to RVM bytecode, one VM reused (input pre-converted).
//! - regorus new engine per call — parse + prepare + evaluate each time: what compile-once avoids.
//! - OPA prepared query — `eval_document` of the bindings (a cached prepared query in the Go
//!   library), timed inside the Python process; includes JSON encoding and the ctypes call.
//! - `stage gate` span + `RegoGate::decide` — the gate's own path makes no span; the span of a
//!   gate step is made around it by the pipeline (`telemetry::stage_span`, instrumenting the
//!   stage's future, `kubemedic.next_phase` recorded after), and this row does exactly that,
//!   with no subscriber installed (measured last, after every other row).
//!
//! `GATE_BENCH_TRACES` adds one more row, measured after a global subscriber is installed the
//! way the daemon installs it (so nothing is measured after it but that row):
//! - `off` — `telemetry::init_logging` (JSON log, filter `info`): the daemon with traces off.
//! - `on` — `telemetry::Traces::init` with an OTLP endpoint: the log plus the OpenTelemetry
//!   layer and its batch exporter, sending to a real OTLP/HTTP receiver
//!   (`tests/otlp/receiver.py --count`, run by `KUBEMEDIC_OTLP_PYTHON`). After the row the
//!   exporter is shut down (flushed) and the spans the receiver got are set against the spans
//!   made; the batch processor's drops, if any, are in its warning on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubemedic::domain::{
    NewSignal, Phase, RemediationRequest, SignalMode, SignalSource, SignalStatus,
};
use kubemedic::policy::{GateInput, RegoGate};
use kubemedic::telemetry::{self, LogFormat, TraceSettings, Traces};
use serde_json::{Value, json};
use tracing::Instrument as _;

const DECISION: &str = "data.kubemedic.approval.decision";

fn main() -> anyhow::Result<()> {
    // As the daemon does: the trace exporter's HTTP client needs the process's crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let policy_dir = std::env::var("GATE_BENCH_POLICY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("policies"));
    let n_inputs: usize = env_or("GATE_BENCH_INPUTS", 2000);
    let passes: usize = env_or("GATE_BENCH_PASSES", 10);
    let inputs = make_inputs(n_inputs);
    let values: Vec<regorus::Value> = inputs
        .iter()
        .map(|i| Ok(regorus::Value::from(serde_json::to_value(i)?)))
        .collect::<anyhow::Result<_>>()?;
    let sources = policy_sources(&policy_dir)?;

    println!(
        "Gate decision latency: {} distinct inputs x {} passes = {} samples per row; policy {}",
        n_inputs,
        passes,
        n_inputs * passes,
        policy_dir.display()
    );
    println!("machine: {}\n", machine());
    let mut rows: Vec<(String, Stats)> = Vec::new();

    // The daemon's gate.
    let gate = Arc::new(RegoGate::load(
        &policy_dir,
        Duration::from_millis(100),
        None,
    ));
    if let Some(p) = gate.problem() {
        anyhow::bail!("the shipped policy does not load: {p}");
    }
    let reference: Vec<bool> = inputs
        .iter()
        .map(|i| gate.decide_blocking(i).require_approval)
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // On a worker thread, as the daemon's pipeline tasks are (block_on's thread is not one).
    let stats = runtime.block_on({
        let gate = gate.clone();
        let inputs = inputs.clone();
        async move {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(inputs.len() * passes);
                for i in &inputs {
                    std::hint::black_box(gate.decide(i).await);
                }
                for _ in 0..passes {
                    for i in &inputs {
                        let t = Instant::now();
                        let d = gate.decide(i).await;
                        samples.push(t.elapsed());
                        std::hint::black_box(d);
                    }
                }
                Stats::of(samples)
            })
            .await
        }
    })?;
    rows.push((
        "`RegoGate::decide` (daemon path: `block_in_place` on the multi-thread runtime)".into(),
        stats,
    ));
    rows.push((
        "`RegoGate::decide_blocking` (the same on the calling thread)".into(),
        measure(passes, &inputs, |i| {
            std::hint::black_box(gate.decide_blocking(i));
        }),
    ));

    // regorus directly.
    let mut engine = regorus::Engine::new();
    for (path, text) in &sources {
        engine.add_policy(path.clone(), text.clone())?;
    }
    let compiled = engine.compile_with_entrypoint(&regorus::Rc::from(DECISION))?;
    let mut reused = engine.clone();
    let mut mismatches = 0;
    for (v, want) in values.iter().zip(&reference) {
        reused.set_input(v.clone());
        let d = reused.eval_rule(DECISION.to_owned())?;
        if d["require_approval"] != regorus::Value::from(*want) {
            mismatches += 1;
        }
    }
    anyhow::ensure!(
        mismatches == 0,
        "reused engine disagrees on {mismatches} inputs"
    );
    rows.push((
        "regorus interpreter, prepared engine cloned per call".into(),
        measure(passes, &values, |v| {
            let mut e = engine.clone();
            e.set_input(v.clone());
            std::hint::black_box(e.eval_rule(DECISION.to_owned()).ok());
        }),
    ));
    rows.push((
        "regorus interpreter, one engine reused (`set_input` + `eval_rule`)".into(),
        measure(passes, &values, |v| {
            reused.set_input(v.clone());
            std::hint::black_box(reused.eval_rule(DECISION.to_owned()).ok());
        }),
    ));

    match rvm(&compiled) {
        Ok(mut vm) => {
            let mut disagree = 0;
            for (v, want) in values.iter().zip(&reference) {
                vm.set_input(v.clone());
                match vm.execute_entry_point_by_name(DECISION) {
                    Ok(d) if d["require_approval"] == regorus::Value::from(*want) => {}
                    _ => disagree += 1,
                }
            }
            if disagree == 0 {
                rows.push((
                    "regorus RVM (bytecode, VM reused)".into(),
                    measure(passes, &values, |v| {
                        vm.set_input(v.clone());
                        std::hint::black_box(vm.execute_entry_point_by_name(DECISION).ok());
                    }),
                ));
            } else {
                println!(
                    "regorus RVM: disagrees with the interpreter on {disagree} inputs; not timed\n"
                );
            }
        }
        Err(e) => println!("regorus RVM: cannot compile this policy ({e}); not timed\n"),
    }

    let few = (passes / 5).max(1);
    rows.push((
        "regorus new engine per call (parse + prepare + eval)".into(),
        measure(few, &values, |v| {
            let mut e = regorus::Engine::new();
            for (path, text) in &sources {
                let _ = e.add_policy(path.clone(), text.clone());
            }
            e.set_input(v.clone());
            std::hint::black_box(e.eval_rule(DECISION.to_owned()).ok());
        }),
    ));

    // Real OPA on the same policy and inputs.
    let opa = opa(&root, &policy_dir, &inputs, passes, &reference);
    match &opa {
        Ok((stats, note)) => {
            rows.push((format!("OPA prepared query ({note})"), stats.clone()));
        }
        Err(e) => println!("OPA: not measured: {e}\n"),
    }

    // The `stage gate` span around the decision, as the pipeline makes it: first with no
    // subscriber, then (GATE_BENCH_TRACES) with the daemon's.
    let traces_mode = std::env::var("GATE_BENCH_TRACES").unwrap_or_default();
    let request = gate_request();
    rows.push((
        "`stage gate` span + `RegoGate::decide`, no subscriber".into(),
        span_and_decide(&runtime, &gate, &request, &inputs, passes)?,
    ));
    match traces_mode.trim() {
        "" => {}
        "off" => {
            telemetry::init_logging(LogFormat::Json, "info");
            rows.push((
                "`stage gate` span + `RegoGate::decide`, the daemon's subscriber, traces off"
                    .into(),
                span_and_decide(&runtime, &gate, &request, &inputs, passes)?,
            ));
        }
        "on" => {
            let python = std::env::var_os("KUBEMEDIC_OTLP_PYTHON").ok_or_else(|| {
                anyhow::anyhow!(
                    "GATE_BENCH_TRACES=on needs KUBEMEDIC_OTLP_PYTHON: a Python with the \
                     opentelemetry-proto package (scripts/bench-gate sets it)"
                )
            })?;
            let counts =
                std::env::temp_dir().join(format!("gate-bench-spans-{}.json", std::process::id()));
            let mut receiver = Receiver::start(&root, Path::new(&python), &counts)?;
            let settings = TraceSettings {
                endpoint: url::Url::parse(&format!(
                    "http://127.0.0.1:{}/v1/traces",
                    receiver.port
                ))?,
                service_name: "kubemedic-gate-bench".into(),
                record_prompts: false,
            };
            let traces = runtime
                .block_on(async { Traces::init(LogFormat::Json, "info", Some(&settings)) })?;
            anyhow::ensure!(
                telemetry::tracing_enabled(),
                "the trace exporter was not installed"
            );
            let stats = span_and_decide(&runtime, &gate, &request, &inputs, passes)?;
            runtime.block_on(traces.shutdown());
            std::thread::sleep(Duration::from_millis(300));
            let made = inputs.len() * (passes + 1);
            let got: Value = std::fs::read_to_string(&counts)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            println!(
                "traces on: {} spans made ({} warm-up + {} timed), the receiver got {} `stage gate` \
                 spans in {} exports ({} spans in all); its CPU {:.1} s",
                made,
                inputs.len(),
                stats.n,
                got["by_name"]["stage gate"].as_u64().unwrap_or(0),
                got["exports"].as_u64().unwrap_or(0),
                got["spans"].as_u64().unwrap_or(0),
                receiver.cpu_seconds(),
            );
            receiver.stop();
            let _ = std::fs::remove_file(&counts);
            rows.push((
                "`stage gate` span + `RegoGate::decide`, traces ON (OTel layer, batch export over OTLP/HTTP)".into(),
                stats,
            ));
        }
        other => anyhow::bail!("GATE_BENCH_TRACES={other}: expected off or on"),
    }

    println!("| path | p50 µs | p99 µs | mean µs | samples |");
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in &rows {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {} |",
            s.p50, s.p99, s.mean, s.n
        );
    }
    if let Some((_, s)) = rows.first() {
        let verdict = if s.p99 <= 100.0 { "met" } else { "MISSED" };
        println!(
            "\ntarget p99 <= 100 µs in-process (daemon path): {verdict} ({:.1} µs)",
            s.p99
        );
    }
    Ok(())
}

/// A request in the gate phase, with a trace context as every request has.
fn gate_request() -> RemediationRequest {
    let now = chrono::Utc::now();
    let signal = NewSignal {
        fingerprint: "gate-bench".into(),
        starts_at: now,
        ends_at: None,
        status: SignalStatus::Firing,
        name: "KubePodCrashLooping".into(),
        severity: None,
        mode: SignalMode::Reactive,
        source: SignalSource::Alertmanager,
        labels: Default::default(),
        annotations: Default::default(),
        generator_url: None,
        receiver: None,
        group_key: None,
        external_url: None,
        target: None,
        target_fingerprint: "gate-bench".into(),
        target_aliases: vec![],
        requested: None,
        trace: None,
    };
    RemediationRequest::for_signal(&signal, Phase::Gating, now)
}

/// `RegoGate::decide` inside the `stage gate` span, as `pipeline` runs a stage: the span made
/// by `telemetry::stage_span`, the future instrumented with it, the next phase recorded, the
/// span dropped (ended). On a runtime worker, timed per call like the first row.
fn span_and_decide(
    runtime: &tokio::runtime::Runtime,
    gate: &Arc<RegoGate>,
    request: &RemediationRequest,
    inputs: &[GateInput],
    passes: usize,
) -> anyhow::Result<Stats> {
    let gate = gate.clone();
    let request = request.clone();
    let inputs = inputs.to_vec();
    let stats = runtime.block_on(async move {
        tokio::spawn(async move {
            let mut samples = Vec::with_capacity(inputs.len() * passes);
            for i in &inputs {
                std::hint::black_box(traced_decide(&gate, &request, i).await);
            }
            for _ in 0..passes {
                for i in &inputs {
                    let t = Instant::now();
                    let d = traced_decide(&gate, &request, i).await;
                    samples.push(t.elapsed());
                    std::hint::black_box(d);
                }
            }
            Stats::of(samples)
        })
        .await
    })?;
    Ok(stats)
}

/// One gate step's decision under its span, as `pipeline` runs it; whether approval is required.
async fn traced_decide(gate: &RegoGate, request: &RemediationRequest, input: &GateInput) -> bool {
    let span = telemetry::stage_span(request);
    let d = gate.decide(input).instrument(span.clone()).await;
    let next = if d.require_approval {
        Phase::AwaitingApproval
    } else {
        Phase::Executing
    };
    span.record("kubemedic.next_phase", next.as_str());
    drop(span);
    d.require_approval
}

/// `tests/otlp/receiver.py --count`: a real OTLP/HTTP receiver counting the spans it gets.
struct Receiver {
    child: std::process::Child,
    port: u16,
}

impl Receiver {
    fn start(root: &Path, python: &Path, counts: &Path) -> anyhow::Result<Self> {
        use std::io::BufRead as _;
        let mut child = Command::new(python)
            .arg(root.join("tests/otlp/receiver.py"))
            .arg("--count")
            .arg(counts)
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("the receiver has no stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        match line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
        {
            Some(port) => Ok(Self { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("the OTLP receiver did not start: {line:?}")
            }
        }
    }

    /// utime + stime so far.
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
    n: usize,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let at = |q: f64| {
            let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(i).copied().map_or(0.0, us)
        };
        let n = samples.len();
        Self {
            p50: at(0.50),
            p99: at(0.99),
            mean: samples.iter().copied().map(us).sum::<f64>() / n.max(1) as f64,
            n,
        }
    }

    fn from_us(mut us: Vec<f64>) -> Self {
        us.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((us.len() as f64 - 1.0) * q).round() as usize;
            us.get(i).copied().unwrap_or(0.0)
        };
        Self {
            p50: at(0.50),
            p99: at(0.99),
            mean: us.iter().sum::<f64>() / us.len().max(1) as f64,
            n: us.len(),
        }
    }
}

/// Time `f` once per item per pass, after one warm-up pass.
fn measure<T>(passes: usize, items: &[T], mut f: impl FnMut(&T)) -> Stats {
    for i in items {
        f(i);
    }
    let mut samples = Vec::with_capacity(items.len() * passes);
    for _ in 0..passes {
        for i in items {
            let t = Instant::now();
            f(i);
            samples.push(t.elapsed());
        }
    }
    Stats::of(samples)
}

fn rvm(compiled: &regorus::CompiledPolicy) -> anyhow::Result<regorus::rvm::RegoVM> {
    let program =
        regorus::languages::rego::compiler::Compiler::compile_from_policy(compiled, &[DECISION])?;
    let mut vm = regorus::rvm::RegoVM::new();
    vm.load_program(program);
    Ok(vm)
}

fn policy_sources(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "rego") {
            files.push((path.display().to_string(), std::fs::read_to_string(&path)?));
        }
    }
    files.sort();
    Ok(files)
}

/// Distinct, deterministic inputs covering every rule of the default policy.
fn make_inputs(n: usize) -> Vec<GateInput> {
    let envs = [
        "production",
        "staging",
        "development",
        "qa",
        "perf",
        "Production",
    ];
    let kinds = [
        "Deployment",
        "StatefulSet",
        "Node",
        "DaemonSet",
        "Deployment",
    ];
    (0..n)
        .map(|i| {
            let kind = kinds[i % kinds.len()];
            let mut v = json!({
                "environment": envs[(i / 3) % envs.len()],
                "severity": if i % 2 == 0 { "critical" } else { "warning" },
                "confidence": (i % 100) as f64 / 100.0,
                "action_type": "RestartDeployment",
                "workflow_id": format!("workflow-{}", i % 17),
                "business_classification": {"business_unit": format!("bu-{}", i % 7), "priority": "P2"},
            });
            if i % 11 != 0 {
                v["remediation_target"] = if kind == "Node" {
                    json!({"kind": kind, "name": format!("worker-{i}")})
                } else {
                    json!({"kind": kind, "name": format!("app-{i}"), "namespace": format!("ns-{}", i % 13)})
                };
            }
            if i % 7 == 0 {
                v["failed_detections"] = json!(["pdbProtected", "hpaEnabled"]);
            }
            if i % 5 == 0 {
                v["warnings"] = json!([format!("declining effectiveness ({i})")]);
            }
            serde_json::from_value(v).unwrap_or_else(|e| panic!("bench input {i}: {e}"))
        })
        .collect()
}

/// Run scripts/opa/bench.py with the Python that has the OPA bindings.
fn opa(
    root: &Path,
    policy_dir: &Path,
    inputs: &[GateInput],
    passes: usize,
    reference: &[bool],
) -> anyhow::Result<(Stats, String)> {
    let python = std::env::var("KUBEMEDIC_OPA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".test-state/opa-venv/bin/python"));
    anyhow::ensure!(
        python.exists(),
        "{} not found (scripts/bench-gate installs it)",
        python.display()
    );
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("inputs.json");
    std::fs::write(&path, serde_json::to_vec(inputs)?)?;
    let out = Command::new(&python)
        .arg(root.join("scripts/opa/bench.py"))
        .arg(policy_dir)
        .arg(&path)
        .arg(passes.to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "bench.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)?;
    let decisions: Vec<bool> = serde_json::from_value(report["require_approval"].clone())?;
    let disagree = decisions
        .iter()
        .zip(reference)
        .filter(|(a, b)| a != b)
        .count();
    anyhow::ensure!(
        disagree == 0 && decisions.len() == reference.len(),
        "OPA and regorus disagree on {disagree} of {} inputs",
        reference.len()
    );
    let samples: Vec<f64> = serde_json::from_value(report["samples_us"].clone())?;
    let note = format!(
        "OPA {}, via Python ctypes + JSON; JSON encoding alone p50 {:.1} µs",
        report["opa_version"].as_str().unwrap_or("?"),
        report["json_encode_p50_us"].as_f64().unwrap_or(0.0)
    );
    Ok((Stats::from_us(samples), note))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores, release build")
}
