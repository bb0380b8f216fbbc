//! Fuzzing the two ingest parsers — the Alertmanager webhook (`ingest::alertmanager::parse`) and
//! the native signal (`ingest::native::parse`) — and, lightly, the HTTP handlers in front of them,
//! on stable Rust, for a bounded time.
//!
//! A mutational fuzzer without coverage instrumentation (libFuzzer needs nightly), made effective
//! by knowing the input's structure. Seeds are the real bodies in `tests/fixtures/alertmanager`,
//! `tests/fixtures/native` and `src/demo/alerts`. Each input is a pool entry mutated one to a few
//! times, either on the JSON tree (values replaced by huge, Unicode, NUL, control, RTL or
//! lone-surrogate strings, extreme numbers, malformed or out-of-range timestamps; types swapped;
//! keys removed, duplicated, renamed or added by the thousand; arrays repeated; values nested deep;
//! subtrees spliced in from other seeds) or on the bytes (bit flips, inserted tokens and invalid
//! UTF-8, deletions, repeats, truncation, splices, deep bracket runs, trailing garbage). The feedback
//! is the parser's outcome: an input whose outcome (accepted shape, or rejected field and message
//! kind) was not seen before joins the pool, so later mutations start from inputs that reach
//! further into validation.
//!
//! Every input is checked for: no panic (`catch_unwind`); time (an input that takes more than
//! [`SLOW`] — best of three — is a denial-of-service bug); determinism (the same bytes parse to the
//! same result twice); and what the result says. Accepted: every signal has a name, a fingerprint
//! of at most 128 characters, a target fingerprint that is its first alias, times after the zero
//! time and inside RFC 3339's years (0001–9999 in UTC, what the stores' fixed-width text format
//! holds) that survive an RFC 3339 round trip, and no NUL anywhere. Rejected: a field and a
//! message, both non-empty, at most [`MAX_FIELD`] and [`MAX_MESSAGE`] bytes (an error echoes a
//! bounded part of the input, never the body), free of control and bidirectional-override
//! characters (they end up in log lines), and not a Debug dump. The HTTP test posts mutated
//! bodies through the real router (`tower::ServiceExt::oneshot`, SQLite in a temp dir) and checks
//! the answer is what the parser decided (200 with every signal in the store, or 400 naming the
//! parser's field with nothing stored; 413 and 415 for the bodies and headers made to get them),
//! never a 5xx, and that everything stored reads back through the API.
//!
//! A failing input is written to `$CARGO_TARGET_TMPDIR/fuzz/` and printed (path, and base64 when
//! small); the test fails at the end with the list.
//!
//! Knobs:
//! - `KUBEMEDIC_FUZZ_SECONDS` — the time for the three tests together (default 20: 40 % per
//!   parser, 20 % for HTTP, which also stops after 300 requests per 20 s). `scripts/fuzz N` runs
//!   N seconds in release, one test after the other.
//! - `KUBEMEDIC_FUZZ_SEED` — a u64; random by default, always printed. Input number i of a seed
//!   is the same whatever the machine's speed.
//! - `KUBEMEDIC_FUZZ_REPLAY` — a file: check only that input, with both parsers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use chrono::{DateTime, Datelike, Utc};
use futures::FutureExt as _;
use http_body_util::BodyExt as _;
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::domain::{NewSignal, is_cluster_scoped};
use kubemedic::ingest::{IngestError, IngestQueue, alertmanager, native};
use kubemedic::secret::Secret;
use kubemedic::telemetry::Metrics;
use kubemedic::web::{AppState, WebhookAuth};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tower::ServiceExt as _;

/// An input slower than this (best of three, debug or release) is a denial-of-service bug.
const SLOW: Duration = Duration::from_secs(1);
/// The daemon's default `max_body_bytes`: no larger body reaches a parser.
const MAX_BODY: usize = 1024 * 1024;
/// Longest error field and message the parsers may produce, in bytes.
const MAX_FIELD: usize = 256;
const MAX_MESSAGE: usize = 512;
/// Inputs larger than this are tried but not kept in the pool (they would slow every later run).
const MAX_POOL_INPUT: usize = 64 * 1024;
const MAX_POOL: usize = 2048;
/// Deepest tree the tree mutations build (the parsers stop at serde_json's 128 levels anyway;
/// the byte mutations go much deeper).
const MAX_TREE_DEPTH: usize = 300;

const TOKEN: &str = "fuzz-webhook-token";
const API: &str = "fuzz-api-token";

// ---------------------------------------------------------------------------------------------
// Configuration

struct Config {
    seconds: f64,
    seed: u64,
}

impl Config {
    fn from_env() -> Self {
        let seconds = match std::env::var("KUBEMEDIC_FUZZ_SECONDS") {
            Ok(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or_else(|| panic!("KUBEMEDIC_FUZZ_SECONDS={s:?} is not a positive number")),
            Err(_) => 20.0,
        };
        let seed = match std::env::var("KUBEMEDIC_FUZZ_SEED") {
            Ok(s) => s
                .trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("KUBEMEDIC_FUZZ_SEED={s:?} is not a u64")),
            Err(_) => rand::random(),
        };
        Self { seconds, seed }
    }

    fn share(&self, fraction: f64) -> Duration {
        Duration::from_secs_f64(self.seconds * fraction)
    }
}

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_790_000_000, 0).unwrap()
}

// ---------------------------------------------------------------------------------------------
// A JSON tree that can hold what serde_json::Value cannot: duplicate keys, lone surrogate
// escapes, numbers out of any range. Strings and keys are kept escaped, as they appear between
// the quotes; literals (numbers, true, false, null) as their raw text.

