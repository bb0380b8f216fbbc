//! The neighbourhood of an investigation's target (DESIGN §3.5, issue 26 item 3): what the
//! failing thing depends on — its nodes, volumes, configuration, the Services and hosts its
//! failures name, the policies and webhooks in its way — each with what is wrong with it now and
//! what changed just before the failures began, ranked. Both investigators read it; the
//! analysis keeps it (the API, the audit trail and `investigate --format text` show it).

use std::fmt::Write as _;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The kinds of dependency an adapter follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DepKind {
    /// A host, Service or workload named by the failing containers' logs or events, and what
    /// serves it.
    Host,
    /// Cluster DNS.
    Dns,
    /// The node a pod runs on, or a neighbour on it.
    Node,
    /// A volume: claim, volume, storage class, attachment.
    Storage,
    /// A ConfigMap or Secret the pods refer to.
    Config,
    /// A NetworkPolicy selecting the pods.
    Network,
    /// An admission webhook that applies to the namespace.
    Admission,
    /// The RBAC the pods' ServiceAccount calls the API with, when the API refuses it.
    Access,
    /// ResourceQuota or LimitRange.
    Quota,
    /// A HorizontalPodAutoscaler or PodDisruptionBudget.
    Scaling,
    /// A Service selecting the pods.
    Service,
    /// The workload's own rollout state (paused, another revision).
    Rollout,
    /// The pods' own probe, when it kills them.
    Probe,
}

/// Something that changed on a dependency, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub at: DateTime<Utc>,
    pub what: String,
}

impl Change {
    /// What a [`Change::creation`] says: the object was created then and not written since.
    pub const CREATED: &'static str = "created";

    /// The object's creation, its only write.
    pub fn creation(at: DateTime<Utc>) -> Self {
        Self {
            at,
            what: Self::CREATED.to_owned(),
        }
    }

    /// Whether it is the object's creation rather than an edit: a dependency created
    /// before the onset did not change before it.
    pub fn is_creation(&self) -> bool {
        self.what == Self::CREATED
    }
}

/// The dependency whose trouble another causes: the object it is about, or, for a host named
/// in logs (no object), its text. Stored as a bare string before it was typed, which parses as
/// [`Causes::Named`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Causes {
    Object(super::Target),
    Named(String),
}

impl std::fmt::Display for Causes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Causes::Object(t) => f.write_str(&Dependency::name_of(t)),
            Causes::Named(n) => f.write_str(n),
        }
    }
}

impl Causes {
    /// Whether it is `d`: the object `d` is about, or (for `d` about none) `d`'s text.
    pub fn is(&self, d: &Dependency) -> bool {
        match (self, &d.subject) {
            (Causes::Object(t), Some(s)) => t == s,
            (Causes::Object(t), None) => d.object == Dependency::name_of(t),
            (Causes::Named(n), None) => &d.object == n,
            (Causes::Named(_), Some(_)) => false,
        }
    }
}

/// One dependency of the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dependency {
    pub kind: DepKind,
    /// `Service ledger/ledger-db`: the object as people read it.
    pub object: String,
    /// The object it is, when it is one the API serves (kind, name and namespace): what
    /// decisions about it read, never [`Dependency::object`]'s text. `None` for a host named in
    /// logs, a probe, a service account only named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<super::Target>,
    /// How the target depends on it: `named in the logs of ledger (ledger-db:5432)`.
    pub relation: String,
    /// 1: the target's pods use it directly; 2: behind a direct dependency.
    pub distance: u8,
    /// What is wrong with it now, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy: Option<String>,
    /// Since when, when the cluster says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// The latest change to it the API shows (creation, a scale, an edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<Change>,
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Why the remedy the culprit suggests cannot work on its own (a node whose pods cannot
    /// finish terminating): a human must act first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<String>,
    /// The dependency whose trouble this one causes (a neighbour eating its node's PIDs):
    /// it outranks that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causes: Option<Causes>,
    /// The workload and its revision that did not have the problem (the one before the rollout
    /// that caused it): rolling it back to that undoes the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<Undo>,
    /// For the node a pod of the target runs on: how many run there and fail, and whether
    /// the node is their common factor (the drain's question, asked of the target's pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_node: Option<OnNode>,
    /// Set by the ranking.
    #[serde(default)]
    pub score: u32,
}

