//! Bindings: the slice behind a handle, its storage range, and the failures it carries.

use super::super::error_graph::{Claim, ErrorGraph, FailureId};
use super::super::pool::DynamicPool;
use super::super::pool::slices::{Slice, SliceTable, not_found};
use super::super::taint::Taint;
use super::MemoryManagement;
use crate::storage::{ComputeStorage, StorageHandle};
use cubecl_runtime::memory_management::{
    DEDICATED_POOL_POS, ManagedMemoryBinding, ManagedMemoryHandle, PERSISTENT_POOL_POS,
};
use cubecl_runtime::server::IoError;
use std::ops::Range;

impl<S: ComputeStorage> MemoryManagement<S> {
    /// Looks up whether `range` (offsets from the slice's start) of `binding`'s slice
    /// has a failure marked on it, and returns one such failure. `None` for clean bytes
    /// and for a binding that names no slice here.
    pub fn failure(&self, binding: &ManagedMemoryBinding, range: Range<u64>) -> Option<FailureId> {
        let table = self.table(binding).ok()?;
        table.find(binding).ok()?.taint.failure(&range)
    }

    /// Why the bytes `range` of `binding` cannot be trusted, if they cannot:
    /// [`Claim::Unallocated`] when the handle has no slice (its reservation failed, or
    /// the slice is gone), [`Claim::Failed`] when a failure claims any of the bytes.
    pub fn claim(&self, binding: &ManagedMemoryBinding, range: Range<u64>) -> Option<Claim> {
        self.trusted_slice(binding, range).err()
    }

    /// Where the bytes of `binding`'s slice are (its storage handle) when the bytes
    /// `range` can be trusted, else the [`Claim`] that refuses them, as
    /// [`claim`](Self::claim) gives it. One slice lookup for both answers: a read of a
    /// thousand handles asks this once per handle.
    pub fn trusted_storage(
        &self,
        binding: &ManagedMemoryBinding,
        range: Range<u64>,
    ) -> Result<StorageHandle, Claim> {
        self.trusted_slice(binding, range)
            .map(|slice| slice.storage.clone())
    }

    fn trusted_slice(
        &self,
        binding: &ManagedMemoryBinding,
        range: Range<u64>,
    ) -> Result<&Slice, Claim> {
        let slice = self.table(binding).and_then(|table| table.find(binding));
        let slice = slice.map_err(|_| Claim::Unallocated(binding.id()))?;
        match slice.taint.failure(&range) {
            None => Ok(slice),
            Some(failure) => Err(Claim::Failed(failure, binding.id())),
        }
    }

    /// Claims `range` of the allocation behind `binding` for `failure` (those bytes leave
    /// any other failure). Unknown bindings are ignored.
    pub fn taint(&mut self, binding: &ManagedMemoryBinding, range: Range<u64>, failure: FailureId) {
        self.with_taint(binding, |taint, graph| taint.taint(range, failure, graph));
    }

    /// Runs `change` on the taint of the slice behind `binding`, if it resolves.
    pub(super) fn with_taint(
        &mut self,
        binding: &ManagedMemoryBinding,
        change: impl FnOnce(&mut Taint, &mut ErrorGraph),
    ) {
        // The graph is moved out for the call: the slice and the graph are both ours.
        let mut graph = std::mem::take(&mut self.graph);
        let location = binding.descriptor().location();
        if let Ok(table) = self.table_mut(location.pool)
            && let Ok(slice) = table.find_mut(binding)
        {
            change(&mut slice.taint, &mut graph);
        }
        self.graph = graph;
    }

    /// Clears the failure marks on `range` of `binding`'s slice, after work that
    /// succeeded wrote those bytes. Marks outside `range` stay. Does nothing for a
    /// binding that names no slice here.
    pub fn written(&mut self, binding: &ManagedMemoryBinding, range: Range<u64>) {
        self.with_taint(binding, |taint, graph| taint.written(range, graph));
    }

