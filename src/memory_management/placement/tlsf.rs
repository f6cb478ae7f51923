//! Two-level segregated fit (TLSF) placement index over byte ranges.
//!
//! The index never touches memory: it only decides `(region, offset)` for
//! requests inside caller-owned regions (one device page each, named by a
//! caller-chosen `u32`). All sizes and offsets are bytes (`u64`) and
//! multiples of the `granule` given to [`Tlsf::new`] (any non-zero value,
//! not necessarily a power of two).
//!
//! Free blocks are filed in bins by `size_class_floor`; two bitmap levels
//! say which bins are non-empty, so a fitting bin is found with two
//! bit scans instead of walking lists:
//!
//! ```text
//! fl_bitmap (u64):  bit fl set <=> sl_bitmap[fl] != 0
//!      fl:   59 ...  7   6   5 ...  1   0
//!          [  0 ...  1   0   1 ...  0   1 ]
//!                    |       |
//!                    v       v
//! sl_bitmap[7] (u32): bit sl set <=> bins[7][sl] is non-empty
//!      sl:   31 ...  2   1   0
//!          [  0 ...  1   0   0 ]
//!                    |
//!                    v
//! bins[7][2] -> blk <-> blk <-> blk     (intrusive doubly linked free list)
//!
//! per region, physical order: blk <-> blk <-> blk  (prev_phys / next_phys)
//! ```
//!
//! # Complexity
//! - [`Tlsf::allocate`]: O(1): up to `BIN_WALK` (8) blocks of the request's
//!   own bin for the tightest fit (an exact fit stops at once), then two bit
//!   scans and the head of the first fitting bin.
//! - [`Tlsf::free`]: O(1): at most two physical neighbours merged.
//! - [`Tlsf::has_close_fit`]: O(1): the same walk of the request's own bin,
//!   without taking anything.
//! - [`Tlsf::add_region`], [`Tlsf::remove_region`], [`Tlsf::is_region_free`],
//!   [`Tlsf::free_bytes`], [`Tlsf::region_count`]: O(1) (amortised for
//!   `add_region`, which may grow the region table).
//! - [`Tlsf::largest_free`]: O(k), k = number of blocks in the highest
//!   non-empty bin (the bin is at most 1/32 wide, so k is usually small).
//! - [`Tlsf::free_ranges`]: O(blocks in the region); the range operations
//!   compaction plans with are in `ranges.rs`, with their costs.
//!
//! # Waste bound
//! A request is rounded up to the next bin boundary (by less than
//! `size / 32`, exact below 32 bytes) only to pick the bin to search; the
//! chosen block is split to the exact request and the rest stays free, so an
//! allocation wastes no bytes beyond the caller's rounding to the granule.
//! The rounding can pass over a free block less than `size / 32` bytes
//! larger than the request (up to eight blocks of the request's own bin are
//! checked first, the tightest taken, to reduce that).
//!
//! Nodes live in a slab with a vacant list, so steady-state operations
//! allocate no heap memory. No hashing is used: the same calls always give
//! the same layout.

use super::size_class::{FL_COUNT, SL_COUNT, size_class_ceil, size_class_floor};

/// Index meaning "no node".
const NIL: u32 = u32::MAX;

/// The most blocks of the request's own bin looked at for the tightest fit.
const BIN_WALK: usize = 8;

/// Identifies one allocation; stale ids (already freed, or from a node
/// reused since) are detected through `generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId {
    /// Slot of the block's node in the index's slab.
    pub index: u32,
    /// Generation of the slot when the block was handed out.
    pub generation: u32,
}

/// A placed allocation: `size` bytes at byte `offset` inside `region`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Caller-chosen id of the region (device page) holding the block.
    pub region: u32,
    /// Start of the block, in bytes from the start of the region.
    pub offset: u64,
    /// Length of the block in bytes (the request, or `granule` for 0).
    pub size: u64,
    /// Handle to give back to [`Tlsf::free`].
    pub id: BlockId,
}

/// What a slab slot currently holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// On the vacant list; `next_free` links vacant slots.
    Vacant,
    /// A free block, filed in a bin.
    Free,
    /// An allocated block.
    Used,
}

/// One block (or vacant slot) in the slab.
#[derive(Clone, Debug)]
struct Node {
    region: u32,
    offset: u64,
    size: u64,
    prev_phys: u32,
    next_phys: u32,
    prev_free: u32,
    next_free: u32,
    generation: u32,
    state: State,
}

