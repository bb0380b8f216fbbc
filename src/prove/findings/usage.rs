//! What a container may use now, and how close its use is to it.

use crate::cluster::observed::PodSpec;

/// From what share of its limit a container's use counts as near it, in percent: close enough
/// that a growing workload reaches it within a prediction's horizon, or that replicas running
/// this hot leave no room for a burst. The memory prediction rule and the memory proof ask it
/// of a limit; the scale proof of the CPU the ready pods request.
pub const NEAR_LIMIT_PERCENT: u128 = 80;

/// Whether `used` is at [`NEAR_LIMIT_PERCENT`] of `limit` or more (a zero limit: any use is).
pub fn near_limit(used: u128, limit: u128) -> bool {
    used.saturating_mul(100) >= limit.saturating_mul(NEAR_LIMIT_PERCENT)
}

/// The most one step may multiply a limit or a claim's size by: a larger step is no longer a
/// correction of a value that was too small but a new sizing, a human's to decide. The rules
/// propose well inside it, and the raise's and the expansion's proofs
/// hold every proposal to it ([`bounded_step`]).
pub const MAX_STEP_FACTOR: u128 = 4;

/// Whether `new` is a step up from `old` of at most [`MAX_STEP_FACTOR`].
pub fn bounded_step(old: u128, new: u128) -> bool {
    new > old && new <= old.saturating_mul(MAX_STEP_FACTOR)
}

/// The size a claim of `bytes` is grown to when it is filling: half again, in whole Gi where
/// that stays a bounded step ([`bounded_step`], which `pvc.grows-bounded` asks), else in whole
/// Mi (a claim of a few hundred Mi, whose next whole Gi would be a leap).
pub fn grown_claim_size(bytes: u128) -> String {
    let grown = bytes.saturating_mul(3).div_ceil(2);
    let gi = 1024u128.pow(3);
    if bounded_step(bytes, grown.div_ceil(gi) * gi) {
        crate::cluster::quantity::format_gi(grown)
    } else {
        crate::cluster::quantity::format_mi(grown)
    }
}

/// From what share of its CPU limit a container's measured use counts as throttled, in percent:
/// the metrics API averages use over its window, and a container whose average is this close to
/// its quota spends most periods at it (the kernel throttles within each 100 ms period, long
/// before the average reaches the limit).
pub const THROTTLED_USE_PERCENT: u128 = 90;

/// Whether a container's measured CPU use says it is throttled at `limit`
/// ([`THROTTLED_USE_PERCENT`]).
pub fn throttled_use(used: u128, limit: u128) -> bool {
    used.saturating_mul(100) >= limit.saturating_mul(THROTTLED_USE_PERCENT)
}

/// Whether an alert is about CPU throttling (`CPUThrottlingHigh`, `ContainerCpuThrottled`…),
/// whatever its case: the evidence reads usage for it, the throttling rule and the raise's
/// proof ask which container it is about ([`throttling_alert_about`]).
pub fn is_throttling_alert(alert: &str) -> bool {
    alert.to_ascii_lowercase().contains("throttl")
}

/// Whether an alert is a throttling alert and which container it is about: the one it names,
/// else the only container of `containers` (the pod template's). `None` for another alert, and
/// for a throttling alert that names no container about pods that run several: which one is
/// throttled is not known. The throttling rule proposes a raise for it and the raise's proof
/// takes the alert's word for it.
pub fn throttling_alert_about<'a>(
    alert: &str,
    named: Option<&'a str>,
    containers: &[&'a str],
) -> Option<&'a str> {
    if !is_throttling_alert(alert) {
        return None;
    }
    match (named, containers) {
        (Some(c), _) => Some(c),
        (None, [only]) => Some(only),
        (None, _) => None,
    }
}

/// A container's limit of `resource` now: what its pods run with (a LimitRange's default is
/// written into the pod, not the template), the first pod that names it, else the template's.
/// A template edited but not rolled out yet has one limit and its pods another: the pods'
/// is the one their kills and their use were measured against. The rules propose a raise from
/// it and the raise's proof bounds the raise by it.
pub fn limit_now<'a>(
    template: &'a PodSpec,
    pods: &'a [PodSpec],
    container: &str,
    resource: &str,
) -> Option<&'a str> {
    pods.iter()
        .find_map(|p| p.limit(container, resource))
        .or_else(|| template.limit(container, resource))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_claim_grows_by_half_in_a_step_its_proof_allows() {
        use crate::cluster::quantity::memory_bytes;
        let gi = 1024u128.pow(3);
        assert_eq!(grown_claim_size(10 * gi), "15Gi");
        assert_eq!(grown_claim_size(gi), "2Gi");
        // 100Mi: the next whole Gi would be ten times as much.
        assert_eq!(grown_claim_size(100 * 1024 * 1024), "150Mi");
        for size in [
            1u128 << 20,
            100 << 20,
            255 << 20,
            256 << 20,
            700 << 20,
            gi,
            3 * gi,
            1000 * gi,
        ] {
            let grown = memory_bytes(&grown_claim_size(size)).unwrap();
            assert!(bounded_step(size, grown), "{size} → {grown}");
        }
    }

    use super::*;

    #[test]
    fn a_bounded_step_goes_up_by_at_most_four_times() {
        assert!(bounded_step(100, 150));
        assert!(bounded_step(100, 400));
        assert!(!bounded_step(100, 401));
        assert!(!bounded_step(100, 100));
        assert!(!bounded_step(100, 50));
    }

    #[test]
    fn four_fifths_of_the_limit_is_near_it() {
        assert!(near_limit(800, 1000));
        assert!(!near_limit(799, 1000));
        assert!(near_limit(1, 0));
        assert!(near_limit(0, 0));
        // A limit that does not parse is read as unbounded: nothing is near it.
        assert!(!near_limit(1 << 40, u128::MAX));
    }

    #[test]
    fn a_throttling_alert_is_about_the_container_it_names_or_the_only_one() {
        let about = throttling_alert_about;
        assert_eq!(
            about("CPUThrottlingHigh", Some("app"), &["app", "proxy"]),
            Some("app")
        );
        assert_eq!(about("CPUThrottlingHigh", None, &["app"]), Some("app"));
        assert_eq!(about("CPUThrottlingHigh", None, &["app", "proxy"]), None);
        assert_eq!(about("KubePodCrashLooping", Some("app"), &["app"]), None);
        assert!(throttled_use(900, 1000) && !throttled_use(899, 1000));
    }

    #[test]
    fn the_limit_now_is_the_pods_before_the_template() {
        let spec = |limit: Option<&str>| {
            PodSpec::parse(&serde_json::json!({"initContainers": [{"name": "init"}],
                "containers": [{"name": "app",
                "resources": limit.map_or(serde_json::json!({}), |l| serde_json::json!({"limits": {"memory": l}}))}]}))
        };
        // A LimitRange's default in the pods, none in the template.
        let pods = [spec(Some("512Mi"))];
        assert_eq!(
            limit_now(&spec(None), &pods, "app", "memory"),
            Some("512Mi")
        );
        // A template edited, not rolled out: what the pods run.
        assert_eq!(
            limit_now(&spec(Some("1Gi")), &pods, "app", "memory"),
            Some("512Mi")
        );
        // No pods: the template's.
        assert_eq!(
            limit_now(&spec(Some("1Gi")), &[], "app", "memory"),
            Some("1Gi")
        );
        assert_eq!(limit_now(&spec(None), &[], "app", "memory"), None);
        assert_eq!(limit_now(&spec(None), &[], "init", "memory"), None);
    }
}
