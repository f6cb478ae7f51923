//! Sweeping a [`SliceTable`] for dropped handles, and handing a dropped slice out again
//! in place (the sweeps and their bounds: the parent module's docs).

use super::{Slice, SliceTable};
use crate::memory_management::taint::Taint;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, ManagedMemoryId, MemoryLocation};

/// How much of the table a sweep for dropped handles visits.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sweep {
    /// A few slots, resuming where the previous step stopped: bounded work per reservation.
    Step,
    /// Up to [`POLL_LIMIT`] slots, resuming likewise: the whole of a table that small,
    /// before a tight placement.
    Poll,
    /// Every slot when the table holds at most [`CATCH_UP_WHOLE`] slots or the
    /// reservations since the last full sweep pay for it (at most [`CATCH_UP_RATIO`]
    /// slots per reservation, amortised); a [`Sweep::Poll`] otherwise. Before a pool
    /// grows or a whole-page pool misses: a pool with many live slices that grows often
    /// (a model loading its weights one by one) would otherwise visit every slot on
    /// every reservation.
    CatchUp,
    /// Every slot: before reports, cleanups and errors.
    All,
    /// Only the slot `index`, if it still holds the allocation `id`: the O(1) release of
    /// one allocation whose owner knows it let go
    /// ([`MemoryManagement::release`](crate::memory_management::MemoryManagement::release)).
    Slot {
        /// The slot (a location's `slice` field).
        index: u32,
        /// The allocation the slot must hold.
        id: ManagedMemoryId,
    },
}

/// A reservation a dropped slice may serve as it is ([`SliceTable::step_reusing`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reuse {
    /// The requested size in bytes.
    pub(crate) size: u64,
    /// The requested size aligned as the pool places it, in bytes: the slice's block
    /// must be exactly this long.
    pub(crate) effective: u64,
    /// The tier the slice's page must belong to (0 outside adaptive pools).
    pub(crate) tier: u32,
}

impl Reuse {
    fn fits(&self, slice: &Slice) -> bool {
        slice.block.is_some()
            && slice.tier == self.tier
            && slice.storage.size() + slice.padding == self.effective
    }
}

/// Where a pool's released slices go back to, as a sweep sees it.
pub(crate) trait FreeSpace {
    /// Returns a released slice's bytes to the pool's free space.
    fn release(&mut self, slice: &Slice);
    /// Whether the dropped `slice`'s block may be handed out again where it is to a
    /// request of its size: freeing it would leave a hole that starts at its offset
    /// (see `Tlsf::reissues_in_place`). Only such slices are reused in place
    /// ([`SliceTable::step_reusing`]).
    fn reissues_in_place(&self, slice: &Slice) -> bool;
}

/// A closure as a [`FreeSpace`] that reuses nothing in place.
struct Releasing<F>(F);

impl<F: FnMut(&Slice)> FreeSpace for Releasing<F> {
    fn release(&mut self, slice: &Slice) {
        (self.0)(slice)
    }

    fn reissues_in_place(&self, _slice: &Slice) -> bool {
        false
    }
}

/// Slots visited by one [`Sweep::Step`].
const SWEEP_STEP: usize = 4;
/// Most slots visited by one [`Sweep::Poll`].
pub(crate) const POLL_LIMIT: usize = 64;
/// Slots a [`Sweep::CatchUp`] may visit per reservation made since the last full
/// sweep, amortised.
pub(crate) const CATCH_UP_RATIO: usize = 8;
/// Tables of at most this many slots are swept whole by every [`Sweep::CatchUp`]: a
/// couple of microseconds, less than the page the pool is about to make, and a pool
/// with few slices places best when it sees every drop (with only a poll of 64 before
/// growth, the allocator bench's random trace fell from 0.814 to 0.806 efficiency on
/// average over twelve seeds, and its worst seed from 0.789 to 0.751).
pub(crate) const CATCH_UP_WHOLE: usize = 1024;

