//! Compaction on host memory: bytes travel with their slices, usage stays exact, pinned
//! slices stay, and the ranges moved slices left stay reserved until released.

use crate::memory_management::{
    Cleanup, CompactNow, MemoryManagement, MemoryManagementOptions, MemoryPoolOptions,
    NothingPending, Pin, PoolType, ReserveError,
};
use crate::storage::BytesStorage;
use cubecl_ir::MemoryDeviceProperties;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration};

const KIB: u64 = 1 << 10;

/// A memory of one sliced pool of 64 KiB pages, capped at `cap` bytes when given.
fn memory(cap: Option<u64>) -> MemoryManagement<BytesStorage> {
    let pool = MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size: 64 * KIB,
            max_slice_size: 64 * KIB,
            max_pool_size: cap,
        },
        dealloc_period: None,
    };
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(1 << 30, 256),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("test").pools(vec![pool]),
    )
}

fn write(memory: &mut MemoryManagement<BytesStorage>, handle: &ManagedMemoryHandle, byte: u8) {
    let size = memory
        .get_storage(&handle.clone().binding())
        .unwrap()
        .size();
    let resource = memory
        .get_resource(&handle.clone().binding(), None, None)
        .unwrap();
    resource.write(&vec![byte; size as usize]);
}

fn read(memory: &mut MemoryManagement<BytesStorage>, handle: &ManagedMemoryHandle) -> Vec<u8> {
    memory
        .get_resource(&handle.clone().binding(), None, None)
        .unwrap()
        .read()
}

fn pages(memory: &MemoryManagement<BytesStorage>) -> u64 {
    memory.memory_report().dynamic[0].pages
}

/// Eight pages of four 16 KiB slices; every other slice dropped.
fn half_full(memory: &mut MemoryManagement<BytesStorage>) -> Vec<(ManagedMemoryHandle, u8)> {
    let handles: Vec<_> = (0..32u8)
        .map(|i| {
            let handle = memory.reserve(16 * KIB).unwrap();
            write(memory, &handle, i + 1);
            (handle, i + 1)
        })
        .collect();
    handles.into_iter().step_by(2).collect()
}

#[test]
fn moved_slices_keep_their_bytes_and_usage_stays_exact() {
    let mut memory = memory(None);
    let kept = half_full(&mut memory);
    assert_eq!(pages(&memory), 8);
    let before = memory.memory_usage();
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert_eq!(done.moves.len(), 8);
    assert_eq!(done.bytes_moved, 8 * 16 * KIB);
    let after = memory.memory_usage();
    assert_eq!(after.bytes_in_use, before.bytes_in_use);
    assert_eq!(after.number_allocs, before.number_allocs);
    memory.release_moved();
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(pages(&memory), 4);
    for (handle, byte) in &kept {
        assert!(read(&mut memory, handle).iter().all(|b| b == byte));
    }
}

#[test]
fn ranges_moved_slices_left_stay_reserved_until_released() {
    let mut memory = memory(None);
    let _kept = half_full(&mut memory);
    let done = memory.compact(u64::MAX, &|_, _| Pin::Free);
    assert!(!done.is_empty());
    assert_eq!(memory.bytes_moved_pending(), done.bytes_moved);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(
        pages(&memory),
        8,
        "no page goes back while its left ranges are held"
    );
    assert_eq!(memory.release_moved(), done.bytes_moved);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(pages(&memory), 4);
}

#[test]
fn a_pinned_slice_and_its_page_stay() {
    let mut memory = memory(None);
    let kept = half_full(&mut memory);
    let pinned_id = kept[0].0.descriptor().id;
    let at = memory.get_storage(&kept[0].0.clone().binding()).unwrap();
    let done = memory.compact(u64::MAX, &|id, _| {
        if id == pinned_id {
            Pin::Page
        } else {
            Pin::Free
        }
    });
    assert!(done.moves.iter().all(|moved| moved.from.0 != page_of(&at)));
    let now = memory.get_storage(&kept[0].0.clone().binding()).unwrap();
    assert_eq!((now.id, now.offset()), (at.id, at.offset()));
}

