//! gitleaks' default rules, vendored as data (`gitleaks.json`, made by `scripts/vendor-gitleaks`
//! from the upstream `config/gitleaks.toml`; MIT, see `GITLEAKS-LICENSE`), applied with the
//! gitleaks semantics that decide precision (docs/adr/0009-secret-rules-from-gitleaks.md):
//!
//! - a rule runs only when one of its keywords occurs in the text (ASCII case-insensitive,
//!   one Aho-Corasick pass over the text for all rules);
//! - the secret is `secretGroup`, else the first non-empty capture group, else the match, and
//!   only the secret is redacted, so `DB_PASSWORD=[REDACTED]` keeps its key;
//! - a finding whose secret's Shannon entropy is not above the rule's `entropy` is dropped;
//! - a finding is dropped when the global allowlist or one of the rule's allowlists allows it
//!   (regexes against the secret, the match or the line; stopwords contained in the secret).
//!
//! Path restrictions and path allowlists do not apply: a Kubernetes object has no file name.
//!
//! Every regex is compiled once when the rules load, to check it (a rule that does not compile
//! is reported and left out), and then kept as its pattern until a text needs it: compiled, the
//! 221 rules and their allowlists take ~16 MiB, and most texts (alert labels, Kubernetes
//! objects) contain the keywords of none or a few of them (docs/benchmarks.md, run 14).

use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use serde::Deserialize;

use super::{Marker, Span};

const DATA: &str = include_str!("gitleaks.json");

#[derive(Deserialize)]
struct File {
    commit: String,
    upstream_rules: usize,
    #[serde(default)]
    path_only_rules_dropped: Vec<String>,
    allowlist: RawAllowlist,
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
struct RawRule {
    id: String,
    regex: String,
    #[serde(default)]
    secret_group: usize,
    #[serde(default)]
    entropy: f64,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<RawAllowlist>,
}

#[derive(Deserialize)]
struct RawAllowlist {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// A regex checked at load and compiled again on first use.
struct Lazy {
    pattern: String,
    compiled: OnceLock<Option<Regex>>,
}

impl Lazy {
    /// The pattern, if it compiles (the check costs a compile; the result is dropped).
    fn checked(pattern: &str) -> Result<(Self, Regex), regex::Error> {
        let re = Regex::new(pattern)?;
        let lazy = Self {
            pattern: pattern.to_owned(),
            compiled: OnceLock::new(),
        };
        Ok((lazy, re))
    }

    fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| Regex::new(&self.pattern).ok())
            .as_ref()
    }
}

struct Allowlist {
    target: Target,
    all: bool,
    regexes: Vec<Lazy>,
    stopwords: Option<AhoCorasick>,
}

struct Rule {
    id: String,
    re: Lazy,
    secret_group: usize,
    entropy: f64,
    allowlists: Vec<Allowlist>,
}

/// The loaded rule set.
pub struct Rules {
    rules: Vec<Rule>,
    /// Rules without keywords: always run.
    always: Vec<usize>,
    /// Keyword pattern index → the rules it enables.
    by_keyword: Vec<Vec<usize>>,
    prefilter: Option<AhoCorasick>,
    global: Allowlist,
    /// Rules that did not load, with why.
    pub skipped: Vec<(String, String)>,
    /// The upstream commit the data was taken from.
    pub commit: String,
    /// How many rules the upstream file has (path-only rules included).
    pub upstream_rules: usize,
    /// Upstream rules that only match file names, left out by the converter.
    pub path_only: Vec<String>,
}

impl Rules {
    /// How many rules are in force.
    pub fn loaded(&self) -> usize {
        self.rules.len()
    }
}

pub static RULES: LazyLock<Rules> = LazyLock::new(load);

