//! `FakeStorage`: a small fake device for scenario and regression tests.
//!
//! A [`ComputeStorage`] over [`BytesStorage`] (host pages, so slices can be written and
//! read back) with:
//! - a byte capacity: an allocation that would take the bytes held over it fails with
//!   `IoError::OutOfMemory { size, .. }`, as a device heap does;
//! - a count of live device allocations (allocations minus deallocations *flushed*:
//!   a deallocation only returns memory at `flush`, as on a device);
//! - the total of allocations made and of `alloc` calls (failed ones included);
//! - [`FakeStorage::fail_nth_allocation`]: the n-th future `alloc` call fails with
//!   out-of-memory, once.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use wgpu_memory::storage::{BytesStorage, ComputeStorage, StorageHandle, StorageId};

use cubecl_runtime::server::IoError;

/// A fake device: host pages with a capacity and injectable allocation failures.
#[derive(Debug)]
pub struct FakeStorage {
    inner: BytesStorage,
    capacity: u64,
    /// Bytes of every page not yet deallocated *and flushed*.
    held: u64,
    /// Sizes of the pages held, by id.
    sizes: HashMap<StorageId, u64>,
    /// Deallocations waiting for `flush`.
    pending: Vec<StorageId>,
    /// `alloc` calls so far, failed ones included.
    alloc_calls: u64,
    /// Successful allocations so far.
    allocations_made: u64,
    /// Allocation calls that failed.
    failed_calls: u64,
    /// `alloc` call numbers (1-based, counted from the start) that must fail once.
    fail_at: BTreeSet<u64>,
    /// `flush` calls so far.
    flushes: u64,
    /// Largest number of live allocations seen.
    live_peak: u64,
    /// Largest number of bytes held seen.
    held_peak: u64,
}

impl FakeStorage {
    /// A fake device of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self {
            inner: BytesStorage::default(),
            capacity,
            held: 0,
            sizes: HashMap::new(),
            pending: Vec::new(),
            alloc_calls: 0,
            allocations_made: 0,
            failed_calls: 0,
            fail_at: BTreeSet::new(),
            flushes: 0,
            live_peak: 0,
            held_peak: 0,
        }
    }

    /// A fake device with no practical capacity limit.
    pub fn unbounded() -> Self {
        Self::new(u64::MAX)
    }

    /// The `n`-th future `alloc` call (1 = the next one) fails with out-of-memory, once.
    /// May be called several times to fail several future calls.
    pub fn fail_nth_allocation(&mut self, n: u64) {
        assert!(n >= 1, "n counts from 1 (the next allocation)");
        self.fail_at.insert(self.alloc_calls + n);
    }

    /// Device allocations alive now: made and not yet deallocated-and-flushed.
    pub fn live_allocations(&self) -> u64 {
        self.sizes.len() as u64
    }

    /// The most device allocations alive at once so far.
    pub fn live_peak(&self) -> u64 {
        self.live_peak
    }

    /// Bytes held from the device now (a deallocation waiting on flush still counts).
    pub fn bytes_held(&self) -> u64 {
        self.held
    }

    /// The most bytes held at once so far.
    pub fn held_peak(&self) -> u64 {
        self.held_peak
    }

    /// Successful allocations made so far.
    pub fn allocations_made(&self) -> u64 {
        self.allocations_made
    }

    /// `alloc` calls so far, failed ones included.
    pub fn alloc_calls(&self) -> u64 {
        self.alloc_calls
    }

    /// `alloc` calls that failed so far (capacity or injected).
    pub fn failed_calls(&self) -> u64 {
        self.failed_calls
    }

    /// `flush` calls so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Deallocations waiting for a flush.
    pub fn pending_deallocations(&self) -> usize {
        self.pending.len()
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Whether `id` names a page held now.
    pub fn holds(&self, id: StorageId) -> bool {
        self.sizes.contains_key(&id)
    }

    fn out_of_memory(size: u64) -> IoError {
        IoError::OutOfMemory {
            size,
            backtrace: Default::default(),
        }
    }
}

impl ComputeStorage for FakeStorage {
    type Resource = <BytesStorage as ComputeStorage>::Resource;

    fn alignment(&self) -> usize {
        self.inner.alignment()
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<Self::Resource, IoError> {
        self.inner.get(handle)
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        self.alloc_calls += 1;
        if self.fail_at.remove(&self.alloc_calls) {
            self.failed_calls += 1;
            return Err(Self::out_of_memory(size));
        }
        if self.held.saturating_add(size) > self.capacity {
            self.failed_calls += 1;
            return Err(Self::out_of_memory(size));
        }
        let handle = self.inner.alloc(size)?;
        self.sizes.insert(handle.id, size);
        self.held += size;
        self.allocations_made += 1;
        self.live_peak = self.live_peak.max(self.sizes.len() as u64);
        self.held_peak = self.held_peak.max(self.held);
        Ok(handle)
    }

    fn dealloc(&mut self, id: StorageId) {
        self.pending.push(id);
        self.inner.dealloc(id);
    }

    fn flush(&mut self) {
        self.flushes += 1;
        for id in self.pending.drain(..) {
            if let Some(size) = self.sizes.remove(&id) {
                self.held -= size;
            }
        }
        self.inner.flush();
    }

    fn bytes_allocated(&self) -> u64 {
        self.held
    }
}
