//! Planning one compaction pass: which pages empty, and where each of their slices goes.
//!
//! The plan is made in a planning index of its own, a [`Tlsf`] holding one region per
//! page that takes moves (its free ranges copied from the pool's index), so a candidate
//! that does not fit is undone there and the pool's own index is never touched until
//! the plan is final. Fresh pages are regions of the planning index too, named by their
//! order; the pool reserves them once the plan says which are worth it.
//!
//! 1. **Held pages.** Each candidate in turn (sparsest first) has its own region closed
//!    ([`Tlsf::hold_free`]: its slices may not land in it) and its slices placed largest
//!    first. All placed: the page is planned empty, its region stays closed, and each
//!    page that took one of its slices is marked as having received (its census is
//!    stale: it is no longer a candidate this pass). One missing: its placements are
//!    freed, its region reopened, and it waits for step 2.
//! 2. **Fresh pages.** The candidates step 1 left are packed, in order, into fresh pages
//!    (and whatever holes remain): a fresh page is opened, candidates are emptied into
//!    it until one no longer fits, and the page is kept only if the pages emptied with
//!    it hold more bytes than it does; the first that does not pay is undone and ends
//!    the step (the candidates after it are fuller still).
//!
//! Bounds: each candidate is tried at most three times (step 1, and twice in step 2:
//! once in the page that filled, once in a fresh one); each try places each of its
//! slices once. The pass stops once its [`MoveLimits`] or its page count would be passed.

use super::super::pages::SlicedPages;
use super::PageCensus;
use crate::memory_management::MoveLimits;
use crate::memory_management::placement::{BlockId, Tlsf};
use std::collections::BTreeMap;

/// Where a planned slice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    /// A page the pool holds: its tier and index.
    Held { tier: u32, page: u32 },
    /// The `k`-th fresh page of the plan.
    Fresh(usize),
}

/// One planned move: the slice's slot, its requested size, and where it goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Move {
    pub(crate) slot: u32,
    pub(crate) size: u64,
    pub(crate) to: Dest,
    /// Byte offset of the destination in its page.
    pub(crate) offset: u64,
}

/// The moves of one pass, and the fresh pages they need.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    moves: Vec<Move>,
    /// For each fresh page, in order, the index of the first move of the pages
    /// emptied with its help: no earlier move depends on it.
    fresh_starts: Vec<usize>,
}

impl Plan {
    /// How many fresh pages the plan needs.
    pub(crate) fn fresh_pages(&self) -> usize {
        self.fresh_starts.len()
    }

    /// Drops fresh page `k` and the ones after it, with the moves of every page planned
    /// empty with their help (the storage refused page `k`): those pages stay.
    pub(crate) fn without_fresh_from(&mut self, k: usize) {
        if let Some(&start) = self.fresh_starts.get(k) {
            self.moves.truncate(start);
            self.fresh_starts.truncate(k);
        }
    }

    /// The moves, in plan order.
    pub(crate) fn into_moves(self) -> Vec<Move> {
        self.moves
    }
}

/// What a pass plans with.
pub(crate) struct Request<'a> {
    /// Whether a page takes moved slices ([`super::Census::takes_moves`]).
    pub(crate) takes_moves: &'a dyn Fn(u32, u32) -> bool,
    /// The pages to empty, in the order to try them.
    pub(crate) candidates: Vec<&'a PageCensus>,
    /// The tiers whose pages may take the candidates' slices, with their pages.
    pub(crate) tiers: Vec<(u32, &'a SlicedPages)>,
    /// The size of a fresh page, in bytes, where the pass may make them.
    pub(crate) fresh_page: Option<u64>,
    pub(crate) limits: MoveLimits,
    /// The most pages planned empty.
    pub(crate) max_pages: usize,
}

/// Plans one pass (see the module docs).
pub(crate) fn plan(request: Request<'_>) -> Plan {
    let Some(granule) = request.tiers.first().map(|(_, pages)| pages.granule()) else {
        return Plan::default();
    };
    let mut planner = Planner::new(&request, granule);
    let mut left = Vec::new();
    for &candidate in &request.candidates {
        if planner.try_empty(candidate) == Tried::NoRoom {
            left.push(candidate);
        }
    }
    if let Some(size) = request.fresh_page {
        planner.pack_into_fresh(&left, size);
    }
    planner.plan
}

/// How trying to empty one candidate went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tried {
    Emptied,
    /// One of its slices found no room: nothing of it is planned.
    NoRoom,
    /// Not tried: it received moved slices this pass, or it would pass the limits.
    Skipped,
}

/// A fresh page being filled: its order, and the bytes of the pages emptied into it.
#[derive(Debug, Clone, Copy)]
struct Open {
    first_move: usize,
    emptied_bytes: u64,
    emptied: usize,
}

