use super::super::size_class::{bin_min, size_class_ceil, size_class_floor};
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Asserts no two free ranges of `region` touch (coalescing is complete).
fn assert_coalesced(tlsf: &Tlsf, region: u32) {
    let ranges = tlsf.free_ranges(region);
    for pair in ranges.windows(2) {
        assert!(pair[0].0 + pair[0].1 < pair[1].0, "uncoalesced {ranges:?}");
    }
}

/// Every bin list holds exactly the free nodes of its size class, linked
/// both ways, and the bitmaps mark exactly the non-empty bins.
fn assert_bins_consistent(tlsf: &Tlsf) {
    let mut filed = 0;
    for (fl, bins) in tlsf.bins.iter().enumerate() {
        let fl_bit = tlsf.fl_bitmap >> fl & 1 == 1;
        assert_eq!(fl_bit, tlsf.sl_bitmap[fl] != 0, "fl bit {fl}");
        for (sl, &head) in bins.iter().enumerate() {
            let sl_bit = tlsf.sl_bitmap[fl] >> sl & 1 == 1;
            assert_eq!(sl_bit, head != NIL, "sl bit {fl} {sl}");
            let (mut prev, mut cursor) = (NIL, head);
            while cursor != NIL {
                let node = &tlsf.nodes[cursor as usize];
                assert_eq!(node.state, State::Free);
                assert_eq!(node.prev_free, prev);
                let bin = size_class_floor(node.size);
                assert_eq!(bin, (fl as u32, sl as u32));
                filed += 1;
                (prev, cursor) = (cursor, node.next_free);
            }
        }
    }
    let free = tlsf.nodes.iter().filter(|n| n.state == State::Free);
    assert_eq!(filed, free.count(), "free node missing from bins");
}

const PERMUTATIONS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

#[test]
fn three_blocks_coalesce_in_every_free_order() {
    // 300: the blocks fill the region; 400: a free tail follows them.
    for region_size in [300, 400] {
        for order in PERMUTATIONS {
            let mut tlsf = Tlsf::new(4);
            tlsf.add_region(7, region_size);
            let blocks: Vec<Block> = (0..3).map(|_| tlsf.allocate(100).unwrap()).collect();
            let offsets: Vec<u64> = blocks.iter().map(|b| b.offset).collect();
            assert_eq!(offsets, [0, 100, 200]);
            for &i in &order {
                assert!(!tlsf.is_region_free(7));
                assert!(tlsf.free(blocks[i].id), "{order:?}");
                assert_coalesced(&tlsf, 7);
                assert_bins_consistent(&tlsf);
            }
            assert_eq!(tlsf.free_ranges(7), [(0, region_size)], "{order:?}");
            assert!(tlsf.is_region_free(7));
            assert_eq!(tlsf.free_bytes(), region_size);
            assert!(tlsf.remove_region(7), "{order:?}");
            assert_eq!((tlsf.region_count(), tlsf.free_bytes()), (0, 0));
        }
    }
}

#[test]
fn merging_both_sides_keeps_other_blocks_of_the_merged_size_filed() {
    // Regression: freeing b between free a and free c once unlinked b (never
    // filed) from its bin, emptying the bin that holds region 1's block.
    let mut tlsf = Tlsf::new(1);
    tlsf.add_region(0, 400);
    let [a, b, c, _fence] = [(); 4].map(|_| tlsf.allocate(100).unwrap());
    tlsf.add_region(1, 200);
    assert!(tlsf.free(a.id) && tlsf.free(c.id));
    let other = tlsf.allocate(200).unwrap();
    assert!(tlsf.free(other.id), "region 1's block is filed");
    assert!(tlsf.free(b.id));
    assert_bins_consistent(&tlsf);
    assert_eq!(tlsf.free_ranges(0), [(0, 300)]);
    assert_eq!(tlsf.allocate(200).map(|x| x.region), Some(1));
}

#[test]
fn stale_and_unknown_ids_are_rejected() {
    let mut tlsf = Tlsf::new(1);
    tlsf.add_region(0, 64);
    let a = tlsf.allocate(64).unwrap();
    assert!(tlsf.free(a.id));
    assert!(!tlsf.free(a.id), "double free");
    let b = tlsf.allocate(64).unwrap();
    assert_eq!(b.id.index, a.id.index, "slot reused");
    assert!(!tlsf.free(a.id), "stale id must not free the new block");
    assert_eq!(tlsf.free_bytes(), 0);
    let bogus = BlockId {
        index: 999,
        generation: 0,
    };
    assert!(!tlsf.free(bogus));
    assert!(tlsf.free(b.id));
    assert!(tlsf.remove_region(0));
    assert!(!tlsf.free(b.id), "id of a removed region");
}