    pub(super) fn table(&self, binding: &ManagedMemoryBinding) -> Result<&SliceTable, IoError> {
        let location = binding.descriptor().location();
        if location.init == 0 {
            return Err(not_found("the handle was never given a slice"));
        }
        match location.pool {
            PERSISTENT_POOL_POS => Ok(self.persistent.slices()),
            DEDICATED_POOL_POS => Ok(self.dedicated.slices()),
            position => self
                .dynamic
                .get(position as usize)
                .map(DynamicPool::slices)
                .ok_or_else(|| not_found("the handle names a pool this layout does not have")),
        }
    }

    pub(super) fn table_mut(&mut self, location_pool: u8) -> Result<&mut SliceTable, IoError> {
        match location_pool {
            PERSISTENT_POOL_POS => Ok(self.persistent.slices_mut()),
            DEDICATED_POOL_POS => Ok(self.dedicated.slices_mut()),
            position => self
                .dynamic
                .get_mut(position as usize)
                .map(DynamicPool::slices_mut)
                .ok_or_else(|| not_found("the handle names a pool this layout does not have")),
        }
    }

    /// Gives the slice reserved under `reserved` to `assigned` (a handle minted up front
    /// by a client), with the stream `cursor`. `reserved` becomes stale.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when `reserved` names no live slice, or when `assigned`
    /// already names another slice (a handle names one allocation: two slots holding it
    /// would keep each other alive for good). Binding a handle to its own slice only
    /// records the cursor.
    pub fn bind(
        &mut self,
        reserved: ManagedMemoryHandle,
        assigned: ManagedMemoryHandle,
        cursor: u64,
    ) -> Result<(), IoError> {
        let location = reserved.descriptor().location();
        if location.init == 0 {
            return Err(not_found("the reserved handle was never given a slice"));
        }
        // A handle minted for this reservation has no location yet.
        let rebind = assigned.descriptor().is_allocated();
        if rebind && assigned.descriptor().id != reserved.descriptor().id {
            return Err(not_found(
                "the assigned handle already names a slice: bind takes a handle minted for \
                 this reservation",
            ));
        }
        let binding = assigned.clone().binding();
        self.table_mut(location.pool)?
            .bind(reserved, assigned, cursor)?;
        if !rebind {
            // A new allocation on the slice: the old one's claims are not its bytes' story.
            self.with_taint(&binding, |taint, graph| taint.clear(graph));
        }
        Ok(())
    }

    /// The stream cursor recorded at bind time.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when the binding names no live slice.
    pub fn get_cursor(&self, binding: &ManagedMemoryBinding) -> Result<u64, IoError> {
        Ok(self.table(binding)?.find(binding)?.cursor)
    }

    /// The page and range of the slice behind `binding`: the page's storage id, the
    /// slice's byte offset in the page, and its requested size in bytes.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when the binding was never placed, its slice was released,
    /// or its location now holds another allocation (never another allocation's bytes).
    pub fn get_storage(&self, binding: &ManagedMemoryBinding) -> Result<StorageHandle, IoError> {
        Ok(self.table(binding)?.find(binding)?.storage.clone())
    }

    /// The storage resource of the slice behind `binding`, narrowed by `offset_start`
    /// bytes from its start and `offset_end` bytes from its end.
    ///
    /// # Errors
    /// [`IoError::NotFound`] as [`get_storage`](Self::get_storage);
    /// [`IoError::Unknown`] when the offsets exceed the slice's size.
    pub fn get_resource(
        &mut self,
        binding: &ManagedMemoryBinding,
        offset_start: Option<u64>,
        offset_end: Option<u64>,
    ) -> Result<S::Resource, IoError> {
        let handle = self.get_storage(binding)?;
        let (start, end) = (offset_start.unwrap_or(0), offset_end.unwrap_or(0));
        if start.saturating_add(end) > handle.size() {
            return Err(IoError::Unknown {
                description: format!(
                    "offsets {start} + {end} bytes exceed the slice's {} bytes",
                    handle.size()
                ),
                backtrace: Default::default(),
            });
        }
        self.storage
            .get(&handle.offset_start(start).offset_end(end))
    }
}