/// A rollback that undoes a dependency's trouble ([`Dependency::undo`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undo {
    /// The workload to roll back.
    pub target: super::Target,
    pub to_revision: i64,
}

/// The target's pods on one node ([`Dependency::on_node`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnNode {
    /// The node's name.
    pub node: String,
    /// The target's pods on it.
    pub pods: usize,
    /// Those of them that fail.
    pub failing: usize,
    /// The node is the common factor of their failures: its conditions, its readiness
    /// flapping, or pods failing on it while their siblings elsewhere are ready.
    pub at_fault: bool,
    /// What says the node ran short of memory itself when the target's containers were killed
    /// for memory on it (`prove::findings::node_took_memory`): only then does it explain such a
    /// kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_of_memory: Option<String>,
}

impl Dependency {
    pub fn new(kind: DepKind, object: impl Into<String>, relation: impl Into<String>) -> Self {
        Self {
            kind,
            object: object.into(),
            subject: None,
            relation: relation.into(),
            distance: 1,
            unhealthy: None,
            since: None,
            changed: None,
            evidence: vec![],
            blocks: None,
            causes: None,
            undo: None,
            on_node: None,
            score: 0,
        }
    }

    /// A dependency on the object `subject`, named as [`Dependency::name_of`] names it.
    pub fn of(kind: DepKind, subject: super::Target, relation: impl Into<String>) -> Self {
        Self::new(kind, Self::name_of(&subject), relation).about(subject)
    }

    /// How a dependency names an object: `Service ledger/ledger-db`, `Node worker-1`.
    pub fn name_of(t: &super::Target) -> String {
        match &t.namespace {
            Some(ns) => format!("{} {ns}/{}", t.kind, t.name),
            None => format!("{} {}", t.kind, t.name),
        }
    }

    /// It is the object `subject` (its text, [`Dependency::object`], says more).
    pub fn about(mut self, subject: super::Target) -> Self {
        self.subject = Some(subject);
        self
    }

    /// It turns out to be another object (a claim's trouble is its StorageClass's).
    pub fn rename(&mut self, subject: super::Target) {
        self.object = Self::name_of(&subject);
        self.subject = Some(subject);
    }

    /// Whether it is an object of `kind`.
    pub fn is_a(&self, kind: &str) -> bool {
        self.subject.as_ref().is_some_and(|s| s.kind == kind)
    }

    /// It causes the trouble of `other` (a host named in logs, an object): linked by the
    /// object `other` is about, or by its text for a host about none.
    pub fn culprit_of(mut self, other: &Dependency) -> Self {
        self.causes = Some(match &other.subject {
            Some(t) => Causes::Object(t.clone()),
            None => Causes::Named(other.object.clone()),
        });
        self
    }

    /// It causes the trouble of the object `other`.
    pub fn culprit_of_object(mut self, other: &super::Target) -> Self {
        self.causes = Some(Causes::Object(other.clone()));
        self
    }

    pub fn unhealthy(mut self, what: impl Into<String>, since: Option<DateTime<Utc>>) -> Self {
        self.unhealthy = Some(what.into());
        self.since = since;
        self
    }

    pub fn changed(mut self, change: Option<Change>) -> Self {
        self.changed = change;
        self
    }

    /// Rolling `workload` (this dependency) back to `revision` undoes the change that caused
    /// the trouble.
    pub fn undo_to(mut self, workload: super::Target, revision: i64) -> Self {
        self.undo = Some(Undo {
            target: workload,
            to_revision: revision,
        });
        self
    }

