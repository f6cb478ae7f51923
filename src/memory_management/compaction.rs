//! Compaction's vocabulary: what a pass did, and how an owner makes room for a
//! reservation by moving slices.
//!
//! A memory moves a live slice by copying its bytes to a block in another page of the
//! same pool and pointing the slice's slot there; handles name slots, so every handle
//! and binding of the allocation follows without being told. What moves, and how the
//! bytes travel, is split by layer:
//!
//! - the memory plans and applies the moves
//!   ([`MemoryManagement::compact`](super::MemoryManagement::compact));
//! - the storage copies the bytes ([`CopyStorage`](crate::storage::CopyStorage));
//! - the owner says which allocations are pinned (their address is held outside the
//!   memory), orders the copies with the rest of its work, and frees the ranges the
//!   slices left once no later work can overtake the copies
//!   ([`MemoryManagement::release_moved`](super::MemoryManagement::release_moved)).

use super::MemoryManagement;
use crate::storage::{ComputeStorage, CopyStorage};
use cubecl_runtime::memory_management::{ManagedMemoryId, WeakMemoryBinding};

/// The default bound on the bytes one compaction pass moves: 256 MiB. On a device a
/// copy runs at hundreds of GB/s, so a pass this size adds about a millisecond to the
/// queue; larger passes would delay the work queued behind them by more than a typical
/// kernel, and a pass that cannot finish in one bound simply continues on the next.
pub const DEFAULT_MAX_MOVE_BYTES: u64 = 256 << 20;

/// The most moves whose left ranges wait for
/// [`release_moved`](MemoryManagement::release_moved); a compaction plans no move
/// while this many are pending, so the list stays bounded.
pub const MAX_MOVES_PENDING: usize = 1 << 16;

/// What a compaction may do with one live slice, as its owner says
/// ([`MemoryManagement::compact`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pin {
    /// The slice may move, and its page may give and take slices.
    #[default]
    Free,
    /// The slice stays where it is, but its page may still take moved slices (its owner
    /// needs its bytes to stay put, not the page: a held export whose resource is gone).
    /// A page holding such a slice cannot empty, so its other slices stay too.
    Slice,
    /// The slice stays, and its page neither gives nor takes slices (its owner holds the
    /// page's address, or the page may be unusable: a page the application destroyed).
    Page,
}

/// The bounds of one compaction pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveLimits {
    /// The most bytes (requested sizes) the pass moves.
    pub max_bytes: u64,
    /// The most slices the pass moves (each is one copy in the owner's batch).
    pub max_moves: usize,
}

impl MoveLimits {
    /// At most `max_bytes` bytes, any number of slices.
    pub const fn bytes(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            max_moves: usize::MAX,
        }
    }
}

impl From<u64> for MoveLimits {
    fn from(max_bytes: u64) -> Self {
        Self::bytes(max_bytes)
    }
}

/// One slice a compaction moved. Offsets are bytes from the start of their page; pages
/// are named by id as in [`PageSlices::id`](super::PageSlices::id).
#[derive(Debug, Clone)]
pub struct SliceMove {
    /// The allocation.
    pub id: ManagedMemoryId,
    /// A weak binding of the allocation (to claim its bytes should the copy fail).
    pub binding: WeakMemoryBinding,
    /// The pool's place in [`page_map`](MemoryManagement::page_map).
    pub pool: usize,
    /// The page the slice left, and its offset there.
    pub from: (u64, u64),
    /// The page the slice moved to, and its offset there.
    pub to: (u64, u64),
    /// The allocation's requested size in bytes (the bytes copied, before the storage's
    /// rounding).
    pub bytes: u64,
}

/// What one compaction pass did.
#[derive(Debug, Clone, Default)]
pub struct Compaction {
    /// Every slice moved, in the order the copies were issued.
    pub moves: Vec<SliceMove>,
    /// Bytes moved: the requested sizes of the moved slices.
    pub bytes_moved: u64,
}

impl Compaction {
    /// Whether nothing moved.
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// Adds what another pass did.
    pub fn extend(&mut self, other: Compaction) {
        self.bytes_moved += other.bytes_moved;
        self.moves.extend(other.moves);
    }
}

/// Why a reservation asks its owner for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomFor {
    /// No free block fits, yet an accepting pool holds enough free bytes in holes
    /// ([`MemoryManagement::could_gather`]): gathering them avoids a new page.
    Gather,
    /// The reservation is out of room after a cleanup: a capped pool is full, or the
    /// storage refused a page (the device or a budget).
    OutOfRoom,
}

/// An owner that can make room for a reservation by compacting, in its own order of
/// work ([`MemoryManagement::reserve_making_room`]).
pub trait MakeRoom<S: ComputeStorage> {
    /// Makes room for `size` bytes in `memory` if it can; returns whether anything moved
    /// (the reservation is then tried again). A compaction that moves slices must leave
    /// the moved-from ranges released (or the retry finds no room) only once the owner's
    /// later work cannot overtake the copies.
    fn make_room(&mut self, memory: &mut MemoryManagement<S>, size: u64, why: RoomFor) -> bool;
}

/// An owner that moves nothing: what [`MemoryManagement::reserve_with`] uses.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

impl<S: ComputeStorage> MakeRoom<S> for NoRoom {
    fn make_room(&mut self, _: &mut MemoryManagement<S>, _: u64, _: RoomFor) -> bool {
        false
    }
}

/// An owner whose storage copies at once (host memory, [`BytesStorage`]): it compacts
/// to make room and frees the moved-from ranges in the same call, as nothing can overtake
/// a copy already done. Nothing is pinned. `max_bytes` bounds each pass (default
/// [`DEFAULT_MAX_MOVE_BYTES`]).
///
/// [`BytesStorage`]: crate::storage::BytesStorage
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactNow {
    /// The most bytes one pass moves.
    pub max_bytes: u64,
}

impl Default for CompactNow {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_MOVE_BYTES,
        }
    }
}

impl<S: CopyStorage> MakeRoom<S> for CompactNow {
    fn make_room(&mut self, memory: &mut MemoryManagement<S>, size: u64, why: RoomFor) -> bool {
        let pinned = |_: ManagedMemoryId, _: u64| Pin::Free;
        let done = match why {
            RoomFor::Gather => memory.compact_for(size, self.max_bytes, &pinned),
            RoomFor::OutOfRoom => memory.compact(self.max_bytes, &pinned),
        };
        memory.release_moved();
        !done.is_empty()
    }
}
