//! The slices of one pool: a slab addressed by the `slice` field of a handle's location.
//!
//! A live slice never moves in the slab, so a handle's location stays valid for the
//! slice's whole life and no cleanup ever renumbers it. A slot is reused only after its
//! slice was released, and every lookup checks the slot's identity against the binding,
//! so a stale location answers `NotFound` instead of another allocation's bytes.
//!
//! A dropped handle says nothing, so the table polls for handles that every owner let go.
//! Before each placement a pool sweeps a [`Sweep::Step`] of a few slots, resuming where the
//! last one stopped. When the placement is tight (free space is scarce and no free block
//! fits closely) it also sweeps a [`Sweep::Poll`]: up to [`POLL_LIMIT`](sweep::POLL_LIMIT)
//! slots, the whole of a table that small. A tight placement in a table of at most
//! `POLL_LIMIT` slots then sees every byte freed since the last reservation: placing around
//! dropped-but-unswept blocks is what made the allocator bench's training trace reserve 57
//! MiB where 52 MiB do (benches/README.md). A larger table is polled round-robin,
//! `POLL_LIMIT` slots at a time, so the work per reservation stays bounded whatever the
//! number of live slices. Before a pool grows it sweeps a [`Sweep::CatchUp`]: every slot of
//! a table of at most [`CATCH_UP_WHOLE`](sweep::CATCH_UP_WHOLE) slots, so such a pool never
//! grows on stale knowledge; a larger table is swept whole only as often as the
//! reservations since the last full sweep pay for
//! ([`CATCH_UP_RATIO`](sweep::CATCH_UP_RATIO) slots each).
//! The pool's clones of the handles sit in an array of their own, apart from the rest
//! of each slice, so a sweep reads 16 bytes and one reference count per slot.
//!
//! A reservation's own step may hand a dropped slice out again where it is, under a
//! fresh handle, when it has the reservation's aligned size and the placement would put
//! the reservation exactly there once the slice were freed
//! ([`SliceTable::step_reusing`]): the layout is the same and the placement index is not
//! touched.

use super::pages::Placement;
use crate::memory_management::error_graph::{ErrorGraph, FailureId};
use crate::memory_management::taint::Taint;
use crate::memory_management::usage::SliceSums;
use crate::storage::StorageHandle;
use cubecl_runtime::memory_management::{
    ManagedMemoryBinding, ManagedMemoryHandle, ManagedMemoryId, MemoryLocation, WeakMemoryBinding,
};
use cubecl_runtime::server::IoError;

mod sweep;

#[cfg(test)]
pub(crate) use sweep::{CATCH_UP_RATIO, CATCH_UP_WHOLE, POLL_LIMIT};
pub(crate) use sweep::{FreeSpace, Reuse, Sweep};

/// One reservation's slice of a page (its handle is kept apart, see the module docs).
#[derive(Debug)]
pub(crate) struct Slice {
    /// The page's storage id, the slice's offset in the page and the *requested* size.
    pub(crate) storage: StorageHandle,
    /// Bytes between the requested size and the aligned slice size.
    pub(crate) padding: u64,
    /// The stream cursor given at bind time (wgpu always binds 0).
    pub(crate) cursor: u64,
    /// The index of the page in its pool (or in its tier).
    pub(crate) page: u32,
    /// The placement block behind the slice (sliced and adaptive pools).
    pub(crate) block: Option<crate::memory_management::placement::BlockId>,
    /// The tier of an adaptive pool the page belongs to (0 elsewhere).
    pub(crate) tier: u32,
    /// Bytes a failure left unwritten.
    pub(crate) taint: Taint,
}

/// A slab of slices with a free list of slot indices.
#[derive(Debug)]
pub(crate) struct SliceTable {
    pool: u8,
    /// The pool's own clone of each live slice's handle, by slot: the slice is free once
    /// that clone is the only owner left.
    handles: Vec<Option<ManagedMemoryHandle>>,
    /// The rest of each live slice, by slot.
    slots: Vec<Option<Slice>>,
    vacant: Vec<u32>,
    cursor: usize,
    /// The slot after the one last handed out (placed or reissued): a loop that drops
    /// its buffers and asks for the same sizes in the same order finds its next slice
    /// there, whatever the sweep cursor has passed over meanwhile.
    hint: usize,
    /// Slices inserted since the last sweep that visited every slot.
    since_full: usize,
    /// Visits the last [`step_reusing`](Self::step_reusing) steps left undone by
    /// stopping at the slice they kept, made up by the next one (at most
    /// [`POLL_LIMIT`](sweep::POLL_LIMIT)).
    owed: usize,
    /// Slots visited by sweeps, for the work-bound tests.
    #[cfg(test)]
    pub(crate) visits: usize,
    /// Dropped slices handed out again in place, for the reuse tests.
    #[cfg(test)]
    pub(crate) reissued: usize,
    /// Failures carried by released slices, to uncount in the error graph.
    shed: Vec<FailureId>,
}

