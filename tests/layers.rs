//! The architecture as a test (docs/adr/0007-one-way-layers.md): every import between the
//! crate's top-level modules points down the layers of `src/lib.rs`, stages never import each
//! other, only the commands read `config`, only `web` knows axum and hyper (and the page and
//! API-description crates, maud and utoipa), the investigator cannot name anything that
//! writes to the cluster, and the store's shared SQL (`src/store/sql/`) names no database
//! driver (what differs between SQLite and Postgres is their `Dialect`).
//!
//! Inside a folder the same holds between files: no two files (or sub-folders) of one folder
//! import each other, directly or round a longer circle. A folder's `mod.rs` is its face — its
//! files may use what it declares and it re-exports theirs — so it takes part in no circle.
//!
//! It reads every `.rs` file under `src/` as text (like ArchUnit), finds each reference to a
//! top-level module (`crate::x`, `$crate::x`, `crate::{x, y}`, and `super::` paths that climb
//! out of a module), and fails with the offending file and line. Comments are skipped. The
//! rules are checked on the real tree and, so that the checker itself cannot silently pass
//! everything, on small made-up trees that break each rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// The layers, bottom first. A module may import modules of lower layers; within a layer only
/// where `SAME_LAYER` allows it.
const LAYERS: &[(&str, &[&str])] = &[
    ("domain", &["domain"]),
    (
        "leaves",
        &[
            "canonical",
            "clock",
            "live",
            "readiness",
            "redact",
            "secret",
            "telemetry",
        ],
    ),
    (
        "foundations",
        &[
            "store",
            "cluster",
            "llm",
            "catalog",
            "history",
            "policy",
            "monitoring",
            "notify",
            "actions",
            "mcp_client",
        ],
    ),
    // Proof obligations sit below every stage that proposes, approves or runs an action.
    ("proof", &["prove"]),
    (
        "stages",
        &[
            "ingest",
            "enrich",
            "investigate",
            "gate",
            "approval",
            "execute",
            "verify",
        ],
    ),
    (
        "web / pipeline",
        &["web", "pipeline", "chat", "resources", "mirror", "mcp"],
    ),
    ("config", &["config"]),
    ("daemon", &["daemon"]),
    ("commands", &["demo", "cli"]),
];

/// Imports allowed inside one layer (importer, imported). Everything else in the same layer
/// is refused, so a new arrow is a decision someone writes down here.
const SAME_LAYER: &[(&str, &str)] = &[
    // The demo is a command the CLI runs.
    ("cli", "demo"),
    // The built-in actions are writes through the cluster's traits, and the catalog checks
    // every step against their type.
    ("actions", "cluster"),
    ("catalog", "actions"),
    // The chat endpoints hand questions and decisions to the chat service, which opens
    // requests through ingest and decides through approvals like the other handlers.
    ("web", "chat"),
    // The MCP endpoint at `/mcp` serves the MCP tools; the tools know no HTTP server.
    ("web", "mcp"),
    // MCP's `investigate` is a question asked of the chat (a question is a request), not a
    // second way to investigate.
    ("mcp", "chat"),
];

const STAGES: &[&str] = &[
    "ingest",
    "enrich",
    "investigate",
    "gate",
    "approval",
    "execute",
    "verify",
];

/// Names of a database driver. The store's shared SQL (`src/store/sql/`) is generic over its
/// `Dialect`: what differs between SQLite and Postgres lives in `src/store/sqlite.rs` and
/// `src/store/postgres.rs`, never in a capability's SQL.
const DRIVER: &str = r"\bsqlx::(sqlite|postgres|Sqlite|Postgres)\b|\b(Sqlite|Pg)(Pool|Connection|Row|QueryResult|BindIterExt|Arguments)\b|\b(super::)+(sqlite|postgres)\b";

/// Names the investigator must never use: it reads the cluster, and only through the reader.
const INVESTIGATE_FORBIDDEN: &[&str] = &[
    "ClusterWriter",
    "KubeCluster",
    "SnapshotCluster",
    "crate::actions",
    "BuiltinAction",
];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    file: String,
    line: usize,
    from: String,
    to: String,
}

/// A source file: its path relative to the crate root (`src/gate/mod.rs`) and its text.
struct Source {
    path: String,
    text: String,
}

fn read_tree(root: &Path) -> Vec<Source> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| Source {
            path: p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/"),
            text: std::fs::read_to_string(&p).unwrap(),
        })
        .collect()
}

