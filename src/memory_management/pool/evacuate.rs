//! Evacuation: emptying sparse pages by moving their live slices into the holes of
//! fuller pages of the same pool.
//!
//! A pool that served many sizes over time ends with free bytes scattered between live
//! slices: reserved, yet too fragmented to serve a request or to give a page back. No
//! placement policy prevents that once allocations outlive their neighbours. Because a
//! handle names its slice by slot (not by address), a slice can move: its bytes are
//! copied to a new block and the slot points there, so every handle and binding follows.
//!
//! A pass works page by page, sparsest first:
//!
//! 1. **Census.** Every live slice is counted against its page: live bytes, and whether
//!    any slice of the page is pinned (its owner holds the page's address, or a read of it
//!    is in flight). Pinned pages and empty pages are never candidates.
//! 2. **Plan.** For each candidate in turn, every slice of it is placed (largest first)
//!    in a page of the destination tier that is not itself being emptied; a page that
//!    took moved slices is no longer a candidate. If one slice
//!    finds no room, the candidate's placements are undone and it is skipped: a page half
//!    emptied gives nothing back and costs the copies. The pass stops at the byte bound.
//! 3. **Commit.** Each planned slice is relocated in the slice table and its bytes copied
//!    through the storage. The old block stays allocated: it is handed back to the caller,
//!    who frees it once the copy can no longer be overtaken (see
//!    [`MemoryManagement::release_moved`](crate::memory_management::MemoryManagement::release_moved)).
//!
//! Cost: the census is O(live slices); each placement is a thorough TLSF search.
//! Moves only go between pages, never inside one (wgpu forbids a copy whose source and
//! destination are one buffer).

use super::pages::{Placement, SlicedPages};
use super::slices::SliceTable;
use crate::memory_management::placement::BlockId;
use crate::memory_management::{MoveLimits, Pin};
use crate::storage::{CopyStorage, StorageHandle};
use cubecl_runtime::memory_management::ManagedMemoryId;
use std::collections::BTreeMap;

/// Whether an allocation must stay where it is (and its page with it): by its id, and
/// the id of its page (as [`PageSlices::id`](crate::memory_management::PageSlices::id)).
pub(crate) type Pinned<'a> = &'a dyn Fn(ManagedMemoryId, u64) -> Pin;

/// What one page holds, for choosing what to empty.
#[derive(Debug, Clone)]
pub(crate) struct PageCensus {
    pub(crate) tier: u32,
    pub(crate) page: u32,
    /// Bytes its live slices occupy (requested plus padding).
    pub(crate) live: u64,
    /// Its live slices: slot and requested size.
    slots: Vec<(u32, u64, u64)>,
}

/// What a pass knows of a pool's pages: the candidates to empty, sparsest first (pages
/// holding a pinned slice and pages without live slices are not candidates), and the
/// live bytes of every page that holds any, pinned or not (the possible destinations:
/// all but the pages a [`Pin::Page`] closes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Census {
    pub(crate) candidates: Vec<PageCensus>,
    /// Live bytes of every page holding a live slice, and whether one of them pins the
    /// page ([`Pin::Page`]).
    live: BTreeMap<(u32, u32), (u64, bool)>,
}

impl Census {
    /// Whether page `page` of tier `tier` may take moved slices: it holds live slices,
    /// none of them pinning the page. An empty page never does (filling it to empty
    /// another gains nothing); a page pinned whole neither gives nor takes (its owner's
    /// view of it stands); one holding a slice pinned alone ([`Pin::Slice`]) takes.
    fn takes_moves(&self, tier: u32, page: u32) -> bool {
        self.live
            .get(&(tier, page))
            .is_some_and(|&(held, pinned)| held > 0 && !pinned)
    }
}

/// Counts the live slices of `slices` per page.
pub(crate) fn census(slices: &SliceTable, pinned: Pinned<'_>) -> Census {
    // Per page: its census, whether a slice of it stays, whether one pins it whole.
    let mut pages: BTreeMap<(u32, u32), (PageCensus, bool, bool)> = BTreeMap::new();
    for (slot, id, slice) in slices.live_slots() {
        let entry = pages.entry((slice.tier, slice.page)).or_insert_with(|| {
            let census = PageCensus {
                tier: slice.tier,
                page: slice.page,
                live: 0,
                slots: Vec::new(),
            };
            (census, false, false)
        });
        let size = slice.storage.size();
        entry.0.live += size + slice.padding;
        entry.0.slots.push((slot, size, size + slice.padding));
        match pinned(id, super::page_map::page_id(&slice.storage.id)) {
            Pin::Free => {}
            Pin::Slice => entry.1 = true,
            Pin::Page => (entry.1, entry.2) = (true, true),
        }
    }
    let live = pages
        .iter()
        .map(|(&key, (census, _, closed))| (key, (census.live, *closed)))
        .collect();
    let mut candidates: Vec<PageCensus> = pages
        .into_values()
        .filter(|(_, stays, _)| !stays)
        .map(|(census, _, _)| census)
        .collect();
    candidates.sort_by_key(|census| (census.live, census.tier, census.page));
    Census { candidates, live }
}