pub(crate) fn not_found(reason: &'static str) -> IoError {
    IoError::NotFound {
        backtrace: Default::default(),
        reason: reason.into(),
    }
}

impl SliceTable {
    pub(crate) fn new(pool: u8) -> Self {
        Self {
            pool,
            handles: Vec::new(),
            slots: Vec::new(),
            vacant: Vec::new(),
            cursor: 0,
            hint: 0,
            since_full: 0,
            owed: 0,
            #[cfg(test)]
            visits: 0,
            #[cfg(test)]
            reissued: 0,
            shed: Vec::new(),
        }
    }

    /// Stores a slice placed in a sliced page (of `tier`) and returns its handle.
    pub(crate) fn insert(&mut self, placed: Placement, tier: u32) -> ManagedMemoryHandle {
        self.insert_slice(
            placed.storage,
            placed.padding,
            placed.page,
            Some(placed.block),
            tier,
        )
    }

    /// Stores a new slice and returns the handle that names it.
    pub(crate) fn insert_slice(
        &mut self,
        storage: StorageHandle,
        padding: u64,
        page: u32,
        block: Option<crate::memory_management::placement::BlockId>,
        tier: u32,
    ) -> ManagedMemoryHandle {
        let handle = ManagedMemoryHandle::new();
        self.since_full += 1;
        let index = match self.vacant.pop() {
            Some(index) => index,
            None => {
                self.handles.push(None);
                self.slots.push(None);
                // A u32 slab index: 4 billion live slices in one pool cannot be reached
                // before the device runs out of memory.
                (self.slots.len() - 1) as u32
            }
        };
        self.hint = index as usize + 1;
        // The page field is informational: lookups go through the slot index.
        let location = MemoryLocation::new(self.pool, page.min(u16::MAX as u32) as u16, index);
        handle.descriptor().update_location(location);
        self.handles[index as usize] = Some(handle.clone());
        self.slots[index as usize] = Some(Slice {
            storage,
            padding,
            cursor: 0,
            page,
            block,
            tier,
            taint: Taint::default(),
        });
        handle
    }

    /// The slice a binding names, after checking that the slot still holds *that*
    /// allocation.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when the binding was never placed, its slot is empty, or the
    /// slot now holds another allocation.
    pub(crate) fn find(&self, binding: &ManagedMemoryBinding) -> Result<&Slice, IoError> {
        let index = self.index_of(binding)?;
        self.slots[index]
            .as_ref()
            .ok_or_else(|| not_found("the slice behind this binding was released"))
    }

    pub(crate) fn find_mut(
        &mut self,
        binding: &ManagedMemoryBinding,
    ) -> Result<&mut Slice, IoError> {
        let index = self.index_of(binding)?;
        self.slots[index]
            .as_mut()
            .ok_or_else(|| not_found("the slice behind this binding was released"))
    }

    fn index_of(&self, binding: &ManagedMemoryBinding) -> Result<usize, IoError> {
        let location = binding.descriptor().location();
        if location.init == 0 {
            return Err(not_found("the handle was never given a slice"));
        }
        let index = location.slice as usize;
        match self.handles.get(index).and_then(Option::as_ref) {
            None => Err(not_found("the slice behind this binding was released")),
            Some(handle) if handle.descriptor().id != binding.id() => {
                Err(not_found("the location now holds a different allocation"))
            }
            Some(_) => Ok(index),
        }
    }

    /// Moves the slice reserved under `reserved` to the handle `assigned` (the server
    /// protocol: a client mints its handle up front and the memory binds a fresh
    /// reservation to it). `reserved` becomes stale.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when `reserved` names no live slice of this table.
    pub(crate) fn bind(
        &mut self,
        reserved: ManagedMemoryHandle,
        assigned: ManagedMemoryHandle,
        cursor: u64,
    ) -> Result<(), IoError> {
        let binding = reserved.clone().binding();
        let index = self.index_of(&binding)?;
        assigned
            .descriptor()
            .update_location(reserved.descriptor().location());
        self.handles[index] = Some(assigned);
        if let Some(slice) = self.slots[index].as_mut() {
            slice.cursor = cursor;
        }
        Ok(())
    }

