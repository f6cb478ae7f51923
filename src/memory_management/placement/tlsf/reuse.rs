//! Whether a block freed and asked for again at its own size would come back where it
//! is: then its owner may hand it out again without freeing it at all.
//!
//! # Complexity
//! [`Tlsf::comes_back_in_place`]: O(1): a few node reads and two bit scans.

use super::super::size_class::{FL_COUNT, SL_COUNT, size_class_ceil, size_class_floor};
use super::{BlockId, NIL, State, Tlsf};

impl Tlsf {
    /// Whether freeing the allocated block `id` and then allocating its size again (one
    /// [`Tlsf::allocate`], nothing in between) would hand out the same offset. `false`
    /// for an id that is not a live allocated block.
    ///
    /// True when both physical neighbours are allocated (the freed hole has exactly the
    /// block's size, and an exact fit at the head of its bin is taken first), and when
    /// only the upper neighbour is free and the merged hole, filed at the head of its
    /// bin, is what the search picks: the request's own bin holds nothing once that
    /// neighbour is taken out, and no bin between the request's ceiling and the merged
    /// hole's bin holds a block. The hole is then split from its start. A free lower
    /// neighbour moves the merged hole's start, so the block never comes back in place.
    ///
    /// # Panics
    /// Never.
    pub fn comes_back_in_place(&self, id: BlockId) -> bool {
        let Some(node) = self.nodes.get(id.index as usize) else {
            return false;
        };
        let live = node.state == State::Used && node.generation == id.generation;
        if !live || self.is_free(node.prev_phys) {
            return false;
        }
        if !self.is_free(node.next_phys) {
            return true;
        }
        let upper = &self.nodes[node.next_phys as usize];
        let own = size_class_floor(node.size);
        let merged = size_class_floor(node.size + upper.size);
        if merged == own {
            // The walk of the request's own bin would weigh the hole against the others.
            return false;
        }
        // The upper neighbour leaves its bin when it merges: a bin holding only it is
        // empty by the time of the search.
        let upper_bin = size_class_floor(upper.size);
        let upper_alone = upper.prev_free == NIL && upper.next_free == NIL;
        let holds = |bin: (u32, u32)| {
            self.bins[bin.0 as usize][bin.1 as usize] != NIL && !(upper_alone && bin == upper_bin)
        };
        if holds(own) {
            return false;
        }
        let Some((fl, sl)) = size_class_ceil(node.size) else {
            return false;
        };
        let first = match self.first_nonempty_bin(fl, sl) {
            Some(bin) if !holds(bin) => {
                next_bin(bin).and_then(|(fl, sl)| self.first_nonempty_bin(fl, sl))
            }
            first => first,
        };
        first.is_none_or(|bin| bin >= merged)
    }
}

/// The bin after `(fl, sl)` in search order, if any.
fn next_bin((fl, sl): (u32, u32)) -> Option<(u32, u32)> {
    if sl + 1 < SL_COUNT {
        Some((fl, sl + 1))
    } else if fl + 1 < FL_COUNT {
        Some((fl + 1, 0))
    } else {
        None
    }
}
