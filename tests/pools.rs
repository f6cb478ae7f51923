//! The pool family on host memory: caps and spills, installs, modes, direct and
//! exclusive release rules, the adaptive pool.

use wgpu_memory::memory_management::{
    Cleanup, InstallMemoryPoolsError, ManagedMemoryHandle, MemoryAllocationMode,
    MemoryConfiguration, MemoryDeviceProperties, MemoryManagement, MemoryManagementOptions,
    MemoryPoolKind, MemoryPoolOptions, PoolType, ReserveError,
};
use wgpu_memory::storage::BytesStorage;

const MIB: u64 = 1 << 20;

fn memory(pools: Option<Vec<MemoryPoolOptions>>) -> MemoryManagement<BytesStorage> {
    let options = MemoryManagementOptions::new("pools");
    let options = match pools {
        Some(pools) => options.pools(pools),
        None => options,
    };
    memory_on(1 << 30, 32, options)
}

/// A memory on host storage with the default configuration, for a device whose largest
/// page and alignment are given in bytes.
fn memory_on(
    max_page_size: u64,
    alignment: u64,
    options: MemoryManagementOptions,
) -> MemoryManagement<BytesStorage> {
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &MemoryDeviceProperties::new(max_page_size, alignment),
        MemoryConfiguration::default(),
        options,
    )
}

fn sliced(page_size: u64, max_pool_size: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size,
            max_slice_size: page_size,
            max_pool_size,
        },
        dealloc_period: None,
    }
}

#[test]
fn a_full_capped_pool_spills_to_the_next_accepting_pool() {
    let mut memory = memory(Some(vec![sliced(1024, Some(1024)), sliced(1024, None)]));
    let _a = memory.reserve(1024).unwrap();
    let _b = memory.reserve(1024).unwrap();
    let report = memory.memory_report();
    assert_eq!(report.dynamic[0].pages_peak, 1);
    assert_eq!(report.dynamic[1].pages_peak, 1);
    assert_eq!(memory.memory_usage().bytes_reserved, 2048);
}

#[test]
fn a_capped_pool_alone_is_pool_capacity_exceeded() {
    let mut memory = memory(Some(vec![sliced(1024, Some(2048))]));
    let _a = memory.reserve(1024).unwrap();
    let _b = memory.reserve(1000).unwrap();
    match memory.reserve(1024) {
        Err(ReserveError::PoolCapacityExceeded {
            requested,
            pool,
            capacity,
            bytes_in_use,
            bytes_reserved,
            largest_free_slice,
        }) => assert_eq!(
            (
                requested,
                pool,
                capacity,
                bytes_in_use,
                bytes_reserved,
                largest_free_slice
            ),
            (1024, 0, 2048, 2024, 2048, 0)
        ),
        other => panic!("expected PoolCapacityExceeded, got {other:?}"),
    }
    assert_eq!(memory.memory_usage().bytes_reserved, 2048);
    drop(_b);
    assert!(
        memory.reserve(1024).is_ok(),
        "a freed slice serves under the cap"
    );
}

#[test]
fn install_refuses_while_slices_live_and_resets_marks_after() {
    let mut memory = memory(Some(vec![sliced(MIB, Some(MIB))]));
    let live = memory.reserve(MIB / 2).unwrap();
    assert_eq!(
        memory.install_memory_pools(vec![sliced(2 * MIB, None)]),
        Err(InstallMemoryPoolsError::PoolsInUse {
            bytes_in_use: MIB / 2,
            allocations: 1
        })
    );
    // The old layout is untouched: its cap still refuses a second page.
    assert!(matches!(
        memory.reserve(MIB),
        Err(ReserveError::PoolCapacityExceeded { .. })
    ));
    drop(live);
    memory
        .install_memory_pools(vec![sliced(2 * MIB, None)])
        .unwrap();
    let report = memory.memory_report();
    assert_eq!(report.dynamic.len(), 1);
    assert_eq!(report.dynamic[0].pages_peak, 0, "fresh high-water marks");
    assert!(memory.reserve(2 * MIB).is_ok());
}

/// A live zero-size allocation blocks an install too, and the error counts it.
#[test]
fn install_counts_live_zero_size_allocations() {
    let mut memory = memory(None);
    let empty = memory.reserve(0).unwrap();
    assert_eq!(
        memory.install_configuration(MemoryConfiguration::ExclusivePages),
        Err(InstallMemoryPoolsError::PoolsInUse {
            bytes_in_use: 0,
            allocations: 1
        })
    );
    drop(empty);
    assert!(
        memory
            .install_configuration(MemoryConfiguration::ExclusivePages)
            .is_ok()
    );
}