fn build_allowlist(raw: &RawAllowlist) -> Result<Allowlist, String> {
    let target = match raw.target.as_deref() {
        None | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(other) => return Err(format!("allowlist target `{other}`")),
    };
    let regexes = raw
        .regexes
        .iter()
        .map(|r| {
            Lazy::checked(r)
                .map(|(lazy, _)| lazy)
                .map_err(|e| format!("allowlist regex: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stopwords = if raw.stopwords.is_empty() {
        None
    } else {
        Some(
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .build(&raw.stopwords)
                .map_err(|e| format!("stopwords: {e}"))?,
        )
    };
    Ok(Allowlist {
        target,
        all: raw.condition.as_deref() == Some("AND"),
        regexes,
        stopwords,
    })
}

fn build_rule(raw: &RawRule) -> Result<Rule, String> {
    let (re, compiled) = Lazy::checked(&raw.regex).map_err(|e| e.to_string())?;
    if raw.secret_group > 0 && raw.secret_group >= compiled.captures_len() {
        return Err(format!("secretGroup {} out of range", raw.secret_group));
    }
    drop(compiled);
    let allowlists = raw
        .allowlists
        .iter()
        .map(build_allowlist)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rule {
        id: raw.id.clone(),
        re,
        secret_group: raw.secret_group,
        entropy: raw.entropy,
        allowlists,
    })
}

fn load() -> Rules {
    let empty = || Allowlist {
        target: Target::Secret,
        all: false,
        regexes: Vec::new(),
        stopwords: None,
    };
    let file: File = match serde_json::from_str(DATA) {
        Ok(f) => f,
        // The file is part of the source; the unit tests load it. Should it ever be
        // unreadable, the kubemedic rules still apply and the tests say so.
        Err(e) => {
            return Rules {
                rules: Vec::new(),
                always: Vec::new(),
                by_keyword: Vec::new(),
                prefilter: None,
                global: empty(),
                skipped: vec![("gitleaks.json".into(), e.to_string())],
                commit: String::new(),
                upstream_rules: 0,
                path_only: Vec::new(),
            };
        }
    };
    let mut skipped = Vec::new();
    let global = build_allowlist(&file.allowlist).unwrap_or_else(|e| {
        skipped.push(("global allowlist".into(), e));
        empty()
    });
    let mut rules = Vec::new();
    let mut keywords: Vec<String> = Vec::new();
    let mut by_keyword: Vec<Vec<usize>> = Vec::new();
    let mut always = Vec::new();
    for raw in &file.rules {
        let rule = match build_rule(raw) {
            Ok(r) => r,
            Err(e) => {
                skipped.push((raw.id.clone(), e));
                continue;
            }
        };
        let index = rules.len();
        rules.push(rule);
        if raw.keywords.is_empty() {
            always.push(index);
        }
        for k in &raw.keywords {
            let k = k.to_ascii_lowercase();
            match keywords.iter().position(|x| *x == k) {
                Some(p) => by_keyword[p].push(index),
                None => {
                    keywords.push(k);
                    by_keyword.push(vec![index]);
                }
            }
        }
    }
    let prefilter = AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(&keywords)
        .map_err(|e| skipped.push(("keywords".into(), e.to_string())))
        .ok();
    Rules {
        rules,
        always,
        by_keyword,
        prefilter,
        global,
        skipped,
        commit: file.commit,
        upstream_rules: file.upstream_rules,
        path_only: file.path_only_rules_dropped,
    }
}

/// Shannon entropy as gitleaks computes it: over characters, divided by the byte length.
pub fn shannon_entropy(s: &str) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts: Vec<(char, u32)> = Vec::new();
    for c in s.chars() {
        match counts.iter_mut().find(|(x, _)| *x == c) {
            Some((_, n)) => *n += 1,
            None => counts.push((c, 1)),
        }
    }
    let len = s.len() as f64;
    counts
        .iter()
        .map(|(_, n)| {
            let p = f64::from(*n) / len;
            -p * p.log2()
        })
        .sum()
}

impl Allowlist {
    fn allows(&self, secret: &str, matched: &str, line: &str) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        // A pattern that compiled at load compiles again; were it not to, it allows nothing.
        let regex = !target.is_empty()
            && self
                .regexes
                .iter()
                .any(|r| r.get().is_some_and(|r| r.is_match(target)));
        let stop =
            !secret.is_empty() && self.stopwords.as_ref().is_some_and(|a| a.is_match(secret));
        if self.all {
            let mut checks = Vec::new();
            if !self.regexes.is_empty() {
                checks.push(regex);
            }
            if self.stopwords.is_some() {
                checks.push(stop);
            }
            !checks.is_empty() && checks.iter().all(|c| *c)
        } else {
            regex || stop
        }
    }
}

/// The line(s) of `text` around `start..end`.
fn line_of(text: &str, start: usize, end: usize) -> &str {
    let from = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let to = text[end..].find('\n').map_or(text.len(), |i| end + i);
    &text[from..to]
}

/// Every finding of the vendored rules in `text`, as the span of its secret.
pub fn find(text: &str, out: &mut Vec<Span>) {
    let rules = &*RULES;
    let mut enabled = vec![false; rules.rules.len()];
    for &i in &rules.always {
        enabled[i] = true;
    }
    if let Some(pre) = &rules.prefilter {
        for m in pre.find_overlapping_iter(text) {
            for &i in &rules.by_keyword[m.pattern().as_usize()] {
                enabled[i] = true;
            }
        }
    }
    for (rule, _) in rules.rules.iter().zip(&enabled).filter(|(_, on)| **on) {
        // A pattern that compiled at load compiles again (it is the same text).
        let Some(re) = rule.re.get() else { continue };
        for caps in re.captures_iter(text) {
            let Some(whole) = caps.get(0) else { continue };
            // gitleaks trims newlines off the match.
            let matched = whole.as_str().trim_matches('\n');
            if matched.is_empty() {
                continue;
            }
            let m_start = whole.start()
                + (whole.as_str().len() - whole.as_str().trim_start_matches('\n').len());
            let m_end = m_start + matched.len();
            let group = if rule.secret_group > 0 {
                caps.get(rule.secret_group).filter(|g| !g.is_empty())
            } else {
                caps.iter().skip(1).flatten().find(|g| !g.is_empty())
            };
            let (s_start, s_end) = match group {
                Some(g) => (g.start().max(m_start), g.end().min(m_end)),
                None => (m_start, m_end),
            };
            if s_start >= s_end {
                continue;
            }
            let secret = &text[s_start..s_end];
            if rule.entropy > 0.0 && shannon_entropy(secret) <= rule.entropy {
                continue;
            }
            let line = line_of(text, m_start, m_end);
            if rules.global.allows(secret, matched, line)
                || rule
                    .allowlists
                    .iter()
                    .any(|a| a.allows(secret, matched, line))
            {
                continue;
            }
            // kubemedic's one check on top of the vendored rules: a JWT's header names its
            // algorithm (rules::not_a_jwt).
            if rule.id == "jwt" && super::context::not_a_jwt(secret) {
                continue;
            }
            out.push(Span {
                start: s_start,
                end: s_end,
                marker: Marker::Redacted,
                rule: &rule.id,
            });
        }
    }
}