struct Planner<'r, 'a> {
    request: &'r Request<'a>,
    index: Tlsf,
    /// Where each region of the planning index is.
    regions: Vec<Dest>,
    /// The region of each held page in the planning index.
    region_of: BTreeMap<(u32, u32), u32>,
    /// Regions that took moved slices this pass.
    received: Vec<bool>,
    plan: Plan,
    bytes: u64,
    emptied: usize,
}

impl<'r, 'a> Planner<'r, 'a> {
    /// The planning index: every page of `request.tiers` that takes moves, with its
    /// free ranges.
    fn new(request: &'r Request<'a>, granule: u64) -> Self {
        let mut index = Tlsf::new(granule);
        let mut regions = Vec::new();
        let mut region_of = BTreeMap::new();
        for &(tier, pages) in &request.tiers {
            for page in pages.held_indices() {
                if (request.takes_moves)(tier, page) {
                    let region = regions.len() as u32;
                    index.add_region_with_free(
                        region,
                        pages.size_of(page),
                        &pages.free_ranges(page),
                    );
                    regions.push(Dest::Held { tier, page });
                    region_of.insert((tier, page), region);
                }
            }
        }
        let received = vec![false; regions.len()];
        Self {
            request,
            index,
            regions,
            region_of,
            received,
            plan: Plan::default(),
            bytes: 0,
            emptied: 0,
        }
    }

    /// Plans `candidate` empty if all its slices find room (outside its own page).
    fn try_empty(&mut self, candidate: &PageCensus) -> Tried {
        let limits = self.request.limits;
        let region = self
            .region_of
            .get(&(candidate.tier, candidate.page))
            .copied();
        if self.emptied >= self.request.max_pages
            || self.bytes.saturating_add(candidate.live) > limits.max_bytes
            || self.plan.moves.len().saturating_add(candidate.slots.len()) > limits.max_moves
            || region.is_some_and(|region| self.received[region as usize])
        {
            return Tried::Skipped;
        }
        let closed = region.map_or_else(Vec::new, |region| self.index.hold_free(region));
        let mut order = candidate.slots.clone();
        order.sort_by_key(|&(slot, _, effective)| (std::cmp::Reverse(effective), slot));
        let mut placed: Vec<(BlockId, Move)> = Vec::with_capacity(order.len());
        for &(slot, size, effective) in &order {
            let Some(block) = self.index.allocate_thorough(effective) else {
                break;
            };
            let to = self.regions[block.region as usize];
            placed.push((
                block.id,
                Move {
                    slot,
                    size,
                    to,
                    offset: block.offset,
                },
            ));
        }
        if placed.len() < order.len() {
            for (block, _) in placed {
                self.index.free(block);
            }
            for block in closed {
                self.index.free(block);
            }
            return Tried::NoRoom;
        }
        // Its region stays closed: a page planned empty takes nothing.
        self.bytes += candidate.live;
        self.emptied += 1;
        for (_, planned) in placed {
            if let Dest::Held { tier, page } = planned.to
                && let Some(&region) = self.region_of.get(&(tier, page))
            {
                self.received[region as usize] = true;
            }
            self.plan.moves.push(planned);
        }
        Tried::Emptied
    }

    /// Step 2: packs `left` into fresh pages of `size` bytes while each pays.
    fn pack_into_fresh(&mut self, left: &[&PageCensus], size: u64) {
        let mut open: Option<Open> = None;
        let mut next = 0;
        while let Some(&candidate) = left.get(next) {
            let page = match open {
                Some(page) => page,
                None => {
                    let region = self.regions.len() as u32;
                    self.index.add_region(region, size);
                    self.regions.push(Dest::Fresh(self.plan.fresh_starts.len()));
                    self.received.push(false);
                    let page = Open {
                        first_move: self.plan.moves.len(),
                        emptied_bytes: 0,
                        emptied: 0,
                    };
                    open = Some(page);
                    page
                }
            };
            match self.try_empty(candidate) {
                Tried::Emptied => {
                    open = Some(Open {
                        emptied_bytes: page.emptied_bytes + candidate.page_size,
                        emptied: page.emptied + 1,
                        ..page
                    });
                    next += 1;
                }
                // Full: close this page and try the candidate in a new one, unless it
                // did not fit an empty one either.
                Tried::NoRoom if page.emptied > 0 => {
                    if !self.close(page, size) {
                        return;
                    }
                    open = None;
                }
                Tried::NoRoom | Tried::Skipped => next += 1,
            }
        }
        if let Some(page) = open {
            self.close(page, size);
        }
    }

    /// Keeps fresh page `page` if the pages emptied into it hold more bytes than it
    /// does; otherwise undoes their moves. Returns whether it was kept.
    fn close(&mut self, page: Open, size: u64) -> bool {
        if page.emptied_bytes > size {
            self.plan.fresh_starts.push(page.first_move);
            return true;
        }
        self.plan.moves.truncate(page.first_move);
        false
    }
}
