//! The memory snapshot: each memory's page map turned into report values.

use crate::memory_management::{
    LiveSlice, MemoryManagement, MemoryPoolKind, MemoryReport, PoolPages, format_bytes,
};
use crate::report::{
    MAIN_MEMORY, MemorySnapshot, MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot,
};
use crate::server::Server;
use crate::storage::WgpuStorage;

/// Attempts at a snapshot whose report and pages agree (see [`Server::memory_snapshot`]).
const ATTEMPTS: usize = 4;

impl Server {
    /// The report and every page of the main, readback staging and upload staging
    /// memories, taken together under the client's lock, at `taken_us`. History is left
    /// empty for the caller to fill.
    ///
    /// Handles are dropped without the lock, so one dropped on another thread between the
    /// report and the walk could make them disagree: the pair is taken again (at most
    /// four times) until their totals match.
    pub(crate) fn memory_snapshot(&self, taken_us: u64) -> MemorySnapshot {
        let mut snapshot = self.snapshot_once(taken_us);
        for _ in 1..ATTEMPTS {
            if snapshot.check_report().is_ok() {
                break;
            }
            snapshot = self.snapshot_once(taken_us);
        }
        snapshot
    }

    fn snapshot_once(&self, taken_us: u64) -> MemorySnapshot {
        let memories = [
            (MAIN_MEMORY, &self.main),
            ("staging", &self.staging),
            ("upload", &self.uploads.memory),
        ];
        let report: MemoryReport = self.memory_report();
        MemorySnapshot {
            taken_us,
            memories: memories
                .into_iter()
                .map(|(name, memory)| memory_snapshot(name, memory))
                .collect(),
            history: Vec::new(),
            history_dropped: 0,
            started_unix_us: None,
            budget: self.budget.limit(),
            report,
        }
    }
}

fn memory_snapshot(name: &str, memory: &MemoryManagement<WgpuStorage>) -> MemorySnapshotMemory {
    let pools = memory.page_map();
    let count = pools.len();
    MemorySnapshotMemory {
        name: name.to_string(),
        pools: pools
            .into_iter()
            .enumerate()
            .map(|(at, pool)| pool_snapshot(place_name(count, at, &pool.kind), pool))
            .collect(),
    }
}

/// The name of the pool at `place` of `count` in page-map order: the page map ends with
/// the persistent and the dedicated pool.
pub(crate) fn place_name(count: usize, place: usize, kind: &MemoryPoolKind) -> String {
    match count.saturating_sub(place) {
        2 => "persistent".to_string(),
        1 => "dedicated".to_string(),
        _ => pool_name(kind),
    }
}

fn pool_snapshot(name: String, pool: PoolPages) -> PoolSnapshot {
    PoolSnapshot {
        pool: name,
        index: pool.index,
        pages: pool
            .pages
            .into_iter()
            .map(|page| PageSnapshot {
                id: page.id,
                size: page.size,
                slices: with_free_ranges(page.size, &page.slices),
            })
            .collect(),
    }
}

/// The live slices of a page (ascending offsets) and, between them, each free range as a
/// slice with `live: false`, in offset order: together they cover the page once.
fn with_free_ranges(page_size: u64, live: &[LiveSlice]) -> Vec<SliceSnapshot> {
    let free = |start: u64, end: u64| SliceSnapshot::free(start, end - start);
    let mut slices = Vec::with_capacity(live.len() * 2 + 1);
    let mut covered = 0;
    for slice in live {
        if slice.offset > covered {
            slices.push(free(covered, slice.offset));
        }
        slices.push(SliceSnapshot {
            id: Some(slice.id),
            ..SliceSnapshot::live(slice.offset, slice.size, slice.padding)
        });
        covered = covered.max(slice.offset + slice.size + slice.padding);
    }
    if page_size > covered {
        slices.push(free(covered, page_size));
    }
    slices
}

/// A pool's kind and shape for people, the same for the pool's whole life (history events
/// and snapshots name it alike): "sliced 4.00 MiB", "adaptive" (its page size grows),
/// "exclusive", "direct", "persistent".
pub(crate) fn pool_name(kind: &MemoryPoolKind) -> String {
    match kind {
        MemoryPoolKind::Sliced { page_size, .. } => format!("sliced {}", format_bytes(*page_size)),
        MemoryPoolKind::Adaptive { .. } => "adaptive".to_string(),
        MemoryPoolKind::Exclusive { .. } => "exclusive".to_string(),
        MemoryPoolKind::Direct => "direct".to_string(),
        MemoryPoolKind::Persistent => "persistent".to_string(),
    }
}