    pub fn at(mut self, distance: u8) -> Self {
        self.distance = distance;
        self
    }

    pub fn evidence(mut self, line: impl Into<String>) -> Self {
        self.evidence.push(line.into());
        self
    }
}

/// The target's dependencies, ranked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Neighbourhood {
    /// `Deployment ledger/ledger`.
    pub target: String,
    /// When the target's failures began, as far as the cluster shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset: Option<DateTime<Utc>>,
    /// What the target's pods show (a line each, the first few).
    #[serde(default)]
    pub symptoms: Vec<String>,
    /// Every failing pod of the target runs but is not ready (none crashes, waits or is
    /// unplaced), after it was ready once: the pods are wedged, not broken.
    #[serde(default)]
    pub failing_pods_run: bool,
    /// Best-supported first.
    pub dependencies: Vec<Dependency>,
}

/// How much a finding weighs.
const UNHEALTHY: u32 = 6;
const CHANGED_BEFORE_ONSET: u32 = 4;
const CHANGED_RECENTLY: u32 = 1;
/// A change this long before the onset still counts as "just before".
const BEFORE_ONSET: i64 = 60 * 60;
/// A change this long after the onset still counts as "just before": the onset is the first
/// warning seen, which can trail the first failure by the kubelet's back-off.
const ONSET_TRAILS: i64 = 5 * 60;
/// A change this recent is still a suspect (scored, less than one just before the onset), and a
/// rollout this recent whose pods fail where the previous revision's ran is the cause.
pub const RECENT_CHANGE_HOURS: i64 = 6;

/// Whether `change` came just before failures that began at `onset`
/// ([`Neighbourhood::just_before_onset`]).
pub fn just_before(onset: Option<DateTime<Utc>>, change: &Change) -> bool {
    onset.is_some_and(|o| {
        change.at <= o + Duration::seconds(ONSET_TRAILS)
            && change.at >= o - Duration::seconds(BEFORE_ONSET)
    })
}

fn hhmm(t: DateTime<Utc>) -> String {
    t.format("%H:%M").to_string()
}

impl Neighbourhood {
    /// Whether `change` came just before the failures began: at most [`BEFORE_ONSET`] seconds
    /// before the onset, or up to [`ONSET_TRAILS`] after it (the onset is the first warning
    /// seen, which can trail the first failure).
    pub fn just_before_onset(&self, change: &Change) -> bool {
        just_before(self.onset, change)
    }

    /// Order the dependencies, best-supported culprit first: unhealthy now, changed just
    /// before the onset, close to the target.
    pub fn rank(&mut self, now: DateTime<Utc>) {
        let onset = self.onset;
        for d in &mut self.dependencies {
            let mut score = 0;
            if d.unhealthy.is_some() {
                score += UNHEALTHY;
            }
            if let Some(c) = &d.changed {
                if just_before(onset, c) {
                    score += CHANGED_BEFORE_ONSET;
                } else if now - c.at < Duration::hours(RECENT_CHANGE_HOURS) {
                    score += CHANGED_RECENTLY;
                }
            }
            if score > 0 {
                score += u32::from(3u8.saturating_sub(d.distance));
            }
            d.score = score;
        }
        // What causes another's trouble outranks it.
        let scores: Vec<(Dependency, u32)> = self
            .dependencies
            .iter()
            .map(|d| (d.clone(), d.score))
            .collect();
        for d in &mut self.dependencies {
            if let Some(other) = &d.causes
                && let Some((_, s)) = scores.iter().find(|(o, _)| other.is(o))
            {
                d.score = d.score.max(s + 1);
            }
        }
        self.dependencies
            .sort_by(|a, b| b.score.cmp(&a.score).then(a.distance.cmp(&b.distance)));
    }

    /// The best-supported culprit: unhealthy now, or changed just before the onset.
    pub fn culprit(&self) -> Option<&Dependency> {
        self.dependencies
            .first()
            .filter(|d| d.score >= CHANGED_BEFORE_ONSET)
    }

