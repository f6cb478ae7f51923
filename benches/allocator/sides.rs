//! The sides the bench compares: this crate's memory, cubecl-server's, and the handle
//! floor; and the storage wrapper that counts pages.

use std::fmt::Display;
use std::sync::Arc;

use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration, MemoryUsage};
use cubecl_runtime::server::IoError;
use cubecl_runtime::storage::{ComputeStorage, StorageHandle, StorageId};

use wgpu_memory::memory_management::Pin;
use wgpu_memory::storage::CopyStorage;

use crate::traces::GIB;

/// Device properties given to both sides: largest page 2 GiB, alignment 256.
pub const MAX_PAGE_SIZE: u64 = 2 * GIB;
pub const ALIGNMENT: u64 = 256;

pub const OURS: &str = "wgpu-memory";
pub const PEER: &str = "cubecl-server";
pub const FLOOR: &str = "handle-floor";

/// What a trace needs from a memory.
pub trait Memory {
    type Error: Display;
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error>;
    fn usage(&self) -> MemoryUsage;
    /// Gives every free page back to the storage (untimed, after a replay: the traces
    /// are closed, so that is every page). cubecl-server's `BytesStorage` frees pages
    /// only on `dealloc`, not on drop, so a memory dropped without this leaks them.
    fn release_all(&mut self);
    /// What a user's `cleanup()` does at the end of a trace, with the trace's live
    /// allocations still held: ours compacts, then gives back every free page; the peer
    /// gives back its free pages. Returns the largest page still held, in bytes.
    fn cleanup_live(&mut self) -> u64 {
        self.release_all();
        0
    }
}

fn properties() -> cubecl_ir::MemoryDeviceProperties {
    cubecl_ir::MemoryDeviceProperties::new(MAX_PAGE_SIZE, ALIGNMENT)
}

/// This crate's memory with `MemoryConfiguration::default()`. Reservations do not gather
/// holes here (`reserve`, not `reserve_making_room` with `CompactNow`): on host memory
/// each gathering is a real memcpy, which made growth-heavy traces 10-450 times slower
/// (README, "With compaction"). The cleanup at the end compacts.
pub struct Ours<S: ComputeStorage>(pub wgpu_memory::memory_management::MemoryManagement<S>);

impl<S: ComputeStorage> Ours<S> {
    pub fn new(storage: S) -> Self {
        Self(
            wgpu_memory::memory_management::MemoryManagement::from_configuration(
                storage,
                &properties(),
                MemoryConfiguration::default(),
                wgpu_memory::memory_management::MemoryManagementOptions::new("bench"),
            ),
        )
    }
}

impl<S: CopyStorage> Memory for Ours<S> {
    type Error = wgpu_memory::memory_management::ReserveError;

    #[inline]
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        self.0.reserve(size)
    }

    fn usage(&self) -> MemoryUsage {
        self.0.memory_usage()
    }

    fn release_all(&mut self) {
        self.0
            .cleanup(wgpu_memory::memory_management::Cleanup::Explicit);
    }

    fn cleanup_live(&mut self) -> u64 {
        // As many passes as it takes: the bound is per pass.
        while !self.0.compact(u64::MAX, &|_, _| Pin::Free).is_empty() {
            self.0.release_moved();
        }
        self.release_all();
        self.0
            .page_map()
            .iter()
            .flat_map(|pool| pool.pages.iter().map(|page| page.size))
            .max()
            .unwrap_or(0)
    }
}

/// cubecl-server 0.12.0-pre.1's memory with `MemoryConfiguration::default()`,
/// reserving with `PageUpdate::Allow`.
pub struct Peer<S: ComputeStorage> {
    pub memory: cubecl_server::memory_management::MemoryManagement<S>,
    failures: cubecl_server::memory_management::ErrorGraph,
}

impl<S: ComputeStorage> Peer<S> {
    pub fn new(storage: S) -> Self {
        Self {
            memory: cubecl_server::memory_management::MemoryManagement::from_configuration(
                storage,
                &properties(),
                MemoryConfiguration::default(),
                Arc::new(cubecl_server::logging::ServerLogger::default()),
                cubecl_server::memory_management::MemoryManagementOptions::new("bench"),
            ),
            failures: Default::default(),
        }
    }
}