/// No pool would refuse every reservation: `install_memory_pools` says so and keeps the
/// old layout; `from_configuration` falls back to the preset, which serves.
#[test]
fn an_empty_layout_is_refused() {
    let mut memory = memory(None);
    assert_eq!(
        memory.install_memory_pools(Vec::new()),
        Err(InstallMemoryPoolsError::EmptyLayout)
    );
    assert!(memory.reserve(1000).is_ok(), "the old layout still serves");
    let mut memory = memory_on(
        1 << 30,
        32,
        MemoryManagementOptions::new("empty").pools(Vec::new()),
    );
    assert!(memory.reserve(1000).is_ok(), "the preset serves");
    assert!(!memory.memory_report().dynamic.is_empty());
}

#[test]
fn install_refuses_too_many_pools() {
    let mut memory = memory(None);
    let pools = vec![sliced(1024, None); 255];
    assert_eq!(
        memory.install_memory_pools(pools),
        Err(InstallMemoryPoolsError::TooManyPools {
            count: 255,
            limit: 254
        })
    );
}

#[test]
fn persistent_windows_nest() {
    let mut memory = memory(None);
    memory.mode(MemoryAllocationMode::Persistent);
    memory.mode(MemoryAllocationMode::Persistent);
    memory.mode(MemoryAllocationMode::Auto);
    let weights = memory.reserve(1024).unwrap();
    let report = memory.memory_report();
    assert_eq!(report.persistent.usage.bytes_in_use, 1024);
    assert!(report.dynamic.iter().all(|pool| pool.pages_peak == 0));
    memory.mode(MemoryAllocationMode::Auto);
    let activation = memory.reserve(1024).unwrap();
    assert_eq!(memory.memory_report().persistent.usage.number_allocs, 1);
    assert_eq!(memory.memory_report().dynamic[0].usage.bytes_in_use, 1024);
    drop((weights, activation));
}

/// Windows of different modes nest: a dedicated window inside a persistent one routes
/// to the dedicated pool, and closing it returns to persistent, then to auto.
#[test]
fn a_dedicated_window_inside_a_persistent_one_routes_by_the_innermost() {
    let mut memory = memory(None);
    let usage = |memory: &MemoryManagement<BytesStorage>| {
        let report = memory.memory_report();
        (
            report.persistent.usage.bytes_in_use,
            report.dedicated.usage.bytes_in_use,
            report.usage().bytes_in_use,
        )
    };
    memory.mode(MemoryAllocationMode::Persistent);
    let weight = memory.reserve(1000).unwrap();
    memory.mode(MemoryAllocationMode::Dedicated);
    let dedicated = memory.reserve(2000).unwrap();
    assert_eq!(usage(&memory), (1000, 2000, 3000));
    memory.mode(MemoryAllocationMode::Auto);
    let second_weight = memory.reserve(3000).unwrap();
    assert_eq!(usage(&memory), (4000, 2000, 6000));
    memory.mode(MemoryAllocationMode::Auto);
    let activation = memory.reserve(4000).unwrap();
    assert_eq!(usage(&memory), (4000, 2000, 10000));
    drop((weight, dedicated, second_weight, activation));
}

#[test]
fn persistent_slices_are_reused_by_exact_aligned_size() {
    let mut memory = memory(None);
    memory.mode(MemoryAllocationMode::Persistent);
    let first = memory.reserve(1025).unwrap();
    let id = memory.get_storage(&first.clone().binding()).unwrap().id;
    drop(first);
    // 1030 has the same aligned size (1056 at alignment 32): the slice is reused and
    // reports the new request's size.
    let second = memory.reserve(1030).unwrap();
    let storage = memory.get_storage(&second.clone().binding()).unwrap();
    assert_eq!((storage.id, storage.size()), (id, 1030));
    assert_eq!(memory.memory_usage().bytes_padding, 1056 - 1030);
    assert_eq!(memory.storage().allocations_made(), 1);
}

