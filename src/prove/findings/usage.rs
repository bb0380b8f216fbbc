//! How close a container's use is to what it may use.

/// From what share of its limit a container's use counts as near it, in percent: close enough
/// that a growing workload reaches it within a prediction's horizon, or that replicas running
/// this hot leave no room for a burst. The memory prediction rule and the memory proof ask it
/// of a limit; the scale proof of the CPU the ready pods request.
pub const NEAR_LIMIT_PERCENT: u128 = 80;

/// Whether `used` is at [`NEAR_LIMIT_PERCENT`] of `limit` or more (a zero limit: any use is).
pub fn near_limit(used: u128, limit: u128) -> bool {
    used.saturating_mul(100) >= limit.saturating_mul(NEAR_LIMIT_PERCENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_fifths_of_the_limit_is_near_it() {
        assert!(near_limit(800, 1000));
        assert!(!near_limit(799, 1000));
        assert!(near_limit(1, 0));
        assert!(near_limit(0, 0));
        // A limit that does not parse is read as unbounded: nothing is near it.
        assert!(!near_limit(1 << 40, u128::MAX));
    }
}