    /// What is broken now among the dependencies (unhealthy), ranked. New pods, from a restart
    /// or from more replicas, meet each of them: the restart and scale proofs refuse while one
    /// lasts, and the rules propose neither then.
    pub fn broken(&self) -> impl Iterator<Item = &Dependency> {
        self.dependencies.iter().filter(|d| d.unhealthy.is_some())
    }

    /// The reason a human reads: the culprit, what is wrong with it, and the timeline, then
    /// how the target depends on it.
    pub fn explain(&self) -> Option<String> {
        let d = self.culprit()?;
        let mut s = d.object.clone();
        if let Some(u) = &d.unhealthy {
            let _ = write!(s, " {u}");
            if let Some(t) = d.since {
                let _ = write!(s, " since {}", hhmm(t));
            }
        }
        if let Some(c) = &d.changed {
            let _ = write!(s, "; {} at {}", c.what, hhmm(c.at));
        }
        if let Some(o) = self.onset {
            let _ = write!(s, "; {}'s pods fail since {}", self.target, hhmm(o));
        }
        let mut relation: String = d.relation.chars().take(160).collect();
        if relation.len() < d.relation.len() {
            relation.push('…');
        }
        let _ = write!(s, " ({relation})");
        for e in d.evidence.iter().take(2) {
            let _ = write!(s, "; {}", e.chars().take(160).collect::<String>());
        }
        Some(s)
    }

    /// The ranked dependencies, a line each, short.
    pub fn compact(&self, max: usize) -> String {
        self.lines(self.dependencies.iter().take(max))
    }

    /// For the model's first prompt: only the dependencies something was found about (unhealthy,
    /// or changed), ranked, a line each.
    pub fn findings(&self, max: usize) -> String {
        self.lines(self.dependencies.iter().filter(|d| d.score > 0).take(max))
    }

    fn lines<'a>(&self, deps: impl Iterator<Item = &'a Dependency>) -> String {
        let mut s = String::new();
        for d in deps {
            let mut line = format!("- {} [{}]", d.object, d.relation);
            if let Some(u) = &d.unhealthy {
                let _ = write!(line, ": {u}");
            }
            if let Some(c) = &d.changed {
                let _ = write!(line, "; {} at {}", c.what, c.at.format("%H:%M:%S"));
            }
            let line: String = line.chars().take(240).collect();
            s.push_str(&line);
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Target;

    /// Issue 43: what a dependency causes is the object it is about, not text to match: the
    /// neighbour eating a node's PIDs outranks the node, and a link stored as text before it
    /// was typed still reads.
    #[test]
    fn a_culprit_is_linked_to_the_object_whose_trouble_it_causes() {
        let node = Target::new("Node", "worker-1", None);
        let troubled = Dependency::of(DepKind::Node, node.clone(), "runs the pods")
            .unhealthy("PIDPressure", None);
        let hog = Dependency::new(DepKind::Node, "pod batch/forker", "a neighbour on it")
            .culprit_of_object(&node);
        let mut n = Neighbourhood {
            dependencies: vec![troubled.clone(), hog],
            ..Neighbourhood::default()
        };
        n.rank(Utc::now());
        assert_eq!(n.dependencies[0].object, "pod batch/forker");
        assert!(n.dependencies[0].score > n.dependencies[1].score);
        assert_eq!(
            n.dependencies[0].causes.as_ref().map(ToString::to_string),
            Some("Node worker-1".to_owned())
        );
        assert!(
            n.dependencies[0]
                .causes
                .as_ref()
                .is_some_and(|c| c.is(&troubled))
        );
        let stored: Dependency = serde_json::from_value(serde_json::json!({
            "kind": "host", "object": "pod x", "relation": "r", "distance": 1,
            "causes": "db.shop:5432"}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored.causes, Some(Causes::Named("db.shop:5432".into())));
    }
}
