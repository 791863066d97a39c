//! What a scenario will hold in memory before it is built, and what the machine has free
//! (docs/DESIGN.md, "Memory bounds").
//!
//! A stack of L layers with H_i heads of d x d matrices A, V holds
//!
//! ```text
//! bytes ~ sum over distinct layers of  3 * 2 H_i d^2 * 8          (HeadSpec, Attention, field)
//!       + sum over all layers of       2 H_i d^2 * RESOLVED_ENTRY  (the resolved scenario)
//!       + L * PER_LAYER                                            (each layer's entry)
//! ```
//!
//! distinct layers (identical entries, repeated checkpoint layers) being kept once. A looped
//! stack records the order parameters at every layer boundary, [`BOUNDARY_BYTES`] each.

/// Bytes a matrix entry costs in the resolved scenario: the TOML value in memory, its text in
/// `scenario.toml`, and the copy a sweep keeps.
pub const RESOLVED_ENTRY_BYTES: u64 = 160;

/// Bytes every layer costs besides its matrices (its spec, its dynamics, its resolved table).
pub const PER_LAYER_BYTES: u64 = 4096;

/// Bytes of one recorded layer boundary (time, pass, layer, R2, R1, s) and its `layers.csv`
/// row being formatted.
pub const BOUNDARY_BYTES: u64 = 96;

/// Memory available to this process, if known: the least of the machine's `MemAvailable`, the
/// room left under its cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) and the
/// room left under its address-space limit (`ulimit -v`, less what it maps already).
pub fn available() -> Option<u64> {
    [machine_available(), cgroup_room(), address_space_room()]
        .into_iter()
        .flatten()
        .min()
}

/// `MemAvailable` of /proc/meminfo.
fn machine_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    kib_field(&text, "MemAvailable:")
}

/// A "Name:   123 kB" line of a /proc file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// A file holding one number of bytes ("max" and unreadable: none).
fn bytes_in(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The cgroup's limit less its usage (v2, else v1).
fn cgroup_room() -> Option<u64> {
    let v2 = bytes_in("/sys/fs/cgroup/memory.max").zip(bytes_in("/sys/fs/cgroup/memory.current"));
    let v1 = || {
        bytes_in("/sys/fs/cgroup/memory/memory.limit_in_bytes")
            .zip(bytes_in("/sys/fs/cgroup/memory/memory.usage_in_bytes"))
    };
    v2.or_else(v1)
        .map(|(limit, used)| limit.saturating_sub(used))
}

/// RLIMIT_AS (/proc/self/limits "Max address space") less the process's VmSize.
fn address_space_room() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mapped = kib_field(&status, "VmSize:").unwrap_or(0);
    Some(soft.saturating_sub(mapped))
}

/// The matrix entries of a layer: 2 H d^2.
pub fn layer_entries(heads: usize, d: usize) -> u64 {
    (heads as u64)
        .saturating_mul(2)
        .saturating_mul((d as u64).saturating_mul(d as u64))
}

/// The bytes of a stack: `distinct` entries kept once (three copies on the way to the
/// field), `written` entries in the resolved scenario, `layers` layers.
pub fn stack_bytes(distinct: u64, written: u64, layers: usize, resolved_matrices: bool) -> u64 {
    let resolved = if resolved_matrices {
        written.saturating_mul(RESOLVED_ENTRY_BYTES)
    } else {
        0
    };
    distinct
        .saturating_mul(3 * 8)
        .saturating_add(resolved)
        .saturating_add((layers as u64).saturating_mul(PER_LAYER_BYTES))
}

/// "1.2 GB"-style figure.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.0} MB", (b / 1e6).max(1.0))
    }
}

/// `Err(message)` when `need` bytes exceed what is available (unknown: accepted).
pub fn check(need: u64, what: &str) -> Result<(), String> {
    match available() {
        Some(free) if need > free => Err(format!(
            "{what} needs about {} of memory, but {} is available; refused before allocating",
            human(need),
            human(free)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_of_identical_layers_costs_its_matrices_once_plus_its_resolved_text() {
        // 4000 identical layers of one head, d = 64: one copy of the matrices.
        let one = layer_entries(1, 64);
        assert_eq!(one, 8192);
        let with = stack_bytes(one, 4000 * one, 4000, true);
        let without = stack_bytes(one, 4000 * one, 4000, false);
        assert_eq!(without, 8192 * 24 + 4000 * PER_LAYER_BYTES);
        assert_eq!(with - without, 4000 * 8192 * RESOLVED_ENTRY_BYTES);
        assert_eq!(stack_bytes(u64::MAX, u64::MAX, usize::MAX, true), u64::MAX);
        assert!(check(u64::MAX, "x").is_err() || available().is_none());
        assert!(check(1, "x").is_ok());
    }

    #[test]
    fn the_room_is_at_most_the_machine_s() {
        // Whatever limits apply, none of them can leave more room than the machine has.
        if let (Some(all), Some(machine)) = (available(), machine_available()) {
            assert!(all <= machine);
        }
        assert_eq!(
            kib_field("MemAvailable:   12 kB\n", "MemAvailable:"),
            Some(12288)
        );
    }
}
