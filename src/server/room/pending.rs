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

/// Client operations (reservations in the main memory, writes, reads, launches) over
/// which a staging memory made no reservation, after which its free pages go back to the
/// driver without a cleanup: 1024.
///
/// Staging serves bursts: a training step or a render loop makes its reads and writes on
/// every pass, and a pass of up to 1024 operations keeps its staging pages from one pass
/// to the next; the pages of a burst that is over (a model load, a one-off readback) go
/// back within 1024 operations. Counting operations, not time, needs no thread and no
/// clock, and gives the same pages back on every run of a program. Within a memory that
/// keeps reserving, a free page that is not taken goes back after
/// [`STAGING_IDLE_RESERVATIONS`](crate::server::STAGING_IDLE_RESERVATIONS) of its
/// reservations.
pub const STAGING_IDLE_OPERATIONS: u64 = 1024;

/// The clock of [`STAGING_IDLE_OPERATIONS`]: operations so far, and the operation at
/// which each staging memory last reserved (or was last given back).
#[derive(Debug, Default)]
pub(crate) struct IdleClock {
    now: u64,
    /// Upload page reservations seen at the last tick.
    upload_reservations: u64,
    upload_at: u64,
    readback_at: u64,
}

impl IdleClock {
    /// One client operation: gives back the free pages of a staging memory that made no
    /// reservation over the last [`STAGING_IDLE_OPERATIONS`] operations.
    ///
    /// # Complexity
    /// O(1), and once per [`STAGING_IDLE_OPERATIONS`] operations per memory an explicit
    /// cleanup of that memory (O(its slots)).
    pub(crate) fn tick(
        &mut self,
        staging: &mut MemoryManagement<WgpuStorage>,
        uploads: &mut crate::server::uploads::upload::UploadStaging,
    ) {
        self.now += 1;
        if uploads.reservations() != self.upload_reservations {
            self.upload_reservations = uploads.reservations();
            self.upload_at = self.now;
        }
        if self.now - self.upload_at >= STAGING_IDLE_OPERATIONS {
            self.upload_at = self.now;
            give_back_idle("upload", &mut uploads.memory);
        }
        if self.now - self.readback_at >= STAGING_IDLE_OPERATIONS {
            self.readback_at = self.now;
            give_back_idle("staging", staging);
        }
    }

    /// The readback staging reserves now.
    pub(crate) fn readback_used(&mut self) {
        self.readback_at = self.now;
    }
}

/// Gives back every free page of an idle staging memory.
fn give_back_idle(name: &str, memory: &mut MemoryManagement<WgpuStorage>) {
    let before = memory.bytes_allocated();
    if before == 0 {
        return;
    }
    memory.cleanup(Cleanup::Explicit);
    tracing::debug!(
        memory = name,
        bytes_released = before - memory.bytes_allocated(),
        "idle staging given back"
    );
}
