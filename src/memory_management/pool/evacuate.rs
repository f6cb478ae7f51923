//! Evacuation: emptying sparse pages by moving their live slices into the holes of
//! other pages of the same pool (any tier of an adaptive pool's band), or into fresh
//! pages where those give back more than they take.
//!
//! A pool that served many sizes over time ends with free bytes scattered between live
//! slices: reserved, yet too fragmented to serve a request or to give a page back. No
//! placement policy prevents that once allocations outlive their neighbours. Because a
//! handle names its slice by slot (not by address), a slice can move: its bytes are
//! copied to a new block and the slot points there, so every handle and binding follows.
//!
//! A pass:
//!
//! 1. **Census.** Every live slice is counted against its page: live bytes, and how it
//!    is pinned. A page holding a [`Pin::Slice`] slice takes moved slices but does not
//!    empty; one holding a [`Pin::Page`] slice neither gives nor takes; a page with no
//!    live slice does neither (it goes back at the next cleanup). The others are the
//!    candidates, sparsest first: lowest fraction of the page in use (so a large page
//!    nearly empty goes before a small one nearly full, whatever their tiers).
//! 2. **Plan** (in [`plan`]). The free ranges of every page that takes moves are copied
//!    into a planning index; each candidate in turn is closed to placement and its
//!    slices (largest first) placed in the index by TLSF searches. A candidate empties
//!    whole or not at all (a page half emptied gives nothing back and costs the copies);
//!    a page that took moved slices is not emptied in the same pass. The candidates left
//!    may then be packed into fresh pages, each kept only where the pages it empties
//!    hold more bytes than it does.
//! 3. **Fresh pages.** The pool reserves the fresh pages the plan kept from the storage;
//!    a page the storage (a budget, the device) refuses is planned without: the pages
//!    it would have emptied stay.
//! 4. **Commit.** The planned ranges are taken in the pool's own index
//!    ([`SlicedPages::claim`]), each planned slice is relocated in the slice table and
//!    its bytes copied through the storage. The old block stays allocated: it is handed
//!    back to the caller, who frees it once the copy can no longer be overtaken (see
//!    [`MemoryManagement::release_moved`](crate::memory_management::MemoryManagement::release_moved)).
//!
//! Passes come to rest: every pass that moves anything empties pages whose bytes exceed
//! those of the fresh pages it makes, and moves only into pages that keep live slices,
//! so the bytes of pages holding live slices fall with every pass that moves, and a
//! later pass never brings back a page an earlier one emptied.
//!
//! Cost: the census and the planning index are O(live slices + free blocks) per pass;
//! each placement is one thorough TLSF search, never a walk over pages or slices.
//! Moves only go between pages, never inside one (wgpu forbids a copy whose source and
//! destination are one buffer).

pub(crate) mod plan;

use super::pages::{Placement, SlicedPages};
use super::slices::SliceTable;
use crate::memory_management::Pin;
use crate::memory_management::placement::BlockId;
use crate::storage::{CopyStorage, StorageHandle};
use cubecl_runtime::memory_management::ManagedMemoryId;
use plan::{Dest, Plan};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Whether an allocation must stay where it is (and its page with it): by its id, and
/// the id of its page (as [`PageSlices::id`](crate::memory_management::PageSlices::id)).
pub(crate) type Pinned<'a> = &'a dyn Fn(ManagedMemoryId, u64) -> Pin;

/// What a pass is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// Pack the pool: empty every page it can, fresh pages included.
    Pack,
    /// Room for one reservation of this many bytes: empty one page of the tier that
    /// serves the size, into the pages already held (a fresh page would be the page
    /// the reservation avoids).
    RoomFor(u64),
}

impl Goal {
    /// The most pages the pass plans empty.
    pub(crate) fn max_pages(self) -> usize {
        match self {
            Goal::Pack => usize::MAX,
            Goal::RoomFor(_) => 1,
        }
    }
}

/// What one page holds, for choosing what to empty.
#[derive(Debug, Clone)]
pub(crate) struct PageCensus {
    pub(crate) tier: u32,
    pub(crate) page: u32,
    /// The page's size in bytes.
    pub(crate) page_size: u64,
    /// Bytes its live slices occupy (requested plus padding).
    pub(crate) live: u64,
    /// Its live slices: slot, requested size, and size with padding.
    pub(crate) slots: Vec<(u32, u64, u64)>,
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
    /// another gains nothing, and it goes back at the next cleanup); a page pinned whole
    /// neither gives nor takes (its owner's view of it stands); one holding a slice
    /// pinned alone ([`Pin::Slice`]) takes.
    pub(crate) fn takes_moves(&self, tier: u32, page: u32) -> bool {
        self.live
            .get(&(tier, page))
            .is_some_and(|&(held, pinned)| held > 0 && !pinned)
    }
}