/// Per-region bookkeeping.
#[derive(Clone, Copy, Debug)]
struct RegionInfo {
    /// Node at offset 0; merges keep the lower node, so it never changes.
    first: u32,
    /// Region length in bytes.
    size: u64,
}

/// TLSF placement index: decides offsets of byte ranges inside regions.
#[derive(Clone, Debug)]
pub struct Tlsf {
    granule: u64,
    nodes: Vec<Node>,
    vacant: u32,
    fl_bitmap: u64,
    sl_bitmap: [u32; FL_COUNT as usize],
    // Boxed: 7.5 KiB inline would make every pool that holds an index that large.
    bins: Box<[[u32; SL_COUNT as usize]; FL_COUNT as usize]>,
    regions: Vec<Option<RegionInfo>>,
    region_count: usize,
    free_bytes: u64,
    /// Nodes looked at by the last `allocate` (tests check it is bounded).
    #[cfg(test)]
    last_visits: u32,
}

impl Tlsf {
    /// Creates an empty index whose sizes and offsets are multiples of
    /// `granule` bytes (any non-zero value; a power of two is not required).
    ///
    /// # Panics
    /// In debug builds, if `granule == 0`. Release builds treat 0 as 1.
    pub fn new(granule: u64) -> Self {
        debug_assert!(granule > 0, "granule must be non-zero");
        Self {
            granule: granule.max(1),
            nodes: Vec::new(),
            vacant: NIL,
            fl_bitmap: 0,
            sl_bitmap: [0; FL_COUNT as usize],
            bins: Box::new([[NIL; SL_COUNT as usize]; FL_COUNT as usize]),
            regions: Vec::new(),
            region_count: 0,
            free_bytes: 0,
            #[cfg(test)]
            last_visits: 0,
        }
    }

    /// The granule in bytes that all sizes and offsets are multiples of.
    ///
    /// # Panics
    /// Never.
    #[cfg(test)]
    #[allow(dead_code)]
    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// Adds region `region` as one free block `[0, size)` bytes. The region
    /// table grows to the largest id used, so keep ids small and reuse them.
    /// A duplicate id or a zero size is ignored.
    ///
    /// # Panics
    /// In debug builds, if the id is already present, `size == 0`, or `size`
    /// is not a multiple of the granule.
    pub fn add_region(&mut self, region: u32, size: u64) {
        debug_assert!(size > 0, "empty region");
        debug_assert!(size.is_multiple_of(self.granule), "unaligned size");
        debug_assert!(self.region(region).is_none(), "region already present");
        if size == 0 || self.region(region).is_some() {
            return;
        }
        let slot = region as usize;
        if self.regions.len() <= slot {
            self.regions.resize(slot + 1, None);
        }
        let first = self.new_node(region, 0, size);
        self.regions[slot] = Some(RegionInfo { first, size });
        self.region_count += 1;
        self.free_bytes += size;
        self.insert_free(first);
    }

    /// Removes `region` if it is entirely free (one free block spanning it);
    /// returns whether it was removed. Unknown ids return `false`.
    ///
    /// # Panics
    /// Never.
    pub fn remove_region(&mut self, region: u32) -> bool {
        let Some(info) = self.region(region) else {
            return false;
        };
        if !self.is_region_free(region) {
            return false;
        }
        self.remove_free(info.first);
        self.release_node(info.first);
        self.regions[region as usize] = None;
        self.region_count -= 1;
        self.free_bytes -= info.size;
        true
    }

    /// Places `size` bytes in some region and returns where. `size == 0` is
    /// treated as one granule, so a valid block is always returned when
    /// space exists. `None` when no free block can hold `size` bytes.
    ///
    /// # Panics
    /// In debug builds, if `size` is not a multiple of the granule.
    pub fn allocate(&mut self, size: u64) -> Option<Block> {
        self.take(size, BIN_WALK)
    }

    /// As [`Tlsf::allocate`], but walks the whole of the request's own bin, so `None`
    /// means no free block of `size` bytes exists at all. O(blocks in that bin): for the
    /// rare moment before a pool grows or reports itself full, which must not happen
    /// while a fitting block is free.
    pub fn allocate_thorough(&mut self, size: u64) -> Option<Block> {
        self.take(size, usize::MAX)
    }

