//! Kubernetes resource quantities, as far as remediation needs them: memory in bytes, CPU in
//! millicores, and formatting a raised value back.

/// `256Mi`, `1Gi`, `512M`, `1073741824`, `64Ki` → bytes.
pub fn memory_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, unit) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024.0f64.powi(2),
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "m" => 1e-3,
        _ => return None,
    };
    Some((n * mult).round() as u128)
}

/// Bytes → `NMi` (rounded up to a whole MiB).
pub fn format_mi(bytes: u128) -> String {
    let mi = 1024u128 * 1024;
    format!("{}Mi", bytes.div_ceil(mi))
}

/// Bytes → `NGi` (rounded up to a whole GiB).
pub fn format_gi(bytes: u128) -> String {
    let gi = 1024u128.pow(3);
    format!("{}Gi", bytes.div_ceil(gi))
}

/// `500m`, `1`, `1.5`, `250000n` → millicores.
pub fn cpu_millis(q: &str) -> Option<u64> {
    let q = q.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| v.round() as u64);
    }
    if let Some(n) = q.strip_suffix('n') {
        return n.parse::<f64>().ok().map(|v| (v / 1e6).round() as u64);
    }
    if let Some(u) = q.strip_suffix('u') {
        return u.parse::<f64>().ok().map(|v| (v / 1e3).round() as u64);
    }
    q.parse::<f64>().ok().map(|v| (v * 1000.0).round() as u64)
}

/// A raised memory limit: `factor` times the current one, never more than double, at most
/// 16Gi, rounded up to a whole MiB.
/// A quantity of `resource` in comparable units: bytes for memory and storage, millicores for
/// CPU, a count otherwise.
pub fn amount(resource: &str, q: &str) -> Option<u128> {
    match resource {
        "cpu" => cpu_millis(q).map(u128::from),
        "memory" | "ephemeral-storage" | "storage" => memory_bytes(q),
        _ => q.parse().ok(),
    }
}

/// An [`amount`] of `resource` written back as a quantity.
pub fn format_amount(resource: &str, v: u128) -> String {
    match resource {
        "cpu" => format!("{v}m"),
        "memory" | "ephemeral-storage" | "storage" => format_mi(v),
        _ => v.to_string(),
    }
}

/// The most memory a raise proposes for one container (16 GiB): past it, more memory is a
/// sizing decision, not a remediation. At or above it, [`raised_memory`] returns the limit as
/// it is, which no proof takes as a raise.
pub const MAX_RAISED_MEMORY_BYTES: u128 = 16 << 30;

pub fn raised_memory(current: &str, factor: f64) -> Option<String> {
    let bytes = memory_bytes(current)? as f64;
    let factor = factor.clamp(1.0, 2.0);
    let cap = MAX_RAISED_MEMORY_BYTES as f64;
    let raised = (bytes * factor).min(cap.max(bytes));
    Some(format_mi(raised.ceil() as u128))
}

/// A raised CPU limit in millicores, at most double.
pub fn raised_cpu(current: &str, factor: f64) -> Option<String> {
    let m = cpu_millis(current)? as f64;
    Some(format!("{}m", (m * factor.clamp(1.0, 2.0)).ceil() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_raise() {
        assert_eq!(memory_bytes("256Mi"), Some(256 * 1024 * 1024));
        assert_eq!(memory_bytes("1Gi"), Some(1024 * 1024 * 1024));
        assert_eq!(memory_bytes("500M"), Some(500_000_000));
        assert_eq!(raised_memory("256Mi", 1.5).as_deref(), Some("384Mi"));
        assert_eq!(
            raised_memory("1Gi", 3.0).as_deref(),
            Some("2048Mi"),
            "at most double"
        );
        assert_eq!(cpu_millis("500m"), Some(500));
        assert_eq!(cpu_millis("1.5"), Some(1500));
        assert_eq!(raised_cpu("500m", 1.5).as_deref(), Some("750m"));
        assert_eq!(format_gi(15 * 1024u128.pow(3) + 1), "16Gi");
    }
}
