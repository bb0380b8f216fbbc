//! A pod and its containers, as their status shows them.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::spec::Probe;
use super::{Event, ago, created, image_digest, time};
use crate::cluster::obj::{self, array, at, i64_at, str_at};

/// What kind of failure a pod shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Not placed on a node (`PodScheduled=False`).
    Unschedulable,
    /// A container waits on an error ([`FAILING_WAITS`]): crash loop, image, configuration.
    CannotRun,
    /// Placed, but its containers are not created after [`CREATING_ALLOWANCE`].
    StuckCreating,
    /// A container's current state is an exit with an error (before its restart, or for
    /// good under `restartPolicy: Never`).
    Exited,
    /// The pod's phase is `Failed`.
    PodFailed,
    /// Deletion was asked longer than [`TERMINATING_ALLOWANCE`] ago and the pod is still there
    /// (a finalizer, a node that does not answer).
    StuckTerminating,
    /// Still starting, and whoever tried to start it (the kubelet, the attach-detach
    /// controller) warned about it: `FailedMount`, `FailedAttachVolume`, a sandbox that cannot
    /// be made. It says the pod cannot start before any allowance runs out.
    Warned,
    /// Running, but not ready (a readiness probe that does not pass): the pod runs, it does
    /// not serve. Proofs that ask whether a pod can run at all leave this kind out
    /// ([`Pod::broken`]).
    NotReady,
}

/// Why a pod fails: its kind, and the line that shows it (`container api CrashLoopBackOff, 4
/// restarts, last exit OOMKilled (137)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The cause in a word or two, what "a new failure" compares: `exited <reason>` for a
    /// container that exits (`exited Error`, `exited OOMKilled`; a crash loop's back-off is the
    /// same cause as the exit before it), the waiting reason otherwise (`ImagePullBackOff` for
    /// either image wait, `CreateContainerConfigError`), the event's reason for
    /// [`FailureKind::Warned`], else the kind (`Unschedulable`, `NotReady`, …).
    pub cause: String,
    pub line: String,
}

impl Failure {
    fn new(kind: FailureKind, line: String) -> Self {
        Self {
            kind,
            cause: format!("{kind:?}"),
            line,
        }
    }

