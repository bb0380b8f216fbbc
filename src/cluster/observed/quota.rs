//! A namespace's ResourceQuotas: how much room they leave for a resource.

use serde_json::Value;

use crate::cluster::obj::{self, at, str_at};
use crate::cluster::quantity;

/// The quota that leaves the least room for one resource (`limits.memory`, `pods`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRoom {
    /// The ResourceQuota's name.
    pub name: String,
    pub hard: u128,
    pub used: u128,
    /// `hard` and `used` as the quota writes them.
    pub hard_text: String,
    pub used_text: String,
}

impl QuotaRoom {
    /// The room a quota named `name` leaves for `resource`, from its `hard` and `used` as
    /// written (the enrichment's detected labels carry them so). `None` when `hard` does not
    /// parse.
    pub fn written(name: &str, resource: &str, hard: &str, used: &str) -> Option<Self> {
        let base = resource
            .trim_start_matches("limits.")
            .trim_start_matches("requests.");
        Some(Self {
            name: name.to_owned(),
            hard: quantity::amount(base, hard)?,
            used: quantity::amount(base, used).unwrap_or(0),
            hard_text: hard.to_owned(),
            used_text: used.to_owned(),
        })
    }

    /// Whether `more` fits beside what is used.
    pub fn fits(&self, more: u128) -> bool {
        self.used.saturating_add(more) <= self.hard
    }

    /// Whether nothing more fits: what is used reached what is allowed, in quantities, not
    /// spellings (`1024Mi` of `1Gi` is used up).
    pub fn used_up(&self) -> bool {
        !self.fits(1)
    }
}

/// The quota of `quotas` that leaves the least room for `resource`: every quota of a namespace
/// applies, so the tightest decides (`status.hard`, else `spec.hard`; nothing used when the
/// quota's status does not say). `None` when no quota limits it in a quantity that parses.
/// The enrichment's detected labels, the offline rules and the proofs all read this one.
pub fn tightest(quotas: &[Value], resource: &str) -> Option<QuotaRoom> {
    let mut best: Option<QuotaRoom> = None;
    for q in quotas {
        let Some(hard_text) = str_at(q, &["status", "hard", resource])
            .or_else(|| str_at(q, &["spec", "hard", resource]))
        else {
            continue;
        };
        let used_text = str_at(q, &["status", "used", resource]).unwrap_or("0");
        let Some(room) = QuotaRoom::written(obj::name(q), resource, hard_text, used_text) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|b| room.hard.saturating_sub(room.used) < b.hard.saturating_sub(b.used))
        {
            best = Some(room);
        }
    }
    best
}

/// Every resource some quota of `quotas` limits.
pub fn limited(quotas: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = quotas
        .iter()
        .flat_map(|q| {
            obj::map_pairs(at(q, &["status", "hard"]).or_else(|| at(q, &["spec", "hard"])))
                .map(|(k, _)| k.to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn quota(name: &str, hard: &str, used: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"hard": {"limits.memory": hard, "pods": "10"}},
            "status": {"hard": {"limits.memory": hard, "pods": "10"},
                "used": {"limits.memory": used, "pods": "4"}}})
    }

    #[test]
    fn the_quota_with_the_least_room_decides() {
        let quotas = [quota("team", "8Gi", "2Gi"), quota("tight", "4Gi", "3Gi")];
        let room = tightest(&quotas, "limits.memory").unwrap_or_else(|| panic!("a quota"));
        assert_eq!(room.name, "tight");
        assert_eq!(
            (room.hard_text.as_str(), room.used_text.as_str()),
            ("4Gi", "3Gi")
        );
        assert!(room.fits(1 << 30));
        assert!(!room.fits((1 << 30) + 1));
        // In either order.
        let quotas = [quota("tight", "4Gi", "3Gi"), quota("team", "8Gi", "2Gi")];
        assert_eq!(
            tightest(&quotas, "limits.memory").map(|r| r.name),
            Some("tight".into())
        );
        assert_eq!(tightest(&quotas, "limits.cpu"), None);
        assert_eq!(limited(&quotas), ["limits.memory", "pods"]);
    }

    /// Issue 43: "used up" compares quantities (the graph once compared the spellings, and
    /// missed `1024Mi` of `1Gi`); a quota lowered below its use is used up too.
    #[test]
    fn a_quota_is_used_up_by_quantity_not_by_spelling() {
        let up = |resource: &str, hard: &str, used: &str| {
            QuotaRoom::written("q", resource, hard, used).map(|q| q.used_up())
        };
        assert_eq!(up("limits.memory", "1Gi", "1024Mi"), Some(true));
        assert_eq!(up("limits.memory", "1Gi", "512Mi"), Some(false));
        assert_eq!(up("requests.cpu", "2", "2500m"), Some(true));
        assert_eq!(up("pods", "10", "10"), Some(true));
        assert_eq!(up("count/deployments.apps", "5", "4"), Some(false));
    }
}
