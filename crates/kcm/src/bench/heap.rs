//! The allocator's own figures for this process: how much the program holds (`allocated`),
//! and how much of RSS jemalloc keeps for it (`resident`, `retained`). A soak whose RSS grows
//! while `allocated` stays flat is keeping freed memory, not data; one whose `allocated`
//! grows is holding more objects.

use serde::Serialize;

/// jemalloc's `stats.*` at one moment, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HeapStats {
    /// Bytes the program has allocated and not freed (`stats.allocated`).
    pub allocated: u64,
    /// Bytes in active pages, `allocated` plus the unused parts of those pages
    /// (`stats.active`).
    pub active: u64,
    /// Bytes of physically resident pages jemalloc maps, its metadata and dirty pages
    /// included (`stats.resident`).
    pub resident: u64,
    /// Bytes unmapped from RSS but kept as address space for reuse (`stats.retained`).
    pub retained: u64,
}

/// The figures now; `None` where kcm is built without jemalloc or it does not answer.
#[cfg(not(target_env = "msvc"))]
pub fn stats() -> Option<HeapStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are a snapshot refreshed when the epoch advances.
    epoch::advance().ok()?;
    let read = |r: tikv_jemalloc_ctl::Result<usize>| r.ok().map(|v| v as u64);
    Some(HeapStats {
        allocated: read(stats::allocated::read())?,
        active: read(stats::active::read())?,
        resident: read(stats::resident::read())?,
        retained: read(stats::retained::read())?,
    })
}

/// The figures now; `None` where kcm is built without jemalloc.
#[cfg(target_env = "msvc")]
pub fn stats() -> Option<HeapStats> {
    None
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    use super::*;

    /// The unit tests run in the kcm binary, with jemalloc as the global allocator. Other
    /// tests allocate at the same time, so the margins are wide: 256 MiB held, 192 MiB seen.
    #[test]
    fn allocated_counts_a_held_buffer_and_drops_it_when_freed() {
        const HELD: usize = 256 << 20;
        const SEEN: u64 = 192 << 20;
        let before = stats().expect("jemalloc answers with stats enabled");
        let held = std::hint::black_box(vec![0u8; HELD]);
        let during = stats().expect("stats");
        assert!(
            during.allocated >= before.allocated + SEEN,
            "{before:?} → {during:?}"
        );
        assert!(during.active >= during.allocated, "{during:?}");
        drop(held);
        let after = stats().expect("stats");
        assert!(
            after.allocated + SEEN <= during.allocated,
            "{during:?} → {after:?}"
        );
    }
}
