//! Whether a pod's failure is its own, so that a new pod from the same template starts clean:
//! the question behind deleting one pod. The rules ask it before they propose the deletion
//! (whichever rule found the pod: one stuck creating, one failing among serving siblings, the
//! only replica failing on state it keeps), the deletion's proof before it allows one: one
//! answer, so a rule never proposes a replacement the proof then refuses for the pod's own
//! failure.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{StateKept, configmaps, hhmm, moved_image, read_only_by};
use crate::cluster::observed::Pod;

/// The pod to be replaced, and what shows whether its replacement starts clean.
pub struct Replacement<'a> {
    pub pod: &'a Pod,
    /// The workload's other pods, not those already leaving.
    pub siblings: Vec<&'a Pod>,
    /// It is the only replica (`spec.replicas` 1, no sibling): nothing shows its template runs
    /// but the state it keeps.
    pub only: bool,
    /// The state the only replica's failing starts keep, which a new pod starts without
    /// ([`super::state_kept`]).
    pub kept: Option<&'a StateKept>,
}

impl<'a> Replacement<'a> {
    /// `pod` among the workload's `pods` (itself included); `replicas` the workload's
    /// `spec.replicas`.
    pub fn of(
        pod: &'a Pod,
        pods: impl IntoIterator<Item = &'a Pod>,
        replicas: Option<i64>,
        kept: Option<&'a StateKept>,
    ) -> Self {
        let siblings: Vec<&Pod> = pods
            .into_iter()
            .filter(|p| p.name != pod.name && !p.deleting)
            .collect();
        let only = siblings.is_empty() && replicas == Some(1);
        Self {
            pod,
            siblings,
            only,
            kept: kept.filter(|_| only),
        }
    }

    fn ready(&self) -> Vec<&'a Pod> {
        self.siblings.iter().copied().filter(|p| p.ready).collect()
    }

    /// Whether something keeps serving while it is replaced: a sibling is ready, or, for the
    /// only replica failing on state it keeps, it serves nothing now. `Ok` or `Err` with the
    /// line that shows it.
    pub fn sibling_ready(&self) -> Result<String, String> {
        if self.kept.is_some() {
            return Ok(format!(
                "pod {} is the only replica (spec.replicas 1) and serves nothing now: deleting it takes nothing away that runs",
                self.pod.name
            ));
        }
        let line = format!(
            "{} of {} sibling pod(s) ready",
            self.ready().len(),
            self.siblings.len()
        );
        if self.ready().is_empty() {
            Err(line)
        } else {
            Ok(line)
        }
    }

    /// The siblings not ready with the same failure ([`Pod::failure`]'s cause: a crash caught
    /// between restarts and one backing off are the same), or, when the pod shows none, not
    /// ready at all: a failure they share is not the pod's own.
    pub fn sharing(&self) -> Vec<&'a Pod> {
        let cause = |p: &Pod| p.failure().map(|f| f.cause);
        let mine = cause(self.pod);
        self.siblings
            .iter()
            .copied()
            .filter(|p| !p.ready && (mine.is_none() || cause(p) == mine))
            .collect()
    }

    /// Why the failure comes with the template, if it does: a replacement is made from the
    /// same template (its ReplicaSet's, its revision's) and fails alike. The only replica has
    /// no sibling to show its template runs, so only the state it keeps shows its failure its
    /// own; a container that waits on its image or configuration ([`Pod::template_wait`]), a
    /// tag that moved since the serving siblings pulled it ([`moved_image`]), or a template no
    /// serving sibling runs ([`Pod::template_runs_in`]) fails a replacement too. `Ok` with the
    /// lines that show it does not.
    pub fn template_fails(&self) -> Result<Vec<String>, String> {
        let pod = self.pod;
        if let Some(k) = self.kept {
            return Ok(k.evidence.clone());
        }
        if self.only {
            return Err(format!(
                "pod {} is the only replica: no sibling shows its template runs, and nothing shows its failure is state of its own (an error naming a path in its emptyDir, a kill it never recovered from)",
                pod.name
            ));
        }
        if let Some((c, why)) = pod.template_wait() {
            return Err(format!(
                "container {} of pod {} waits with {why}: its image or configuration is what fails, and a replacement reads the same",
                c.name, pod.name
            ));
        }
        let serving: Vec<&Pod> = self
            .siblings
            .iter()
            .copied()
            .filter(|p| p.serving())
            .collect();
        if let Some(moved) = moved_image(pod, &serving) {
            return Err(moved);
        }
        let runs = serving.iter().filter(|p| pod.template_runs_in(p)).count();
        match pod.template() {
            Some(h) if !serving.is_empty() && runs == 0 => Err(format!(
                "no ready sibling runs the template of pod {} ({h}); the ready ones run {}: its replacement is made from {h} again",
                pod.name,
                serving
                    .iter()
                    .filter_map(|p| p.template())
                    .map(String::as_str)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => Ok(vec![format!(
                "{runs} ready sibling(s) run the template of pod {}",
                pod.name
            )]),
        }
    }

    /// Whether configuration the replacement reads changed between its ready siblings and it,
    /// from when each ConfigMap its template reads was last written (`written`, by name;
    /// those not known are passed over). A replacement reads them as they are now: when the
    /// pod has read a change its ready siblings have not ([`read_only_by`]), they run the old
    /// configuration and the pod the new one, and the replacement fails like the pod.
    ///
    /// The only pod whose failing starts name state of its own is the exception: its
    /// restarting containers read the changed configuration too, and what they fail on is the
    /// state a new pod starts without. `Ok` or `Err` with the lines that show it.
    pub fn config_changed(
        &self,
        written: impl Fn(&str) -> Option<DateTime<Utc>>,
    ) -> Result<Vec<String>, Vec<String>> {
        let pod = self.pod;
        let ready = self.ready();
        if !self.siblings.is_empty() && ready.is_empty() {
            return Ok(vec![
                "no ready sibling started before it to compare with".into(),
            ]);
        }
        let mut changed = Vec::new();
        let mut read = Vec::new();
        for name in configmaps(&pod.raw) {
            match written(&name) {
                Some(t) if read_only_by(pod, &ready, t) && ready.is_empty() => changed.push(format!(
                    "ConfigMap {name} changed at {}, after pod {} started ({}): its restarting containers and its replacement read it as it is now",
                    hhmm(t),
                    pod.name,
                    pod.start().map(hhmm).unwrap_or_default()
                )),
                Some(t) if read_only_by(pod, &ready, t) => changed.push(format!(
                    "ConfigMap {name} changed at {}; pod {} read it since (it or a container started again after that) and none of its {} ready sibling(s) has: its replacement reads it as it is now",
                    hhmm(t),
                    pod.name,
                    ready.len()
                )),
                Some(_) => read.push(name),
                None => {}
            }
        }
        if changed.is_empty() {
            return Ok(vec![if read.is_empty() {
                "its template reads no ConfigMap".to_owned()
            } else {
                format!("unchanged since its siblings started: {}", read.join(", "))
            }]);
        }
        match self.kept.and_then(|k| k.named.as_ref()) {
            Some(k) if self.siblings.is_empty() => {
                changed.push(format!(
                    "its failing starts read that configuration already, and the error they end on names {} in its emptyDir volume {}, not it",
                    k.path, k.volume
                ));
                Ok(changed)
            }
            _ => Err(changed),
        }
    }
}