#[test]
fn regions_are_isolated() {
    let mut tlsf = Tlsf::new(1);
    tlsf.add_region(0, 100);
    tlsf.add_region(1, 100);
    assert_eq!(tlsf.allocate(150), None, "no block spans two regions");
    let a = tlsf.allocate(100).unwrap();
    let b = tlsf.allocate(100).unwrap();
    assert_ne!(a.region, b.region);
    assert_eq!((a.offset, b.offset), (0, 0));
    assert!(tlsf.free(a.id) && tlsf.free(b.id));
    assert_eq!(tlsf.free_ranges(0), [(0, 100)]);
    assert_eq!(tlsf.free_ranges(1), [(0, 100)]);
    assert_eq!(tlsf.largest_free(), 100, "never merged across regions");
    assert!(tlsf.remove_region(0));
    assert!(tlsf.is_region_free(1) && !tlsf.is_region_free(0));
    tlsf.add_region(0, 300);
    assert_eq!(tlsf.allocate(300).map(|b| b.region), Some(0), "id reused");
}

#[test]
fn remove_region_needs_a_fully_free_region() {
    let mut tlsf = Tlsf::new(1);
    assert!(!tlsf.remove_region(3), "unknown region");
    tlsf.add_region(3, 64);
    let a = tlsf.allocate(8).unwrap();
    assert!(!tlsf.remove_region(3));
    assert_eq!(tlsf.region_count(), 1);
    assert!(tlsf.free(a.id));
    assert!(tlsf.remove_region(3));
    assert!(!tlsf.remove_region(3), "already removed");
}

/// Allocates `sizes` in order and checks offsets are granule multiples.
fn check_granule(granule: u64, region: u64, sizes: &[u64]) -> Vec<Block> {
    let mut tlsf = Tlsf::new(granule);
    tlsf.add_region(0, region);
    let blocks: Vec<Block> = sizes.iter().map(|&s| tlsf.allocate(s).unwrap()).collect();
    for b in &blocks {
        assert_eq!(b.offset % granule, 0, "{b:?}");
        assert_eq!(b.size % granule, 0, "{b:?}");
    }
    let used: u64 = blocks.iter().map(|b| b.size).sum();
    assert_eq!(tlsf.free_bytes(), region - used);
    blocks
}

#[test]
fn granule_fifty_keeps_offsets_aligned() {
    let blocks = check_granule(50, 1000, &[0, 150, 50, 300, 100]);
    assert_eq!(blocks[0].size, 50, "size 0 becomes one granule");
    let offsets: Vec<u64> = blocks.iter().map(|b| b.offset).collect();
    assert_eq!(offsets, [0, 50, 200, 250, 550]);
}

#[test]
fn granule_256_keeps_offsets_aligned() {
    let blocks = check_granule(256, 4096, &[256, 0, 768, 1024, 512]);
    assert_eq!(blocks[1].size, 256, "size 0 becomes one granule");
    let offsets: Vec<u64> = blocks.iter().map(|b| b.offset).collect();
    assert_eq!(offsets, [0, 256, 512, 1280, 2304]);
}

#[test]
fn exhaustion_returns_none() {
    let mut tlsf = Tlsf::new(1);
    assert_eq!(tlsf.allocate(1), None, "no regions");
    tlsf.add_region(0, 1024);
    let a = tlsf.allocate(1024).unwrap();
    assert_eq!(tlsf.allocate(1), None);
    assert_eq!(tlsf.allocate(0), None);
    assert_eq!(tlsf.allocate(u64::MAX), None);
    assert!(tlsf.free(a.id));
    assert_eq!(tlsf.allocate(1025), None);
    assert!(tlsf.allocate(1024).is_some());
}

#[test]
fn largest_free_is_exact_within_a_bin() {
    // 1008 and 1015 share bin (5, 31), so the bin head alone is not enough.
    for order in [[1008, 1015], [1015, 1008]] {
        let mut tlsf = Tlsf::new(1);
        tlsf.add_region(0, order[0]);
        tlsf.add_region(1, order[1]);
        assert_eq!(tlsf.largest_free(), 1015);
    }
    assert_eq!(Tlsf::new(1).largest_free(), 0);
}