/// One page as the census sees it.
struct CensusEntry {
    census: PageCensus,
    /// A slice of the page is pinned: the page gives nothing.
    stays: bool,
    /// A slice pins the page whole: it neither gives nor takes.
    pinned_whole: bool,
    /// The page's id, read once per page (not per slice).
    page_id: u64,
}

/// Counts the live slices of `slices` per page; `page_size(tier, page)` gives the size of
/// a page, in bytes.
pub(crate) fn census(
    slices: &SliceTable,
    pinned: Pinned<'_>,
    page_size: impl Fn(u32, u32) -> u64,
) -> Census {
    let mut pages: BTreeMap<(u32, u32), CensusEntry> = BTreeMap::new();
    for (slot, id, slice) in slices.live_slots() {
        let entry = pages
            .entry((slice.tier, slice.page))
            .or_insert_with(|| CensusEntry {
                census: PageCensus {
                    tier: slice.tier,
                    page: slice.page,
                    page_size: page_size(slice.tier, slice.page),
                    live: 0,
                    slots: Vec::new(),
                },
                stays: false,
                pinned_whole: false,
                page_id: super::page_map::page_id(&slice.storage.id),
            });
        let size = slice.storage.size();
        entry.census.live += size + slice.padding;
        entry.census.slots.push((slot, size, size + slice.padding));
        match pinned(id, entry.page_id) {
            Pin::Free => {}
            Pin::Slice => entry.stays = true,
            Pin::Page => (entry.stays, entry.pinned_whole) = (true, true),
        }
    }
    let live = pages
        .iter()
        .map(|(&key, entry)| (key, (entry.census.live, entry.pinned_whole)))
        .collect();
    let mut candidates: Vec<PageCensus> = pages
        .into_values()
        .filter(|entry| !entry.stays)
        .map(|entry| entry.census)
        .collect();
    candidates.sort_by(sparsest_first);
    Census { candidates, live }
}

/// Lower fraction in use first (compared exactly, in u128), then fewer live bytes, then
/// by place: one order for one state.
fn sparsest_first(a: &PageCensus, b: &PageCensus) -> Ordering {
    let fill = |page: &PageCensus, other: &PageCensus| {
        u128::from(page.live) * u128::from(other.page_size.max(1))
    };
    fill(a, b)
        .cmp(&fill(b, a))
        .then(a.live.cmp(&b.live))
        .then((a.tier, a.page).cmp(&(b.tier, b.page)))
}

/// One slice to move: its slot, where it goes, and the tier of the destination.
#[derive(Debug)]
pub(crate) struct Planned {
    slot: u32,
    to: Placement,
    tier: u32,
}

/// A planned range of one destination page: offset, requested size, index of the move.
type Asked = (u64, u64, usize);

/// Takes the destinations of `plan` in the pool's pages (`pages` is indexed by tier;
/// `fresh[k]` is the tier and page of the plan's `k`-th fresh page) and returns the
/// moves in plan order. A range the pool's index does not hold free (a plan made on
/// other free space: a bug) drops its move.
///
/// One walk per destination page ([`SlicedPages::claim`]).
pub(crate) fn take_destinations(
    pages: &mut [Option<&mut SlicedPages>],
    plan: Plan,
    fresh: &[(u32, u32)],
) -> Vec<Planned> {
    let moves = plan.into_moves();
    // Per destination page: (offset, requested size, index of the move), by offset.
    let mut by_page: BTreeMap<(u32, u32), Vec<Asked>> = BTreeMap::new();
    for (index, planned) in moves.iter().enumerate() {
        let at = match planned.to {
            Dest::Held { tier, page } => (tier, page),
            Dest::Fresh(k) => match fresh.get(k) {
                Some(&at) => at,
                None => continue,
            },
        };
        by_page
            .entry(at)
            .or_default()
            .push((planned.offset, planned.size, index));
    }
    let mut placed: Vec<Option<(Placement, u32)>> = moves.iter().map(|_| None).collect();
    for ((tier, page), mut ranges) in by_page {
        let Some(Some(pages)) = pages.get_mut(tier as usize) else {
            continue;
        };
        ranges.sort_unstable();
        let asked: Vec<(u64, u64)> = ranges.iter().map(|&(o, s, _)| (o, s)).collect();
        for (claimed, &(_, _, index)) in pages.claim(page, &asked).into_iter().zip(&ranges) {
            debug_assert!(claimed.is_some(), "a planned range is not free");
            placed[index] = claimed.map(|placement| (placement, tier));
        }
    }
    moves
        .iter()
        .zip(placed)
        .filter_map(|(planned, placed)| {
            let (to, tier) = placed?;
            Some(Planned {
                slot: planned.slot,
                to,
                tier,
            })
        })
        .collect()
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