    /// The live slices with their slot index and allocation id, for a compaction's
    /// census: `(slot, id, slice)` of every slice some handle or binding still holds.
    pub(crate) fn live_slots(&self) -> impl Iterator<Item = (u32, ManagedMemoryId, &Slice)> + '_ {
        self.handles
            .iter()
            .zip(&self.slots)
            .enumerate()
            .filter_map(|(index, pair)| match pair {
                (Some(handle), Some(slice)) if !handle.is_free() => {
                    Some((index as u32, handle.descriptor().id, slice))
                }
                _ => None,
            })
    }

    /// A weak binding of the allocation in slot `slot` (a dangling one for an empty slot).
    pub(crate) fn weak_binding(&self, slot: u32) -> WeakMemoryBinding {
        match self.handles.get(slot as usize).and_then(Option::as_ref) {
            Some(handle) => handle.clone().binding().downgrade(),
            None => ManagedMemoryHandle::new().binding().downgrade(),
        }
    }

    /// Moves the live slice in slot `slot` to `placed` (in `tier`), keeping its slot, id,
    /// size, cursor and taint: every handle and binding of the allocation follows it, as
    /// lookups go through the slot. Updates the page the handle's location names. Returns
    /// the allocation's id and the slice as it was (its old storage range, page, tier and
    /// block), or `None` for an empty slot.
    pub(crate) fn relocate(
        &mut self,
        slot: u32,
        placed: Placement,
        tier: u32,
    ) -> Option<(ManagedMemoryId, Slice)> {
        let index = slot as usize;
        let handle = self.handles.get(index)?.as_ref()?;
        let slice = self.slots.get_mut(index)?.as_mut()?;
        let moved = Slice {
            storage: placed.storage,
            padding: placed.padding,
            cursor: slice.cursor,
            page: placed.page,
            block: Some(placed.block),
            tier,
            taint: std::mem::take(&mut slice.taint),
        };
        handle
            .descriptor()
            .update_page(placed.page.min(u16::MAX as u32) as u16);
        Some((handle.descriptor().id, std::mem::replace(slice, moved)))
    }

    /// Puts back a slice [`relocate`](Self::relocate) moved (its copy was refused), with
    /// the taint it carries now. Returns whether the slot was live.
    pub(crate) fn restore(&mut self, slot: u32, mut old: Slice) -> bool {
        let index = slot as usize;
        let (Some(Some(handle)), Some(Some(slice))) =
            (self.handles.get(index), self.slots.get_mut(index))
        else {
            return false;
        };
        old.taint = std::mem::take(&mut slice.taint);
        handle
            .descriptor()
            .update_page(old.page.min(u16::MAX as u32) as u16);
        *slice = old;
        true
    }

    /// Uncounts in `graph` the failures of slices released since the last call.
    #[inline]
    pub(crate) fn settle(&mut self, graph: &mut ErrorGraph) {
        // Runs on every reservation; almost always there is nothing to settle.
        if self.shed.is_empty() {
            return;
        }
        for failure in self.shed.drain(..) {
            graph.untag(failure);
        }
    }

    /// Slots holding a slice (live, or dropped and not yet swept).
    pub(crate) fn live(&self) -> usize {
        self.slots.len() - self.vacant.len()
    }

    /// Count, in-use and padding bytes of the slices some handle or binding still holds.
    pub(crate) fn sums(&self) -> SliceSums {
        let mut sums = SliceSums::default();
        for (handle, slice) in self.handles.iter().zip(&self.slots) {
            if let (Some(handle), Some(slice)) = (handle, slice)
                && !handle.is_free()
            {
                sums.add(slice.storage.size(), slice.padding);
            }
        }
        sums
    }

    /// The slices some handle or binding still holds, with the pool's clone of each
    /// handle: exactly those [`sums`](Self::sums) counts (for page maps).
    pub(crate) fn live_slices(&self) -> impl Iterator<Item = (&ManagedMemoryHandle, &Slice)> + '_ {
        self.handles
            .iter()
            .zip(&self.slots)
            .filter_map(|(handle, slice)| match (handle, slice) {
                (Some(handle), Some(slice)) if !handle.is_free() => Some((handle, slice)),
                _ => None,
            })
    }
}