#[test]
fn dedicated_allocations_go_back_once_freed() {
    let mut memory = memory(None);
    memory.mode(MemoryAllocationMode::Dedicated);
    let buffer = memory.reserve(3 * MIB).unwrap();
    memory.mode(MemoryAllocationMode::Auto);
    assert_eq!(memory.memory_report().dedicated.pages, 1);
    drop(buffer);
    memory.cleanup(Cleanup::Periodic);
    assert_eq!(memory.memory_report().dedicated.pages, 0);
    assert_eq!(memory.memory_usage().bytes_reserved, 0);
}

#[test]
fn direct_pool_reclaims_at_the_watermark() {
    let direct = MemoryPoolOptions {
        pool_type: PoolType::Direct {
            reclaim_at: Some(7 * MIB),
        },
        dealloc_period: None,
    };
    let mut memory = memory(Some(vec![direct]));
    let held: Vec<_> = [MIB, 2 * MIB, 3 * MIB]
        .into_iter()
        .map(|size| memory.reserve(size).unwrap())
        .collect();
    drop(held);
    let _big = memory.reserve(4 * MIB).unwrap();
    let report = &memory.memory_report().dynamic[0];
    // 1 and 2 MiB went back (oldest first) until 4 MiB fit under 7 MiB; 3 MiB stays.
    assert_eq!(report.pages, 2);
    assert_eq!(report.usage.bytes_reserved, 7 * MIB);
}

#[test]
fn exclusive_pages_idle_for_a_period_go_back() {
    let exclusive = MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages {
            max_alloc_size: 64 * MIB,
        },
        dealloc_period: Some(100),
    };
    let mut memory = memory(Some(vec![sliced(MIB, None), exclusive]));
    drop(memory.reserve(8 * MIB).unwrap());
    for _ in 0..99 {
        drop(memory.reserve(1024).unwrap());
    }
    assert_eq!(
        memory.memory_report().dynamic[1].pages,
        1,
        "not idle for a period yet"
    );
    for _ in 0..30 {
        drop(memory.reserve(1024).unwrap());
    }
    assert_eq!(memory.memory_report().dynamic[1].pages, 0);
}

/// Adaptive pages are sized for the request that makes them, and pages of every size
/// keep serving (before, a tier of pages sized for the largest allocation plus a MiB
/// took over and the older pages served nothing new until they emptied).
#[test]
fn adaptive_pages_are_sized_for_the_request_and_every_page_serves() {
    let mut memory = memory(None);
    // Three 600 KiB allocations share one 2 MiB page: a page holds at least two of the
    // request that made it (1.2 MiB), rounded up to a power of two up to 4 MiB.
    let small: Vec<_> = (0..3)
        .map(|_| memory.reserve(600 * 1024).unwrap())
        .collect();
    let report = memory.memory_report();
    assert!(
        matches!(
            report.dynamic[1].kind,
            MemoryPoolKind::Adaptive { page_size, outdated_pages: 0 } if page_size == 2 * MIB
        ),
        "{:?}",
        report.dynamic[1].kind
    );
    assert_eq!(report.dynamic[1].pages, 1);
    // A 3 MiB allocation does not fit there: a page sized for it (4 MiB, a power of two
    // up to 4 MiB) is added beside the 2 MiB page, which stays.
    let large = memory.reserve(3 * MIB).unwrap();
    let report = memory.memory_report();
    assert!(
        matches!(
            report.dynamic[1].kind,
            MemoryPoolKind::Adaptive { page_size, outdated_pages: 0 } if page_size == 4 * MIB
        ),
        "{:?}",
        report.dynamic[1].kind
    );
    assert_eq!(report.dynamic[1].pages, 2);
    assert_eq!(report.dynamic[1].usage.bytes_reserved, 2 * MIB + 4 * MIB);
    // A 300 KiB request goes where it fits: the 2 MiB page has 248 KiB left, the 4 MiB
    // page 1 MiB.
    let again = memory.reserve(300 * 1024).unwrap();
    assert_eq!(memory.memory_report().dynamic[1].pages, 2);
    assert_eq!(
        memory.get_storage(&again.clone().binding()).unwrap().id,
        memory.get_storage(&large.clone().binding()).unwrap().id
    );
    // Once its slices are dropped, the 2 MiB page serves a 1 MiB request: no page added.
    let in_small_page = memory.get_storage(&small[0].clone().binding()).unwrap().id;
    drop(small);
    memory.cleanup(Cleanup::Periodic);
    let mib = memory.reserve(MIB).unwrap();
    let report = memory.memory_report();
    assert_eq!(report.dynamic[1].pages, 2);
    assert_eq!(
        memory.get_storage(&mib.clone().binding()).unwrap().id,
        in_small_page
    );
    // Everything dropped: a cleanup gives both pages back.
    drop((large, again, mib));
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_report().dynamic[1].pages, 0);
}

