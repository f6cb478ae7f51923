//! Filling a page so no reservation lands in it: the page stays held, its free room
//! taken by slices the caller keeps (a page the application destroyed, whose bytes no
//! new allocation may use).

use super::MemoryManagement;
use crate::storage::{ComputeStorage, StorageId};
use cubecl_runtime::memory_management::ManagedMemoryHandle;

impl<S: ComputeStorage> MemoryManagement<S> {
    /// Handles over every free range of the page `id`, in whichever pool holds it: while
    /// the caller keeps them, no reservation is placed in that page; once they and the
    /// page's other slices are dropped, a cleanup gives the page back as usual. Empty for
    /// a page with no free room, a whole page (it holds one slice; a free one would be
    /// handed out whole, and the caller can hold that reservation instead) or an id no
    /// pool holds.
    ///
    /// # Complexity
    /// O(pages of the pools + free blocks of the page).
    pub fn fill_page(&mut self, id: StorageId) -> Vec<ManagedMemoryHandle> {
        for pool in &mut self.dynamic {
            let filled = pool.fill_page(id);
            if !filled.is_empty() {
                return filled;
            }
        }
        Vec::new()
    }
}
