//! Compaction's rules beyond the holes of one page size: fresh pages where they pay (and not
//! where the storage refuses them), moves across the page sizes of an adaptive band, and
//! passes that never undo one another.

use crate::memory_management::{
    Cleanup, CompactNow, MemoryManagement, MemoryManagementOptions, MemoryPoolOptions,
    NothingPending, Pin, PoolType,
};
use crate::storage::BytesStorage;
use cubecl_ir::MemoryDeviceProperties;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration};
use std::collections::BTreeMap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A memory of one sliced pool of 64 KiB pages over `storage`.
fn sliced(storage: BytesStorage) -> MemoryManagement<BytesStorage> {
    let pool = MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size: 64 * KIB,
            max_slice_size: 64 * KIB,
            max_pool_size: None,
        },
        dealloc_period: None,
    };
    MemoryManagement::from_configuration(
        storage,
        &MemoryDeviceProperties::new(1 << 30, 256),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("rules").pools(vec![pool]),
    )
}

fn write(memory: &mut MemoryManagement<BytesStorage>, handle: &ManagedMemoryHandle, byte: u8) {
    let binding = handle.clone().binding();
    let size = memory.get_storage(&binding).unwrap().size();
    let resource = memory.get_resource(&binding, None, None).unwrap();
    resource.write(&vec![byte; size as usize]);
}

fn holds(memory: &mut MemoryManagement<BytesStorage>, handle: &ManagedMemoryHandle, byte: u8) {
    let bytes = memory
        .get_resource(&handle.clone().binding(), None, None)
        .unwrap()
        .read();
    assert!(
        bytes.iter().all(|&b| b == byte),
        "the bytes moved with the slice"
    );
}

/// The page id of every live allocation, by allocation id.
fn pages_of(memory: &MemoryManagement<BytesStorage>) -> BTreeMap<u64, u64> {
    memory
        .page_map()
        .iter()
        .flat_map(|pool| pool.pages.iter())
        .flat_map(|page| page.slices.iter().map(|slice| (slice.id, page.id)))
        .collect()
}

/// Bytes of the pages that hold a live slice.
fn occupied_bytes(memory: &MemoryManagement<BytesStorage>) -> u64 {
    memory
        .page_map()
        .iter()
        .flat_map(|pool| pool.pages.iter())
        .filter(|page| !page.slices.is_empty())
        .map(|page| page.size)
        .sum()
}

/// Eight 64 KiB pages, each [24 KiB kept][8 KiB dropped][8 KiB kept][16 KiB dropped]
/// [8 KiB kept]: 40 KiB live per page, and no hole holds a 24 KiB slice. Returns the
/// kept handles with their bytes.
fn no_hole_fits(memory: &mut MemoryManagement<BytesStorage>) -> Vec<(ManagedMemoryHandle, u8)> {
    let mut kept = Vec::new();
    let mut byte = 0u8;
    for _ in 0..8 {
        for (size, keep) in [(24, true), (8, false), (8, true), (16, false), (8, true)] {
            let handle = memory.reserve(size * KIB).unwrap();
            byte += 1;
            write(memory, &handle, byte);
            kept.push((handle, byte, keep));
        }
    }
    assert_eq!(memory.memory_report().dynamic[0].pages, 8);
    kept.into_iter()
        .filter(|&(_, _, keep)| keep)
        .map(|(handle, byte, _)| (handle, byte))
        .collect()
}

/// Whether every page the `before` map names kept all its allocations or none.
fn pages_emptied_whole(before: &BTreeMap<u64, u64>, after: &BTreeMap<u64, u64>) -> bool {
    let mut per_page: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for (id, page) in before {
        let entry = per_page.entry(*page).or_default();
        entry.0 += 1;
        entry.1 += usize::from(after.get(id) == Some(page));
    }
    per_page
        .values()
        .all(|&(held, stayed)| stayed == 0 || stayed == held)
}

/// No hole holds the largest slice of any page, so no page could empty into the others
/// (before, nothing moved and all eight pages stayed); fresh pages take them where each
/// empties more than its own size.
#[test]
fn fresh_pages_take_slices_no_hole_holds() {
    let mut memory = sliced(BytesStorage::default());
    let kept = no_hole_fits(&mut memory);
    let before = pages_of(&memory);
    let in_use = memory.memory_usage().bytes_in_use;
    let made = memory.storage().allocations_made();
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert!(!done.is_empty(), "the pass moved nothing");
    assert!(memory.storage().allocations_made() > made, "no fresh page");
    assert!(pages_emptied_whole(&before, &pages_of(&memory)));
    memory.release_moved();
    memory.cleanup(Cleanup::Explicit);
    let usage = memory.memory_usage();
    assert_eq!(usage.bytes_in_use, in_use);
    assert!(
        usage.bytes_reserved < 8 * 64 * KIB,
        "{} bytes still reserved",
        usage.bytes_reserved
    );
    for (handle, byte) in &kept {
        holds(&mut memory, handle, *byte);
    }
}