/// Equal large tensors (the matmul's three 4 MiB matrices) get pages of exactly their
/// size, and smaller ones pages of their own size rather than room beside them.
#[test]
fn equal_large_tensors_reserve_what_they_use() {
    let mut memory = memory(None);
    let tensors: Vec<_> = (0..3).map(|_| memory.reserve(4 * MIB).unwrap()).collect();
    let usage = memory.memory_usage();
    assert_eq!(usage.bytes_in_use, 12 * MIB);
    assert_eq!(usage.bytes_reserved, 12 * MIB);
    // A smaller tensor does not fit beside them: a page sized for it is added (2 MiB,
    // an eighth of the 16 MiB peak), which the next ones share.
    let biases: Vec<_> = (0..8)
        .map(|_| memory.reserve(512 * 1024).unwrap())
        .collect();
    assert_eq!(memory.memory_usage().bytes_reserved, 16 * MIB);
    drop((tensors, biases));
}

/// A loop that uses both bands of the adaptive pool (a shared-size and a huge
/// reservation) settles: one band growing does not give back the other band's free
/// pages, which the next pass would have to make again.
/// A tight placement (free space scarce, no exact fit) first polls every dropped
/// handle: a dropped slice of exactly the requested size is reused, rather than a larger
/// free block split, even where the few slots swept per reservation have not reached
/// it yet. Checked for every slice of the page, so wherever the sweep cursor stands.
#[test]
fn a_tight_placement_reuses_a_dropped_slice_the_step_sweep_has_not_reached() {
    const SLICE: u64 = 60 << 10;
    for dropped in 0..16 {
        let options = MemoryManagementOptions::new("pools").pools(vec![sliced(MIB, None)]);
        let mut memory = memory_on(1 << 30, 256, options);
        // 16 slices of 60 KiB leave a 64 KiB tail: free space is under a third.
        let mut held: Vec<_> = (0..16).map(|_| memory.reserve(SLICE).unwrap()).collect();
        let offset_of = |memory: &MemoryManagement<BytesStorage>, handle: &ManagedMemoryHandle| {
            memory
                .get_storage(&handle.clone().binding())
                .unwrap()
                .offset()
        };
        let freed_at = offset_of(&memory, &held[dropped]);
        drop(held.remove(dropped));
        let again = memory.reserve(SLICE).unwrap();
        assert_eq!(
            offset_of(&memory, &again),
            freed_at,
            "slice {dropped}: the 60 KiB reservation split the 64 KiB tail instead"
        );
        assert_eq!(memory.memory_usage().bytes_reserved, MIB);
    }
}

#[test]
fn a_loop_over_both_bands_makes_no_page_after_its_first_pass() {
    let mut memory = memory_on(64 * MIB, 256, MemoryManagementOptions::new("bands"));
    let mut made = Vec::new();
    for _ in 0..6 {
        drop(memory.reserve(MIB).unwrap());
        drop(memory.reserve(5 * MIB).unwrap());
        made.push(memory.storage().allocations_made());
    }
    assert_eq!(made, vec![made[0]; 6], "pages made after each pass");
}

/// A workload of small tensors only reserves pages of the small pool, and its first
/// page is small: a few KiB live cost 128 KiB, not megabytes (the allocator bench's
/// `tiny` trace); the pages after it are 512 KiB.
#[test]
fn small_reservations_take_a_small_first_page_then_512_kib_pages() {
    const KIB: u64 = 1 << 10;
    let mut memory = memory(None);
    let mut handles: Vec<_> = (0..32).map(|_| memory.reserve(4 * KIB).unwrap()).collect();
    let usage = memory.memory_usage();
    assert_eq!(usage.bytes_in_use, 128 * KIB);
    assert_eq!(usage.bytes_reserved, 128 * KIB);
    let mut reserved = Vec::new();
    for _ in 0..4 {
        // One more than the pages hold: the pool grows by one page.
        handles.extend(
            (0..memory.memory_usage().bytes_reserved / (4 * KIB) - handles.len() as u64 + 1)
                .map(|_| memory.reserve(4 * KIB).unwrap()),
        );
        reserved.push(memory.memory_usage().bytes_reserved / KIB);
    }
    assert_eq!(reserved, [640, 1152, 1664, 2176]);
    let report = memory.memory_report();
    assert_eq!(report.dynamic[1].pages, 0, "the adaptive pool made no page");
    drop(handles);
}

