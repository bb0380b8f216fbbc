//! What a container's log says it failed on, read against what the pod mounts where: the one
//! reading of "this pod fails on state of its own" that the rules and the proofs share.
//!
//! A container restart keeps the pod's emptyDir volumes; a new pod starts with empty ones. When
//! the error a start ended on names a path inside an emptyDir (a lock, pid or socket file, a
//! half-written cache) and no path of the configuration the pod reads, what fails is state the
//! pod keeps, and a replacement starts without it.

use std::sync::LazyLock;

use regex::Regex;

use super::Pod;
use crate::cluster::obj::{array, at, str_at};

static ERROR_WORDS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(panic|fatal|error|exception|failed|refused|cannot|missing)").ok()
});

/// The last error-looking line of a log, trimmed: what the process said before it ended.
pub fn error_line(log: &str) -> Option<&str> {
    let re = ERROR_WORDS.as_ref()?;
    log.lines()
        .rev()
        .find(|l| re.is_match(l))
        .map(str::trim)
        .filter(|l| !l.is_empty())
}

/// A path in one of a container's emptyDir volumes that the error its last start ended on
/// names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptState {
    /// The emptyDir volume.
    pub volume: String,
    /// The path the error names, inside that volume's mount.
    pub path: String,
    /// The error line, at most 200 characters.
    pub line: String,
}

/// Where a container mounts a volume, and whether the volume is an emptyDir.
struct Mount {
    volume: String,
    path: String,
    empty_dir: bool,
}

impl Pod {
    /// The state of its own that container `container` fails on, as its log (`log`, the
    /// previous instance's when it restarted) names it: the last error line names a path in
    /// one of its emptyDir mounts and none in another volume (a ConfigMap, a Secret, a claim:
    /// what a replacement reads alike). `None` when the log names no such path.
    pub fn kept_state_named(&self, container: &str, log: &str) -> Option<KeptState> {
        let line = error_line(log)?;
        let mounts = self.mounts(container);
        let named: Vec<(&Mount, String)> = mounts
            .iter()
            .filter_map(|m| path_under(line, &m.path).map(|p| (m, p)))
            .collect();
        if named.iter().any(|(m, _)| !m.empty_dir) {
            return None;
        }
        let (m, path) = named.into_iter().next()?;
        Some(KeptState {
            volume: m.volume.clone(),
            path,
            line: line.chars().take(200).collect(),
        })
    }

    /// The volumes that live and die with the pod (emptyDir, generic ephemeral) container
    /// `container` mounts (a sidecar's do not keep the container's own state), by name.
    pub fn empty_dirs_of(&self, container: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .mounts(container)
            .into_iter()
            .filter(|m| m.empty_dir)
            .map(|m| m.volume)
            .collect();
        names.dedup();
        names
    }

    fn mounts(&self, container: &str) -> Vec<Mount> {
        let spec = at(&self.raw, &["spec"]);
        let volumes = spec.map(|s| array(s, &["volumes"])).unwrap_or_default();
        let containers = spec.map(|s| array(s, &["containers"])).unwrap_or_default();
        let Some(c) = containers
            .iter()
            .find(|c| str_at(c, &["name"]) == Some(container))
        else {
            return vec![];
        };
        array(c, &["volumeMounts"])
            .iter()
            .filter_map(|m| {
                let volume = str_at(m, &["name"])?;
                let path = str_at(m, &["mountPath"])?.trim_end_matches('/');
                if path.is_empty() {
                    return None;
                }
                // A volume that lives and dies with the pod: an emptyDir, or a generic ephemeral
                // volume (its claim is made for the pod and deleted with it).
                let empty_dir = volumes.iter().any(|v| {
                    str_at(v, &["name"]) == Some(volume)
                        && (at(v, &["emptyDir"]).is_some() || at(v, &["ephemeral"]).is_some())
                });
                Some(Mount {
                    volume: volume.to_owned(),
                    path: path.to_owned(),
                    empty_dir,
                })
            })
            .collect()
    }
}

/// The first word of `line` that is `mount` or a path below it (`/var/lib/app/app.lock:` under
/// `/var/lib/app`), without trailing punctuation.
fn path_under(line: &str, mount: &str) -> Option<String> {
    line.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '`' | '(' | ')' | '[' | ']' | '<' | '>' | ',' | ';' | '='
            )
    })
    .map(|w| w.trim_end_matches([':', '.']))
    .find(|w| {
        *w == mount
            || w.strip_prefix(mount)
                .is_some_and(|rest| rest.starts_with('/'))
    })
    .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Pod {
        Pod::parse(&json!({
            "metadata": {"name": "sched-1"},
            "spec": {
                "containers": [{"name": "sched", "volumeMounts": [
                    {"name": "state", "mountPath": "/var/lib/sched"},
                    {"name": "conf", "mountPath": "/etc/sched/"},
                    {"name": "data", "mountPath": "/data"}]}],
                "volumes": [
                    {"name": "state", "emptyDir": {}},
                    {"name": "conf", "configMap": {"name": "sched-conf"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]},
        }))
    }

    fn named(log: &str) -> Option<(String, String)> {
        pod()
            .kept_state_named("sched", log)
            .map(|k| (k.volume, k.path))
    }

    /// Issue 43: a generic ephemeral volume lives and dies with the pod, as an emptyDir does:
    /// a file in it is state a replacement does not inherit.
    #[test]
    fn a_file_in_a_generic_ephemeral_volume_is_state_the_pod_keeps() {
        let mut p = pod();
        p.raw["spec"]["volumes"][0] =
            json!({"name": "state", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}});
        assert_eq!(
            p.kept_state_named("sched", "FATAL: lock /var/lib/sched/sched.lock held")
                .map(|k| k.volume),
            Some("state".into())
        );
        assert_eq!(p.empty_dirs_of("sched"), vec!["state".to_owned()]);
    }

    #[test]
    fn an_error_naming_a_file_in_an_emptydir_is_state_the_pod_keeps() {
        let log = "starting\nFATAL: cannot acquire lock /var/lib/sched/sched.lock: held by sched-1 pid=1\n";
        assert_eq!(
            named(log),
            Some(("state".into(), "/var/lib/sched/sched.lock".into()))
        );
        assert_eq!(
            named("error: pid file '/var/lib/sched/run.pid' exists"),
            Some(("state".into(), "/var/lib/sched/run.pid".into()))
        );
    }

    #[test]
    fn an_error_naming_configuration_or_a_claim_is_not() {
        // The configuration a replacement reads alike.
        assert_eq!(
            named("FATAL: cannot parse /etc/sched/schedules.yaml: line 3"),
            None
        );
        // Both: it may fail on either.
        assert_eq!(
            named("error: /etc/sched/a.yaml lists a job /var/lib/sched/jobs/x that is missing"),
            None
        );
        // A claim survives a new pod too.
        assert_eq!(named("FATAL: database /data/db.sqlite is corrupt"), None);
        // A path that only starts like the mount.
        assert_eq!(named("error: cannot open /var/lib/schedule/x"), None);
    }

    #[test]
    fn only_the_last_error_counts_and_only_the_container_s_own_mounts() {
        // An earlier error about the emptyDir, then the one the start ended on.
        let log = "warning: removed stale /var/lib/sched/tmp\nFATAL: cannot connect to db:5432: connection refused";
        assert_eq!(named(log), None);
        assert_eq!(
            pod().kept_state_named("other", "FATAL: /var/lib/sched/x.lock exists"),
            None
        );
        assert_eq!(named("all good"), None);
    }
}