/// `src/gate/mod.rs` → (`gate`, depth 1); `src/investigate/offline/mod.rs` → (`investigate`,
/// 2); `src/clock.rs` → (`clock`, 1). `None` for the crate roots.
fn module_of(path: &str) -> Option<(String, usize)> {
    let rel = path.strip_prefix("src/")?;
    let parts: Vec<&str> = rel.split('/').collect();
    let top = parts[0].trim_end_matches(".rs");
    if top == "lib" || top == "main" {
        return None;
    }
    let last = parts[parts.len() - 1];
    // The module path of the file: mod.rs names its folder.
    let depth = if last == "mod.rs" {
        parts.len() - 1
    } else {
        parts.len()
    };
    Some((top.to_owned(), depth))
}

/// The text with comments blanked out (line structure kept, so offsets still give lines).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // Good enough for this code base: `//` inside a string literal on a line that
            // also names a module would hide that reference, and none does.
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn imports(src: &Source) -> Vec<Import> {
    let Some((from, depth)) = module_of(&src.path) else {
        return vec![];
    };
    let text = strip_comments(&src.text);
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut push = |offset: usize, to: &str| {
        if to != from && !to.is_empty() {
            out.push(Import {
                file: src.path.clone(),
                line: line_of(offset),
                from: from.clone(),
                to: to.to_owned(),
            });
        }
    };
    let path = Regex::new(r"\b(?:\$)?crate::([a-z_][a-z0-9_]*)").unwrap();
    for m in path.captures_iter(&text) {
        let g = m.get(1).unwrap();
        push(g.start(), g.as_str());
    }
    // `crate::{a, b::C}`: the first segment of every item of the group.
    let group = Regex::new(r"\b(?:\$)?crate::\{").unwrap();
    let first = Regex::new(r"^\s*([a-z_][a-z0-9_]*)").unwrap();
    for m in group.find_iter(&text) {
        let mut level = 1;
        let mut start = m.end();
        for (i, c) in text[m.end()..].char_indices() {
            let at = m.end() + i;
            match c {
                '{' => level += 1,
                '}' | ',' if level == 1 => {
                    if let Some(f) = first.captures(&text[start..at]) {
                        let g = f.get(1).unwrap();
                        push(start + g.start(), g.as_str());
                    }
                    start = at + 1;
                    if c == '}' {
                        break;
                    }
                }
                '}' => level -= 1,
                _ => {}
            }
        }
    }
    // `super::super::x` that climbs to the crate root names the top-level module `x`.
    let supers = Regex::new(r"\b((?:super::)+)([a-z_][a-z0-9_]*)").unwrap();
    for m in supers.captures_iter(&text) {
        let levels = m.get(1).unwrap().as_str().matches("super::").count();
        if levels >= depth {
            let g = m.get(2).unwrap();
            push(g.start(), g.as_str());
        }
    }
    out.sort_by_key(|i| i.line);
    out
}

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, members))| members.contains(&module))
        .map(|(i, (name, _))| (i, *name))
}

