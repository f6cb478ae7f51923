//! Compaction on the device: which slices may move, and how their copies join the batch.
//!
//! The memory layer plans the moves; here they become GPU copies in the pending batch,
//! in order with every launch, upload and read recorded before and after them:
//!
//! 1. A slice whose address left the client is **pinned**: a [`HandleResource`] the
//!    application holds (its buffer and offset may sit in the application's own bind
//!    groups and encoders), or a read in flight; so is every slice of a page the
//!    application destroyed. A page holding a pinned slice neither gives nor takes moved
//!    slices. An export whose resource was dropped but whose dropping thread has not
//!    submitted since (see `exports`) keeps its slice in place; its page may take moved
//!    slices.
//! 2. The memory moves the rest and queues one copy per moved slice in the storage; the
//!    server records them into the pending encoder at once, before anything else, and
//!    notes each destination as an output of the batch (should wgpu refuse the batch,
//!    the moved bytes are claimed instead of read as garbage).
//! 3. The ranges the slices left stay reserved until the batch that reads them is taken
//!    for submission ([`Server::take_batch`]): work recorded later lands in a later
//!    submission, so it cannot overtake the copies. A reservation that compacted to make
//!    room releases them at once instead: the reservation's own uses are recorded after
//!    the copies in the same encoder, and an export through `Client::resource` submits
//!    that encoder first.
//! 4. Launches resolve their bindings when they are recorded, so a launch recorded after
//!    a move binds the slice where it is now; one recorded before bound where it was and
//!    runs before the copy.
//!
//! # Why a move is safe against every other thread
//!
//! - **Which locations may outlive which lock.** A slice's location is read and changed
//!   only under the server's mutex. Locations the client itself reads (launch
//!   bindings, upload, merge and read copies, `Server::resource`) are recorded into the
//!   pending batch in the same critical section, so none outlives the mutex: a move
//!   planned later records its copy after them. Batches go to the queue in the order
//!   they were taken, under the submit turn. The locations that outlive every lock of
//!   ours are those the application was given ([`HandleResource`]: in its encoders,
//!   bind groups and wgpu's pending `write_buffer`s) and those a read in flight waits
//!   on. Those slices are named at every pass: pinned with their page while a resource
//!   clone lives (the pin table, and the export's own hold, which covers the drop of
//!   its last clone) or while the read is in flight; then, for an export, held in place
//!   and reserved until the thread that dropped the last clone has had a counted
//!   submission (`ClientQueue::submit`, sync, cleanup, install) *begun after the drop*
//!   return, or has exited. The application records and submits on one thread, through
//!   `Client::queue()`, so by then what it recorded on the old address is on the queue.
//! - **What a move waits for.** Nothing on the device: only the mutex to plan it (over
//!   slices no pin or hold names, on pages not destroyed) and the submit turn to submit
//!   the batch carrying its copy. Its copy therefore runs after every submission that
//!   returned before it was planned, the application's submission that ended a hold
//!   included, and before every submission recorded after.
//! - **What a move claims.** A destination range in another hole, noted as an output of
//!   the batch carrying the copy (claimed, not read as garbage, should wgpu refuse that
//!   batch); the descriptor's new location, so work recorded later binds the new place;
//!   and the source range, kept reserved until that batch is taken for submission (step
//!   3), so nothing recorded later can land on the bytes the copy still reads (a
//!   reservation that compacted frees it at once: what it records lands after the
//!   copies in the same encoder).
//!
//! [`HandleResource`]: crate::server::HandleResource

use super::exports::Exports;
use super::pins::PinTable;
use crate::memory_management::{
    Compaction, DEFAULT_MAX_MOVE_BYTES, MakeRoom, ManagedMemoryId, MemoryManagement, MoveLimits,
    Pin, RoomFor,
};
use crate::server::Server;
use crate::server::batch::PendingWork;
use crate::server::faults::destroyed::DestroyedPages;
use crate::storage::WgpuStorage;
use rustc_hash::FxHashMap as HashMap;

/// What one compaction on the device did.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceCompaction {
    pub(crate) moves: usize,
    pub(crate) bytes_moved: u64,
}

/// What a compaction pass may move, taken once per pass: slices whose address left the
/// client stay with their page ([`Pin::Page`]): a live `HandleResource`, a read in flight,
/// every slice of a page the application destroyed; a held export whose resource is gone
/// stays alone ([`Pin::Slice`]) until its dropping thread submits (see the module docs,
/// "Why a move is safe against every other thread").
pub(crate) struct PinRule {
    pinned: HashMap<ManagedMemoryId, u32>,
    held: HashMap<ManagedMemoryId, Pin>,
    destroyed: Vec<u64>,
}

impl PinRule {
    /// Takes the pins for one pass: probes the pages of holds not yet probed (see
    /// `exports`) first, so a page the application destroyed neither gives nor takes.
    pub(crate) fn take(
        pins: &PinTable,
        exports: &mut Exports,
        destroyed: &mut DestroyedPages,
        device: &wgpu::Device,
        main: &mut MemoryManagement<WgpuStorage>,
    ) -> Self {
        let (held, probe) = exports.pins(main);
        if !probe.is_empty() {
            destroyed.probe_ids(device, main, &probe);
        }
        Self {
            pinned: pins.pinned(),
            held,
            destroyed: destroyed.page_ids(),
        }
    }