/// One slice to move: its slot, where it goes, and the tier of the destination.
#[derive(Debug)]
pub(crate) struct Planned {
    slot: u32,
    to: Placement,
    tier: u32,
}

/// Plans the emptying of `candidates`, in order, into tier `dest` (`pages` is indexed
/// by tier). Stops once `limits` would be passed or `max_pages` pages are planned
/// empty. Destination blocks are taken in `pages` as planned.
///
/// A slice only moves into a page that holds live slices, never into an empty one:
/// filling an empty page to empty another gains nothing, and two passes could then
/// trade slices back and forth for ever. With the rule every pass that moves anything
/// leaves fewer pages holding live slices, so passes repeated until nothing moves end.
pub(crate) fn plan(
    pages: &mut [Option<&mut SlicedPages>],
    census: &Census,
    candidates: &[PageCensus],
    dest: u32,
    limits: MoveLimits,
    max_pages: usize,
) -> Vec<Planned> {
    let mut planned = Vec::new();
    let mut emptied: Vec<(u32, u32)> = Vec::new();
    // Pages that took moved slices hold more than their census says: never emptied.
    let mut received: Vec<u32> = Vec::new();
    let mut bytes = 0u64;
    let Some(Some(target)) = pages.get_mut(dest as usize) else {
        return planned;
    };
    for candidate in candidates {
        if emptied.len() >= max_pages {
            break;
        }
        if bytes.saturating_add(candidate.live) > limits.max_bytes
            || planned.len().saturating_add(candidate.slots.len()) > limits.max_moves
            || (candidate.tier == dest && received.contains(&candidate.page))
        {
            continue;
        }
        let mut order = candidate.slots.clone();
        order.sort_by_key(|&(_, _, effective)| std::cmp::Reverse(effective));
        let avoid = |page: u32| {
            (candidate.tier == dest && page == candidate.page)
                || emptied.contains(&(dest, page))
                || !census.takes_moves(dest, page)
        };
        let mut placed = Vec::with_capacity(order.len());
        for &(slot, size, _) in &order {
            match target.place_avoiding(size, avoid) {
                Some(to) => placed.push(Planned {
                    slot,
                    to,
                    tier: dest,
                }),
                None => break,
            }
        }
        if placed.len() < order.len() {
            for undo in placed {
                target.free(undo.to.block);
            }
            continue;
        }
        bytes += candidate.live;
        emptied.push((candidate.tier, candidate.page));
        for moved in &placed {
            if !received.contains(&moved.to.page) {
                received.push(moved.to.page);
            }
        }
        planned.extend(placed);
    }
    planned
}

/// A slice that moved: where from, where to.
#[derive(Debug, Clone)]
pub(crate) struct Relocated {
    pub(crate) slot: u32,
    pub(crate) id: ManagedMemoryId,
    pub(crate) from: StorageHandle,
    pub(crate) to: StorageHandle,
    /// The tier and block the slice left: still allocated, for the caller to free.
    pub(crate) left: (u32, BlockId),
}

/// Relocates each planned slice in `slices` and copies its bytes through `storage`.
/// A copy the storage refuses leaves that slice where it was and frees its destination
/// through `free_block` (tier, block).
pub(crate) fn commit<S: CopyStorage>(
    slices: &mut SliceTable,
    storage: &mut S,
    planned: Vec<Planned>,
    mut free_block: impl FnMut(u32, BlockId),
) -> Vec<Relocated> {
    let mut moved = Vec::with_capacity(planned.len());
    for Planned { slot, to, tier } in planned {
        let (to_storage, to_block) = (to.storage.clone(), to.block);
        let Some((id, old)) = slices.relocate(slot, to, tier) else {
            free_block(tier, to_block);
            continue;
        };
        let Some(old_block) = old.block else {
            unreachable!("a sliced page's slice has a block");
        };
        if let Err(error) = storage.copy(&old.storage, &to_storage) {
            tracing::warn!(%error, "compaction: the storage refused a copy; the slice stays");
            let back = slices.restore(slot, old);
            free_block(tier, to_block);
            debug_assert!(back);
            continue;
        }
        moved.push(Relocated {
            slot,
            id,
            from: old.storage,
            to: to_storage,
            left: (old.tier, old_block),
        });
    }
    moved
}