#[test]
fn fragmented_region_rejects_without_scanning() {
    const KIB: u64 = 1024;
    let mut tlsf = Tlsf::new(256);
    tlsf.add_region(0, 1024 * KIB);
    let blocks: Vec<Block> = (0..1024).map(|_| tlsf.allocate(KIB).unwrap()).collect();
    for b in blocks.iter().step_by(2) {
        assert!(tlsf.free(b.id));
    }
    assert_eq!(tlsf.free_ranges(0).len(), 512);
    assert_eq!(tlsf.allocate(4 * KIB), None);
    assert!(tlsf.last_visits <= 4, "visited {}", tlsf.last_visits);
    assert_eq!(tlsf.allocate(2 * KIB), None);
    assert!(tlsf.last_visits <= 4, "visited {}", tlsf.last_visits);
    assert!(tlsf.allocate(KIB).is_some());
    assert!(tlsf.last_visits <= 4, "visited {}", tlsf.last_visits);
}

/// One step of the random sequence; sizes are in granules.
#[derive(Clone, Debug)]
enum Op {
    Add(u32, u64),
    Alloc(u64),
    Free(usize),
    Remove(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..4u32, 1..80u64).prop_map(|(r, n)| Op::Add(r, n)),
        4 => (0..24u64).prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        1 => (0..4u32).prop_map(Op::Remove),
    ]
}

/// Shadow model: region sizes and live blocks keyed by (region, offset).
struct Model {
    granule: u64,
    regions: BTreeMap<u32, u64>,
    live: BTreeMap<(u32, u64), Block>,
}

impl Model {
    fn apply(&mut self, tlsf: &mut Tlsf, op: &Op) {
        match *op {
            Op::Add(r, n) => self.add(tlsf, r, n * self.granule),
            Op::Alloc(n) => self.alloc(tlsf, n * self.granule),
            Op::Free(pick) => self.free(tlsf, pick),
            Op::Remove(r) => self.remove(tlsf, r),
        }
    }

    fn add(&mut self, tlsf: &mut Tlsf, region: u32, size: u64) {
        if self.regions.contains_key(&region) {
            return;
        }
        tlsf.add_region(region, size);
        self.regions.insert(region, size);
    }

    fn alloc(&mut self, tlsf: &mut Tlsf, size: u64) {
        let want = size.max(self.granule);
        let Some(block) = tlsf.allocate(size) else {
            // Only blocks below the request's ceil bin may be passed over.
            let (fl, sl) = size_class_ceil(want).unwrap();
            assert!(tlsf.largest_free() < bin_min(fl, sl), "missed a fit");
            return;
        };
        assert_eq!(block.size, want);
        let region_size = self.regions[&block.region];
        assert!(block.offset + block.size <= region_size, "outside region");
        let key = (block.region, block.offset);
        assert!(self.live.insert(key, block).is_none(), "same offset twice");
    }

    fn free(&mut self, tlsf: &mut Tlsf, pick: usize) {
        let Some(&key) = self.live.keys().nth(pick % self.live.len().max(1)) else {
            let bogus = BlockId {
                index: pick as u32,
                generation: 7,
            };
            assert!(!tlsf.free(bogus));
            return;
        };
        let block = self.live.remove(&key).unwrap();
        assert!(tlsf.free(block.id));
        assert!(!tlsf.free(block.id), "second free must fail");
    }

    fn remove(&mut self, tlsf: &mut Tlsf, region: u32) {
        let used = self.live.keys().any(|&(r, _)| r == region);
        let expected = self.regions.contains_key(&region) && !used;
        assert_eq!(tlsf.remove_region(region), expected);
        if expected {
            self.regions.remove(&region);
        }
    }

    /// Live blocks and free ranges must tile each region exactly.
    fn check(&self, tlsf: &Tlsf) {
        assert_bins_consistent(tlsf);
        assert_eq!(tlsf.region_count(), self.regions.len());
        let mut free_total = 0;
        let mut largest = 0;
        for (&region, &size) in &self.regions {
            let free = tlsf.free_ranges(region);
            let used = self.live.range((region, 0)..=(region, u64::MAX));
            let mut pieces: Vec<(u64, u64, bool)> =
                free.iter().map(|&(o, s)| (o, s, true)).collect();
            pieces.extend(used.map(|(_, b)| (b.offset, b.size, false)));
            pieces.sort_unstable();
            let mut end = 0;
            for &(offset, len, is_free) in &pieces {
                assert_eq!(offset, end, "gap or overlap in region {region}");
                assert_eq!(offset % self.granule, 0, "misaligned");
                end = offset + len;
                if is_free {
                    free_total += len;
                    largest = largest.max(len);
                }
            }
            assert_eq!(end, size, "region {region} not covered");
            assert_coalesced(tlsf, region);
            let all_free = free.len() == 1 && pieces.len() == 1;
            assert_eq!(tlsf.is_region_free(region), all_free);
        }
        assert_eq!(tlsf.free_bytes(), free_total);
        let allocated: u64 = self.live.values().map(|b| b.size).sum();
        assert_eq!(free_total + allocated, self.regions.values().sum::<u64>());
        assert_eq!(tlsf.largest_free(), largest);
    }
}