#[test]
fn small_reservations_never_share_a_page_with_large_ones() {
    let mut memory = memory(None);
    let large = memory.reserve(700 * MIB).unwrap();
    let small = memory.reserve(2 * MIB).unwrap();
    let large_page = memory.get_storage(&large.binding()).unwrap().id;
    let small_page = memory.get_storage(&small.binding()).unwrap().id;
    assert_ne!(large_page, small_page);
}

/// Where a reservation of at most 64 KiB goes in the default layout, as the README's
/// "Configuring the pools" says: into free room the small pool holds, else into free
/// room the adaptive pool's pages hold (the room each keeps beside its largest
/// allocation), and only when neither has room does the small pool grow by one page
/// (its first is 128 KiB); the adaptive pool never grows for it. (Issue 24, item 10: a program
/// that made its weights first saw all its small reservations in the adaptive pool,
/// while the README said they all went to the small pool.)
#[test]
fn small_reservations_use_held_room_first_and_grow_only_the_small_pool() {
    const KIB: u64 = 1 << 10;
    let mut memory = memory(None);
    let pool_of = |handle: &ManagedMemoryHandle| handle.descriptor().location().pool;
    let pages = |memory: &MemoryManagement<BytesStorage>| {
        let report = memory.memory_report();
        (report.dynamic[0].pages, report.dynamic[1].pages)
    };
    // A large reservation first: the adaptive pool makes a page with room beside it.
    let weights = memory.reserve(MIB).unwrap();
    assert_eq!(pool_of(&weights), 1);
    assert_eq!(pages(&memory), (0, 1));
    let room = memory.memory_report().dynamic[1].usage.bytes_reserved - MIB;
    assert!(
        room >= 512 * KIB,
        "the adaptive page keeps room: {room} bytes"
    );
    // Small reservations fill that room before any pool grows.
    let fits = room / (4 * KIB);
    let mut small: Vec<_> = (0..fits)
        .map(|_| memory.reserve(4 * KIB).unwrap())
        .collect();
    assert!(small.iter().all(|handle| pool_of(handle) == 1));
    assert_eq!(pages(&memory), (0, 1), "no page made for them");
    // The adaptive page is full: the next small one grows the small pool, not the
    // adaptive one.
    small.push(memory.reserve(4 * KIB).unwrap());
    assert_eq!(pool_of(small.last().unwrap()), 0);
    assert_eq!(pages(&memory), (1, 1));
    assert_eq!(
        memory.memory_report().dynamic[0].usage.bytes_reserved,
        128 * KIB
    );
    // With room in both, the pools are looked at in layout order: the small pool's
    // room serves, not the slot just freed in the adaptive page.
    drop(small.remove(0));
    memory.cleanup(Cleanup::Periodic);
    small.push(memory.reserve(4 * KIB).unwrap());
    assert_eq!(pool_of(small.last().unwrap()), 0);
    // Over 64 KiB never goes to the small pool, even with room there.
    let larger = memory.reserve(64 * KIB + 1).unwrap();
    assert_eq!(pool_of(&larger), 1);
    drop((weights, small, larger));
}

#[test]
fn a_transient_memory_serves_small_reservations_from_a_big_idle_page() {
    let exclusive = MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages {
            max_alloc_size: 64 * MIB,
        },
        dealloc_period: Some(5000),
    };
    let build = |transient: bool| {
        let options = MemoryManagementOptions::new("staging").pools(vec![exclusive]);
        let options = if transient {
            options.transient()
        } else {
            options
        };
        MemoryManagement::from_configuration(
            BytesStorage::default(),
            &MemoryDeviceProperties::new(1 << 30, 8),
            MemoryConfiguration::ExclusivePages,
            options,
        )
    };
    let mut staging = build(true);
    drop(staging.reserve(32 * MIB).unwrap());
    let small = staging.reserve(4096).unwrap();
    assert_eq!(
        staging.storage().allocations_made(),
        1,
        "the idle 32 MiB page served it"
    );
    drop(small);
    // Without the flag a page at most half again as large is reused, so the small
    // reservation makes its own page and (the pool having a period) the idle big one
    // goes back.
    let mut memory = build(false);
    drop(memory.reserve(32 * MIB).unwrap());
    let _small = memory.reserve(4096).unwrap();
    assert_eq!(memory.storage().allocations_made(), 2);
    assert_eq!(memory.memory_usage().bytes_reserved, 4096);
}