    fn because(mut self, cause: &str) -> Self {
        // The kubelet alternates the two while it retries one image pull.
        self.cause = match cause {
            "ErrImagePull" => "ImagePullBackOff".to_owned(),
            c => c.to_owned(),
        };
        self
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

/// One container of a pod, as its status shows it.
#[derive(Debug, Clone, Default)]
pub struct Container {
    pub name: String,
    pub running: bool,
    /// Its `ready` flag (its readiness probe passes, or it has none and runs).
    pub ready: bool,
    pub restarts: i64,
    /// `CrashLoopBackOff`, `ImagePullBackOff`, `ContainerCreating`, …
    pub waiting: Option<String>,
    /// What the kubelet says about the wait (`secret "db" not found`); empty when nothing.
    pub waiting_message: String,
    /// Its latest termination (the current state's, else the last state's): reason (`Error` when
    /// none is given), exit code, when it finished.
    pub terminated: Option<(String, i64, Option<DateTime<Utc>>)>,
    /// The image as the spec names it, and the digest the kubelet pulled for it
    /// (`sha256:…` from `imageID`).
    pub image: String,
    pub digest: Option<String>,
    /// An init container.
    pub init: bool,
    /// The current state is terminated: reason and exit code.
    pub exited: Option<(String, i64)>,
    /// When its latest run started: the running state's start, else the latest termination's
    /// (a container backing off after a crash started that run).
    pub started: Option<DateTime<Utc>>,
}

impl Container {
    /// Its latest termination, when it ended since `since` in a way that says more than a
    /// start: the time is recorded and not before `since`, and it runs again or exited with an
    /// error (an init container that completed did its job). "Healthy again", more pods helping
    /// and verification's restarts ask this.
    pub fn exited_since(&self, since: DateTime<Utc>) -> Option<(&str, i64, DateTime<Utc>)> {
        let (reason, code, at) = self.terminated.as_ref()?;
        let at = (*at)?;
        (at >= since && (self.running || *code != 0) && (!self.init || *code != 0)).then_some((
            reason.as_str(),
            *code,
            at,
        ))
    }
}

/// One pod, as observed.
#[derive(Debug, Clone, Default)]
pub struct Pod {
    pub name: String,
    pub node: Option<String>,
    pub phase: String,
    /// The kubelet's `status.reason` (`Evicted`, `NodeShutdown`, …), and its message.
    pub reason: Option<(String, Option<String>)>,
    pub ready: bool,
    /// Since when the Ready condition has had its current value.
    pub ready_since: Option<DateTime<Utc>>,
    pub created: Option<DateTime<Utc>>,
    pub deleting: bool,
    /// Since deletion was asked, as of the moment the pod was observed at.
    pub deleting_for: Option<Duration>,
    pub finalizers: Vec<String>,
    pub template_hash: Option<String>,
    pub revision_hash: Option<String>,
    pub controller: Option<(String, String)>,
    pub unschedulable: Option<String>,
    /// Still creating its containers (ContainerCreating, PodInitializing) this long after it
    /// was placed: something (a volume, a sandbox) keeps it from starting.
    pub stuck_creating: Option<Duration>,
    /// Pending on no node this long, and no scheduler has written that it tried (no
    /// `PodScheduled` condition): a `schedulerName` nobody serves.
    pub unplaced_for: Option<Duration>,
    /// Running and never ready since it started, this long: its Ready condition has been
    /// False since the kubelet first set it (a readiness probe that never passes).
    pub never_ready: Option<Duration>,
    /// Still starting (Pending), and the latest Warning about it since it was created, as
    /// reason and message: set by [`Pod::heed`] from the events read beside it.
    pub warned: Option<(String, String)>,
    pub containers: Vec<Container>,
    pub labels: Value,
    pub raw: Value,
}

/// Waiting reasons that mean a container cannot run.
pub const FAILING_WAITS: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "ErrImageNeverPull",
];

/// The warnings that say a placed pod cannot start ([`Pod::heed`]): a volume that does not
/// mount or attach, a sandbox the runtime cannot make.
pub const STARTING_WARNINGS: &[&str] = &[
    "FailedMount",
    "FailedAttachVolume",
    "FailedCreatePodSandBox",
];

/// What the kubelet says of a volume's source in the first seconds of a pod, a race it retries
/// and wins, not a mount that fails: a projected source it has not registered yet (`object
/// "shop"/"kube-root-ca.crt" not registered`), a ConfigMap or Secret cache not synced yet
/// (`failed to sync configmap cache: timed out waiting for the condition`).
pub const TRANSIENT_MOUNTS: &[&str] = &["not registered", "failed to sync"];

/// A pod's `status.reason` when its node ended it, whatever it ran ([`Pod::outlived`]): the
/// node shut down (`NodeShutdown`, `Terminated`, `Shutdown`), was lost (`NodeLost`), no longer
/// matched its affinity or had no room when the kubelet admitted it (`NodeAffinity`,
/// `OutOfcpu`, `OutOfmemory`, `OutOfpods`), or the scheduler preempted it for a pod of higher
/// priority (`Preempting`).
pub const NODE_ENDINGS: &[&str] = &[
    "NodeShutdown",
    "Terminated",
    "Shutdown",
    "NodeLost",
    "NodeAffinity",
    "OutOfcpu",
    "OutOfmemory",
    "OutOfpods",
    "Preempting",
];

/// How the kubelet's message begins when it evicts or rejects a pod because the node runs low
/// (`The node was low on resource: memory.`) or reports pressure (`The node had condition:
/// [DiskPressure].`), as opposed to a pod over its own ephemeral-storage limit (`Container x
/// exceeded its local ephemeral storage limit`, `Pod ephemeral local storage usage exceeds the
/// total limit of containers`).
pub const NODE_EVICTIONS: &[&str] = &["The node was low on resource", "The node had condition"];

/// What the kubelet adds to a pressure eviction's message for a container of the pod that used
/// more than it requested (`Container api was using 3Gi, request is 256Mi, has larger
/// consumption of memory.`): the pod's own use brought the pressure, as a leak does, so its end
/// is its own ([`Pod::outlived`] does not hold).
pub const OVER_ITS_REQUEST: &str = "has larger consumption of";

/// Waiting reasons that come with what the pod is made from (its image, its configuration): a
/// replacement made from the same template meets them again.
pub const TEMPLATE_WAITS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
];

/// How many restarts of a container say its pod is past its start-up, however recently its
/// Ready condition moved: a start that fails three times is not a start that takes long.
pub const PAST_STARTUP_RESTARTS: i64 = 3;
/// How many restarts of a container in `CrashLoopBackOff` say its starts failed, not that it
/// takes long to start: the kubelet backs off only after a start has failed, and two failed
/// starts are not chance.
pub const BACKED_OFF_RESTARTS: i64 = 2;

/// How long a pod has not been ready, and whether that is past its start-up ([`Pod::unready`]).
#[derive(Debug, Clone, Copy)]
pub struct Unready {
    /// Since its Ready condition turned False, or since it was created; `None` when it is ready.
    pub failing_for: Option<Duration>,
    /// The most restarts of one of its containers.
    pub restarts: i64,
    /// What its start-up may take ([`Pod::startup_allowance`]).
    pub allowance: Duration,
    /// Not ready past the allowance, or with a container restarted [`PAST_STARTUP_RESTARTS`]
    /// times, backed off after two failed starts, or whose containers are stuck being created;
    /// never for a pod being deleted.
    pub past_startup: bool,
}

/// How many of a failing container's last log lines the investigations read: a stack trace's
/// head and the error that ended the run fit in it.
pub const FAILURE_LOG_LINES: i64 = 50;

/// A container whose log shows its pod's failure, and which run's: the previous run's when it
/// restarted (the current one is waiting, or has only begun), else the current's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSource {
    pub container: String,
    pub init: bool,
    pub previous: bool,
}

/// The exit code of a process killed by SIGKILL (128 + 9), as the kernel's OOM killer does.
pub const SIGKILL_EXIT: i64 = 137;
/// The exit code of a process stopped by SIGTERM (128 + 15), as the kubelet stops a container.
pub const SIGTERM_EXIT: i64 = 143;

