//! A PersistentVolumeClaim and the StorageClass it names: its phase, its size as requested and
//! as provisioned, whether a resize is under way and whether its class lets it grow, read once
//! for the predicted-fill rule and the proof of expanding a claim.

use serde_json::Value;

use crate::cluster::obj::{self, array, at, str_at};
use crate::cluster::quantity;

/// A claim, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub name: String,
    /// `status.phase` (`Bound`, `Pending`, `Lost`); `None` when unreported.
    pub phase: Option<String>,
    /// `spec.storageClassName`; `None` when it names none.
    pub class: Option<String>,
    /// `spec.resources.requests.storage`; empty when unknown. Above the capacity while an
    /// expansion is under way.
    pub requested: String,
    /// `status.capacity.storage`, or the request while none is reported (unbound); empty when
    /// neither is known.
    pub capacity: String,
    /// The types of its conditions that are True (`Resizing`, `FileSystemResizePending`: a
    /// claim's conditions report a change of its volume under way).
    pub resizing: Vec<String>,
}

impl Claim {
    /// The claim as far as it can be read: a field of another shape reads as not given.
    pub fn parse(c: &Value) -> Self {
        let requested = str_at(c, &["spec", "resources", "requests", "storage"])
            .unwrap_or_default()
            .to_owned();
        Self {
            name: obj::name(c).to_owned(),
            phase: str_at(c, &["status", "phase"]).map(str::to_owned),
            class: str_at(c, &["spec", "storageClassName"]).map(str::to_owned),
            capacity: str_at(c, &["status", "capacity", "storage"])
                .map_or_else(|| requested.clone(), str::to_owned),
            requested,
            resizing: array(c, &["status", "conditions"])
                .iter()
                .filter(|c| str_at(c, &["status"]) == Some("True"))
                .filter_map(|c| str_at(c, &["type"]).map(str::to_owned))
                .collect(),
        }
    }

    /// The claim, or `None` when a field it reads has another shape than the API's (a
    /// malformed object is left out, not read in part: what the offline evidence wants).
    pub fn read(c: &Value) -> Option<Self> {
        well_formed(c).then(|| Self::parse(c))
    }

    /// Whether it is bound to a volume (`Bound`): what verification, the "resolved" proof, the
    /// expansion's proof and the graph call a healthy claim.
    pub fn bound(&self) -> bool {
        self.phase.as_deref() == Some("Bound")
    }

    /// Whether a change of its volume is under way: it requests more than its volume holds
    /// ([`Claim::growing`]), or a condition says so (`Resizing`, `FileSystemResizePending`).
    /// The predicted-fill rule reads a forecast made on the smaller volume as moot then, and
    /// the expansion's proof refuses another resize on top.
    pub fn resize_under_way(&self) -> bool {
        self.growing() || !self.resizing.is_empty()
    }

    /// Its size now, in bytes: the larger of what it requests and what its volume holds (a
    /// provisioner may round a volume up). What a new size must exceed, and is bounded by.
    pub fn size_now(&self) -> Option<u128> {
        [&self.requested, &self.capacity]
            .into_iter()
            .filter_map(|q| quantity::memory_bytes(q))
            .max()
    }

    /// Whether it is growing: it requests more than its volume holds (both sizes known).
    pub fn growing(&self) -> bool {
        match (
            quantity::memory_bytes(&self.requested),
            quantity::memory_bytes(&self.capacity),
        ) {
            (Some(r), Some(c)) => r > c,
            _ => false,
        }
    }
}

