//! C23 Odd alignments.
//!
//! Sub-allocator over 50,331,648 bytes, alignment 2: a = 576, b = 648, free a, c = 720,
//! free b, free c; then 100,000 random reserve/free with alignments 1, 2, 4, 256.
//! Expect: no panic; offsets honour alignment; after every operation
//! free + used + padding == page size; at the end one free region spans the page.
//!
//! Choices: the sub-allocator is an explicit layout of one sliced pool whose page is
//! 50,331,648 bytes, capped at that one page. A memory has one alignment, so the random
//! phase runs four such memories side by side, with alignments 1, 2, 4 and 256 (each
//! operation picks an alignment, i.e. a memory, at random). Live bytes per memory are
//! kept under half the page, so every reservation must succeed in that one page.
//! "free + used + padding == page size" is checked as: one page reserved, in use and
//! padding equal to a model's sums, the model's slices (offset, aligned size) disjoint
//! inside the page, and the largest free slice never more than page minus used minus
//! padding. "One free region spans the page" is checked by reserving the whole page
//! after everything is freed: it must succeed at offset 0 of the same page.

use crate::common::*;
use std::collections::BTreeMap;
use wgpu_memory::memory_management::MemoryManagement;
use wgpu_memory::storage::{BytesStorage, StorageId};

const PAGE: u64 = 50_331_648;
const OPERATIONS: u64 = 100_000;

struct Xorshift(u64);
impl Xorshift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Live {
    handle: cubecl_runtime::memory_management::ManagedMemoryHandle,
    offset: u64,
    size: u64,
}

/// One memory of one alignment, with a model of its page.
struct Sub {
    align: u64,
    memory: MemoryManagement<BytesStorage>,
    live: Vec<Live>,
    /// offset -> end (offset + aligned size) of every live slice.
    ranges: BTreeMap<u64, u64>,
    page: Option<StorageId>,
    in_use: u64,
    padding: u64,
}

fn aligned(size: u64, align: u64) -> u64 {
    size.div_ceil(align) * align
}

impl Sub {
    fn new(align: u64) -> Self {
        Self {
            align,
            memory: explicit(
                BytesStorage::default(),
                GIB,
                align,
                vec![sliced(PAGE, PAGE, Some(PAGE))],
            ),
            live: Vec::new(),
            ranges: BTreeMap::new(),
            page: None,
            in_use: 0,
            padding: 0,
        }
    }

    fn reserve(&mut self, size: u64, op: u64) {
        let handle = self.memory.reserve(size).unwrap_or_else(|e| {
            panic!("op {op}: align {} reserve({size}) failed: {e}", self.align)
        });
        let storage = self.memory.get_storage(&handle.clone().binding()).unwrap();
        let (offset, align) = (storage.offset(), self.align);
        assert_eq!(storage.size(), size, "op {op}: slice size");
        assert_eq!(
            offset % align,
            0,
            "op {op}: offset {offset} breaks alignment {align}"
        );
        assert_eq!(
            *self.page.get_or_insert(storage.id),
            storage.id,
            "op {op}: align {align}: a second page was used"
        );
        let end = offset + aligned(size, align);
        assert!(
            end <= PAGE,
            "op {op}: slice [{offset}, {end}) past the page"
        );
        if let Some((&before, &before_end)) = self.ranges.range(..=offset).next_back() {
            assert!(
                before_end <= offset,
                "op {op}: align {align}: [{offset}, {end}) overlaps [{before}, {before_end})"
            );
        }
        if let Some((&after, _)) = self.ranges.range(offset + 1..).next() {
            assert!(
                end <= after,
                "op {op}: align {align}: [{offset}, {end}) overlaps the slice at {after}"
            );
        }
        self.ranges.insert(offset, end);
        self.in_use += size;
        self.padding += aligned(size, align) - size;
        self.live.push(Live {
            handle,
            offset,
            size,
        });
    }

    fn free(&mut self, index: usize) {
        let live = self.live.swap_remove(index);
        self.ranges.remove(&live.offset);
        self.in_use -= live.size;
        self.padding -= aligned(live.size, self.align) - live.size;
        drop(live.handle);
    }

    fn check(&self, op: u64) {
        let usage = self.memory.memory_usage();
        let align = self.align;
        assert_eq!(
            usage.bytes_reserved, PAGE,
            "op {op}: align {align}: reserved"
        );
        assert_eq!(
            usage.bytes_in_use, self.in_use,
            "op {op}: align {align}: in use"
        );
        assert_eq!(
            usage.bytes_padding, self.padding,
            "op {op}: align {align}: padding"
        );
        assert_eq!(
            usage.number_allocs,
            self.live.len() as u64,
            "op {op}: count"
        );
        let free = PAGE - self.in_use - self.padding;
        assert!(
            self.memory.largest_free_slice() <= free,
            "op {op}: align {align}: largest free slice {} > free bytes {free}",
            self.memory.largest_free_slice()
        );
    }

    /// Frees everything, then the whole page must be one free region.
    fn finish(mut self) {
        while !self.live.is_empty() {
            self.free(self.live.len() - 1);
        }
        let whole = self.memory.reserve(PAGE).unwrap_or_else(|e| {
            panic!(
                "align {}: the freed page is not one region: {e}",
                self.align
            )
        });
        let storage = self.memory.get_storage(&whole.binding()).unwrap();
        assert_eq!(storage.offset(), 0);
        assert_eq!(Some(storage.id), self.page);
        assert_eq!(self.memory.storage().allocations_made(), 1);
    }
}

#[test]
fn c23_odd_alignments() {
    // The fixed sequence, alignment 2.
    let mut sub = Sub::new(2);
    sub.reserve(576, 0);
    sub.check(0);
    sub.reserve(648, 1);
    sub.check(1);
    sub.free(0); // a
    sub.check(2);
    sub.reserve(720, 3);
    sub.check(3);
    let b = sub.live.iter().position(|l| l.size == 648).unwrap();
    sub.free(b);
    sub.check(4);
    let c = sub.live.iter().position(|l| l.size == 720).unwrap();
    sub.free(c);
    sub.check(5);
    sub.finish();

    // The random phase.
    let mut subs: Vec<Sub> = [1, 2, 4, 256].into_iter().map(Sub::new).collect();
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    for op in 0..OPERATIONS {
        let sub = &mut subs[rng.below(4) as usize];
        let reserve = sub.live.is_empty() || rng.below(100) < 52;
        if reserve {
            let size = match rng.below(10) {
                0..=5 => 1 + rng.below(4096),
                6..=8 => 1 + rng.below(65_536),
                _ => 1 + rng.below(1 << 20),
            };
            let held = sub.in_use + sub.padding;
            if held + aligned(size, sub.align) <= PAGE / 2 {
                sub.reserve(size, op);
            } else {
                let index = rng.below(sub.live.len() as u64) as usize;
                sub.free(index);
            }
        } else {
            let index = rng.below(sub.live.len() as u64) as usize;
            sub.free(index);
        }
        sub.check(op);
    }
    for sub in subs {
        sub.finish();
    }
}