impl SliceTable {
    /// Releases the slices whose handles and bindings were all dropped, handing each to
    /// `release` (which returns its bytes to the pool's free space) before dropping it.
    pub(crate) fn sweep(&mut self, sweep: Sweep, release: impl FnMut(&Slice)) {
        let len = self.slots.len();
        if len == 0 {
            return;
        }
        let visits = match sweep {
            Sweep::Slot { index, id } => {
                self.release_one(index as usize, id, &mut Releasing(release));
                return;
            }
            Sweep::Step => SWEEP_STEP.min(len),
            Sweep::Poll => POLL_LIMIT.min(len),
            Sweep::CatchUp if self.catch_up_paid(len) => len,
            Sweep::CatchUp => POLL_LIMIT.min(len),
            Sweep::All => len,
        };
        if visits == len {
            self.since_full = 0;
        }
        self.visit(visits, None, &mut Releasing(release));
    }

    /// The dropped slice in the [hinted](Self::hint) slot, when `reuse` fits it and it
    /// [reissues in place](FreeSpace::reissues_in_place); otherwise a [`Sweep::Step`]
    /// that keeps, instead of releasing it, the first dropped slice that does, and
    /// hands it out again under a fresh handle for a reservation of `reuse.size` bytes.
    /// `None` when the step met no such slice (the others it met are released as by
    /// [`sweep`](Self::sweep)).
    ///
    /// Why: a loop that drops a buffer and asks for one of the same size (the allocator
    /// bench's `steady`, a frame's buffers) would otherwise free the block, merge it with
    /// a free upper neighbour, file the hole, find it again and split the same bytes
    /// off. Keeping the slice where it is gives the same layout without touching the
    /// placement index. A slice with a free lower neighbour is released as usual, so
    /// the two holes join.
    ///
    /// The step stops at the slice it keeps and the next step makes up the visits left
    /// (`owed`): slots after it may hold the loop's next requests, and releasing them
    /// now would lose their reuse, while dropping the visits would release other drops
    /// later than without the reuse (which moved the allocator bench's `phases` from
    /// 0.889 to 0.877 efficiency; with the visits made up, every trace is unchanged).
    ///
    /// The hint comes first because the step alone loses a whole round of reuse: at a
    /// round's start every slice is dropped, the cursor stands wherever the last round
    /// left it, and a step releases the slices it meets that do not fit, slices the
    /// round asks for next (the inference trace reused 5 % of its reservations; with
    /// the hint, 98 %). A hinted reuse owes the step's visits, made up by the next step,
    /// so drops are still released at the step's pace (without that, `phases` fell from
    /// 0.889 to 0.867 efficiency; with it, 0.877, and no other trace moved).
    pub(crate) fn step_reusing(
        &mut self,
        reuse: Reuse,
        space: &mut impl FreeSpace,
    ) -> Option<ManagedMemoryHandle> {
        let len = self.slots.len();
        if let Some(index) = self.hinted(reuse, space) {
            self.owed = (self.owed + SWEEP_STEP).min(POLL_LIMIT);
            return self.reissue(index, reuse);
        }
        let visits = (SWEEP_STEP + self.owed).min(len);
        let (kept, visited) = self.visit(visits, Some(reuse), space);
        if visited == len {
            self.since_full = 0;
        }
        self.owed = (visits - visited).min(POLL_LIMIT);
        self.reissue(kept?, reuse)
    }

    /// The [hinted](Self::hint) slot, when it holds a dropped slice `reuse` fits that
    /// reissues in place. O(1); releases nothing.
    fn hinted(&self, reuse: Reuse, space: &impl FreeSpace) -> Option<usize> {
        let index = if self.hint >= self.slots.len() {
            0
        } else {
            self.hint
        };
        let free = self.handles.get(index)?.as_ref()?.is_free();
        let slice = self.slots[index].as_ref()?;
        (free && reuse.fits(slice) && space.reissues_in_place(slice)).then_some(index)
    }