impl<S: ComputeStorage> Memory for Peer<S> {
    type Error = IoError;

    #[inline]
    fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        self.memory.reserve(
            size,
            cubecl_server::memory_management::PageUpdate::Allow,
            &mut self.failures,
        )
    }

    fn usage(&self) -> MemoryUsage {
        self.memory.memory_report().usage()
    }

    fn release_all(&mut self) {
        self.memory.cleanup(
            cubecl_server::memory_management::Cleanup::Explicit,
            &mut self.failures,
        );
    }
}

/// The least any allocator returning cubecl's handle type does per operation: mint a
/// `ManagedMemoryHandle` (a fresh id and two `Arc`s, as the spec's value type requires:
/// ids are never reused), keep a clone to learn when every owner let go, and notice that
/// it did. No bytes are placed. Both real sides pay this, so `peer ns/op / floor ns/op`
/// is the largest speedup any allocator could show on a trace.
pub struct HandleFloor {
    kept: Vec<ManagedMemoryHandle>,
    /// The list length that triggers the next pass.
    next_pass: usize,
}

impl HandleFloor {
    pub fn new() -> Self {
        Self {
            kept: Vec::new(),
            next_pass: 64,
        }
    }
}

impl Memory for HandleFloor {
    type Error = std::convert::Infallible;

    #[inline]
    fn reserve(&mut self, _size: u64) -> Result<ManagedMemoryHandle, Self::Error> {
        // Forget the dropped handles in one pass once the list doubles: one `is_free` per
        // reservation, amortised.
        if self.kept.len() >= self.next_pass {
            self.kept.retain(|handle| !handle.is_free());
            self.next_pass = (2 * self.kept.len()).max(64);
        }
        let handle = ManagedMemoryHandle::new();
        self.kept.push(handle.clone());
        Ok(handle)
    }

    fn usage(&self) -> MemoryUsage {
        MemoryUsage::default()
    }

    fn release_all(&mut self) {
        self.kept.clear();
    }
}

/// Counts the pages a storage makes, and the most bytes it held at once. Used on both
/// sides in the accounting pass (never in the timed runs).
pub struct CountingStorage<S> {
    pub inner: S,
    pub allocs: u64,
    pub peak_bytes: u64,
}

impl<S> CountingStorage<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            allocs: 0,
            peak_bytes: 0,
        }
    }
}

impl<S: ComputeStorage> ComputeStorage for CountingStorage<S> {
    type Resource = S::Resource;

    fn alignment(&self) -> usize {
        self.inner.alignment()
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<Self::Resource, IoError> {
        self.inner.get(handle)
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        let handle = self.inner.alloc(size)?;
        self.allocs += 1;
        self.peak_bytes = self.peak_bytes.max(self.inner.bytes_allocated());
        Ok(handle)
    }

    fn dealloc(&mut self, id: StorageId) {
        self.inner.dealloc(id)
    }

    fn flush(&mut self) {
        self.inner.flush()
    }

    fn bytes_allocated(&self) -> u64 {
        self.inner.bytes_allocated()
    }
}

impl<S: CopyStorage> CopyStorage for CountingStorage<S> {
    fn copy(&mut self, from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError> {
        self.inner.copy(from, to)
    }
}

/// Reaches the counting storage inside either side.
pub trait Counted: Memory {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage>;
    /// Our `BytesStorage`'s own page count, to cross-check the wrapper.
    fn own_count(&mut self) -> Option<u64> {
        None
    }
}

impl Counted for Ours<CountingStorage<wgpu_memory::storage::BytesStorage>> {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage> {
        self.0.storage()
    }

    fn own_count(&mut self) -> Option<u64> {
        Some(self.0.storage().inner.allocations_made())
    }
}

impl Counted for Peer<CountingStorage<cubecl_server::storage::BytesStorage>> {
    fn counter(&mut self) -> &CountingStorage<impl ComputeStorage> {
        self.memory.storage()
    }
}

/// A fresh memory of each side, on plain (uncounted) storage: what the timed runs use.
pub fn ours() -> Ours<wgpu_memory::storage::BytesStorage> {
    Ours::new(wgpu_memory::storage::BytesStorage::default())
}

pub fn peer() -> Peer<cubecl_server::storage::BytesStorage> {
    Peer::new(cubecl_server::storage::BytesStorage::default())
}
