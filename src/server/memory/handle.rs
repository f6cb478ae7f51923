//! [`Handle`]: one allocation of a client's memory.

use cubecl_runtime::memory_management::{
    ManagedMemoryBinding, ManagedMemoryHandle, ManagedMemoryId, MemoryLocation,
};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock, Weak};

/// The most dropped allocations a client queues for release between two reservations;
/// past it, drops are left to the memory's own sweeps (which find them anyway).
pub const MAX_QUEUED_RELEASES: usize = 1 << 16;

/// Allocations whose handles' last clone was dropped, for the server to release at its
/// next reservation (O(1) each). Bounded by [`MAX_QUEUED_RELEASES`].
pub(crate) type ReleaseQueue = Mutex<Vec<(ManagedMemoryId, MemoryLocation)>>;

/// Shared by every clone of a handle; dropped with the last one, it records the
/// allocation's free in history (when the client set a record) and queues the allocation
/// for release. Takes only the history's and the queue's own locks, so a handle may be
/// dropped anywhere, even under the client's lock.
#[derive(Debug)]
pub(crate) struct DropNotice {
    pub(crate) queue: Weak<ReleaseQueue>,
    pub(crate) id: ManagedMemoryId,
    pub(crate) location: MemoryLocation,
    /// Set once, by a client recording history; its drop records the free.
    pub(crate) free_record: OnceLock<crate::server::FreeRecord>,
}

impl DropNotice {
    pub(crate) fn new(queue: &Arc<ReleaseQueue>, memory: &ManagedMemoryHandle) -> Arc<Self> {
        Arc::new(DropNotice {
            queue: Arc::downgrade(queue),
            id: memory.descriptor().id,
            location: memory.descriptor().location(),
            free_record: OnceLock::new(),
        })
    }
}

impl Drop for DropNotice {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.upgrade() {
            let mut queue = queue.lock();
            if queue.len() < MAX_QUEUED_RELEASES {
                queue.push((self.id, self.location));
            }
        }
    }
}

/// One allocation: a slice of a page of the client's main memory, `size` bytes long.
///
/// Cheap to clone; the slice stays reserved while any clone (or a
/// [`HandleResource`] made from it) is alive, and is reused after the last one is
/// dropped. Work already submitted on it is ordered before any later reuse (one queue).
#[derive(Debug, Clone)]
pub struct Handle {
    pub(crate) memory: ManagedMemoryHandle,
    pub(crate) size: u64,
    /// The number of the client (server) whose memory the slice is in.
    pub(crate) owner: u64,
    /// Shared by every clone: dropped with the last one (after `memory`, fields drop in
    /// order), it records the free and queues the allocation for release.
    pub(crate) last_drop: Arc<DropNotice>,
}

impl Handle {
    /// The bytes asked for when the handle was made (not rounded up).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The allocation's number: what a memory snapshot
    /// ([`MemorySnapshot::slice`](crate::report::MemorySnapshot::slice)), the history and
    /// the PyTorch export name it by. Every clone has the same; no two live allocations
    /// share one.
    pub fn id(&self) -> u64 {
        self.memory.descriptor().id.value as u64
    }

    /// The memory handle behind it (cubecl-runtime's).
    pub fn memory(&self) -> &ManagedMemoryHandle {
        &self.memory
    }

    pub(crate) fn binding(&self) -> ManagedMemoryBinding {
        self.memory.clone().binding()
    }
}

/// Where a [`Handle`]'s bytes are, for an application's own bind groups and copies:
/// `buffer` at byte `offset`, `size` bytes. Holding it keeps the slice reserved.
#[derive(Debug, Clone)]
pub struct HandleResource {
    /// The page the slice lives in.
    pub buffer: wgpu::Buffer,
    /// Byte offset of the slice in `buffer`; a multiple of the device's
    /// `min_storage_buffer_offset_alignment`.
    pub offset: u64,
    /// Bytes of the handle (not rounded).
    pub size: u64,
    pub(crate) _binding: ManagedMemoryBinding,
    /// For an exported resource: records, with the last clone's drop, which thread let
    /// go of the address and how far its submissions had got (see `exports`). Dropped
    /// before `_pin` (fields drop in order), so the slice is held from the moment the pin
    /// goes.
    pub(crate) _export: Option<std::sync::Arc<super::export_life::ExportLife>>,
    /// Keeps the slice from moving while the application holds its address (`None` for
    /// the server's own short-lived lookups).
    pub(crate) _pin: Option<super::pins::PinGuard>,
}

impl HandleResource {
    /// The bytes a binding covers: `size` rounded up to 4, at least 4 (wgpu rejects
    /// zero-size bindings; the rounding stays inside the slice).
    pub fn binding_size(&self) -> u64 {
        self.size
            .max(1)
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
    }

    /// The slice as a `wgpu::BufferBinding` for a bind group entry.
    pub fn as_binding(&self) -> wgpu::BufferBinding<'_> {
        wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: wgpu::BufferSize::new(self.binding_size()),
        }
    }
}