#[derive(Clone, Debug)]
enum J {
    Lit(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

impl J {
    fn from_value(v: &Value) -> J {
        match v {
            Value::Null => J::Lit("null".into()),
            Value::Bool(b) => J::Lit(b.to_string()),
            Value::Number(n) => J::Lit(n.to_string()),
            Value::String(s) => J::Str(escape(s)),
            Value::Array(items) => J::Arr(items.iter().map(J::from_value).collect()),
            Value::Object(map) => J::Obj(
                map.iter()
                    .map(|(k, v)| (escape(k), J::from_value(v)))
                    .collect(),
            ),
        }
    }

    fn parse(bytes: &[u8]) -> Option<J> {
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .map(|v| J::from_value(&v))
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            J::Lit(raw) => out.extend_from_slice(raw.as_bytes()),
            J::Str(s) => {
                out.push(b'"');
                out.extend_from_slice(s.as_bytes());
                out.push(b'"');
            }
            J::Arr(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
            J::Obj(fields) => {
                out.push(b'{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.push(b'"');
                    out.extend_from_slice(k.as_bytes());
                    out.extend_from_slice(b"\":");
                    v.write(out);
                }
                out.push(b'}');
            }
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn count(&self) -> usize {
        1 + match self {
            J::Arr(items) => items.iter().map(J::count).sum(),
            J::Obj(fields) => fields.iter().map(|(_, v)| v.count()).sum(),
            _ => 0,
        }
    }

    fn depth(&self) -> usize {
        1 + match self {
            J::Arr(items) => items.iter().map(J::depth).max().unwrap_or(0),
            J::Obj(fields) => fields.iter().map(|(_, v)| v.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// The node number `k` in pre-order.
    fn nth_mut<'a>(&'a mut self, k: &mut usize) -> Option<&'a mut J> {
        if *k == 0 {
            return Some(self);
        }
        *k -= 1;
        match self {
            J::Arr(items) => {
                for item in items {
                    if let Some(found) = item.nth_mut(k) {
                        return Some(found);
                    }
                }
                None
            }
            J::Obj(fields) => {
                for (_, v) in fields {
                    if let Some(found) = v.nth_mut(k) {
                        return Some(found);
                    }
                }
                None
            }
            _ => None,
        }
    }

    fn nth(&self, k: &mut usize) -> Option<&J> {
        if *k == 0 {
            return Some(self);
        }
        *k -= 1;
        match self {
            J::Arr(items) => items.iter().find_map(|item| item.nth(k)),
            J::Obj(fields) => fields.iter().find_map(|(_, v)| v.nth(k)),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Interesting values

/// Every field name either format knows, target labels, and near misses.
const KEYS: &[&str] = &[
    "version",
    "groupKey",
    "truncatedAlerts",
    "status",
    "receiver",
    "groupLabels",
    "commonLabels",
    "commonAnnotations",
    "externalURL",
    "alerts",
    "labels",
    "annotations",
    "startsAt",
    "endsAt",
    "generatorURL",
    "fingerprint",
    "name",
    "severity",
    "mode",
    "target",
    "summary",
    "description",
    "starts_at",
    "ends_at",
    "source",
    "generator_url",
    "kind",
    "namespace",
    "alertname",
    "pod",
    "deployment",
    "statefulset",
    "daemonset",
    "node",
    "job",
    "job_name",
    "persistentvolumeclaim",
    "exported_namespace",
    "signal_mode",
    "severty",
    "Name",
    "ALERTS",
    "",
    "\\u0000",
    "alert\\u0000name",
    "\\ud800",
    "\\u202e",
];

fn huge(rng: &mut StdRng, unit: &str) -> String {
    let n = *[1_000usize, 10_000, 100_000, 300_000].choose(rng).unwrap();
    unit.repeat(n / unit.len().max(1))
}

/// A timestamp, mostly almost valid: every part at or just past its limits.
fn timestamp(rng: &mut StdRng) -> String {
    const FIXED: &[&str] = &[
        "0001-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00.000000001Z",
        "0001-01-01T00:00:00+00:01",
        "0001-01-01T00:00:00-00:01",
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59.999999999Z",
        "9999-12-31T23:59:59-23:59",
        "9999-12-31T23:59:60Z",
        "2016-12-31T23:59:60Z",
        "2016-12-31T23:59:60.5Z",
        "2024-06-30T23:59:60+01:00",
        "2024-02-29T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2024-01-01T24:00:00Z",
        "2024-01-01T00:00:00",
        "2024-01-01",
        "2024-01-01 00:00:00Z",
        "2024-01-01t00:00:00z",
        "2024-01-01T00:00:00+24:00",
        "2024-01-01T00:00:00+99:99",
        "+002024-01-01T00:00:00Z",
        "-2024-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999999999Z",
        "2038-01-19T03:14:08Z",
        "2106-02-07T06:28:16Z",
        "yesterday",
        "1700000000",
        "",
    ];
    if rng.random_bool(0.4) {
        return (*FIXED.choose(rng).unwrap()).to_owned();
    }
    let year = *[0u32, 1, 2, 1969, 1970, 2024, 2038, 9998, 9999]
        .choose(rng)
        .unwrap();
    let year = if rng.random_bool(0.2) {
        rng.random_range(0..=9999)
    } else {
        year
    };
    let frac = match rng.random_range(0..5) {
        0 => String::new(),
        1 => ".5".into(),
        2 => format!(".{}", "9".repeat(rng.random_range(1..=12))),
        3 => format!(".{}", "1".repeat(rng.random_range(10..=2000))),
        _ => ".".into(),
    };
    let offset = *[
        "Z", "z", "+00:00", "-00:00", "+23:59", "-23:59", "+24:00", "+05:30", "+5", "", "+0000",
    ]
    .choose(rng)
    .unwrap();
    let sep = *["T", "t", " ", "TT"].choose(rng).unwrap();
    format!(
        "{year:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}{frac}{offset}",
        rng.random_range(0..=13),
        rng.random_range(0..=32),
        rng.random_range(0..=25),
        rng.random_range(0..=60),
        rng.random_range(0..=61),
    )
}

/// A string's escaped content.
fn interesting_string(rng: &mut StdRng) -> String {
    match rng.random_range(0..22) {
        0 => String::new(),
        1 => " \\t\\n ".into(),
        2 => "\\u0000".into(),
        3 => "a\\u0000b\\u0000".into(),
        4 => (*[
            "\\ud800",
            "\\udfff",
            "\\ud800\\ud800",
            "\\ude00\\ud83d",
            "x\\udbff",
        ]
        .choose(rng)
        .unwrap())
        .into(),
        5 => "\\ud83d\\ude00\u{1F4A5}".into(),
        6 => "\u{202E}gnp.exe\u{202C}\\u2066x\\u2069\u{200F}".into(),
        7 => "\\u0001\\u001b[31mred\\u001b[0m\\r\\n\\b\\f\\u007f\u{85}".into(),
        8 => huge(rng, "A"),
        9 => huge(rng, "é𝕏"),
        10 => format!("e{}", "\u{301}".repeat(rng.random_range(1..5000))),
        11 | 12 => timestamp(rng),
        13 => (*[
            "firing",
            "resolved",
            "FIRING",
            "Firing",
            " firing",
            "firing\\u0000",
            "proactive",
            "reactive",
            "Proactive",
            "4",
            "5",
            "04",
        ]
        .choose(rng)
        .unwrap())
        .into(),
        14 => (*[
            "Pod",
            "Node",
            "Deployment",
            "StatefulSet",
            "Namespace",
            "PersistentVolume",
            "pod",
            "kube-system",
            "default",
            "prometheus",
            "kube-state-metrics",
            "PredictedDiskFull",
            "MemoryForecastHigh",
        ]
        .choose(rng)
        .unwrap())
        .into(),
        15 => (*[
            "%",
            "%4",
            "%zz",
            "%%%%",
            "%ff%fe%00",
            "predict_linear%28x%29",
            "http://p/graph?g0.expr=predict_linear%28",
            "+%2B+",
            "%C3%28",
        ]
        .choose(rng)
        .unwrap())
        .into(),
        16 => "f".repeat(*[127usize, 128, 129, 4096].choose(rng).unwrap()),
        17 => "\\\"\\\\\\/".into(),
        18 => "\\u00e9\\uFFFF\\uFEFF\\uFFFE".into(),
        19 => "\\\\u0000".into(),
        20 => "%".repeat(rng.random_range(1..100_000)),
        _ => format!("k8s-{}", rng.random::<u32>()),
    }
}

fn interesting_number(rng: &mut StdRng) -> String {
    const FIXED: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "4",
        "1.0",
        "-1.5e-7",
        "1e999",
        "-1e999",
        "1e-999",
        "1E+2",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "9007199254740993",
        "00",
        "01",
        ".5",
        "-",
        "1.",
        "NaN",
        "Infinity",
        "true",
        "false",
        "null",
    ];
    match rng.random_range(0..4) {
        0 => "9".repeat(rng.random_range(1..20_000)),
        1 => format!("0.{}1", "0".repeat(rng.random_range(1..20_000))),
        _ => (*FIXED.choose(rng).unwrap()).to_owned(),
    }
}

fn interesting_key(rng: &mut StdRng) -> String {
    match rng.random_range(0..8) {
        0 => interesting_string(rng),
        _ => (*KEYS.choose(rng).unwrap()).to_owned(),
    }
}

fn interesting_value(rng: &mut StdRng) -> J {
    match rng.random_range(0..6) {
        0 => J::Lit(interesting_number(rng)),
        1 => J::Arr(vec![]),
        2 => J::Obj(vec![]),
        _ => J::Str(interesting_string(rng)),
    }
}

// ---------------------------------------------------------------------------------------------
// Mutations

fn mutate_tree(rng: &mut StdRng, tree: &mut J, donors: &[J]) {
    let depth = tree.depth();
    let mut k = rng.random_range(0..tree.count());
    let Some(node) = tree.nth_mut(&mut k) else {
        return;
    };
    match rng.random_range(0..16) {
        0 | 1 => *node = J::Str(interesting_string(rng)),
        2 | 3 => *node = J::Str(timestamp(rng)),
        4 => *node = J::Lit(interesting_number(rng)),
        // Another type holding the same data, or none.
        5 => {
            let old = std::mem::replace(node, J::Lit("null".into()));
            *node = match rng.random_range(0..7) {
                0 => J::Lit("null".into()),
                1 => J::Lit("true".into()),
                2 => J::Lit(interesting_number(rng)),
                3 => J::Arr(vec![old]),
                4 => J::Obj(vec![("k".into(), old)]),
                5 => match old {
                    J::Str(s) => J::Lit(if s.is_empty() { "0".into() } else { s }),
                    J::Lit(l) => J::Str(l),
                    J::Arr(items) => J::Obj(
                        items
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (i.to_string(), v))
                            .collect(),
                    ),
                    J::Obj(fields) => J::Arr(fields.into_iter().map(|(_, v)| v).collect()),
                },
                _ => J::Str(interesting_string(rng)),
            };
        }
        6..=9 => match node {
            J::Obj(fields) => mutate_object(rng, fields),
            J::Arr(items) => mutate_array(rng, items),
            J::Str(s) => mutate_string(rng, s),
            J::Lit(l) => *l = interesting_number(rng),
        },
        10 => {
            if let J::Str(s) = node {
                mutate_string(rng, s);
            } else {
                *node = J::Str(interesting_string(rng));
            }
        }
        // Nested deep.
        11 if depth < MAX_TREE_DEPTH => {
            let levels = *[1usize, 2, 64, 126, 127, 128, 129, 200]
                .choose(rng)
                .unwrap();
            let levels = levels.min(MAX_TREE_DEPTH - depth);
            let array = rng.random_bool(0.5);
            for _ in 0..levels {
                let inner = std::mem::replace(node, J::Lit("null".into()));
                *node = if array {
                    J::Arr(vec![inner])
                } else {
                    J::Obj(vec![("a".into(), inner)])
                };
            }
        }
        // A subtree of a seed in its place.
        12 | 13 => {
            if let Some(donor) = donors.choose(rng) {
                let mut k = rng.random_range(0..donor.count());
                if let Some(sub) = donor.nth(&mut k)
                    && sub.depth() + depth <= MAX_TREE_DEPTH
                {
                    *node = sub.clone();
                }
            }
        }
        // Thousands of labels.
        14 => {
            let n = *[100usize, 1_000, 5_000, 20_000].choose(rng).unwrap();
            let fields = (0..n)
                .map(|i| (format!("label_{i}"), J::Str(format!("value-{i}"))))
                .collect();
            match node {
                J::Obj(existing) => existing.extend(fields),
                _ => *node = J::Obj(fields),
            }
        }
        _ => *node = interesting_value(rng),
    }
}

fn mutate_object(rng: &mut StdRng, fields: &mut Vec<(String, J)>) {
    match rng.random_range(0..7) {
        0 if !fields.is_empty() => {
            let i = rng.random_range(0..fields.len());
            fields.remove(i);
        }
        // The same key twice, the second with another value.
        1 if !fields.is_empty() => {
            let i = rng.random_range(0..fields.len());
            let (k, v) = fields[i].clone();
            let v = if rng.random_bool(0.5) {
                v
            } else {
                interesting_value(rng)
            };
            let at = rng.random_range(0..=fields.len());
            fields.insert(at, (k, v));
        }
        2 if !fields.is_empty() => {
            let i = rng.random_range(0..fields.len());
            fields[i].0 = interesting_key(rng);
        }
        3 if !fields.is_empty() => {
            let i = rng.random_range(0..fields.len());
            let j = rng.random_range(0..fields.len());
            fields.swap(i, j);
        }
        4 => fields.clear(),
        _ => {
            let at = rng.random_range(0..=fields.len());
            fields.insert(at, (interesting_key(rng), interesting_value(rng)));
        }
    }
}

fn mutate_array(rng: &mut StdRng, items: &mut Vec<J>) {
    match rng.random_range(0..5) {
        0 if !items.is_empty() => {
            let i = rng.random_range(0..items.len());
            items.remove(i);
        }
        // A long array: one element many times.
        1 if !items.is_empty() => {
            let i = rng.random_range(0..items.len());
            let n = *[2usize, 10, 100, 1_000, 5_000].choose(rng).unwrap();
            let copy = items[i].clone();
            items.extend(std::iter::repeat_n(copy, n));
        }
        2 => items.clear(),
        3 => items.reverse(),
        _ => {
            let at = rng.random_range(0..=items.len());
            items.insert(at, interesting_value(rng));
        }
    }
}

fn char_boundary(s: &str, rng: &mut StdRng) -> usize {
    let mut i = rng.random_range(0..=s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn mutate_string(rng: &mut StdRng, s: &mut String) {
    match rng.random_range(0..4) {
        0 => {
            let at = char_boundary(s, rng);
            s.insert_str(at, &interesting_string(rng));
        }
        1 => {
            let at = char_boundary(s, rng);
            s.truncate(at);
        }
        2 if !s.is_empty() && s.len() < 10_000 => {
            *s = s.repeat(rng.random_range(2..200));
        }
        _ => s.push_str(&interesting_string(rng)),
    }
}

const TOKENS: &[&[u8]] = &[
    b"\\u0000",
    b"\\ud800",
    b"\\udc00",
    b"\\",
    b"\"",
    b"null",
    b"1e999",
    b"-0",
    b"{}",
    b"[]",
    b",",
    b":",
    b"\"\":",
    b"\xe2\x80\xae",     // U+202E, raw
    b"\xef\xbb\xbf",     // BOM
    b"\xc0\x80",         // overlong NUL
    b"\xff",             // never UTF-8
    b"\x80",             // lone continuation
    b"\xed\xa0\x80",     // an encoded surrogate
    b"\xf4\x90\x80\x80", // past U+10FFFF
    b"\xe2\x82",         // truncated sequence
    b"\x00",
    b"\x1b",
    b"\t",
    b"\"alerts\":",
    b"\"startsAt\":",
];

const BYTES: &[u8] = b"\x00\x7f\x80\xff\"\\{}[],:09-e. \n\t\x1b";

fn mutate_bytes(rng: &mut StdRng, b: &mut Vec<u8>, other: &[u8]) {
    let len = b.len();
    let pos = |rng: &mut StdRng| rng.random_range(0..=len);
    match rng.random_range(0..15) {
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            b[i] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let i = rng.random_range(0..len);
            b[i] = *BYTES.choose(rng).unwrap();
        }
        2 | 3 => {
            let at = pos(rng);
            let token = TOKENS.choose(rng).unwrap();
            b.splice(at..at, token.iter().copied());
        }
        4 if len > 0 => {
            let at = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - at).min(256));
            b.drain(at..at + n);
        }
        // A chunk repeated.
        5 if len > 0 => {
            let at = rng.random_range(0..len);
            let n = rng.random_range(1..=(len - at).min(4096));
            let times = *[1usize, 2, 10, 100, 1000].choose(rng).unwrap();
            let times = times.min(MAX_BODY / n);
            let chunk = b[at..at + n].to_vec();
            let insert: Vec<u8> = chunk.repeat(times);
            b.splice(at..at, insert);
        }
        6 => b.truncate(pos(rng)),
        // The start of this input, the end of another.
        7 if !other.is_empty() => {
            b.truncate(pos(rng));
            let from = rng.random_range(0..other.len());
            b.extend_from_slice(&other[from..]);
        }
        // Deep nesting, far past serde_json's recursion limit.
        8 => {
            let at = pos(rng);
            let n = *[127usize, 128, 129, 1_000, 100_000].choose(rng).unwrap();
            let unit: &[u8] = if rng.random_bool(0.5) {
                b"["
            } else {
                b"{\"a\":"
            };
            b.splice(at..at, unit.repeat(n));
        }
        9 => match rng.random_range(0..4) {
            0 => {
                b.splice(0..0, b"\xef\xbb\xbf".iter().copied());
            }
            1 => b.extend_from_slice(b" x"),
            2 => b.extend_from_slice(b"{}"),
            _ => b.extend_from_slice(b"\x00"),
        },
        10 => {
            let at = pos(rng);
            let n = rng.random_range(1..=32);
            let random: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            b.splice(at..at, random);
        }
        // A digit changed (times, numbers).
        11 => {
            let digits: Vec<usize> = (0..len).filter(|&i| b[i].is_ascii_digit()).collect();
            if let Some(&i) = digits.choose(rng) {
                b[i] = b'0' + rng.random_range(0..10);
            }
        }
        12 => {
            let quotes: Vec<usize> = (0..len).filter(|&i| b[i] == b'"').collect();
            if let Some(&i) = quotes.choose(rng) {
                b.remove(i);
            }
        }
        13 => {
            let at = pos(rng);
            let n = *[1usize, 100, 10_000, 500_000].choose(rng).unwrap();
            b.splice(at..at, std::iter::repeat_n(b' ', n));
        }
        _ if len > 0 => {
            let i = rng.random_range(0..len);
            if b[i].is_ascii_alphabetic() {
                b[i] ^= 0x20;
            }
        }
        _ => b.push(b'{'),
    }
}

// ---------------------------------------------------------------------------------------------
// The fuzzer: a pool of inputs grown by outcome feedback.

struct Entry {
    bytes: Vec<u8>,
    tree: Option<J>,
}

/// Inputs kept, with the number of seeds at their start (seeds are never replaced).
struct Pool {
    entries: Vec<Entry>,
    seeds: usize,
}

impl Pool {
    fn new(entries: Vec<Entry>) -> Self {
        Self {
            seeds: entries.len(),
            entries,
        }
    }

    fn add(&mut self, rng: &mut StdRng, entry: Entry) {
        if self.entries.len() < MAX_POOL / 2 {
            self.entries.push(entry);
        } else {
            let i = rng.random_range(self.seeds..self.entries.len());
            self.entries[i] = entry;
        }
    }
}

struct Fuzzer {
    rng: StdRng,
    /// Inputs the parser accepted (most mutations start from one: they reach the validation
    /// after the JSON), and inputs it rejected in a way not seen before.
    accepted: Pool,
    rejected: Pool,
    donors: Vec<J>,
    outcomes: HashSet<String>,
}

impl Fuzzer {
    fn new(seed: u64, parser: Parser, donors: &[Vec<u8>]) -> Self {
        let (mut accepted, mut rejected) = (Vec::new(), Vec::new());
        for bytes in parser.seeds() {
            let ok = parser.parse(&bytes).is_ok();
            let entry = Entry {
                tree: J::parse(&bytes),
                bytes,
            };
            if ok {
                accepted.push(entry);
            } else {
                rejected.push(entry);
            }
        }
        assert!(!accepted.is_empty(), "no {} seed parses", parser.name());
        Self {
            rng: StdRng::seed_from_u64(seed),
            accepted: Pool::new(accepted),
            rejected: Pool::new(rejected),
            donors: donors.iter().filter_map(|b| J::parse(b)).collect(),
            outcomes: HashSet::new(),
        }
    }

    fn pick(&mut self) -> &Entry {
        let rng = &mut self.rng;
        let pool = if self.rejected.entries.is_empty() || rng.random_bool(0.65) {
            &self.accepted
        } else {
            &self.rejected
        };
        &pool.entries[rng.random_range(0..pool.entries.len())]
    }

    fn pool_len(&self) -> usize {
        self.accepted.entries.len() + self.rejected.entries.len()
    }

    fn next(&mut self) -> (Vec<u8>, Option<J>) {
        let entry = self.pick();
        let mut bytes = entry.bytes.clone();
        let mut tree = entry.tree.clone();
        // One mutation most of the time, up to six.
        let mut rounds = 1;
        while rounds < 6 && self.rng.random_bool(0.4) {
            rounds += 1;
        }
        for _ in 0..rounds {
            if tree.is_none() && self.rng.random_bool(0.3) {
                tree = J::parse(&bytes);
            }
            if let Some(t) = tree.as_mut()
                && self.rng.random_bool(0.7)
            {
                mutate_tree(&mut self.rng, t, &self.donors);
                bytes = t.to_bytes();
            } else {
                let other = self.pick().bytes.clone();
                mutate_bytes(&mut self.rng, &mut bytes, &other);
                tree = None;
            }
        }
        if bytes.len() > MAX_BODY {
            bytes.truncate(MAX_BODY);
            tree = None;
        }
        (bytes, tree)
    }

    /// Keep the input when its outcome is new.
    fn feedback(&mut self, bytes: Vec<u8>, tree: Option<J>, outcome: String) {
        if bytes.len() > MAX_POOL_INPUT {
            return;
        }
        let ok = outcome.starts_with("ok");
        if !self.outcomes.insert(outcome) {
            return;
        }
        let entry = Entry { bytes, tree };
        if ok {
            self.accepted.add(&mut self.rng, entry);
        } else {
            self.rejected.add(&mut self.rng, entry);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checks

type Parsed = Result<Vec<NewSignal>, IngestError>;

#[derive(Clone, Copy)]
enum Parser {
    Alertmanager,
    Native,
}

impl Parser {
    fn name(self) -> &'static str {
        match self {
            Parser::Alertmanager => "alertmanager",
            Parser::Native => "native",
        }
    }

    fn parse(self, body: &[u8]) -> Parsed {
        match self {
            Parser::Alertmanager => alertmanager::parse(body),
            Parser::Native => native::parse(body, now()).map(|s| vec![s]),
        }
    }

    fn seeds(self) -> Vec<Vec<u8>> {
        match self {
            Parser::Alertmanager => {
                let mut s = files("tests/fixtures/alertmanager");
                s.extend(files("src/demo/alerts"));
                s
            }
            Parser::Native => files("tests/fixtures/native"),
        }
    }

    fn path(self) -> &'static str {
        match self {
            Parser::Alertmanager => "/api/v1/alerts/alertmanager",
            Parser::Native => "/api/v1/signals",
        }
    }
}

fn files(dir: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds in {}", dir.display());
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".into())
}

fn timed(parser: Parser, body: &[u8]) -> (Result<Parsed, String>, Duration) {
    let started = Instant::now();
    let result =
        catch_unwind(AssertUnwindSafe(|| parser.parse(body))).map_err(|p| panic_message(&*p));
    (result, started.elapsed())
}

/// Characters that must not reach a log line raw: control characters and the bidirectional
/// overrides and isolates ("Trojan Source").
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

const ZERO_TIME: i64 = -62_135_596_800;

fn check_time(what: &str, t: &DateTime<Utc>) -> Result<(), String> {
    if t.timestamp() <= ZERO_TIME {
        return Err(format!("{what} {t:?} is not after the zero time"));
    }
    if !(1..=9999).contains(&t.year()) {
        return Err(format!("{what} {t:?} is outside the years 0001-9999"));
    }
    let back = DateTime::parse_from_rfc3339(&t.to_rfc3339()).map(|b| b.with_timezone(&Utc));
    if back != Ok(*t) {
        return Err(format!(
            "{what} {t:?} does not survive an RFC 3339 round trip: {back:?}"
        ));
    }
    Ok(())
}

fn check_signal(parser: Parser, s: &NewSignal) -> Result<(), String> {
    if s.name.trim().is_empty() {
        return Err("accepted with an empty name".into());
    }
    if s.fingerprint.trim().is_empty() || s.fingerprint.len() > 128 {
        return Err(format!("accepted with fingerprint {:?}", s.fingerprint));
    }
    if s.target_fingerprint.is_empty() || s.target_aliases.first() != Some(&s.target_fingerprint) {
        return Err(format!(
            "target fingerprint {:?} is not the first of the aliases {:?}",
            s.target_fingerprint, s.target_aliases
        ));
    }
    if let Some(t) = &s.target {
        if t.fingerprint() != s.target_fingerprint {
            return Err(format!("target {t} does not have the target fingerprint"));
        }
        if t.kind.trim().is_empty()
            || t.name.trim().is_empty()
            || t.namespace.as_ref().is_some_and(|ns| ns.trim().is_empty())
        {
            return Err(format!("target {t:?} has a blank kind, name or namespace"));
        }
        if t.namespace.is_none() && !is_cluster_scoped(&t.kind) {
            return Err(format!("namespaced target {t} without a namespace"));
        }
    }
    check_time("starts_at", &s.starts_at)?;
    if let Some(end) = &s.ends_at {
        check_time("ends_at", end)?;
    }
    if matches!(parser, Parser::Alertmanager) && s.labels.get("alertname") != Some(&s.name) {
        return Err("the name is not the alertname label".into());
    }
    let severity = s.severity.as_ref().map(|v| v.as_str().to_owned());
    let strings = [&s.name, &s.fingerprint]
        .into_iter()
        .chain(s.labels.iter().flat_map(|(k, v)| [k, v]))
        .chain(s.annotations.iter().flat_map(|(k, v)| [k, v]))
        .chain(severity.iter())
        .chain(s.generator_url.iter())
        .chain(s.receiver.iter())
        .chain(s.group_key.iter())
        .chain(s.external_url.iter())
        .chain(
            s.target
                .iter()
                .flat_map(|t| [&t.kind, &t.name].into_iter().chain(t.namespace.iter())),
        );
    for text in strings {
        if text.contains('\0') {
            return Err(format!("a NUL survived in {:?}", clip(text)));
        }
    }
    Ok(())
}

fn check_error(e: &IngestError, body: &[u8]) -> Result<(), String> {
    if e.field.trim().is_empty() || e.message.trim().is_empty() {
        return Err(format!("empty field or message: {e:?}"));
    }
    if e.field.len() > MAX_FIELD {
        return Err(format!(
            "the field is {} bytes (at most {MAX_FIELD}): {}",
            e.field.len(),
            clip(&e.field)
        ));
    }
    if e.message.len() > MAX_MESSAGE {
        return Err(format!(
            "the message is {} bytes (at most {MAX_MESSAGE}): {}",
            e.message.len(),
            clip(&e.message)
        ));
    }
    if let Some(c) = e
        .field
        .chars()
        .chain(e.message.chars())
        .find(|&c| unsafe_char(c))
    {
        return Err(format!("the error carries the raw character {c:?}: {e:?}"));
    }
    let in_body = |text: &str| body.windows(text.len()).any(|w| w == text.as_bytes());
    for dump in [
        "IngestError {",
        "NewSignal {",
        "WebhookPayload {",
        "NativeSignal {",
    ] {
        if e.message.contains(dump) && !in_body(dump) {
            return Err(format!("the message is a Debug dump: {}", clip(&e.message)));
        }
    }
    // What is expected is said in the body's terms, not the parser's Rust types.
    for rust in [
        "WebhookPayload",
        "WebhookAlert",
        "NativeSignal",
        "NativeTarget",
    ] {
        if e.message.contains(rust) && !in_body(rust) {
            return Err(format!(
                "the message names the Rust type {rust}: {}",
                clip(&e.message)
            ));
        }
    }
    Ok(())
}

/// Check one input. Returns the outcome class (for feedback) and a failure, if any.
fn check(parser: Parser, body: &[u8]) -> (String, Duration, Option<Failure>) {
    let (first, took) = timed(parser, body);
    let first = match first {
        Ok(r) => r,
        Err(panic) => {
            return ("panic".into(), took, Some(Failure::Panic(panic)));
        }
    };
    if took > SLOW {
        // Best of three more, so that a busy machine is not reported as a slow parser.
        let best = (0..3).map(|_| timed(parser, body).1).min().unwrap();
        if best > SLOW {
            return ("slow".into(), best, Some(Failure::Slow(best)));
        }
    }
    let failure = match timed(parser, body).0 {
        Err(panic) => Some(Failure::Panic(format!("on the second run: {panic}"))),
        Ok(second) if second != first => Some(Failure::Invariant(format!(
            "not deterministic: {} then {}",
            clip(&format!("{first:?}")),
            clip(&format!("{second:?}"))
        ))),
        Ok(_) => match &first {
            Ok(signals) => {
                if signals.is_empty() && matches!(parser, Parser::Native) {
                    Some(Failure::Invariant(
                        "native accepted without a signal".into(),
                    ))
                } else {
                    signals
                        .iter()
                        .find_map(|s| check_signal(parser, s).err())
                        .map(Failure::Invariant)
                }
            }
            Err(e) => check_error(e, body).err().map(Failure::Invariant),
        },
    };
    (outcome_class(&first), took, failure)
}

/// What kind of outcome: the shape of an accepted body, or the field and message of a rejection
/// with the input's own text (quoted values, indices, label names) taken out.
fn outcome_class(r: &Parsed) -> String {
    match r {
        Ok(signals) => {
            let mut class = format!("ok {}", signals.len().min(3));
            for s in signals.iter().take(2) {
                class.push_str(&format!(
                    " {:?}/{:?}/{}/{}/{}",
                    s.status,
                    s.mode,
                    s.target
                        .as_ref()
                        .map(|t| t.kind.chars().take(24).collect())
                        .unwrap_or_else(|| "-".to_owned()),
                    s.ends_at.is_some(),
                    s.fingerprint.len() == 16,
                ));
            }
            class
        }
        Err(e) => {
            let mut field = String::new();
            for seg in e.field.split('.') {
                field.push('.');
                field.push_str(
                    &seg.chars()
                        .filter(|c| !c.is_ascii_digit())
                        .collect::<String>(),
                );
                if seg.ends_with("labels")
                    || seg.ends_with("Labels")
                    || seg.ends_with("annotations")
                {
                    break;
                }
            }
            let mut message = String::new();
            let mut quoted = None;
            for c in e.message.chars() {
                match (quoted, c) {
                    (None, '`' | '"') => quoted = Some(c),
                    (Some(q), c) if c == q => quoted = None,
                    (None, c) if !c.is_ascii_digit() => message.push(c),
                    _ => {}
                }
            }
            let message: String = message.chars().take(80).collect();
            let field: String = field.chars().take(60).collect();
            format!("err {field} {message}")
        }
    }
}

fn clip(s: &str) -> String {
    if s.len() <= 300 {
        return s.to_owned();
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

#[derive(Debug)]
enum Failure {
    Panic(String),
    Slow(Duration),
    Invariant(String),
    Http(String),
}

/// Keep an input in `$CARGO_TARGET_TMPDIR/fuzz/NAME.json`.
fn save(name: &str, body: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, body).unwrap();
    path
}

/// The failures of one run, each with its input saved.
struct Findings {
    target: &'static str,
    seed: u64,
    list: Vec<String>,
    kinds: HashSet<String>,
}

impl Findings {
    fn new(target: &'static str, seed: u64) -> Self {
        Self {
            target,
            seed,
            list: Vec::new(),
            kinds: HashSet::new(),
        }
    }

    fn record(&mut self, exec: u64, body: &[u8], failure: &Failure) {
        let kind = match failure {
            Failure::Panic(m) => format!("panic {}", m.chars().take(60).collect::<String>()),
            Failure::Slow(_) => "slow".into(),
            Failure::Invariant(m) | Failure::Http(m) => m.chars().take(40).collect(),
        };
        // Report each kind a few times only.
        if (!self.kinds.insert(kind) && self.list.len() >= 5) || self.list.len() >= 50 {
            return;
        }
        let path = save(&format!("{}-{}-{exec}", self.target, self.seed), body);
        let b64 = if body.len() <= 4096 {
            format!(
                "\n  base64: {}",
                base64::engine::general_purpose::STANDARD.encode(body)
            )
        } else {
            String::new()
        };
        let line = format!(
            "{} input #{exec} ({} bytes): {}\n  saved: {}{b64}",
            self.target,
            body.len(),
            match failure {
                Failure::Panic(m) => format!("PANIC: {m}"),
                Failure::Slow(d) => format!("SLOW: {d:?} (limit {SLOW:?})"),
                Failure::Invariant(m) => format!("INVARIANT: {m}"),
                Failure::Http(m) => format!("HTTP: {m}"),
            },
            path.display()
        );
        eprintln!("{line}");
        self.list.push(line);
    }

    fn assert_none(&self) {
        assert!(
            self.list.is_empty(),
            "{} fuzz (seed {}; rerun with KUBEMEDIC_FUZZ_SEED={} or KUBEMEDIC_FUZZ_REPLAY=FILE) found {} problem(s):\n{}",
            self.target,
            self.seed,
            self.seed,
            self.list.len(),
            self.list.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The parser targets

fn fuzz_parser(parser: Parser, fraction: f64, salt: u64) {
    let config = Config::from_env();
    if let Ok(file) = std::env::var("KUBEMEDIC_FUZZ_REPLAY") {
        let body = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (class, took, failure) = check(parser, &body);
        eprintln!("replay {file} with {}: {class} in {took:?}", parser.name());
        if let Some(f) = failure {
            panic!("{}: {f:?}", parser.name());
        }
        return;
    }
    let budget = config.share(fraction);
    let seed = config.seed ^ salt;
    eprintln!(
        "fuzz {}: seed {} (KUBEMEDIC_FUZZ_SEED={}), {budget:?}",
        parser.name(),
        seed,
        config.seed
    );
    let mut donors = Parser::Alertmanager.seeds();
    donors.extend(Parser::Native.seeds());
    let mut fuzzer = Fuzzer::new(seed, parser, &donors);
    let mut findings = Findings::new(parser.name(), config.seed);

    // The seeds themselves first.
    for seed_body in parser.seeds() {
        let (_, _, failure) = check(parser, &seed_body);
        if let Some(f) = failure {
            findings.record(0, &seed_body, &f);
        }
    }

    let started = Instant::now();
    let (mut execs, mut accepted, mut bytes_total) = (0u64, 0u64, 0u64);
    let mut slowest = (Duration::ZERO, Vec::new(), String::new());
    while started.elapsed() < budget {
        execs += 1;
        let (body, tree) = fuzzer.next();
        let (class, took, failure) = check(parser, &body);
        bytes_total += body.len() as u64;
        if class.starts_with("ok") {
            accepted += 1;
        }
        if took > slowest.0 {
            slowest = (took, body.clone(), class.clone());
        }
        if let Some(f) = failure {
            findings.record(execs, &body, &f);
        }
        fuzzer.feedback(body, tree, class);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {}: seed {}: {execs} executions in {secs:.1} s ({:.0}/s, {:.1} MB parsed); \
         {accepted} accepted, {} rejected; {} distinct outcomes, pool {}; \
         slowest {:?} ({} bytes, {}; saved as {}); {} problem(s)",
        parser.name(),
        config.seed,
        execs as f64 / secs,
        bytes_total as f64 / 1e6,
        execs - accepted,
        fuzzer.outcomes.len(),
        fuzzer.pool_len(),
        slowest.0,
        slowest.1.len(),
        slowest.2,
        save(
            &format!("slowest-{}-{}", parser.name(), config.seed),
            &slowest.1
        )
        .display(),
        findings.list.len(),
    );
    findings.assert_none();
}

#[test]
fn fuzz_alertmanager_parser() {
    fuzz_parser(Parser::Alertmanager, 0.4, 0xa1e7);
}

#[test]
fn fuzz_native_parser() {
    fuzz_parser(Parser::Native, 0.4, 0x5161);
}

// ---------------------------------------------------------------------------------------------
// The HTTP handlers, in process

#[derive(Clone, Copy, Debug)]
enum Variant {
    Plain,
    Gzip,
    DeclaredTooLarge,
    TooLarge,
}

async fn send(
    app: &axum::Router,
    method: &str,
    path: &str,
    token: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Result<(u16, Value), String> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let req = req.body(axum::body::Body::from(body)).unwrap();
    let answer = AssertUnwindSafe(app.clone().oneshot(req))
        .catch_unwind()
        .await
        .map_err(|p| format!("the handler panicked: {}", panic_message(&*p)))?
        .unwrap();
    let status = answer.status().as_u16();
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{status} with a body that is not JSON ({e}): {}",
            clip(&String::from_utf8_lossy(&bytes))
        )
    })?;
    Ok((status, json))
}

async fn count(db: &sqlx::SqlitePool, fingerprint: Option<&str>) -> i64 {
    match fingerprint {
        Some(fp) => sqlx::query_scalar("SELECT count(*) FROM signals WHERE fingerprint = ?")
            .bind(fp)
            .fetch_one(db)
            .await
            .unwrap(),
        None => sqlx::query_scalar("SELECT count(*) FROM signals")
            .fetch_one(db)
            .await
            .unwrap(),
    }
}

/// Post one body; check the answer against what the parser decided and against the store.
async fn http_case(
    app: &axum::Router,
    db: &sqlx::SqlitePool,
    parser: Parser,
    variant: Variant,
    mut body: Vec<u8>,
) -> Result<(), String> {
    let mut headers = Vec::new();
    let expected = match variant {
        Variant::Gzip => {
            headers.push(("content-encoding", "gzip".to_owned()));
            Err(415)
        }
        Variant::DeclaredTooLarge => {
            headers.push(("content-length", (MAX_BODY + 1).to_string()));
            Err(413)
        }
        Variant::TooLarge => {
            body.resize(MAX_BODY + 1, b' ');
            Err(413)
        }
        Variant::Plain => Ok(parser.parse(&body)),
    };
    let before = count(db, None).await;
    let (status, answer) = send(app, "POST", parser.path(), TOKEN, &headers, body).await?;
    let stored = count(db, None).await - before;
    match expected {
        Err(code) => {
            if status != code || stored != 0 {
                return Err(format!(
                    "{variant:?}: expected {code} and nothing stored, got {status} ({answer}) and {stored} new signal(s)"
                ));
            }
        }
        Ok(Err(e)) => {
            if status != 400 || answer["field"] != e.field.as_str() || stored != 0 {
                return Err(format!(
                    "the parser rejects ({}); the handler answered {status} {} and stored {stored} signal(s)",
                    clip(&e.to_string()),
                    clip(&answer.to_string())
                ));
            }
        }
        Ok(Ok(signals)) => {
            if status != 200
                || answer["status"] != "accepted"
                || answer["signals"] != signals.len()
                || answer["outcomes"].as_array().map(Vec::len) != Some(signals.len())
            {
                return Err(format!(
                    "the parser accepts {} signal(s); the handler answered {status} {}",
                    signals.len(),
                    clip(&answer.to_string())
                ));
            }
            for s in &signals {
                if count(db, Some(&s.fingerprint)).await == 0 {
                    return Err(format!(
                        "answered 200 but signal {:?} is not in the store",
                        clip(&s.fingerprint)
                    ));
                }
            }
            // The request each signal went to reads back.
            let ids: HashSet<&str> = answer["outcomes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|o| o["request_id"].as_str())
                .collect();
            for id in ids.into_iter().take(3) {
                let (status, request) = send(
                    app,
                    "GET",
                    &format!("/api/v1/requests/{id}"),
                    API,
                    &[],
                    Vec::new(),
                )
                .await?;
                if status != 200 {
                    return Err(format!(
                        "request {id} does not read back: {status} {request}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_http_ingest() {
    let config = Config::from_env();
    if std::env::var("KUBEMEDIC_FUZZ_REPLAY").is_ok() {
        return;
    }
    let budget = config.share(0.2);
    let max_execs = ((300.0 * config.seconds / 20.0).ceil() as u64).max(20);
    eprintln!(
        "fuzz http: seed {}, {budget:?} or {max_execs} requests",
        config.seed
    );

    let (_dir, url) = common::sqlite_url();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(now()));
    let store = common::open_store(&url, clock.clone()).await;
    let ingest = IngestQueue::start(store.clone(), 1, Arc::new(tokio::sync::Notify::new()));
    let state = Arc::new(AppState {
        store,
        metrics: Arc::new(Metrics::new()),
        clock,
        ingest,
        webhook_auth: WebhookAuth {
            token: Some(Secret::new(TOKEN)),
            basic: None,
            insecure_no_auth: false,
        },
        auth: kubemedic::web::auth::AuthSettings {
            bootstrap: vec![kubemedic::web::auth::BootstrapKey::new(
                "api-token",
                kubemedic::domain::Role::Admin,
                API,
            )],
            ..Default::default()
        },
        logins: Default::default(),
        catalog: None,
        playbooks: None,
        policy: None,
        max_body_bytes: MAX_BODY,
        limits: Default::default(),
        stream_poll: std::time::Duration::from_secs(2),
        dependencies: Vec::new(),
        approvals: None,
        slack_signing_secret: None,
        cluster: None,
        chat: None,
        shutdown: Default::default(),
    });
    let app = kubemedic::web::router(state);
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();

    let mut donors = Parser::Alertmanager.seeds();
    donors.extend(Parser::Native.seeds());
    let mut fuzzers = [
        (
            Parser::Alertmanager,
            Fuzzer::new(config.seed ^ 0x4777, Parser::Alertmanager, &donors),
        ),
        (
            Parser::Native,
            Fuzzer::new(config.seed ^ 0x4778, Parser::Native, &donors),
        ),
    ];
    let mut rng = StdRng::seed_from_u64(config.seed ^ 0x4779);
    let mut findings = Findings::new("http", config.seed);
    let started = Instant::now();
    let (mut execs, mut ok) = (0u64, 0u64);
    let mut slowest = (Duration::ZERO, Vec::new());
    while started.elapsed() < budget && execs < max_execs {
        execs += 1;
        let (parser, fuzzer) = &mut fuzzers[(execs % 2) as usize];
        let parser = *parser;
        // Half the requests carry a body the parser accepts (at most 20 draws), so the
        // store sees as many odd-but-valid signals as the 400 path sees broken bodies.
        let (mut body, mut tree) = fuzzer.next();
        if rng.random_bool(0.5) {
            for _ in 0..20 {
                if parser.parse(&body).is_ok() {
                    break;
                }
                (body, tree) = fuzzer.next();
            }
        }
        let variant = match rng.random_range(0..20) {
            0 => Variant::Gzip,
            1 => Variant::DeclaredTooLarge,
            2 => Variant::TooLarge,
            _ => Variant::Plain,
        };
        let t0 = Instant::now();
        let result = http_case(&app, &db, parser, variant, body.clone()).await;
        let took = t0.elapsed();
        if took > slowest.0 {
            slowest = (took, body.clone());
        }
        match result {
            Ok(()) => ok += 1,
            Err(m) => findings.record(
                execs,
                &body,
                &Failure::Http(format!("{} {m}", parser.path())),
            ),
        }
        let class = outcome_class(&parser.parse(&body));
        fuzzer.feedback(body, tree, class);
    }

    // Everything stored reads back through the API, page by page.
    let total = count(&db, None).await;
    let mut offset = 0;
    loop {
        match send(
            &app,
            "GET",
            &format!("/api/v1/signals?limit=500&offset={offset}"),
            API,
            &[],
            Vec::new(),
        )
        .await
        {
            Ok((200, page)) => {
                assert_eq!(page["total"], total, "signals total");
                let n = page["items"].as_array().unwrap().len();
                if n == 0 {
                    break;
                }
                offset += n;
            }
            other => {
                findings.record(
                    execs,
                    b"",
                    &Failure::Http(format!("GET /api/v1/signals at offset {offset}: {other:?}")),
                );
                break;
            }
        }
    }
    match send(
        &app,
        "GET",
        "/api/v1/requests?limit=500",
        API,
        &[],
        Vec::new(),
    )
    .await
    {
        Ok((200, _)) => {}
        other => findings.record(
            execs,
            b"",
            &Failure::Http(format!("GET /api/v1/requests: {other:?}")),
        ),
    }

    eprintln!(
        "fuzz http: seed {}: {execs} requests in {:.1} s, {ok} as expected, {total} signals stored; \
         slowest {:?} ({} bytes, saved as {}); {} problem(s)",
        config.seed,
        started.elapsed().as_secs_f64(),
        slowest.0,
        slowest.1.len(),
        save(&format!("slowest-http-{}", config.seed), &slowest.1).display(),
        findings.list.len()
    );
    findings.assert_none();
}