    /// How the slice `id` in page `page` may move.
    pub(crate) fn pin(&self, id: ManagedMemoryId, page: u64) -> Pin {
        // Runs per live slice of a pass; the tables are nearly always empty, and an empty
        // map answers a lookup without hashing the key.
        if self.pinned.contains_key(&id) || self.destroyed.contains(&page) {
            Pin::Page
        } else {
            self.held.get(&id).copied().unwrap_or(Pin::Free)
        }
    }
}

impl Server {
    /// Moves live, unpinned slices of the main memory out of their sparsest pages, at
    /// most `max_bytes` of them, with the copies recorded in the pending batch. The pages
    /// it empties are given back by the cleanup that follows the batch's take.
    ///
    /// Runs passes until one moves nothing, the bytes are spent or [`MAX_PASSES`] ran
    /// ([`MemoryManagement::compact_passes`]). Between passes the left ranges are
    /// released at once, as a reservation that compacts does (module docs, step 3): the
    /// storage queues every pass's copies in order and they are recorded together, so a
    /// copy into a range an earlier copy read runs after it; the last pass's ranges wait
    /// for the batch's take.
    pub(crate) fn compact(&mut self, max_bytes: u64) -> DeviceCompaction {
        let rule = PinRule::take(
            &self.pins,
            &mut self.exports,
            &mut self.destroyed,
            &self.device,
            &mut self.main,
        );
        let done = self
            .main
            .compact_passes(pass_limits(max_bytes), MAX_PASSES, &|id, page| {
                rule.pin(id, page)
            });
        record_moves(&mut self.pending, &self.device, &mut self.main, &done);
        DeviceCompaction {
            moves: done.moves.len(),
            bytes_moved: done.bytes_moved,
        }
    }

    /// The bound on the bytes one compaction pass moves.
    pub(crate) fn max_move_bytes(&self) -> u64 {
        self.max_move_bytes
    }

    /// Sets the bound on the bytes one compaction pass moves (0 turns compaction off).
    pub(crate) fn set_max_move_bytes(&mut self, bytes: u64) {
        self.max_move_bytes = bytes;
    }
}

/// The most compaction passes one [`Server::compact`] runs: each plans over every page,
/// so the bound keeps a call's planning time bounded when passes keep finding moves.
pub(crate) const MAX_PASSES: usize = 8;

/// The default for [`Server::max_move_bytes`].
pub(crate) const fn default_max_move_bytes() -> u64 {
    DEFAULT_MAX_MOVE_BYTES
}

/// Records the copies the storage queued for `done` as a segment of the pending batch
/// of their own (see `server::batch`), in order, and notes each moved slice as its output.
fn record_moves(
    pending: &mut PendingWork,
    device: &wgpu::Device,
    main: &mut MemoryManagement<WgpuStorage>,
    done: &Compaction,
) {
    let copies = main.storage().take_copies();
    if copies.is_empty() {
        return;
    }
    let moved = done
        .moves
        .iter()
        .map(|moved| (moved.binding.clone(), 0..moved.bytes))
        .collect();
    let bytes: u64 = copies.iter().map(|copy| copy.size).sum();
    pending.record_moves(
        device,
        copies.len(),
        |encoder| {
            for copy in &copies {
                copy.record(encoder);
            }
        },
        moved,
    );
    pending.count_bytes(bytes);
}

/// The bounds of one compaction pass on the device: `max_bytes`, and at most
/// [`MAX_BATCH_COMMANDS`](crate::server::MAX_BATCH_COMMANDS) copies, so one pass never
/// makes a batch carry more than that bound of commands beyond what was already recorded.
pub(crate) fn pass_limits(max_bytes: u64) -> MoveLimits {
    MoveLimits {
        max_bytes,
        max_moves: crate::server::MAX_BATCH_COMMANDS as usize,
    }
}

/// A reservation's way to make room: compacts the main memory with its copies recorded
/// in the pending batch, and frees the moved-from ranges at once (see the module docs,
/// step 3).
pub(crate) struct RoomInBatch<'a> {
    pub(crate) pending: &'a mut PendingWork,
    pub(crate) device: &'a wgpu::Device,
    pub(crate) pins: &'a PinTable,
    pub(crate) exports: &'a mut Exports,
    /// Pages the application destroyed: they neither give nor take moved slices.
    pub(crate) destroyed: &'a mut DestroyedPages,
    pub(crate) max_bytes: u64,
}

impl MakeRoom<WgpuStorage> for RoomInBatch<'_> {
    fn make_room(
        &mut self,
        memory: &mut MemoryManagement<WgpuStorage>,
        size: u64,
        why: RoomFor,
    ) -> bool {
        if self.max_bytes == 0 {
            return false;
        }
        let rule = PinRule::take(self.pins, self.exports, self.destroyed, self.device, memory);
        let pinned = |id: ManagedMemoryId, page: u64| rule.pin(id, page);
        let limits = pass_limits(self.max_bytes);
        let done = match why {
            RoomFor::Gather => memory.compact_for(size, limits, &pinned),
            RoomFor::OutOfRoom => memory.compact(limits, &pinned),
        };
        record_moves(self.pending, self.device, memory, &done);
        memory.release_moved();
        !done.is_empty()
    }
}