/// Whether a container's exit code says it failed by its own doing: not a clean exit (0), nor a
/// signal from outside (the kubelet's SIGTERM, a SIGKILL for memory or a failed probe).
pub fn own_error_exit(code: i64) -> bool {
    !matches!(code, 0 | SIGKILL_EXIT | SIGTERM_EXIT)
}
/// The reason of the warning the kernel's OOM kill is reported by (node-problem-detector's
/// kernel monitor, some runtimes).
pub const OOM_KILL_EVENT: &str = "OOMKilling";
/// How far back a kill for memory says the limit is too small now: a working day's peak. A
/// container killed longer ago that has run since met its limit through the last peak; its
/// status still shows the kill (the last termination stays until the next one).
pub const MEMORY_KILL_LOOKBACK_HOURS: i64 = 6;

/// How long a pod may take to get its containers created before it counts as stuck.
pub const CREATING_ALLOWANCE: i64 = 120;
/// How long a new pod may wait before a scheduler has tried to place it: a scheduler writes
/// the `PodScheduled` condition at its first attempt, within seconds of the pod's creation.
/// Past this, with no condition, no scheduler serves the pod's `schedulerName`.
pub const SCHEDULING_ALLOWANCE: i64 = CREATING_ALLOWANCE;
/// How long a pod of a workload whose other pods serve may stay stuck creating before it is
/// replaced (the offline rules' `DeletePod`): the kubelet retries a volume's attach for about two
/// minutes and its mount as long again, so before five minutes waiting may still end it.
pub const REPLACE_STUCK_CREATING_AFTER: i64 = 300;
/// How long a pod may run without ever becoming ready before it counts as failing when nothing
/// else (a rollout's own deadline, its probes' budgets: [`Pod::startup_allowance`]) says so: as
/// long as creating its containers may take.
pub const NEVER_READY_ALLOWANCE: i64 = CREATING_ALLOWANCE;
/// How long a revision must have served, with nothing recorded against it, to count as proven
/// healthy when none of its pods are left: a revision replaced sooner never proved itself (the
/// rules' "the previous revision was healthy" and the rollback proof's both ask it).
pub const SERVED_MIN_SECONDS: i64 = 60;
/// How long a pod may take to terminate before it counts as stuck: grace periods are 30 s by
/// default and a few minutes when set long; ten minutes is past any of them.
pub const TERMINATING_ALLOWANCE: i64 = 600;
/// The kubelet sets a new pod's `startTime` and its first Ready condition (False) in the same
/// status update, so a Ready condition that has never been True last changed in the second the
/// pod started (or the next one, when the update straddles a second). On the real node, pods
/// never ready showed 0 s; pods ready for a moment and then not, 2 to 4 s (docs/real-node.md).
const NEVER_READY_SLACK: i64 = 1;