    fn take(&mut self, size: u64, walk: usize) -> Option<Block> {
        debug_assert!(size.is_multiple_of(self.granule), "unaligned size");
        let size = if size == 0 { self.granule } else { size };
        #[cfg(test)]
        {
            self.last_visits = 0;
        }
        // No block can hold more than all free bytes together: a pool that is full (or
        // holds no page) answers without a bin search.
        if size > self.free_bytes {
            return None;
        }
        let index = match self.exact_head(size) {
            Some(index) => index,
            None => {
                let index = self.find_block(size, walk)?;
                self.remove_free(index);
                index
            }
        };
        self.split(index, size);
        self.free_bytes -= size;
        let node = &mut self.nodes[index as usize];
        node.state = State::Used;
        // A fresh generation per hand-out makes every earlier id stale.
        node.generation = node.generation.wrapping_add(1);
        Some(Block {
            region: node.region,
            offset: node.offset,
            size,
            id: BlockId {
                index,
                generation: node.generation,
            },
        })
    }

    /// Whether a free block of `size` to `size + size / 32` bytes (the request's own
    /// bin) is at hand among the blocks [`Tlsf::allocate`] looks at first: an
    /// allocation of `size` would take it and leave at most a bin's width behind.
    /// O(1), changes nothing.
    ///
    /// # Panics
    /// Never.
    pub fn has_close_fit(&mut self, size: u64) -> bool {
        let size = if size == 0 { self.granule } else { size };
        let (fl, sl) = size_class_floor(size);
        self.best_in_bin(fl, sl, size, BIN_WALK).is_some()
    }

    /// Returns an allocated block and merges it with free physical
    /// neighbours in its region. Returns `false` (and changes nothing) when
    /// `id` is not a live allocated block (unknown, already freed, stale).
    ///
    /// # Panics
    /// Never.
    pub fn free(&mut self, id: BlockId) -> bool {
        let live = self
            .nodes
            .get(id.index as usize)
            .is_some_and(|node| node.state == State::Used && node.generation == id.generation);
        if !live {
            return false;
        }
        let mut index = id.index;
        self.free_bytes += self.nodes[index as usize].size;
        self.nodes[index as usize].state = State::Free;
        let next = self.nodes[index as usize].next_phys;
        if self.is_free(next) {
            self.remove_free(next);
            self.absorb_next(index);
        }
        let prev = self.nodes[index as usize].prev_phys;
        if self.is_free(prev) {
            // prev is filed under its old size: take it out before growing it.
            self.remove_free(prev);
            self.absorb_next(prev);
            index = prev;
        }
        self.insert_free(index);
        true
    }

    /// Whether `region` exists and is one free block spanning all of it.
    ///
    /// # Panics
    /// Never.
    pub fn is_region_free(&self, region: u32) -> bool {
        self.region(region).is_some_and(|info| {
            let node = &self.nodes[info.first as usize];
            node.state == State::Free && node.size == info.size
        })
    }

    /// Total free bytes over all regions.
    ///
    /// # Panics
    /// Never.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Size in bytes of the largest single free block (0 if none). Exact:
    /// scans the list of the highest non-empty bin, O(that list's length).
    ///
    /// # Panics
    /// Never.
    pub fn largest_free(&self) -> u64 {
        let Some(fl) = highest_bit(self.fl_bitmap) else {
            return 0;
        };
        let Some(sl) = highest_bit(u64::from(self.sl_bitmap[fl as usize])) else {
            return 0;
        };
        let mut best = 0;
        let mut cursor = self.bins[fl as usize][sl as usize];
        while cursor != NIL {
            let node = &self.nodes[cursor as usize];
            best = best.max(node.size);
            cursor = node.next_free;
        }
        best
    }

    /// Number of regions currently added.
    ///
    /// # Panics
    /// Never.
    #[cfg(test)]
    pub fn region_count(&self) -> usize {
        self.region_count
    }

    /// Free ranges `(offset, size)` in bytes of `region`, sorted by offset;
    /// empty for unknown regions. O(blocks in the region); for tests and for
    /// a compaction's planning index ([`Tlsf::add_region_with_free`]).
    ///
    /// # Panics
    /// Never.
    pub fn free_ranges(&self, region: u32) -> Vec<(u64, u64)> {
        let mut ranges = Vec::new();
        let mut cursor = self.region(region).map_or(NIL, |info| info.first);
        while cursor != NIL {
            let node = &self.nodes[cursor as usize];
            if node.state == State::Free {
                ranges.push((node.offset, node.size));
            }
            cursor = node.next_phys;
        }
        ranges
    }

