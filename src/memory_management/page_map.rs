//! Plain values describing every page of a memory and the live slices in it, as
//! [`MemoryManagement::page_map`](super::MemoryManagement::page_map) returns them.
//!
//! These are the allocator's own numbers, with no label or time: a client adds those when
//! it turns a page map into a `report::MemorySnapshot`.

use cubecl_runtime::memory_management::MemoryPoolKind;

/// One pool of a memory and the pages it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPages {
    /// The pool's place in the memory: its index in the layout for a dynamic pool; the
    /// persistent pool comes right after the dynamic pools, then the dedicated one.
    pub index: usize,
    /// The pool's kind and shape, as its report states it.
    pub kind: MemoryPoolKind,
    /// The pages it holds (free pages included), in no particular order.
    pub pages: Vec<PageSlices>,
}

/// One page (one storage allocation) and the live slices carved from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSlices {
    /// The page's id: the number of its storage id, unique among every page the process
    /// makes (never reused while it runs).
    pub id: u64,
    /// The page's size in bytes.
    pub size: u64,
    /// The slices some handle or binding still holds, by ascending offset. Bytes no slice
    /// covers are free.
    pub slices: Vec<LiveSlice>,
}

/// One live slice of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveSlice {
    /// Where it starts in its page, in bytes.
    pub offset: u64,
    /// The bytes requested (not rounded).
    pub size: u64,
    /// Bytes after `size` the slice holds for alignment: its footprint in the page is
    /// `offset .. offset + size + padding`.
    pub padding: u64,
    /// The allocation id: the value of the handle's `ManagedMemoryId`.
    pub id: u64,
}

impl PoolPages {
    /// Live slices, requested bytes and padding bytes of the pool's live slices, and the
    /// bytes of its pages: `(number_allocs, bytes_in_use, bytes_padding, bytes_reserved)`
    /// as the pool's report counts them.
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        self.pages
            .iter()
            .fold((0, 0, 0, 0), |(n, used, pad, reserved), page| {
                let (used, pad) = page.slices.iter().fold((used, pad), |(u, p), slice| {
                    (
                        u.saturating_add(slice.size),
                        p.saturating_add(slice.padding),
                    )
                });
                (
                    n + page.slices.len() as u64,
                    used,
                    pad,
                    reserved.saturating_add(page.size),
                )
            })
    }
}
