//! What the server can give back when the main memory runs out of room.

use crate::memory_management::{Cleanup, MemoryManagement, PendingRelease};
use crate::storage::WgpuStorage;

/// The staging memories' idle pages (readback and upload pages without a live slice)
/// and the bind groups that keep given-back main pages alive inside wgpu: device memory
/// a main-memory reservation may take once they are released.
///
/// Released without polling the device: a reservation runs under the client's lock, and
/// wgpu runs application callbacks inside a poll.
pub(crate) struct IdleStaging<'a> {
    pub(crate) staging: &'a mut MemoryManagement<WgpuStorage>,
    pub(crate) upload: &'a mut MemoryManagement<WgpuStorage>,
    pub(crate) bind_groups: &'a mut dyn FnMut(),
}

/// Bytes of `memory`'s pages that hold no live slice.
fn idle_bytes(memory: &MemoryManagement<WgpuStorage>) -> u64 {
    let usage = memory.memory_usage();
    memory
        .bytes_allocated()
        .saturating_sub(usage.bytes_in_use + usage.bytes_padding)
}

impl PendingRelease for IdleStaging<'_> {
    fn bytes_pending_release(&self) -> u64 {
        idle_bytes(self.staging) + idle_bytes(self.upload)
    }

    fn release_pending(&mut self) {
        self.staging.cleanup(Cleanup::Explicit);
        self.upload.cleanup(Cleanup::Explicit);
        (self.bind_groups)();
    }
}