    fn region(&self, region: u32) -> Option<RegionInfo> {
        self.regions.get(region as usize).copied().flatten()
    }

    fn is_free(&self, index: u32) -> bool {
        index != NIL && self.nodes[index as usize].state == State::Free
    }

    /// Takes the head of the request's own bin off its list when it is exactly `size`
    /// bytes: the tightest fit there is, and the cheapest to unlink (a loop freeing and
    /// reserving the same size hits it every time).
    #[inline]
    fn exact_head(&mut self, size: u64) -> Option<u32> {
        let (fl, sl) = size_class_floor(size);
        let head = self.bins[fl as usize][sl as usize];
        if head == NIL || self.nodes[head as usize].size != size {
            return None;
        }
        let next = self.nodes[head as usize].next_free;
        self.bins[fl as usize][sl as usize] = next;
        if next == NIL {
            self.sl_bitmap[fl as usize] &= !(1 << sl);
            if self.sl_bitmap[fl as usize] == 0 {
                self.fl_bitmap &= !(1 << fl);
            }
        } else {
            self.nodes[next as usize].prev_free = NIL;
        }
        self.nodes[head as usize].next_free = NIL;
        #[cfg(test)]
        {
            self.last_visits += 1;
        }
        Some(head)
    }

    /// Finds a free block of at least `size` bytes, walking at most `walk`
    /// entries of the request's own bin.
    fn find_block(&mut self, size: u64, walk: usize) -> Option<u32> {
        // The request's own bin may hold a fitting block the ceil search
        // would skip, and the tightest one leaves the least behind. A bin
        // spans 1/32 of its sizes, so its list stays short.
        let (fl, sl) = size_class_floor(size);
        if let Some(index) = self.best_in_bin(fl, sl, size, walk) {
            return Some(index);
        }
        let ceil = size_class_ceil(size).and_then(|(fl, sl)| self.first_nonempty_bin(fl, sl));
        match ceil {
            Some((fl, sl)) => {
                let index = self.head_if_fits(fl, sl, size);
                debug_assert!(index.is_some(), "ceil bin holds a block too small");
                index
            }
            None => None,
        }
    }

    /// The smallest block holding at least `size` bytes among the first `walk`
    /// blocks of bin `(fl, sl)`; an exact fit ends the walk at once.
    fn best_in_bin(&mut self, fl: u32, sl: u32, size: u64, walk: usize) -> Option<u32> {
        let mut best: Option<u32> = None;
        let mut cursor = self.bins[fl as usize][sl as usize];
        for _ in 0..walk {
            if cursor == NIL {
                break;
            }
            #[cfg(test)]
            {
                self.last_visits += 1;
            }
            let node = &self.nodes[cursor as usize];
            if node.size == size {
                return Some(cursor);
            }
            let better = best.is_none_or(|b| node.size < self.nodes[b as usize].size);
            if node.size > size && better {
                best = Some(cursor);
            }
            cursor = node.next_free;
        }
        best
    }

    /// Head of bin `(fl, sl)` if it holds at least `size` bytes.
    fn head_if_fits(&mut self, fl: u32, sl: u32, size: u64) -> Option<u32> {
        let head = self.bins[fl as usize][sl as usize];
        if head == NIL {
            return None;
        }
        #[cfg(test)]
        {
            self.last_visits += 1;
        }
        (self.nodes[head as usize].size >= size).then_some(head)
    }

    /// First non-empty bin at or above `(fl, sl)`, by two bit scans.
    fn first_nonempty_bin(&self, fl: u32, sl: u32) -> Option<(u32, u32)> {
        let same_fl = self.sl_bitmap[fl as usize] & (u32::MAX << sl);
        if same_fl != 0 {
            return Some((fl, same_fl.trailing_zeros()));
        }
        let above = self.fl_bitmap & u64::MAX.checked_shl(fl + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let fl = above.trailing_zeros();
        Some((fl, self.sl_bitmap[fl as usize].trailing_zeros()))
    }
}

/// Index of the highest set bit, if any.
fn highest_bit(bits: u64) -> Option<u32> {
    (bits != 0).then(|| 63 - bits.leading_zeros())
}

mod nodes;
mod ranges;
mod reuse;

#[cfg(test)]
mod tests;