/// The host ports a pod spec's containers (init containers included) bind: `(port,
/// protocol)`, sorted, each once. One pod per node can bind a host port, so these decide where
/// a pod can go: the scheduling facts and the scale proof both ask.
pub fn host_ports(spec: &Value) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| array(spec, &[k]))
        .flat_map(|c| array(c, &["ports"]))
        .filter_map(|p| {
            let port = i64_at(p, &["hostPort"]).filter(|p| *p > 0)?;
            Some((port, str_at(p, &["protocol"]).unwrap_or("TCP").to_owned()))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Pod {
    /// The pod as of `now`.
    pub fn at(p: &Value, now: DateTime<Utc>) -> Self {
        let mut v = Self::parse(p);
        let placed = time(p, &["status", "startTime"]).or(v.created);
        // Containers being created, or a pod placed on a node whose kubelet has not reported
        // any container yet.
        let creating = v.containers.iter().any(|c| {
            matches!(
                c.waiting.as_deref(),
                Some("ContainerCreating" | "PodInitializing")
            )
        }) || (v.phase == "Pending" && v.node.is_some() && v.containers.is_empty());
        if creating
            && let Some(t) = placed
            && now - t > Duration::seconds(CREATING_ALLOWANCE)
        {
            v.stuck_creating = Some(now - t);
        }
        if let Some(asked) = time(p, &["metadata", "deletionTimestamp"]) {
            v.deleting_for = Some(now - asked);
        }
        let tried = array(p, &["status", "conditions"])
            .iter()
            .any(|c| str_at(c, &["type"]) == Some("PodScheduled"));
        if v.phase == "Pending"
            && v.node.is_none()
            && !tried
            && !v.deleting
            && let Some(t) = v.created
            && now - t > Duration::seconds(SCHEDULING_ALLOWANCE)
        {
            v.unplaced_for = Some(now - t);
        }
        if v.phase == "Running"
            && !v.deleting
            && v.was_ready() == Some(false)
            && let Some(start) = time(p, &["status", "startTime"])
        {
            v.never_ready = Some(now - start);
        }
        v
    }

    /// Whether the pod has been ready since it started: it is ready now, or its Ready
    /// condition last changed later than the kubelet sets it as the pod starts — a condition
    /// only changes from one value to the other, so it was True in between. `None` when the
    /// times are not recorded.
    pub fn was_ready(&self) -> Option<bool> {
        if self.ready {
            return Some(true);
        }
        let start = time(&self.raw, &["status", "startTime"])?;
        let since = array(&self.raw, &["status", "conditions"])
            .iter()
            .find(|c| str_at(c, &["type"]) == Some("Ready"))
            .and_then(|c| time(c, &["lastTransitionTime"]))?;
        Some(since - start > Duration::seconds(NEVER_READY_SLACK))
    }

    pub fn parse(p: &Value) -> Self {
        let mut containers = Vec::new();
        for key in ["initContainerStatuses", "containerStatuses"] {
            for c in array(p, &["status", key]) {
                let term =
                    at(c, &["state", "terminated"]).or_else(|| at(c, &["lastState", "terminated"]));
                containers.push(Container {
                    name: str_at(c, &["name"]).unwrap_or_default().to_owned(),
                    running: at(c, &["state", "running"]).is_some(),
                    ready: at(c, &["ready"]).and_then(Value::as_bool) == Some(true),
                    restarts: i64_at(c, &["restartCount"]).unwrap_or(0),
                    waiting: str_at(c, &["state", "waiting", "reason"]).map(str::to_owned),
                    waiting_message: str_at(c, &["state", "waiting", "message"])
                        .unwrap_or_default()
                        .to_owned(),
                    terminated: term.map(|t| {
                        (
                            str_at(t, &["reason"]).unwrap_or("Error").to_owned(),
                            i64_at(t, &["exitCode"]).unwrap_or(0),
                            time(t, &["finishedAt"]),
                        )
                    }),
                    image: str_at(c, &["image"]).unwrap_or_default().to_owned(),
                    digest: str_at(c, &["imageID"]).and_then(image_digest),
                    init: key == "initContainerStatuses",
                    exited: at(c, &["state", "terminated"]).map(|t| {
                        (
                            str_at(t, &["reason"]).unwrap_or("Error").to_owned(),
                            i64_at(t, &["exitCode"]).unwrap_or(0),
                        )
                    }),
                    started: time(c, &["state", "running", "startedAt"])
                        .or_else(|| term.and_then(|t| time(t, &["startedAt"]))),
                });
            }
        }
        let cond = |ty: &str| {
            array(p, &["status", "conditions"])
                .iter()
                .find(|c| str_at(c, &["type"]) == Some(ty))
                .cloned()
        };
        let ready_cond = cond("Ready");
        let unschedulable = cond("PodScheduled")
            .filter(|c| str_at(c, &["status"]) == Some("False"))
            .map(|c| {
                str_at(&c, &["message"])
                    .unwrap_or("unschedulable")
                    .to_owned()
            });
        let controller = obj::controller(p).map(|(kind, name)| (kind.to_owned(), name.to_owned()));
        Self {
            name: obj::name(p).to_owned(),
            node: str_at(p, &["spec", "nodeName"]).map(str::to_owned),
            phase: str_at(p, &["status", "phase"])
                .unwrap_or("Unknown")
                .to_owned(),
            reason: str_at(p, &["status", "reason"]).map(|r| {
                let message = str_at(p, &["status", "message"]).map(str::to_owned);
                (r.to_owned(), message)
            }),
            ready: ready_cond
                .as_ref()
                .and_then(|c| str_at(c, &["status"]))
                .is_some_and(|s| s == "True"),
            ready_since: ready_cond
                .as_ref()
                .and_then(|c| time(c, &["lastTransitionTime"]))
                .or_else(|| time(p, &["status", "startTime"])),
            created: created(p),
            deleting: at(p, &["metadata", "deletionTimestamp"]).is_some(),
            deleting_for: None,
            finalizers: array(p, &["metadata", "finalizers"])
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect(),
            template_hash: obj::label(p, "pod-template-hash").map(str::to_owned),
            revision_hash: obj::label(p, "controller-revision-hash").map(str::to_owned),
            controller,
            unschedulable,
            stuck_creating: None,
            unplaced_for: None,
            never_ready: None,
            warned: None,
            containers,
            labels: at(p, &["metadata", "labels"])
                .cloned()
                .unwrap_or(Value::Null),
            raw: p.clone(),
        }
    }

    /// What is wrong with the pod, if anything — the first that holds: not scheduled, a
    /// container that cannot run, a container that exited with an error, containers not
    /// created [`CREATING_ALLOWANCE`] after it was placed, phase Failed, still starting with a
    /// Warning about it ([`Pod::heed`]), running but not ready — with the line that shows it.
    /// `None` for a pod that runs and is ready, has succeeded, or is still starting with
    /// nothing said against it: ten seconds into ContainerCreating, or running and never ready
    /// yet within its start-up allowance ([`Pod::starting`]).
    pub fn failure(&self) -> Option<Failure> {
        self.broken().or_else(|| {
            (self.phase == "Running" && !self.ready && !self.deleting && !self.starting()).then(
                || {
                    let not_ready: Vec<&str> = self
                        .containers
                        .iter()
                        .filter(|c| !c.init && c.running && !self.ready)
                        .map(|c| c.name.as_str())
                        .collect();
                    Failure::new(
                        FailureKind::NotReady,
                        match self.never_ready {
                            Some(d) => format!("running, never ready in {}", ago(d)),
                            None if not_ready.len() == 1 => {
                                format!("running, not ready (container {})", not_ready[0])
                            }
                            None => "running, not ready".into(),
                        },
                    )
                },
            )
        })
    }

    /// Placed on a node and still Pending: the only pods [`Pod::heed`] may find a warning about
    /// (a reader need not read events for pods that cannot have one).
    pub fn placed_not_started(&self) -> bool {
        self.phase == "Pending" && self.node.is_some()
    }

    /// Take in the events read beside the pod: for a pod still starting (Pending, not being
    /// deleted), the latest Warning about it since it was placed on its node that says it
    /// cannot start ([`STARTING_WARNINGS`]) becomes [`Pod::warned`], which [`Pod::broken`]
    /// counts ([`FailureKind::Warned`]). A warning from before it was placed (a
    /// `FailedScheduling` the autoscaler since answered) says nothing of its start. The rules'
    /// evidence, the proofs' scene and the dependency graph heed the events they read, so one
    /// definition of failing answers alike.
    pub fn heed(mut self, events: &[Event]) -> Self {
        // A container that runs or ran (an init container included) shows the sandbox was made
        // and the volumes mounted since: what was said before no longer holds.
        let started = self
            .containers
            .iter()
            .any(|c| c.running || c.exited.is_some());
        if self.phase != "Pending" || self.deleting || started {
            return self;
        }
        let placed = array(&self.raw, &["status", "conditions"])
            .iter()
            .find(|c| {
                str_at(c, &["type"]) == Some("PodScheduled")
                    && str_at(c, &["status"]) == Some("True")
            })
            .and_then(|c| time(c, &["lastTransitionTime"]))
            .or(self.created);
        self.warned = events
            .iter()
            .filter(|e| e.warning && e.kind == "Pod" && e.name == self.name)
            .filter(|e| STARTING_WARNINGS.contains(&e.reason.as_str()))
            .filter(|e| !TRANSIENT_MOUNTS.iter().any(|m| e.message.contains(m)))
            .filter(|e| match (e.last, placed) {
                (Some(t), Some(c)) => t >= c,
                _ => true,
            })
            .max_by_key(|e| e.last)
            .map(|e| (e.reason.clone(), e.message.chars().take(160).collect()));
        self
    }

    /// Whether the pod serves and will go on serving: running, ready, and not being deleted (a
    /// pod on its way out still reports Ready until its containers stop, but it is capacity
    /// that is leaving). What the rules count as a healthy pod. Whether a pod serves at this
    /// instant (what a restart must not take away, a revision's evidence) is [`Pod::ready`];
    /// whether it did since it started, [`Pod::was_ready`].
    pub fn serving(&self) -> bool {
        self.phase == "Running" && self.ready && !self.deleting
    }

    /// Whether it has ended (phase `Succeeded` or `Failed`): it runs nothing again, holds no
    /// room on its node, and no controller replaces it as a failing replica.
    pub fn ended(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }

    /// Whether a pod of the revision being rolled out fails, as a rollback judges it: something
    /// keeps it from running ([`Pod::broken`]), or it runs and has never been ready, once the
    /// rollout's own deadline has passed (`stalled`: the controller says Progressing=False) or for
    /// longer than its start may take ([`Pod::startup_allowance`]: a readiness probe that never
    /// passes). A pod that was ready and is not now is not counted: its revision served. The
    /// rollout rule, the rollback proof and the rollout wait all ask this.
    pub fn fails_in_rollout(&self, stalled: bool) -> bool {
        self.broken().is_some() || self.never_ready_in_rollout(stalled)
    }

    /// The second half of [`Pod::fails_in_rollout`]: running, and never ready past the allowance.
    pub fn never_ready_in_rollout(&self, stalled: bool) -> bool {
        self.never_ready
            .is_some_and(|d| stalled || d > self.startup_allowance())
    }

    /// The workload it belongs to, as kind and name: its controller, except that a ReplicaSet
    /// named after its pods' `pod-template-hash` (`<deployment>-<hash>`) is a Deployment's
    /// revision, and the Deployment is the workload. A bare ReplicaSet (no hash suffix) is its
    /// own workload; a pod without a controller is its own.
    pub fn workload(&self) -> (String, String) {
        match &self.controller {
            Some((kind, name)) if kind == "ReplicaSet" => {
                let hash = self.template_hash.as_deref().filter(|h| !h.is_empty());
                match hash.and_then(|h| name.strip_suffix(h)?.strip_suffix('-')) {
                    Some(deployment) => ("Deployment".into(), deployment.to_owned()),
                    None => (kind.clone(), name.clone()),
                }
            }
            Some((kind, name)) => (kind.clone(), name.clone()),
            None => ("Pod".into(), self.name.clone()),
        }
    }

    /// Whether it is a pod of workload `kind`/`name` ([`Pod::workload`]), or, for a CronJob,
    /// of one of the Jobs it made ([`super::generated_from`]), or, for another kind that runs
    /// its pods through ReplicaSets (an Argo Rollouts `Rollout`), of a ReplicaSet named after
    /// it and the `rollouts-pod-template-hash` its pods carry; for `Pod`, whether it is that pod.
    pub fn belongs_to(&self, kind: &str, name: &str) -> bool {
        if kind == "Pod" {
            return self.name == name;
        }
        let (k, n) = self.workload();
        if k == kind && n == name {
            return true;
        }
        match k.as_str() {
            "Job" => kind == "CronJob" && super::generated_from(&n, name),
            "ReplicaSet" => obj::label(&self.raw, "rollouts-pod-template-hash")
                .filter(|h| !h.is_empty())
                .is_some_and(|h| n.strip_suffix(h).and_then(|r| r.strip_suffix('-')) == Some(name)),
            _ => false,
        }
    }

    /// Whether this pod, which the selector of workload `kind`/`name` matched, is that
    /// workload's rather than a pod another controller made with the same labels (a migration
    /// Job of the same chart, a CronJob's run, another Deployment of the chart): such a pod's
    /// failure is not the workload's and must neither refuse its rollback nor score its
    /// remediation. Its own pods: those it controls directly (a ReplicaSet's, hash label or
    /// not), those [`Pod::belongs_to`] gives it (a Deployment's through its ReplicaSets, whose
    /// pods always carry the hash; the signature asks the same), and a pod no controller owns
    /// (the workload's controller adopts it). A ReplicaSet named `<name>-…` whose pods carry
    /// no hash is not the Deployment's (a bare ReplicaSet `web-v2` is not `web`'s).
    pub fn selected_by(&self, kind: &str, name: &str) -> bool {
        match &self.controller {
            None => true,
            Some((k, n)) => (k == kind && n == name) || self.belongs_to(kind, name),
        }
    }

    /// Whether a drain of its node evicts it, as `kubectl drain` chooses and the drain write
    /// does: not a DaemonSet's (its controller puts it straight back, whichever owner
    /// reference names it), not a mirror pod (the kubelet runs it from a file), and not one
    /// already being deleted (an eviction adds nothing; its replacement is already asked for).
    pub fn drain_evicts(&self) -> bool {
        let daemon = obj::array(&self.raw, &["metadata", "ownerReferences"])
            .iter()
            .any(|o| str_at(o, &["kind"]) == Some("DaemonSet"));
        let mirror = obj::annotation(&self.raw, "kubernetes.io/config.mirror").is_some()
            || matches!(&self.controller, Some((k, _)) if k == "Node");
        !daemon && !mirror && !self.deleting
    }

    /// Whether a drain moves it elsewhere: it evicts it ([`Pod::drain_evicts`]) and the pod
    /// still runs or waits to. An ended pod (Succeeded, Failed) needs no room elsewhere and no
    /// budget counts it; these are the pods the drain's proof judges budgets and room on.
    pub fn drain_moves(&self) -> bool {
        self.drain_evicts() && !self.ended()
    }

    /// Whether it ended for a reason outside it, and a controller that replaces its pods
    /// (a ReplicaSet, StatefulSet or DaemonSet) made it: its node ran low on a resource and
    /// evicted it, rejected it on admission, shut down or was lost, or a pod of higher priority
    /// preempted it ([`NODE_ENDINGS`]). Such a pod is a record, not a failing replica: what its
    /// end says is about the node, which the node's conditions and events tell, and the
    /// replacement is judged as the workload's. A pod that overran its own limit (its
    /// ephemeral storage) or whose containers failed did not end by its node's doing. Whether
    /// the workload is healthy again asks more of an ended pod (the resolved finding's
    /// `ended_and_replaced`): that nothing was recorded about it for an hour, since a node
    /// that evicts each replacement in turn is the incident itself.
    pub fn outlived(&self) -> bool {
        let replaced = self.controller.as_ref().is_some_and(|(kind, _)| {
            matches!(kind.as_str(), "ReplicaSet" | "StatefulSet" | "DaemonSet")
        });
        let by_node = self.reason.as_ref().is_some_and(|(reason, message)| {
            let message = message.as_deref().unwrap_or_default();
            NODE_ENDINGS.contains(&reason.as_str())
                || (matches!(reason.as_str(), "Evicted" | "UnexpectedAdmissionError")
                    && NODE_EVICTIONS.iter().any(|m| message.contains(m))
                    && !message.contains(OVER_ITS_REQUEST))
        });
        self.phase == "Failed" && replaced && by_node
    }

    /// The template it was made from: its `pod-template-hash` (a ReplicaSet's), else its
    /// `controller-revision-hash` (a StatefulSet's or DaemonSet's).
    pub fn template(&self) -> Option<&String> {
        self.template_hash.as_ref().or(self.revision_hash.as_ref())
    }

    /// Whether `other`, another pod of the same workload, shows that this pod's template runs:
    /// it serves ([`Pod::serving`]) and was made from the same template ([`Pod::template`]; pods
    /// of a controller that labels neither hash have its one template). A failure such a sibling
    /// does not share is the pod's own, not its template's: the lone-failure rule proposes
    /// replacing the pod on it, and the deletion's proof holds it to it.
    pub fn template_runs_in(&self, other: &Pod) -> bool {
        other.name != self.name && other.serving() && other.template() == self.template()
    }

    /// A failure that keeps the pod from running at all: [`Pod::failure`] without
    /// [`FailureKind::NotReady`]. What proofs count as a failing pod.
    ///
    /// A pod being deleted is leaving: what it shows is history (the old revision's crash loop
    /// a rollout replaces), unless it has been terminating past [`TERMINATING_ALLOWANCE`]. So is
    /// a pod its node ended and its controller replaced ([`Pod::outlived`]).
    pub fn broken(&self) -> Option<Failure> {
        if self.outlived() {
            return None;
        }
        if self.deleting {
            return self
                .deleting_for
                .filter(|d| *d > Duration::seconds(TERMINATING_ALLOWANCE))
                .map(|d| {
                    Failure::new(
                        FailureKind::StuckTerminating,
                        format!("terminating for {}", ago(d)),
                    )
                });
        }
        if let Some(u) = &self.unschedulable {
            return Some(Failure::new(
                FailureKind::Unschedulable,
                format!("Pending, unschedulable: {u}"),
            ));
        }
        if let Some(d) = self.unplaced_for {
            let scheduler =
                str_at(&self.raw, &["spec", "schedulerName"]).unwrap_or("default-scheduler");
            return Some(Failure::new(
                FailureKind::Unschedulable,
                format!(
                    "Pending for {}: no scheduler has tried to place it (schedulerName {scheduler})",
                    ago(d)
                ),
            ));
        }
        for c in &self.containers {
            let what = if c.init {
                "init container"
            } else {
                "container"
            };
            if let Some(w) = &c.waiting
                && FAILING_WAITS.contains(&w.as_str())
            {
                let last = c
                    .terminated
                    .as_ref()
                    .map(|(r, code, _)| format!(", last exit {r} ({code})"))
                    .unwrap_or_default();
                return Some(
                    Failure::new(
                        FailureKind::CannotRun,
                        format!("{what} {} {w}, {} restarts{last}", c.name, c.restarts),
                    )
                    .because(&match (w.as_str(), &c.terminated) {
                        // The same crash as an exit caught before the restart: one cause.
                        ("CrashLoopBackOff", Some((r, _, _))) => format!("exited {r}"),
                        _ => w.clone(),
                    }),
                );
            }
            if let Some((reason, code)) = &c.exited
                && *code != 0
                && self.phase != "Succeeded"
            {
                return Some(
                    Failure::new(
                        FailureKind::Exited,
                        format!(
                            "{what} {} exited {reason} ({code}), {} restarts",
                            c.name, c.restarts
                        ),
                    )
                    .because(&format!("exited {reason}")),
                );
            }
        }
        if let Some(d) = self.stuck_creating {
            return Some(Failure::new(
                FailureKind::StuckCreating,
                format!("stuck creating its containers for {}", ago(d)),
            ));
        }
        if self.phase == "Failed" {
            let reason = self
                .reason
                .as_ref()
                .map(|(r, _)| format!(" ({r})"))
                .unwrap_or_default();
            return Some(Failure::new(
                FailureKind::PodFailed,
                format!("phase Failed{reason}"),
            ));
        }
        self.warned.as_ref().map(|(reason, msg)| {
            Failure::new(
                FailureKind::Warned,
                format!("starting, but {reason}: {msg}"),
            )
            .because(reason)
        })
    }

    /// How long the pod has not been ready, and whether that is past its start-up. What makes
    /// a failing pod worth replacing: the rules propose deleting one, and the delete's proof
    /// lets it, only past it.
    pub fn unready(&self, now: DateTime<Utc>) -> Unready {
        let since = if self.ready {
            None
        } else {
            self.ready_since.or(self.created)
        };
        let failing_for = since.map(|s| now - s);
        let restarts = self
            .containers
            .iter()
            .map(|c| c.restarts)
            .max()
            .unwrap_or(0);
        // A container that has restarted again and again is past its start-up, however
        // recently its Ready condition moved; so is one the kubelet backs off from restarting
        // after its starts failed twice (a start that fails is not a start that takes long).
        // A pod whose containers are still being created is past it only once the kubelet's
        // attach and mount retries are over ([`REPLACE_STUCK_CREATING_AFTER`]): before, waiting
        // may still end it, however long its start-up allowance.
        let backing_off = self.containers.iter().any(|c| {
            c.restarts >= BACKED_OFF_RESTARTS && c.waiting.as_deref() == Some("CrashLoopBackOff")
        });
        let allowance = self.startup_allowance();
        Unready {
            failing_for,
            restarts,
            allowance,
            past_startup: !self.deleting
                && failing_for.is_some_and(|d| match self.stuck_creating {
                    Some(stuck) => stuck > Duration::seconds(REPLACE_STUCK_CREATING_AFTER),
                    None => d > allowance || restarts >= PAST_STARTUP_RESTARTS || backing_off,
                }),
        }
    }

    /// When the pod started: its `startTime` (the kubelet took it), else its creation.
    pub fn start(&self) -> Option<DateTime<Utc>> {
        time(&self.raw, &["status", "startTime"]).or(self.created)
    }

    /// Whether the pod started, or one of its containers started again, at `t` or later: what
    /// reads its configuration only when it starts (environment, a `subPath` mount) has read
    /// it as it was then. The dependency graph asks it of a changed ConfigMap ("has any pod
    /// read it yet"), and the change finding of the failing pods ("did they read it").
    pub fn started_since(&self, t: DateTime<Utc>) -> bool {
        self.start().is_some_and(|c| c >= t)
            || self
                .containers
                .iter()
                .any(|c| c.started.is_some_and(|s| s >= t))
    }

    /// The containers whose logs show what is wrong with the pod, in its order (init containers
    /// first: a start ends at the first that fails): a container that waits for anything but
    /// its creation (a crash loop's back-off, a configuration error), that exited with an error,
    /// or that runs not ready. A container being created has no log yet; a ready one says
    /// nothing of the failure. The dependency graph and the offline evidence read these.
    pub fn failure_logs(&self) -> Vec<LogSource> {
        self.containers
            .iter()
            .filter(|c| {
                let waits = c
                    .waiting
                    .as_deref()
                    .is_some_and(|w| !matches!(w, "ContainerCreating" | "PodInitializing"));
                let exited = c.exited.as_ref().is_some_and(|(_, code)| *code != 0);
                waits || exited || (c.running && !c.ready)
            })
            .map(|c| LogSource {
                container: c.name.clone(),
                init: c.init,
                previous: c.restarts > 0,
            })
            .collect()
    }

    /// A container (init containers included) that waits with a reason its template gives it
    /// ([`TEMPLATE_WAITS`]), and the reason: a replacement pod meets it again. The rules do not
    /// propose replacing such a pod, and the delete's proof refuses it.
    pub fn template_wait(&self) -> Option<(&Container, &str)> {
        self.containers.iter().find_map(|c| {
            c.waiting
                .as_deref()
                .filter(|w| TEMPLATE_WAITS.contains(w))
                .map(|w| (c, w))
        })
    }

    /// What the scheduler said of a pod waiting for a node: placed on none, not being deleted,
    /// and its `PodScheduled` condition False (the scheduler tried and found no node). The
    /// scheduling facts, the taint, scale and autoscaler proofs ask it; a pod the scheduler has
    /// not looked at yet waits for nothing anyone can change.
    pub fn waiting_for_node(&self) -> Option<&str> {
        if self.node.is_some() || self.deleting {
            return None;
        }
        self.unschedulable.as_deref()
    }

    /// The host ports its containers bind ([`host_ports`]).
    pub fn host_ports(&self) -> Vec<(i64, String)> {
        at(&self.raw, &["spec"]).map(host_ports).unwrap_or_default()
    }

    /// Running and not ready since it started, within [`Pod::startup_allowance`]: a
    /// readiness probe's initial delay, a slow warm-up — starting, not failing, for the rules,
    /// the proofs and the undo alike. Known only of a pod observed at a moment ([`Pod::at`]);
    /// a pod read without one is never "starting".
    pub fn starting(&self) -> bool {
        self.never_ready
            .is_some_and(|d| d <= self.startup_allowance())
    }

    /// How long the pod may take to start: the largest budget of its containers' probes
    /// ([`Probe::budget`]: a startup probe, a readiness probe's initial delay and failures),
    /// and at least [`NEVER_READY_ALLOWANCE`]. The rules, the proofs and the undo ask it.
    pub fn startup_allowance(&self) -> Duration {
        let probes = array(&self.raw, &["spec", "containers"])
            .iter()
            .flat_map(|c| Probe::KINDS.iter().filter_map(|k| Probe::of(c, k)))
            .map(|p| p.budget());
        Duration::seconds(probes.fold(NEVER_READY_ALLOWANCE, i64::max))
    }

    /// Whether the pod is wedged: it runs but is not ready (or is still within its start-up),
    /// and nothing says it has not been ready since it started ([`Pod::was_ready`]). A fresh
    /// process of it may serve again; a pod never ready since it started shows how a fresh pod
    /// of its template starts, not a wedge. The restart proof asks it of the pods it would
    /// restart, and the dependency graph of the target's failing pods (a restart for a moved
    /// dependency).
    pub fn wedged(&self) -> bool {
        (self.running_not_ready() || self.starting()) && self.was_ready() != Some(false)
    }

    /// Running (not failing) but not ready, past starting.
    pub fn running_not_ready(&self) -> bool {
        self.failure()
            .is_some_and(|f| f.kind == FailureKind::NotReady)
    }

    /// A container whose latest termination was an OOM kill, as the kubelet reports it
    /// (`OOMKilled`), with when it finished.
    pub fn oom_killed(&self) -> impl Iterator<Item = (&Container, Option<DateTime<Utc>>)> {
        self.containers.iter().filter_map(|c| match &c.terminated {
            Some((r, _, t)) if r == "OOMKilled" => Some((c, *t)),
            _ => None,
        })
    }

    /// Its containers killed for memory, with when they finished: those the kubelet reports
    /// `OOMKilled`, and those that exited with [`SIGKILL_EXIT`] while a warning about the pod
    /// says the kernel killed for memory ([`OOM_KILL_EVENT`]): some runtimes report such a
    /// kill as a plain `Error`. The OOM rule and the memory proof both ask this.
    pub fn memory_kills(&self, events: &[Event]) -> Vec<(&Container, Option<DateTime<Utc>>)> {
        let kernel_said = events
            .iter()
            .any(|e| e.warning && e.reason == OOM_KILL_EVENT && e.name == self.name);
        self.containers
            .iter()
            .filter_map(|c| match &c.terminated {
                Some((r, _, t)) if r == "OOMKilled" => Some((c, *t)),
                Some((_, code, t)) if *code == SIGKILL_EXIT && kernel_said => Some((c, *t)),
                _ => None,
            })
            .collect()
    }

    /// Its containers killed for memory ([`Self::memory_kills`]) within
    /// [`MEMORY_KILL_LOOKBACK_HOURS`] of `now`, or at an unrecorded time. The OOM rule and the
    /// memory proof both ask this.
    pub fn recent_memory_kills(
        &self,
        events: &[Event],
        now: DateTime<Utc>,
    ) -> Vec<(&Container, Option<DateTime<Utc>>)> {
        let since = now - Duration::hours(MEMORY_KILL_LOOKBACK_HOURS);
        self.memory_kills(events)
            .into_iter()
            .filter(|(_, t)| t.is_none_or(|t| t >= since))
            .collect()
    }
}

#[cfg(test)]
mod tests;
