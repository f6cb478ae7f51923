//! Filling a page of an adaptive pool so nothing new lands in it (a page the application
//! destroyed).

use super::AdaptivePool;
use crate::storage::StorageId;
use cubecl_runtime::memory_management::ManagedMemoryHandle;

impl AdaptivePool {
    /// Slices over every free range of the page `id`, in whichever tier holds it, held by
    /// the caller so nothing else lands there. Their bytes count as the band's live
    /// bytes (their release takes them off again) but not as reservations served.
    pub(crate) fn fill_page(&mut self, id: StorageId) -> Vec<ManagedMemoryHandle> {
        for index in 0..self.tiers.len() {
            let Some(tier) = self.tiers[index].as_mut() else {
                continue;
            };
            let placed = tier.pages.fill(id);
            if placed.is_empty() {
                continue;
            }
            let band = tier.band;
            let bytes: u64 = placed
                .iter()
                .map(|placed| placed.storage.size() + placed.padding)
                .sum();
            self.bands[band].live += bytes;
            return placed
                .into_iter()
                .map(|placed| self.slices.insert(placed, index as u32))
                .collect();
        }
        Vec::new()
    }
}