/// Every broken rule, as `file:line: from → to: why`.
fn violations(tree: &[Source]) -> Vec<String> {
    let http_server = Regex::new(r"\b(axum|hyper|hyper_util)\b").unwrap();
    let web_only = Regex::new(r"\b(maud|utoipa)::").unwrap();
    let driver = Regex::new(DRIVER).unwrap();
    let mut bad = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for src in tree {
        let Some((module, _)) = module_of(&src.path) else {
            continue;
        };
        if layer_of(&module).is_none() {
            bad.push(format!(
                "{}: module `{module}` is in no layer: add it to LAYERS in tests/layers.rs \
                 (and to the picture in src/lib.rs)",
                src.path
            ));
        }
        for i in imports(src) {
            graph
                .entry(i.from.clone())
                .or_default()
                .insert(i.to.clone());
            let at = format!("{}:{}: {} → {}", i.file, i.line, i.from, i.to);
            if i.from == "domain" {
                bad.push(format!("{at}: domain imports nothing of the crate"));
                continue;
            }
            if STAGES.contains(&i.from.as_str()) && STAGES.contains(&i.to.as_str()) {
                bad.push(format!(
                    "{at}: a stage imports another stage (stages meet in domain and daemon)"
                ));
                continue;
            }
            if i.to == "config" && !["cli", "demo", "daemon"].contains(&i.from.as_str()) {
                bad.push(format!(
                    "{at}: only cli, demo and daemon import config (a module owns its Settings)"
                ));
                continue;
            }
            if ["pipeline", "store"].contains(&i.from.as_str()) && STAGES.contains(&i.to.as_str()) {
                bad.push(format!("{at}: {} never imports a stage", i.from));
                continue;
            }
            match (layer_of(&i.from), layer_of(&i.to)) {
                (Some((a, an)), Some((b, bn))) => {
                    let same_ok = SAME_LAYER.contains(&(i.from.as_str(), i.to.as_str()));
                    if b > a || (a == b && !same_ok) {
                        bad.push(format!(
                            "{at}: imports point down ({} is in layer `{an}`, {} in `{bn}`)",
                            i.from, i.to
                        ));
                    }
                }
                // `crate::x` where `x` is not a module (a macro, say) is not an arrow.
                (_, None)
                    if tree
                        .iter()
                        .any(|s| module_of(&s.path).is_some_and(|(m, _)| m == i.to)) =>
                {
                    bad.push(format!("{at}: `{}` is in no layer", i.to));
                }
                _ => {}
            }
        }
        let text = strip_comments(&src.text);
        for (n, line) in text.lines().enumerate() {
            if module != "web" && http_server.is_match(line) {
                bad.push(format!(
                    "{}:{}: axum and hyper appear only under src/web/",
                    src.path,
                    n + 1
                ));
            }
            if module != "web" && web_only.is_match(line) {
                bad.push(format!(
                    "{}:{}: maud and utoipa (pages, the API's description) appear only under src/web/",
                    src.path,
                    n + 1
                ));
            }
            if src.path.starts_with("src/store/sql/") && driver.is_match(line) {
                bad.push(format!(
                    "{}:{}: the store's shared SQL names no database driver: what differs \
                     between SQLite and Postgres goes in their Dialect (src/store/sqlite.rs, \
                     src/store/postgres.rs)",
                    src.path,
                    n + 1
                ));
            }
            if module == "investigate" {
                for name in INVESTIGATE_FORBIDDEN {
                    if line.contains(name) {
                        bad.push(format!(
                            "{}:{}: investigate names `{name}`: the investigator only reads the \
                             cluster, through ClusterReader",
                            src.path,
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    // No circle between top-level modules, whatever the layers say.
    for cycle in cycles(&graph) {
        bad.push(format!("import circle: {}", cycle.join(" → ")));
    }
    // Nor between the files of one folder.
    for (folder, graph) in file_graphs(tree) {
        for cycle in cycles(&graph) {
            bad.push(format!(
                "import circle in src/{}/: {}",
                folder.join("/"),
                cycle.join(" → ")
            ));
        }
    }
    bad
}

/// `src/investigate/graph/adapters.rs` → `["investigate", "graph", "adapters"]`; a `mod.rs`
/// names its folder.
fn segments_of(path: &str) -> Vec<String> {
    let rel = path.strip_prefix("src/").unwrap_or(path);
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// The module paths a file refers to: `crate::a::b`, `super::x` resolved from the file's own
/// path, `self::x`, and each item of a `{…}` group that follows one of them (one level).
fn references(src: &Source) -> Vec<Vec<String>> {
    let own = segments_of(&src.path);
    let text = strip_comments(&src.text);
    let start = Regex::new(r"\b(?:\$)?(crate|self|(?:super::)*super)::").unwrap();
    let chain = Regex::new(r"^((?:[a-z_][a-z0-9_]*::)*)(\{|[a-z_][a-z0-9_]*)?").unwrap();
    let item = Regex::new(r"^\s*((?:[a-z_][a-z0-9_]*)(?:::[a-z_][a-z0-9_]*)*)").unwrap();
    let mut out = Vec::new();
    for m in start.captures_iter(&text) {
        let head = m.get(1).unwrap().as_str();
        let base: Vec<String> = match head {
            "crate" => vec![],
            "self" => own.clone(),
            supers => {
                let n = supers.matches("super").count();
                own[..own.len().saturating_sub(n)].to_vec()
            }
        };
        let rest = &text[m.get(0).unwrap().end()..];
        let Some(c) = chain.captures(rest) else {
            continue;
        };
        let mut path = base.clone();
        path.extend(
            c.get(1)
                .map_or("", |g| g.as_str())
                .split("::")
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        );
        match c.get(2).map(|g| g.as_str()) {
            Some("{") => {
                let group = &rest[c.get(0).unwrap().end()..];
                let end = group.find('}').unwrap_or(group.len());
                for it in group[..end].split(',') {
                    if let Some(i) = item.captures(it) {
                        let mut p = path.clone();
                        p.extend(i[1].split("::").map(str::to_owned));
                        out.push(p);
                    }
                }
            }
            Some(last) => {
                path.push(last.to_owned());
                out.push(path);
            }
            None => out.push(path),
        }
    }
    out
}

/// For each folder under `src/`, the imports between its files and sub-folders (each a node,
/// named by its file or folder name); `mod.rs` is no node.
fn file_graphs(tree: &[Source]) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let files: BTreeSet<Vec<String>> = tree.iter().map(|s| segments_of(&s.path)).collect();
    let is_child = |folder: &[String], name: &str| {
        files
            .iter()
            .any(|f| f.len() > folder.len() && f.starts_with(folder) && f[folder.len()] == name)
    };
    let mut out: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for src in tree {
        let own = segments_of(&src.path);
        if own.len() < 2 {
            continue;
        }
        for to in references(src) {
            // Every folder the file sits in, below the crate root.
            for k in 1..own.len() {
                let folder = &own[..k];
                let node = &own[k];
                if to.len() > k
                    && to.starts_with(folder)
                    && &to[k] != node
                    && is_child(folder, &to[k])
                {
                    out.entry(folder.to_vec())
                        .or_default()
                        .entry(node.clone())
                        .or_default()
                        .insert(to[k].clone());
                }
            }
        }
    }
    out
}

/// One circle per strongly connected group of modules (Tarjan's algorithm would do; the graph
/// is small, so a depth-first search from each module is enough).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut seen: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((node, path)) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if next == start {
                    let members: BTreeSet<String> = path.iter().cloned().collect();
                    if seen.insert(members) {
                        let mut c = path.clone();
                        c.push(start.clone());
                        found.push(c);
                    }
                } else if !path.contains(next) && path.len() < graph.len() {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    found
}

#[test]
fn every_import_points_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = read_tree(root);
    assert!(tree.len() > 50, "read only {} files", tree.len());
    let bad = violations(&tree);
    assert!(
        bad.is_empty(),
        "{} layer violation(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn lib_rs_names_every_module_in_its_layer_order() {
    // The picture a newcomer reads first lists the same modules, top layer first.
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    let ranks: Vec<usize> = declared
        .iter()
        .map(|m| {
            layer_of(m)
                .unwrap_or_else(|| panic!("src/lib.rs declares `{m}`, which is in no layer"))
                .0
        })
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] >= w[1]),
        "src/lib.rs declares the modules top layer first: {declared:?}"
    );
    let all: BTreeSet<&str> = LAYERS.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    let declared: BTreeSet<&str> = declared.into_iter().collect();
    assert_eq!(all, declared, "LAYERS and src/lib.rs name the same modules");
}

fn fake(files: &[(&str, &str)]) -> Vec<Source> {
    files
        .iter()
        .map(|(p, t)| Source {
            path: (*p).to_owned(),
            text: (*t).to_owned(),
        })
        .collect()
}

fn one_violation(files: &[(&str, &str)], expect: &str) {
    let bad = violations(&fake(files));
    assert!(
        bad.iter().any(|b| b.contains(expect)),
        "expected a violation containing {expect:?}, got {bad:#?}"
    );
}

#[test]
fn the_checker_names_file_and_line_of_each_broken_rule() {
    one_violation(
        &[
            (
                "src/domain/mod.rs",
                "//! values\n\nuse crate::store::Store;\n",
            ),
            ("src/store/mod.rs", ""),
        ],
        "src/domain/mod.rs:3: domain → store: domain imports nothing of the crate",
    );
    one_violation(
        &[
            ("src/gate/mod.rs", "use crate::investigate::Analysis;\n"),
            ("src/investigate/mod.rs", ""),
        ],
        "src/gate/mod.rs:1: gate → investigate: a stage imports another stage",
    );
    one_violation(
        &[
            ("src/store/mod.rs", "fn f(s: &crate::config::Settings) {}\n"),
            ("src/config.rs", ""),
        ],
        "src/store/mod.rs:1: store → config: only cli, demo and daemon import config",
    );
    // config is a folder of owners' settings: reaching one of its files is reaching config.
    one_violation(
        &[
            (
                "src/web/auth.rs",
                "use crate::config::web::{DEFAULT_LISTEN, WebArgs};\n",
            ),
            ("src/config/mod.rs", "pub mod web;\n"),
            ("src/config/web.rs", "use super::declare::settings;\n"),
        ],
        "src/web/auth.rs:1: web → config: only cli, demo and daemon import config",
    );
    one_violation(
        &[
            (
                "src/pipeline/worker.rs",
                "use crate::{clock, gate::GateStage};\n",
            ),
            ("src/gate/mod.rs", ""),
            ("src/clock.rs", ""),
        ],
        "src/pipeline/worker.rs:1: pipeline → gate: pipeline never imports a stage",
    );
    one_violation(
        &[
            ("src/cluster/mod.rs", "\n\nuse crate::web::AppState;\n"),
            ("src/web/mod.rs", ""),
        ],
        "src/cluster/mod.rs:3: cluster → web: imports point down",
    );
    one_violation(
        &[("src/gate/mod.rs", "use axum::Json;\n")],
        "src/gate/mod.rs:1: axum and hyper appear only under src/web/",
    );
    one_violation(
        &[("src/daemon.rs", "use hyper_util::rt::TokioIo;\n")],
        "src/daemon.rs:1: axum and hyper appear only under src/web/",
    );
    one_violation(
        &[(
            "src/domain/mod.rs",
            "#[derive(utoipa::ToSchema)]\nstruct S;\n",
        )],
        "src/domain/mod.rs:1: maud and utoipa (pages, the API's description) appear only under src/web/",
    );
    one_violation(
        &[(
            "src/investigate/llm.rs",
            "// KubeCluster in a comment is fine\nfn f(w: &dyn crate::cluster::ClusterWriter) {}\n",
        )],
        "src/investigate/llm.rs:2: investigate names `ClusterWriter`",
    );
    one_violation(
        &[(
            "src/investigate/offline/rules.rs",
            "use super::super::super::gate::X;\n",
        )],
        "src/investigate/offline/rules.rs:1: investigate → gate",
    );
    one_violation(
        &[
            ("src/catalog/mod.rs", "use crate::history::X;\n"),
            ("src/history/mod.rs", "use crate::catalog::Y;\n"),
        ],
        "import circle: catalog → history → catalog",
    );
    one_violation(
        &[
            ("src/web/mod.rs", "mod api;\nmod openapi;\n"),
            ("src/web/api.rs", "fn f() -> super::openapi::ErrorBody {}\n"),
            ("src/web/openapi.rs", "use super::{api::list, auth};\n"),
            ("src/web/auth.rs", ""),
        ],
        "import circle in src/web/: api → openapi → api",
    );
    one_violation(
        &[
            ("src/investigate/mod.rs", ""),
            ("src/investigate/graph/mod.rs", "use super::view::V;\n"),
            (
                "src/investigate/view.rs",
                "use crate::investigate::gather::unreachable;\n",
            ),
            (
                "src/investigate/gather.rs",
                "fn g() { self::x(); crate::investigate::graph::build(); }\n",
            ),
        ],
        "import circle in src/investigate/: gather → graph → view → gather",
    );
    one_violation(
        &[(
            "src/store/sql/claims.rs",
            "// sqlx::Postgres in a comment is fine\nuse sqlx::postgres::PgBindIterExt as _;\n",
        )],
        "src/store/sql/claims.rs:2: the store's shared SQL names no database driver",
    );
    one_violation(
        &[(
            "src/store/sql/requests.rs",
            "fn f(p: &sqlx::SqlitePool) {}\n",
        )],
        "src/store/sql/requests.rs:1: the store's shared SQL names no database driver",
    );
    one_violation(
        &[("src/gadget/mod.rs", "")],
        "src/gadget/mod.rs: module `gadget` is in no layer",
    );
    // And a tree that keeps the rules passes.
    let good = fake(&[
        (
            "src/gate/mod.rs",
            "use crate::domain::{GateDecision, Stage};\nuse crate::policy::RegoGate;\n",
        ),
        ("src/policy/mod.rs", "use crate::domain::GateDecision;\n"),
        ("src/domain/mod.rs", "use serde::Serialize;\n"),
        // A folder's face and its files may use each other; files one way only.
        (
            "src/policy/engine.rs",
            "use super::enrichment::Derived;\nuse super::Error;\n",
        ),
        ("src/policy/enrichment.rs", "use super::Error;\n"),
    ]);
    assert_eq!(violations(&good), Vec::<String>::new());
}
