//! The pin table: allocations whose address left the client, which compaction must not
//! move while a [`PinGuard`] for them lives (see `compaction`, step 1).

use cubecl_runtime::memory_management::ManagedMemoryId;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Pins held per allocation. Entries whose count fell to zero are pruned once the table
/// passes [`PRUNE_AT`] entries, so it holds about as many entries as allocations pinned
/// at once.
#[derive(Debug, Default)]
pub(crate) struct PinTable {
    counts: Mutex<HashMap<ManagedMemoryId, u32>>,
}

/// Entries past which the pin table drops the ones at zero.
const PRUNE_AT: usize = 4096;

impl PinTable {
    /// Pins `id` until the returned guard (and every clone of it) is dropped.
    pub(crate) fn pin(self: &Arc<Self>, id: ManagedMemoryId) -> PinGuard {
        self.pin_all(vec![id])
    }

    /// Pins every allocation of `ids` until the returned guard is dropped: one lock for
    /// all of them (a read of a thousand handles pins a thousand allocations).
    pub(crate) fn pin_all(self: &Arc<Self>, ids: Vec<ManagedMemoryId>) -> PinGuard {
        let mut counts = self.counts.lock();
        if counts.len() >= PRUNE_AT {
            counts.retain(|_, count| *count > 0);
        }
        for id in &ids {
            *counts.entry(*id).or_insert(0) += 1;
        }
        PinGuard {
            table: self.clone(),
            ids,
        }
    }

    /// A snapshot of the pinned ids, for one compaction pass (one lock, not one per slice).
    pub(super) fn pinned(&self) -> HashMap<ManagedMemoryId, u32> {
        let mut counts = self.counts.lock();
        counts.retain(|_, count| *count > 0);
        counts.clone()
    }
}

/// Keeps allocations from moving while it lives. Takes only the pin table's own lock,
/// so it may be dropped anywhere.
#[derive(Debug)]
pub(crate) struct PinGuard {
    table: Arc<PinTable>,
    ids: Vec<ManagedMemoryId>,
}

impl Clone for PinGuard {
    fn clone(&self) -> Self {
        self.table.pin_all(self.ids.clone())
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock();
        for id in &self.ids {
            if let Some(count) = counts.get_mut(id) {
                *count = count.saturating_sub(1);
            }
        }
    }
}