/// A fresh page that would empty no more bytes than its own is not made: two pages each
/// hold a 40 KiB slice that fits neither the other's hole nor, with another, one page.
#[test]
fn a_fresh_page_that_empties_only_its_own_size_is_not_made() {
    let mut memory = sliced(BytesStorage::default());
    let all: Vec<_> = (0..4)
        .map(|i| {
            memory
                .reserve(if i % 2 == 0 { 40 * KIB } else { 24 * KIB })
                .unwrap()
        })
        .collect();
    let _kept: Vec<_> = all.into_iter().step_by(2).collect();
    assert_eq!(memory.memory_report().dynamic[0].pages, 2);
    let made = memory.storage().allocations_made();
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert!(done.is_empty(), "{:?}", done.moves);
    assert_eq!(memory.storage().allocations_made(), made);
}

/// A budget with no room for a page: the plan goes without fresh pages, and every page
/// keeps its slices.
#[test]
fn a_budget_that_refuses_fresh_pages_leaves_their_pages_as_they_were() {
    let mut memory = sliced(BytesStorage::with_capacity(8 * 64 * KIB));
    let kept = no_hole_fits(&mut memory);
    let before = pages_of(&memory);
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert!(done.is_empty(), "moved {} slices", done.moves.len());
    assert_eq!(pages_of(&memory), before);
    for (handle, byte) in &kept {
        holds(&mut memory, handle, *byte);
    }
}

/// A budget with room for one page: the first fresh page is made, the next refused; the
/// pages the refused one would have emptied stay whole.
#[test]
fn a_budget_that_refuses_the_second_fresh_page_keeps_the_first() {
    let mut memory = sliced(BytesStorage::with_capacity(9 * 64 * KIB));
    let kept = no_hole_fits(&mut memory);
    let before = pages_of(&memory);
    let in_use = memory.memory_usage().bytes_in_use;
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert!(!done.is_empty());
    assert_eq!(memory.bytes_allocated(), 9 * 64 * KIB);
    assert!(pages_emptied_whole(&before, &pages_of(&memory)));
    memory.release_moved();
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_in_use, in_use);
    assert!(memory.memory_usage().bytes_reserved < 8 * 64 * KIB);
    for (handle, byte) in &kept {
        holds(&mut memory, handle, *byte);
    }
}