    /// Visits up to `visits` slots from the cursor on, releasing each dropped slice
    /// until it meets one `reuse` fits, where it stops. Returns that slot's index (the
    /// slot is left as it was) and the slots visited.
    fn visit(
        &mut self,
        visits: usize,
        reuse: Option<Reuse>,
        space: &mut impl FreeSpace,
    ) -> (Option<usize>, usize) {
        let len = self.slots.len();
        if len == 0 {
            return (None, 0);
        }
        let mut kept = None;
        let mut visited = 0;
        let mut index = if self.cursor >= len { 0 } else { self.cursor };
        while visited < visits && kept.is_none() {
            visited += 1;
            if self.handles[index]
                .as_ref()
                .is_some_and(ManagedMemoryHandle::is_free)
            {
                let fits = reuse.is_some_and(|r| {
                    self.slots[index]
                        .as_ref()
                        .is_some_and(|slice| r.fits(slice) && space.reissues_in_place(slice))
                });
                if fits {
                    kept = Some(index);
                } else {
                    self.release_slot(index, space);
                }
            }
            index += 1;
            if index == len {
                index = 0;
            }
        }
        #[cfg(test)]
        {
            self.visits += visited;
        }
        // Stopping at the slice kept leaves the slots after it for the next step: a
        // loop that dropped its buffers in order asks for them next, in that order.
        self.cursor = index;
        (kept, visited)
    }

    /// Gives the dropped slice in slot `index` to a new allocation of `reuse.size`
    /// bytes: a fresh handle (a fresh id, so weak bindings of the old allocation stay
    /// dead), no taint (the old allocation's failures are shed with it), cursor 0.
    fn reissue(&mut self, index: usize, reuse: Reuse) -> Option<ManagedMemoryHandle> {
        let slice = self.slots[index].as_mut()?;
        if !slice.taint.is_clean() {
            self.shed.extend(slice.taint.failures());
            slice.taint = Taint::default();
        }
        slice.storage.utilization.size = reuse.size;
        slice.padding = reuse.effective - reuse.size;
        slice.cursor = 0;
        let page = slice.page;
        let handle = ManagedMemoryHandle::new();
        let location =
            MemoryLocation::new(self.pool, page.min(u16::MAX as u32) as u16, index as u32);
        handle.descriptor().update_location(location);
        self.handles[index] = Some(handle.clone());
        self.since_full += 1;
        self.hint = index + 1;
        #[cfg(test)]
        {
            self.reissued += 1;
        }
        Some(handle)
    }

    /// Whether a [`Sweep::CatchUp`] of a table of `len` slots visits every slot: the
    /// table is small, or the reservations since the last full sweep pay for it.
    fn catch_up_paid(&self, len: usize) -> bool {
        len <= CATCH_UP_WHOLE || self.since_full.saturating_mul(CATCH_UP_RATIO) >= len
    }

    /// Releases slot `index` if it holds the allocation `id` and every owner but the
    /// pool let it go.
    fn release_one(&mut self, index: usize, id: ManagedMemoryId, space: &mut impl FreeSpace) {
        let unused = self
            .handles
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|handle| handle.descriptor().id == id && handle.is_free());
        if unused {
            self.release_slot(index, space);
        }
    }

    /// Empties slot `index`, whose handle every owner let go, and hands its slice to
    /// `space`.
    #[inline]
    fn release_slot(&mut self, index: usize, space: &mut impl FreeSpace) {
        self.handles[index] = None;
        if let Some(slice) = &self.slots[index] {
            // The allocation is gone: it carries its failures no more.
            if !slice.taint.is_clean() {
                self.shed.extend(slice.taint.failures());
            }
            space.release(slice);
            self.slots[index] = None;
            self.vacant.push(index as u32);
        }
    }
}