fn page_of(handle: &crate::storage::StorageHandle) -> u64 {
    crate::memory_management::pool::page_map::page_id(&handle.id)
}

#[test]
fn the_move_bound_caps_a_pass() {
    let mut memory = memory(None);
    let _kept = half_full(&mut memory);
    let done = memory.compact(40 * KIB, &|_, _| Pin::Free);
    assert_eq!(
        done.bytes_moved,
        32 * KIB,
        "one page of two slices fits 40 KiB"
    );
}

#[test]
fn a_capped_pool_gathers_its_holes_for_a_request() {
    let mut memory = memory(Some(128 * KIB));
    let handles: Vec<_> = (0..8).map(|_| memory.reserve(16 * KIB).unwrap()).collect();
    let kept: Vec<_> = handles.into_iter().step_by(2).collect();
    assert!(matches!(
        memory.reserve(32 * KIB),
        Err(ReserveError::PoolCapacityExceeded { .. })
    ));
    let served = memory
        .reserve_making_room(32 * KIB, &mut NothingPending, &mut CompactNow::default())
        .expect("the holes hold it once gathered");
    assert_eq!(pages(&memory), 2);
    drop((kept, served));
}

#[test]
fn a_growing_pool_gathers_its_holes_before_adding_a_page() {
    let mut memory = memory(None);
    let _kept = half_full(&mut memory);
    let made = memory.storage().allocations_made();
    let _big = memory
        .reserve_making_room(48 * KIB, &mut NothingPending, &mut CompactNow::default())
        .unwrap();
    assert_eq!(
        memory.storage().allocations_made(),
        made,
        "no page was added"
    );
}

/// Passes repeated until nothing moves end: a slice never moves into an emptier page
/// (before, the full pages of one pass emptied into the empty pages of the last, for
/// ever).
#[test]
fn repeated_passes_come_to_rest() {
    let mut memory = memory(None);
    let kept = half_full(&mut memory);
    let mut passes = 0;
    while !memory.compact(u64::MAX, &|_, _| Pin::Free).is_empty() {
        memory.release_moved();
        passes += 1;
        assert!(
            passes < 4,
            "compaction keeps moving slices after {passes} passes"
        );
    }
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(pages(&memory), 4);
    for (handle, byte) in &kept {
        assert!(read(&mut memory, handle).iter().all(|b| b == byte));
    }
}

#[test]
fn a_slice_pinned_alone_stays_and_its_page_still_takes_moved_slices() {
    let mut memory = memory(None);
    let kept = half_full(&mut memory);
    let pinned_id = kept[0].0.descriptor().id;
    let at = memory.get_storage(&kept[0].0.clone().binding()).unwrap();
    let pinned = |id, _| {
        if id == pinned_id {
            Pin::Slice
        } else {
            Pin::Free
        }
    };
    let done = memory.compact(u64::MAX, &pinned);
    let now = memory.get_storage(&kept[0].0.clone().binding()).unwrap();
    assert_eq!((now.id, now.offset()), (at.id, at.offset()));
    assert!(
        done.moves.iter().any(|moved| moved.to.0 == page_of(&at)),
        "the pinned slice's page took a moved slice: {:?}",
        done.moves
    );
    memory.release_moved();
    for (handle, byte) in &kept {
        assert!(read(&mut memory, handle).iter().all(|b| b == byte));
    }
}

#[test]
fn the_move_count_caps_a_pass() {
    let mut memory = memory(None);
    let _kept = half_full(&mut memory);
    let limits = crate::memory_management::MoveLimits {
        max_bytes: u64::MAX,
        max_moves: 3,
    };
    let done = memory.compact(limits, &|_, _| Pin::Free);
    assert!(
        !done.moves.is_empty() && done.moves.len() <= 3,
        "{}",
        done.moves.len()
    );
}
