//! The node slab and the free lists under [`Tlsf`]: splitting and merging blocks,
//! filing free blocks in their bins (with the bitmap bits), and the vacant list that
//! reuses node slots. Every operation here is O(1).

use super::super::size_class::size_class_floor;
use super::{NIL, Node, State, Tlsf};

impl Tlsf {
    /// Cuts `index` down to `size` bytes, filing the rest as a free block.
    pub(super) fn split(&mut self, index: u32, size: u64) {
        let node = &self.nodes[index as usize];
        debug_assert!(node.size >= size);
        let rest = node.size - size;
        if rest == 0 {
            return;
        }
        let (region, offset, next) = (node.region, node.offset + size, node.next_phys);
        let tail = self.new_node(region, offset, rest);
        self.nodes[index as usize].size = size;
        self.link_phys(index, tail);
        self.link_phys(tail, next);
        self.insert_free(tail);
    }

    /// Merges the free physical successor of `index` into `index`. Neither
    /// may be filed in a bin: `index` changes size and `next` is released.
    pub(super) fn absorb_next(&mut self, index: u32) {
        let next = self.nodes[index as usize].next_phys;
        debug_assert!(self.is_free(next));
        let (size, after) = {
            let node = &self.nodes[next as usize];
            (node.size, node.next_phys)
        };
        self.nodes[index as usize].size += size;
        self.link_phys(index, after);
        self.release_node(next);
    }

    pub(super) fn link_phys(&mut self, before: u32, after: u32) {
        self.nodes[before as usize].next_phys = after;
        if after != NIL {
            self.nodes[after as usize].prev_phys = before;
        }
    }

    /// Files free node `index` at the head of its floor bin.
    pub(super) fn insert_free(&mut self, index: u32) {
        let (fl, sl) = size_class_floor(self.nodes[index as usize].size);
        let head = self.bins[fl as usize][sl as usize];
        let node = &mut self.nodes[index as usize];
        node.prev_free = NIL;
        node.next_free = head;
        if head != NIL {
            self.nodes[head as usize].prev_free = index;
        }
        self.bins[fl as usize][sl as usize] = index;
        self.sl_bitmap[fl as usize] |= 1 << sl;
        self.fl_bitmap |= 1 << fl;
    }

    /// Unlinks free node `index` from its bin, clearing emptied bitmap bits.
    pub(super) fn remove_free(&mut self, index: u32) {
        let node = &self.nodes[index as usize];
        let (prev, next) = (node.prev_free, node.next_free);
        let (fl, sl) = size_class_floor(node.size);
        if prev != NIL {
            self.nodes[prev as usize].next_free = next;
        } else {
            self.bins[fl as usize][sl as usize] = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev_free = prev;
        }
        let node = &mut self.nodes[index as usize];
        node.prev_free = NIL;
        node.next_free = NIL;
        if self.bins[fl as usize][sl as usize] == NIL {
            self.sl_bitmap[fl as usize] &= !(1 << sl);
            if self.sl_bitmap[fl as usize] == 0 {
                self.fl_bitmap &= !(1 << fl);
            }
        }
    }

    /// Takes a slot from the vacant list (or grows the slab) for a new free
    /// block; the caller links it physically and files it.
    pub(super) fn new_node(&mut self, region: u32, offset: u64, size: u64) -> u32 {
        let fresh = Node {
            region,
            offset,
            size,
            prev_phys: NIL,
            next_phys: NIL,
            prev_free: NIL,
            next_free: NIL,
            generation: 0,
            state: State::Free,
        };
        if self.vacant == NIL {
            debug_assert!(self.nodes.len() < NIL as usize, "slab full");
            self.nodes.push(fresh);
            return (self.nodes.len() - 1) as u32;
        }
        let index = self.vacant;
        let slot = &mut self.nodes[index as usize];
        self.vacant = slot.next_free;
        // Keep the slot's generation so ids from its earlier life stay stale.
        *slot = Node {
            generation: slot.generation,
            ..fresh
        };
        index
    }

    /// Puts slot `index` on the vacant list.
    pub(super) fn release_node(&mut self, index: u32) {
        let vacant = self.vacant;
        let node = &mut self.nodes[index as usize];
        node.state = State::Vacant;
        node.prev_phys = NIL;
        node.next_phys = NIL;
        node.prev_free = NIL;
        node.next_free = vacant;
        self.vacant = index;
    }
}
