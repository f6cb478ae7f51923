//! Operations on whole ranges of a region, for planning a compaction: copying a page's
//! free space into a planning index, closing a region to placement for a while, and
//! taking exactly the ranges a plan chose.
//!
//! A compaction plans its moves in an index of its own (one region per destination
//! page, built from the pages' free ranges), so a plan that gives up leaves the pool's
//! index untouched; it then takes the chosen ranges in the pool's index with
//! [`Tlsf::claim`], one walk per page.
//!
//! # Complexity
//! - [`Tlsf::add_region_with_free`]: O(ranges given).
//! - [`Tlsf::hold_free`]: O(blocks in the region).
//! - [`Tlsf::claim`]: O(blocks in the region + ranges claimed).

use super::{BlockId, NIL, RegionInfo, State, Tlsf};

impl Tlsf {
    /// Adds region `region` of `size` bytes whose free blocks are exactly `free`
    /// (`(offset, size)` in bytes, sorted by offset, disjoint, inside the region,
    /// multiples of the granule); the bytes between them are allocated to no one and
    /// stay so (a planning copy of a page: its live slices are never placed over). A
    /// duplicate id or a zero size is ignored; a range that overlaps the previous one or
    /// passes the region's end is ignored.
    ///
    /// # Panics
    /// In debug builds, if the id is already present, `size == 0`, or a range is
    /// unsorted, overlapping or outside the region.
    pub fn add_region_with_free(&mut self, region: u32, size: u64, free: &[(u64, u64)]) {
        debug_assert!(size > 0, "empty region");
        debug_assert!(self.region(region).is_none(), "region already present");
        if size == 0 || self.region(region).is_some() {
            return;
        }
        let slot = region as usize;
        if self.regions.len() <= slot {
            self.regions.resize(slot + 1, None);
        }
        let (mut first, mut last, mut cursor) = (NIL, NIL, 0u64);
        for &(offset, length) in free {
            let fits = offset >= cursor && offset.checked_add(length).is_some_and(|e| e <= size);
            debug_assert!(
                fits,
                "free range {offset}+{length} out of order or outside {size}"
            );
            if !fits || length == 0 {
                continue;
            }
            if offset > cursor {
                last = self.append_node(region, cursor, offset - cursor, State::Used, last);
                first = if first == NIL { last } else { first };
            }
            last = self.append_node(region, offset, length, State::Free, last);
            first = if first == NIL { last } else { first };
            cursor = offset + length;
        }
        if cursor < size {
            last = self.append_node(region, cursor, size - cursor, State::Used, last);
            first = if first == NIL { last } else { first };
        }
        self.regions[slot] = Some(RegionInfo { first, size });
        self.region_count += 1;
    }

    /// A node of `size` bytes at `offset` in `state`, linked after `previous` (filed and
    /// counted when free).
    fn append_node(
        &mut self,
        region: u32,
        offset: u64,
        size: u64,
        state: State,
        previous: u32,
    ) -> u32 {
        let index = self.new_node(region, offset, size);
        if previous != NIL {
            self.link_phys(previous, index);
        }
        if state == State::Free {
            self.free_bytes += size;
            self.insert_free(index);
        } else {
            let node = &mut self.nodes[index as usize];
            node.state = state;
            node.generation = node.generation.wrapping_add(1);
        }
        index
    }

    /// Takes every free block of `region` out of placement, as allocated blocks, and
    /// returns their ids: [`free`](Self::free) each to give them back (they merge again).
    /// Empty for an unknown region.
    ///
    /// # Panics
    /// Never.
    pub fn hold_free(&mut self, region: u32) -> Vec<BlockId> {
        let mut held = Vec::new();
        let mut cursor = self.region(region).map_or(NIL, |info| info.first);
        while cursor != NIL {
            if self.nodes[cursor as usize].state == State::Free {
                held.push(self.take_free(cursor));
            }
            cursor = self.nodes[cursor as usize].next_phys;
        }
        held
    }

    /// Allocates exactly the ranges `ranges` (`(offset, size)` in bytes, sorted by
    /// offset, disjoint) of `region`, each of which must lie inside one free block.
    /// Returns each range's block, or `None` for a range that is not free (nothing is
    /// taken for it). A zero size takes one granule, as [`allocate`](Self::allocate)
    /// does.
    ///
    /// # Panics
    /// Never.
    pub fn claim(&mut self, region: u32, ranges: &[(u64, u64)]) -> Vec<Option<BlockId>> {
        let mut cursor = self.region(region).map_or(NIL, |info| info.first);
        let mut claimed = Vec::with_capacity(ranges.len());
        for &(offset, size) in ranges {
            let size = if size == 0 { self.granule } else { size };
            // Past the blocks that end before the range starts.
            while cursor != NIL && {
                let node = &self.nodes[cursor as usize];
                node.offset + node.size <= offset
            } {
                cursor = self.nodes[cursor as usize].next_phys;
            }
            let inside = cursor != NIL && {
                let node = &self.nodes[cursor as usize];
                node.state == State::Free
                    && node.offset <= offset
                    && offset
                        .checked_add(size)
                        .is_some_and(|end| end <= node.offset + node.size)
            };
            if !inside {
                claimed.push(None);
                continue;
            }
            cursor = self.carve(cursor, offset, size);
            claimed.push(Some(self.take_free(cursor)));
        }
        claimed
    }

    /// Cuts free block `index` so that a free block starts at `offset` and holds exactly
    /// `size` bytes (the bytes before and after stay free, filed); returns that block.
    fn carve(&mut self, index: u32, offset: u64, size: u64) -> u32 {
        let node = &self.nodes[index as usize];
        let (start, end, region, next) = (
            node.offset,
            node.offset + node.size,
            node.region,
            node.next_phys,
        );
        let target = if offset > start {
            // The front stays `index`, refiled at its new size.
            self.remove_free(index);
            let rest = self.new_node(region, offset, end - offset);
            self.nodes[index as usize].size = offset - start;
            self.link_phys(rest, next);
            self.link_phys(index, rest);
            self.insert_free(index);
            self.insert_free(rest);
            rest
        } else {
            index
        };
        self.remove_free(target);
        self.split(target, size);
        // `split` filed the tail; `target` goes back in its bin to be taken.
        self.insert_free(target);
        target
    }

    /// Takes free block `index` as an allocated block and returns its id.
    fn take_free(&mut self, index: u32) -> BlockId {
        self.remove_free(index);
        let node = &mut self.nodes[index as usize];
        node.state = State::Used;
        node.generation = node.generation.wrapping_add(1);
        self.free_bytes -= node.size;
        BlockId {
            index,
            generation: node.generation,
        }
    }
}