proptest! {
    #[test]
    fn random_sequences_match_shadow_model(
        granule in prop::sample::select(vec![1u64, 4, 50, 256]),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut tlsf = Tlsf::new(granule);
        let mut model = Model { granule, regions: BTreeMap::new(), live: BTreeMap::new() };
        for op in &ops {
            model.apply(&mut tlsf, op);
            model.check(&tlsf);
        }
        while let Some((_, block)) = model.live.pop_first() {
            prop_assert!(tlsf.free(block.id));
            model.check(&tlsf);
        }
        for (&region, &size) in &model.regions {
            prop_assert_eq!(tlsf.free_ranges(region), vec![(0, size)]);
            prop_assert!(tlsf.remove_region(region));
        }
        prop_assert_eq!((tlsf.region_count(), tlsf.free_bytes()), (0, 0));
    }
}

/// A fitting block behind the head of the request's own bin is found before the index
/// reports no room (which would make the pool add a page).
#[test]
fn fitting_block_behind_the_bin_head_is_found() {
    // 1008 and 1015 share bin (5, 31); the later region is filed at the head.
    let mut tlsf = Tlsf::new(1);
    tlsf.add_region(0, 1015);
    tlsf.add_region(1, 1008);
    let block = tlsf.allocate(1012).expect("region 0 holds 1015 bytes");
    assert_eq!((block.region, block.offset, block.size), (0, 0, 1012));
    assert_eq!(tlsf.allocate(1012), None);
}

/// `has_close_fit` answers for a free block in the request's own bin (less than a bin's
/// width, 1/32 of the size, above the request), and changes nothing.
#[test]
fn close_fit_is_seen_only_for_a_free_block_in_the_requests_bin() {
    let mut tlsf = Tlsf::new(16);
    tlsf.add_region(0, 4096);
    let _a = tlsf.allocate(256).unwrap();
    let b = tlsf.allocate(1040).unwrap();
    let _c = tlsf.allocate(256).unwrap();
    assert!(!tlsf.has_close_fit(1040), "b is still allocated");
    assert!(tlsf.free(b.id));
    let free_before = tlsf.free_bytes();
    assert!(tlsf.has_close_fit(1040), "b's block is free");
    assert!(
        tlsf.has_close_fit(1024),
        "1040 is in 1024's bin, [1024, 1056)"
    );
    assert!(
        !tlsf.has_close_fit(1056),
        "larger than every block of its bin"
    );
    assert!(!tlsf.has_close_fit(512), "1040 is past 512's bin");
    assert!(tlsf.has_close_fit(2544), "the tail");
    assert!(!tlsf.has_close_fit(0), "0 is one granule; none is free");
    assert_eq!(tlsf.free_bytes(), free_before);
    assert_eq!(tlsf.free_ranges(0), vec![(256, 1040), (1552, 2544)]);
}

/// A region built from free ranges has exactly those free, and placements never land
/// on the bytes between them.
#[test]
fn a_region_built_from_free_ranges_places_only_there() {
    let mut tlsf = Tlsf::new(16);
    tlsf.add_region_with_free(3, 1024, &[(64, 128), (512, 256)]);
    assert_bins_consistent(&tlsf);
    assert_eq!(tlsf.free_ranges(3), vec![(64, 128), (512, 256)]);
    assert_eq!(tlsf.free_bytes(), 384);
    assert!(!tlsf.is_region_free(3));
    let a = tlsf.allocate_thorough(256).unwrap();
    assert_eq!((a.region, a.offset), (3, 512));
    assert_eq!(tlsf.allocate_thorough(192), None, "only 128 bytes are free");
    let b = tlsf.allocate_thorough(128).unwrap();
    assert_eq!(b.offset, 64);
    assert!(tlsf.free(a.id) && tlsf.free(b.id));
    assert_eq!(tlsf.free_ranges(3), vec![(64, 128), (512, 256)]);
    assert_bins_consistent(&tlsf);
}

