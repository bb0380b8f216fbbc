//! Real `kubemedic serve` processes exporting OpenTelemetry traces to a real OTLP/HTTP
//! receiver (`tests/otlp/receiver.py`, built on the `opentelemetry-proto` package from PyPI):
//! what tests/traces.rs and tests/mcp_client.rs read spans from.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{API_TOKEN, WEBHOOK_TOKEN};

/// The `kubemedic` binary: set for integration tests only (an example that shares these
/// helpers has none).
const BIN: Option<&str> = option_env!("CARGO_BIN_EXE_kubemedic");
pub const AUDIT_KEY: &str = "7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace";
/// The OTLP receiver, killed when dropped.
pub struct Receiver {
    child: Child,
    pub endpoint: String,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver {
    pub fn start() -> Option<Self> {
        let python = super::component("KUBEMEDIC_OTLP_PYTHON", "the OTLP receiver's Python")?;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("spans.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Some(Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            file,
            _dir: dir,
        })
    }

    pub fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `kubemedic serve` process.
pub struct Daemon {
    child: Child,
    pub base: String,
    log: Arc<Mutex<Vec<String>>>,
    _data: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Daemon {
    pub async fn start(name: &str, database_url: &str, receiver: &str, args: &[String]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = Command::new(BIN.expect("the kubemedic binary (integration tests only)"))
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data.path())
            .arg("--lease-seconds")
            .arg("2")
            .args(args)
            .env("HOSTNAME", name)
            .env("KUBEMEDIC_DATABASE_URL", database_url)
            .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
            .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
            .env("KUBEMEDIC_AUDIT_KEY", AUDIT_KEY)
            .env("KUBEMEDIC_LOG_FORMAT", "json")
            .env("KUBEMEDIC_OTLP_ENDPOINT", receiver)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut d = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            _data: data,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/readyz", d.base)).await
                && r.status() == 200
            {
                return d;
            }
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("{name} exited ({status}):\n{}", d.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{name} not ready:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGTERM, and wait for the exit (the spans still queued are sent first).
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert_eq!(status.code(), Some(0), "{}", self.log_text());
                return;
            }
            assert!(
                Instant::now() < deadline,
                "did not stop:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub async fn api(&self, path: &str) -> Value {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    pub async fn until(&self, path: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.api(path).await;
            if done(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{path} not there in {secs}s: {v:#}\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn post_alert(base: &str, body: &Value, traceparent: Option<&str>) -> Value {
    let mut r = reqwest::Client::new()
        .post(format!("{base}/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(body.to_string());
    if let Some(t) = traceparent {
        r = r.header("traceparent", t);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Every string in a span's attributes and its events' attributes.
pub fn strings(span: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push(k.clone());
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = vec![span["name"].as_str().unwrap_or("").to_owned()];
    walk(&span["attributes"], &mut out);
    walk(&span["events"], &mut out);
    out
}