/// Out of memory in a later pool, after an earlier capped pool spilled, still triggers
/// the cleanup and retry (the capacity error must not hide it).
#[test]
fn out_of_memory_after_a_spill_still_cleans_up_and_retries() {
    let direct = MemoryPoolOptions {
        pool_type: PoolType::Direct { reclaim_at: None },
        dealloc_period: None,
    };
    let mut memory = MemoryManagement::from_configuration(
        BytesStorage::with_capacity(8 * MIB),
        &MemoryDeviceProperties::new(1 << 30, 32),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("spill").pools(vec![sliced(MIB, Some(MIB)), direct]),
    );
    let _full = memory.reserve(MIB).unwrap();
    drop(memory.reserve(6 * MIB).unwrap());
    // The capped pool is full; the direct pool's cached 6 MiB page leaves no room for a
    // new 2 MiB page until the cleanup gives it back.
    let served = memory.reserve(2 * MIB);
    assert!(served.is_ok(), "{:?}", served.err());
    assert_eq!(memory.memory_usage().bytes_reserved, 3 * MIB);
}

/// Out of memory in the pool a reservation spilled to states the cap of the full pool
/// it spilled from: that cap is why the reservation needed device memory.
#[test]
fn out_of_memory_after_a_spill_states_the_cap_it_spilled_from() {
    let direct = MemoryPoolOptions {
        pool_type: PoolType::Direct { reclaim_at: None },
        dealloc_period: None,
    };
    let mut memory = MemoryManagement::from_configuration(
        BytesStorage::with_capacity(2 * MIB),
        &MemoryDeviceProperties::new(1 << 30, 32),
        MemoryConfiguration::default(),
        MemoryManagementOptions::new("spill").pools(vec![sliced(MIB, Some(MIB)), direct]),
    );
    let half = 512 << 10;
    let _live: Vec<_> = (0..4).map(|_| memory.reserve(half).unwrap()).collect();
    match memory.reserve(half) {
        Err(ReserveError::OutOfMemory { cap, .. }) => assert_eq!(cap, Some(MIB)),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

/// Any pool type, any size: a reservation over the largest page is BufferTooBig, never
/// an overflow.
#[test]
fn huge_requests_are_buffer_too_big_in_every_pool_type() {
    let direct = MemoryPoolOptions {
        pool_type: PoolType::Direct { reclaim_at: None },
        dealloc_period: None,
    };
    let mut memory = memory(Some(vec![direct]));
    for size in [u64::MAX, u64::MAX - 1, (1 << 30) + 1] {
        match memory.reserve(size) {
            Err(ReserveError::BufferTooBig { requested, limit }) => {
                assert_eq!((requested, limit), (size, 1 << 30))
            }
            other => panic!("expected BufferTooBig for {size}, got {other:?}"),
        }
    }
}

/// A hand-written page size that is not a multiple of the alignment is rounded up, so
/// a reservation of the page's size fits its aligned size.
#[test]
fn an_unaligned_page_size_is_rounded_up() {
    let options = MemoryManagementOptions::new("unaligned").pools(vec![sliced(1000, None)]);
    let mut memory = memory_on(1 << 30, 256, options);
    let handle = memory.reserve(1000).unwrap();
    assert_eq!(memory.memory_usage().bytes_reserved, 1024);
    drop(handle);
}

/// A page where the only free block that fits a request lies ninth in its size class
/// (eight free blocks just too small sit before it in the class's list): the O(1)
/// placement looks at the first eight, so the pool must look further before it grows
/// or reports itself full. Before, a capped pool said `PoolCapacityExceeded` naming a
/// 1004-byte free slice as its largest, and an uncapped one made a page.
#[test]
fn a_pool_never_grows_or_fills_up_while_a_fitting_block_is_free() {
    const PAGE: u64 = 64 << 10;
    for cap in [Some(PAGE), None] {
        let mut memory = memory_on(
            1 << 30,
            4,
            MemoryManagementOptions::new("deep bin").pools(vec![MemoryPoolOptions {
                pool_type: PoolType::SlicedPages {
                    page_size: PAGE,
                    max_slice_size: PAGE,
                    max_pool_size: cap,
                },
                dealloc_period: None,
            }]),
        );
        // 1004 | 4 | 8 x (996 | 4) | the rest of the page; the 4-byte slices stay live
        // so no two freed blocks merge.
        let fitting = memory.reserve(1004).unwrap();
        let mut live = vec![memory.reserve(4).unwrap()];
        let mut too_small = Vec::new();
        for _ in 0..8 {
            too_small.push(memory.reserve(996).unwrap());
            live.push(memory.reserve(4).unwrap());
        }
        let used = 1004 + 4 + 8 * (996 + 4);
        live.push(memory.reserve(PAGE - used).unwrap());
        // Freed first, so the eight freed after it are ahead of it in the list.
        drop(fitting);
        memory.cleanup(Cleanup::Explicit);
        drop(too_small);
        memory.cleanup(Cleanup::Explicit);
        assert_eq!(memory.largest_free_slice(), 1004);

        let handle = memory
            .reserve(1000)
            .unwrap_or_else(|error| panic!("cap {cap:?}: 1000 B refused: {error}"));
        assert_eq!(
            memory.storage().allocations_made(),
            1,
            "cap {cap:?}: a page was made"
        );
        let storage = memory.get_storage(&handle.binding()).unwrap();
        assert_eq!(
            storage.offset(),
            0,
            "cap {cap:?}: the 1004-byte block is used"
        );
    }
}

/// `dealloc_period: None` keeps every free exclusive page until an explicit cleanup,
/// even when the pool grows for sizes they cannot serve; with a period, a growing pool
/// gives back the free pages beyond its bytes in use first.
#[test]
fn exclusive_pages_without_a_period_stay_until_an_explicit_cleanup() {
    for (period, pages_after_growth) in [(None, 3), (Some(1000), 1)] {
        let mut memory = memory(Some(vec![MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: MIB,
            },
            dealloc_period: period,
        }]));
        drop((
            memory.reserve(100 << 10).unwrap(),
            memory.reserve(100 << 10).unwrap(),
        ));
        let _large = memory.reserve(500 << 10).unwrap();
        assert_eq!(
            memory.memory_report().dynamic[0].pages,
            pages_after_growth,
            "period {period:?}"
        );
        memory.cleanup(Cleanup::Explicit);
        assert_eq!(
            memory.memory_report().dynamic[0].pages,
            1,
            "period {period:?}"
        );
    }
}