/// Held free blocks are out of placement until given back, then merge as before.
#[test]
fn held_free_blocks_are_out_of_placement_until_given_back() {
    let mut tlsf = Tlsf::new(16);
    tlsf.add_region(0, 1024);
    tlsf.add_region(1, 1024);
    let used = tlsf.allocate(256).unwrap();
    let region = used.region;
    let held = tlsf.hold_free(region);
    assert_eq!(held.len(), 1);
    assert_eq!(tlsf.free_bytes(), 1024, "only the other region is free");
    let placed = tlsf.allocate_thorough(512).unwrap();
    assert_ne!(placed.region, region);
    for id in held {
        assert!(tlsf.free(id));
    }
    assert!(tlsf.free(used.id));
    assert!(tlsf.is_region_free(region));
    assert_bins_consistent(&tlsf);
}

/// `claim` takes exactly the ranges asked inside free blocks (front, middle and back
/// of a block), refuses ranges that are not free, and the rest stays free and filed.
#[test]
fn claim_takes_exactly_the_ranges_asked() {
    let mut tlsf = Tlsf::new(16);
    tlsf.add_region(0, 4096);
    let live = tlsf.allocate(1024).unwrap();
    assert_eq!(live.offset, 0);
    let claimed = tlsf.claim(0, &[(512, 64), (1024, 128), (2048, 256), (3840, 256)]);
    assert_eq!(claimed[0], None, "inside a live block");
    assert!(claimed[1..].iter().all(Option::is_some));
    assert_eq!(
        tlsf.free_ranges(0),
        vec![(1152, 896), (2304, 1536)],
        "front, middle and back of the free block taken"
    );
    assert_eq!(tlsf.free_bytes(), 4096 - 1024 - 128 - 256 - 256);
    assert_bins_consistent(&tlsf);
    for id in claimed.into_iter().flatten() {
        assert!(tlsf.free(id));
    }
    assert!(tlsf.free(live.id));
    assert!(tlsf.is_region_free(0));
    assert_bins_consistent(&tlsf);
}

/// Frees `block` in a copy of `tlsf`: the free range that then holds the block's offset.
fn hole_after_free(tlsf: &Tlsf, block: &Block) -> Option<(u64, u64)> {
    let mut copy = tlsf.clone();
    assert!(copy.free(block.id));
    copy.free_ranges(block.region)
        .into_iter()
        .find(|&(start, len)| start <= block.offset && block.offset < start + len)
}

/// A block is reissued in place exactly when freeing it would leave a hole that starts
/// at its own offset: a free upper neighbour is fine, a free lower one is not.
#[test]
fn a_block_reissues_in_place_only_where_its_hole_would_start_at_it() {
    let mut tlsf = Tlsf::new(1);
    tlsf.add_region(0, 1024);
    let blocks: Vec<Block> = (0..5).map(|_| tlsf.allocate(100).unwrap()).collect();
    // Both neighbours taken: the hole is exactly the block.
    assert!(tlsf.reissues_in_place(blocks[2].id));
    assert_eq!(hole_after_free(&tlsf, &blocks[2]), Some((200, 100)));
    // The region's first block: no lower neighbour at all.
    assert!(tlsf.reissues_in_place(blocks[0].id));
    // Only the upper neighbour (the region's free tail) is free: the hole starts at it,
    // even though an exact hole elsewhere would suit a new placement better.
    assert!(tlsf.free(blocks[1].id));
    assert!(tlsf.reissues_in_place(blocks[4].id));
    assert_eq!(hole_after_free(&tlsf, &blocks[4]), Some((400, 624)));
    // A free lower neighbour moves the merged hole's start.
    assert!(!tlsf.reissues_in_place(blocks[2].id));
    assert_eq!(hole_after_free(&tlsf, &blocks[2]), Some((100, 200)));
    // Freed and stale ids are never reissued.
    let stale = blocks[1].id;
    assert!(!tlsf.reissues_in_place(stale));
}

proptest! {
    /// Whenever `reissues_in_place` says so, freeing the block leaves a hole that starts
    /// at the block's offset and holds it whole, over random layouts of several regions.
    #[test]
    fn reissues_in_place_only_where_the_hole_starts_at_the_block(
        granule in prop::sample::select(vec![1u64, 4, 256]),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut tlsf = Tlsf::new(granule);
        let mut model = Model { granule, regions: BTreeMap::new(), live: BTreeMap::new() };
        for op in &ops {
            model.apply(&mut tlsf, op);
        }
        for block in model.live.values() {
            let hole = hole_after_free(&tlsf, block).expect("a freed block is free");
            let starts_here = hole.0 == block.offset && hole.1 >= block.size;
            prop_assert_eq!(tlsf.reissues_in_place(block.id), starts_here);
        }
    }
}