/// Passes repeated until nothing moves, with or without the left ranges released and
/// the memory cleaned up between them: each pass that moves lowers the bytes of the
/// pages holding live slices, and no slice goes back to the page it left the pass
/// before.
#[test]
fn no_pass_undoes_the_previous_one() {
    for between in [Between::Nothing, Between::Release, Between::Cleanup] {
        let mut memory = sliced(BytesStorage::default());
        let _kept = no_hole_fits(&mut memory);
        // Some holes of every size: drop every third kept slice.
        let _kept: Vec<_> = _kept
            .into_iter()
            .enumerate()
            .filter(|(index, _)| index % 3 != 1)
            .map(|(_, kept)| kept)
            .collect();
        let mut occupied = occupied_bytes(&memory);
        let mut left: BTreeMap<u64, u64> = BTreeMap::new();
        for pass in 1.. {
            let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
            if done.is_empty() {
                break;
            }
            assert!(pass <= 8, "{between:?}: still moving after {pass} passes");
            let now = occupied_bytes(&memory);
            assert!(
                now < occupied,
                "{between:?}: pass {pass}: {occupied} -> {now}"
            );
            occupied = now;
            for moved in &done.moves {
                let id = moved.id.value as u64;
                assert_ne!(
                    left.get(&id),
                    Some(&moved.to.0),
                    "{between:?}: pass {pass} moved {id} back"
                );
            }
            left = done
                .moves
                .iter()
                .map(|moved| (moved.id.value as u64, moved.from.0))
                .collect();
            match between {
                Between::Nothing => {}
                Between::Release => _ = memory.release_moved(),
                Between::Cleanup => {
                    memory.release_moved();
                    memory.cleanup(Cleanup::Explicit);
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Between {
    Nothing,
    Release,
    Cleanup,
}

/// An adaptive memory (4 GiB largest page) whose band holds pages of two sizes: four
/// 2 MiB pages with 1 MiB holes, and two 4 MiB pages: `a` holding one 1 MiB slice behind
/// a 3 MiB hole, `b` full. Returns the handles kept.
fn pages_of_two_sizes_with_holes() -> (MemoryManagement<BytesStorage>, Vec<ManagedMemoryHandle>) {
    let mut memory = MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(4 << 30, 256),
        MemoryConfiguration::Adaptive,
        MemoryManagementOptions::new("sizes"),
    );
    let mut small: Vec<_> = (0..8).map(|_| memory.reserve(MIB).unwrap()).collect();
    let large_a = memory.reserve(3 * MIB).unwrap();
    let in_a = memory.reserve(MIB).unwrap();
    let large_b = memory.reserve(3 * MIB).unwrap();
    let in_b = memory.reserve(MIB).unwrap();
    let mut sizes: Vec<u64> = memory.page_map()[1]
        .pages
        .iter()
        .map(|page| page.size)
        .collect();
    sizes.sort_unstable();
    assert_eq!(
        sizes,
        [2 * MIB, 2 * MIB, 2 * MIB, 2 * MIB, 4 * MIB, 4 * MIB],
        "the adaptive pool's pages"
    );
    let mut kept: Vec<_> = small.drain(..).step_by(2).collect();
    drop(large_a);
    kept.extend([in_a, large_b, in_b]);
    (memory, kept)
}

/// A reservation that fits a 4 MiB page once its one slice moves into a hole of a
/// 2 MiB page gathers it there instead of adding a page (pages of every size of the
/// band take moves).
#[test]
fn a_reservation_gathers_room_across_page_sizes() {
    let (mut memory, _kept) = pages_of_two_sizes_with_holes();
    let made = memory.storage().allocations_made();
    let served = memory
        .reserve_making_room(4 * MIB, &mut NothingPending, &mut CompactNow::default())
        .unwrap();
    assert_eq!(memory.storage().allocations_made(), made, "no page added");
    drop(served);
}

/// Across page sizes, pins keep their meaning: a page pinned whole takes nothing, a
/// page holding a slice pinned alone takes moved slices.
#[test]
fn pins_hold_across_page_sizes() {
    let (mut memory, kept) = pages_of_two_sizes_with_holes();
    // Sweeps the dropped handles (as the reservation that would ask does first).
    memory.cleanup(Cleanup::Explicit);
    assert!(memory.could_gather(4 * MIB));
    let in_small_pages: Vec<u64> = kept[..4]
        .iter()
        .map(|h| h.descriptor().id.value as u64)
        .collect();
    let ids = &in_small_pages;
    let pin = |kind: Pin| {
        move |id: cubecl_runtime::memory_management::ManagedMemoryId, _: u64| {
            if ids.contains(&(id.value as u64)) {
                kind
            } else {
                Pin::Free
            }
        }
    };
    let done = memory.compact_for(4 * MIB, u64::MAX, &pin(Pin::Page));
    assert!(
        done.is_empty(),
        "moved into pages pinned whole: {:?}",
        done.moves
    );
    let done = memory.compact_for(4 * MIB, u64::MAX, &pin(Pin::Slice));
    assert_eq!(done.moves.len(), 1, "{:?}", done.moves);
    let pages = pages_of(&memory);
    let small_pages: Vec<u64> = in_small_pages.iter().map(|id| pages[id]).collect();
    assert!(small_pages.contains(&done.moves[0].to.0));
}

/// Passes over an adaptive band whose pages have many sizes, a free page of another size
/// than the fresh one among them, come to rest: each pass that moves lowers the bytes of
/// the pages holding live slices (before, a free page larger than the fresh size stood in
/// for a fresh page the plan had paid for, and the passes on a workload like this moved
/// slices back and forth for ever).
#[test]
fn passes_over_pages_of_many_sizes_come_to_rest() {
    for seed in 1..=12u64 {
        let mut memory = MemoryManagement::from_configuration(
            BytesStorage::default(),
            &MemoryDeviceProperties::new(2 << 30, 256),
            MemoryConfiguration::Adaptive,
            MemoryManagementOptions::new("sizes"),
        );
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut live: Vec<ManagedMemoryHandle> = Vec::new();
        for phase in 0..6 {
            let (count, keep, low, high) = if phase % 2 == 0 {
                (400, 96, 12u32, 19u32) // 4 KiB ..= 512 KiB
            } else {
                (60, 6, 23, 26) // 8 MiB ..= 64 MiB
            };
            live.clear();
            for _ in 0..count {
                if live.len() == keep {
                    let victim = (next() % keep as u64) as usize;
                    live.swap_remove(victim);
                }
                let bits = low + (next() % u64::from(high - low + 1)) as u32;
                let size = (1u64 << bits) + next() % (1u64 << bits);
                live.push(memory.reserve(size).unwrap());
            }
        }
        let mut occupied = occupied_bytes(&memory);
        let mut passes = 0;
        while !memory.compact(u64::MAX, &|_, _| Pin::Free).is_empty() {
            memory.release_moved();
            memory.cleanup(Cleanup::Explicit);
            let now = occupied_bytes(&memory);
            assert!(
                now < occupied,
                "seed {seed}, pass {passes}: pages holding slices went from {occupied} to {now} bytes"
            );
            occupied = now;
            passes += 1;
            assert!(
                passes < 64,
                "seed {seed}: still moving after {passes} passes"
            );
        }
    }
}