/// An explicit cleanup gives back every free page whatever the number of slices, in the
/// exclusive, persistent and dedicated pools: it sweeps every slot, not the bounded
/// catch-up that growth uses (which sees only 64 of a table over 1024 slots). Then a
/// reservation that needs the whole device succeeds, and an install leaves no page
/// behind.
#[test]
fn an_explicit_cleanup_gives_back_every_free_page_of_a_large_table() {
    const COUNT: u64 = 1037;
    let exclusive = MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages {
            max_alloc_size: MIB,
        },
        dealloc_period: None,
    };
    for mode in [
        MemoryAllocationMode::Auto,
        MemoryAllocationMode::Persistent,
        MemoryAllocationMode::Dedicated,
    ] {
        let mut memory = MemoryManagement::from_configuration(
            BytesStorage::with_capacity(COUNT * 256),
            &MemoryDeviceProperties::new(1 << 30, 256),
            MemoryConfiguration::default(),
            MemoryManagementOptions::new("many").pools(vec![exclusive]),
        );
        memory.mode(mode);
        drop(
            (0..COUNT)
                .map(|_| memory.reserve(256).unwrap())
                .collect::<Vec<_>>(),
        );
        memory.cleanup(Cleanup::Explicit);
        assert_eq!(memory.memory_usage().bytes_reserved, 0, "{mode:?}");
        assert_eq!(memory.bytes_allocated(), 0, "{mode:?}");
        memory.mode(MemoryAllocationMode::Auto);
        drop(
            memory
                .reserve(COUNT * 256 / 2)
                .expect("the whole device is free"),
        );
        assert!(memory.install_memory_pools(vec![exclusive]).is_ok());
        assert_eq!(memory.bytes_allocated(), 0, "{mode:?}: install");
    }
}