/// Whether every field [`Claim::parse`] reads, when present, has the shape the API gives it: an
/// object where one belongs, a string for a name or a phase, a quantity (a string, or a number
/// as Kubernetes' quantities accept) for each resource. A numeric quantity passes here but is
/// not read: the API server always writes quantities as strings.
fn well_formed(c: &Value) -> bool {
    // `null` is as good as absent.
    fn given<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
        at(v, path).filter(|v| !v.is_null())
    }
    let shaped = |path: &[&str], is: fn(&Value) -> bool| given(c, path).is_none_or(is);
    let quantities = |v: &Value| {
        v.as_object()
            .is_some_and(|m| m.values().all(|q| q.is_string() || q.is_number()))
    };
    shaped(&["metadata"], Value::is_object)
        && shaped(&["metadata", "name"], Value::is_string)
        && shaped(&["spec"], Value::is_object)
        && shaped(&["spec", "storageClassName"], Value::is_string)
        && shaped(&["spec", "resources"], Value::is_object)
        && shaped(&["spec", "resources", "requests"], quantities)
        && shaped(&["spec", "resources", "limits"], quantities)
        && shaped(&["status"], Value::is_object)
        && shaped(&["status", "phase"], Value::is_string)
        && shaped(&["status", "capacity"], quantities)
        && shaped(&["status", "conditions"], Value::is_array)
        && array(c, &["status", "conditions"]).iter().all(|cond| {
            cond.is_object()
                && given(cond, &["type"]).is_none_or(Value::is_string)
                && given(cond, &["status"]).is_none_or(Value::is_string)
        })
}

/// A StorageClass, as far as a claim's growth depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClass {
    pub name: String,
    /// `allowVolumeExpansion`, as written (`None` when unset: no expansion). Asked through
    /// [`StorageClass::expands`] only.
    allow_expansion: Option<bool>,
}

impl StorageClass {
    pub fn parse(sc: &Value) -> Self {
        Self {
            name: obj::name(sc).to_owned(),
            allow_expansion: at(sc, &["allowVolumeExpansion"]).and_then(Value::as_bool),
        }
    }

    /// Whether its volumes may be expanded: only when it says so.
    pub fn expands(&self) -> bool {
        self.allow_expansion == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_claim_being_expanded_requests_more_than_its_capacity() {
        let c = Claim::read(&json!({
            "metadata": {"name": "data"},
            "spec": {"storageClassName": "standard",
                "resources": {"requests": {"storage": "20Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                "conditions": [{"type": "FileSystemResizePending", "status": "True"},
                    {"type": "Resizing", "status": "False"}]}}))
        .unwrap();
        assert_eq!(
            (c.requested.as_str(), c.capacity.as_str()),
            ("20Gi", "10Gi")
        );
        assert_eq!(
            (c.phase.as_deref(), c.class.as_deref()),
            (Some("Bound"), Some("standard"))
        );
        assert_eq!(c.resizing, vec!["FileSystemResizePending".to_owned()]);
        assert!(c.growing() && c.resize_under_way());
        assert_eq!(c.size_now(), Some(20 << 30));
    }

    #[test]
    fn a_volume_rounded_up_is_as_large_as_it_holds_and_a_condition_alone_says_a_resize() {
        let c = Claim::parse(&json!({
            "spec": {"resources": {"requests": {"storage": "10Gi"}}},
            "status": {"capacity": {"storage": "12Gi"}}}));
        assert_eq!(c.size_now(), Some(12 << 30));
        assert!(!c.resize_under_way());
        let mut raw = json!({
            "spec": {"resources": {"requests": {"storage": "12Gi"}}},
            "status": {"capacity": {"storage": "12Gi"},
                "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}});
        assert!(!Claim::parse(&raw).growing());
        assert!(Claim::parse(&raw).resize_under_way());
        raw["status"]["conditions"][0]["status"] = json!("False");
        assert!(!Claim::parse(&raw).resize_under_way());
    }

    #[test]
    fn an_unbound_claim_has_its_request_for_capacity() {
        let c = Claim::parse(&json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}}));
        assert!(!c.growing());
        assert_eq!((c.capacity.as_str(), c.phase, c.class), ("5Gi", None, None));
    }

    #[test]
    fn a_malformed_claim_is_read_in_part_or_left_out() {
        let malformed = json!({"metadata": {"name": "data"}, "spec": {"resources": "10Gi"}});
        assert!(Claim::read(&malformed).is_none());
        let c = Claim::parse(&malformed);
        assert_eq!((c.name.as_str(), c.requested.as_str()), ("data", ""));
    }

    #[test]
    fn a_class_expands_only_when_it_says_so() {
        let sc = |allow: Value| StorageClass::parse(&json!({"allowVolumeExpansion": allow}));
        assert!(sc(json!(true)).expands());
        assert!(!sc(json!(false)).expands());
        assert!(!sc(json!("true")).expands());
        assert!(!StorageClass::parse(&json!({})).expands());
    }
}
