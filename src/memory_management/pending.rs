//! [`PendingRelease`]: how a memory's owner tells it about bytes on their way back.

/// What the owner of a [`MemoryManagement`](super::MemoryManagement) knows, and the
/// memory cannot, about device bytes that are about to be given back.
///
/// The memory only sees its own pages and the handles it gave out. Its owner (on wgpu,
/// the server) may hold more that will free device memory once submitted work finishes:
/// handles and bindings kept alive until their submission's fence passes, entries of a
/// drop queue, pages of another memory (idle staging pages) it can give back. When a
/// reservation runs out of room, [`MemoryManagement::reserve_with`] uses this to wait for
/// those bytes before it gives up, and names what is still pending in the error.
///
/// Lifecycle, inside one [`reserve_with`](super::MemoryManagement::reserve_with) call:
///
/// 1. The reservation fails for room ([`ReserveError::OutOfMemory`] or
///    [`ReserveError::PoolCapacityExceeded`]).
/// 2. An explicit cleanup gives back every free page of this memory, and the reservation
///    is tried again.
/// 3. If that fails for room too and [`bytes_pending_release`] is above 0, the memory
///    calls [`release_pending`] once, runs another explicit cleanup (slices whose last
///    handle the owner dropped are free now) and tries a last time.
/// 4. If that fails, the error's `bytes_pending_release` is what
///    [`bytes_pending_release`] reports then.
///
/// Neither method is called on a reservation that succeeds at once, so the fast path
/// costs nothing.
///
/// [`ReserveError::OutOfMemory`]: super::ReserveError::OutOfMemory
/// [`ReserveError::PoolCapacityExceeded`]: super::ReserveError::PoolCapacityExceeded
/// [`MemoryManagement::reserve_with`]: super::MemoryManagement::reserve_with
/// [`bytes_pending_release`]: PendingRelease::bytes_pending_release
/// [`release_pending`]: PendingRelease::release_pending
pub trait PendingRelease {
    /// Device bytes, in bytes, that will be given back without the user dropping
    /// anything more, once work already submitted completes: slices whose handles the
    /// owner holds only until a fence passes, drop-queue entries, idle pages of other
    /// memories. Counts what the memory would see freed; an estimate is fine (it only
    /// decides whether waiting is worth it, and is reported in the error).
    fn bytes_pending_release(&self) -> u64;

    /// Waits until what [`bytes_pending_release`](Self::bytes_pending_release) counted
    /// has been given back: polls the device until the fences pass, drops the handles
    /// held for them, flushes drop queues, cleans up the other memories. Blocks; called
    /// at most once per reservation and only on the out-of-room path.
    fn release_pending(&mut self);
}

/// An owner with nothing pending: what [`MemoryManagement::reserve`] uses.
///
/// [`MemoryManagement::reserve`]: super::MemoryManagement::reserve
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NothingPending;

impl PendingRelease for NothingPending {
    fn bytes_pending_release(&self) -> u64 {
        0
    }

    fn release_pending(&mut self) {}
}
