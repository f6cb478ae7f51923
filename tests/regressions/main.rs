//! Regression tests for upstream (CubeCL) memory-management bugs we must not repeat:
//! section 9 ("upstream quirks / latent bugs") and section 8.5 (fix commits) of
//! `reference/upstream-semantics.md`. One test per item; the test name says which.

#[path = "../scenarios/common.rs"]
mod common;
#[path = "../scenarios/fake.rs"]
mod fake;
mod issue_12;

use common::{GIB, KIB, MIB, direct, exclusive, explicit, preset, sliced};
use cubecl_runtime::memory_management::{
    ManagedMemoryHandle, MemoryAllocationMode, MemoryPoolKind, MemoryUsage, optimal_align,
};
use cubecl_runtime::server::IoError;
use fake::FakeStorage;
use wgpu_memory::memory_management::{
    Cleanup, MemoryConfiguration, MemoryManagement, ReserveError,
};
use wgpu_memory::storage::ComputeStorage;

fn offset<S: ComputeStorage>(memory: &MemoryManagement<S>, handle: &ManagedMemoryHandle) -> u64 {
    memory
        .get_storage(&handle.clone().binding())
        .unwrap()
        .offset()
}

/// A memory whose only pool is unused, for persistent / dedicated tests.
fn memory_for_windows(alignment: u64) -> MemoryManagement<FakeStorage> {
    explicit(
        FakeStorage::unbounded(),
        128 * MIB,
        alignment,
        vec![sliced(MIB, MIB, None)],
    )
}

// ---------------------------------------------------------------------------------------
// Section 9
// ---------------------------------------------------------------------------------------

/// §9.1 Padding leak on slice reuse. Align 32, page 2048: reserve 100, 100; free the first;
/// reuse it for 64. After freeing all and an explicit cleanup the page goes back and
/// reserved is 0 (upstream: the page kept 2020 bytes of slices and was never freed).
#[test]
fn s9_1_padding_leak_on_slice_reuse() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        vec![sliced(2048, 2048, None)],
    );
    let a = memory.reserve(100).unwrap();
    let b = memory.reserve(100).unwrap();
    let a_offset = offset(&memory, &a);
    drop(a);
    let c = memory.reserve(64).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
    let usage = memory.memory_usage();
    assert_eq!((usage.bytes_in_use, usage.bytes_padding), (164, 28));
    assert_eq!(usage.bytes_reserved, 2048);
    drop((b, c));
    // The page spans its whole size again: a 2048-byte reservation fits it.
    let whole = memory.reserve(2048).unwrap();
    assert_eq!(
        memory.storage().allocations_made(),
        1,
        "the freed page lost bytes"
    );
    drop(whole);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 0);
    assert_eq!(
        memory.storage().live_allocations(),
        0,
        "the page was not given back"
    );

    // An isolated freed padded slice serves its own size again, in place.
    let x = memory.reserve(100).unwrap();
    let y = memory.reserve(100).unwrap();
    let z = memory.reserve(100).unwrap();
    let y_offset = offset(&memory, &y);
    drop(y);
    let y2 = memory.reserve(100).unwrap();
    assert_eq!(offset(&memory, &y2), y_offset);
    assert_eq!(memory.memory_usage().bytes_reserved, 2048);
    let _ = (a_offset, x, z);
}

/// §9.2 The direct pool's bind drops the cursor (upstream always 0). Every pool kind keeps
/// the cursor given to `bind`.
#[test]
fn s9_2_direct_pool_bind_keeps_the_cursor() {
    let mut memory = explicit(FakeStorage::unbounded(), 128 * MIB, 32, vec![direct(None)]);
    let reserved = memory.reserve(1000).unwrap();
    let assigned = ManagedMemoryHandle::new();
    memory.bind(reserved, assigned.clone(), 42).unwrap();
    assert_eq!(memory.get_cursor(&assigned.clone().binding()).unwrap(), 42);

    // The other kinds too: sliced, exclusive, persistent, dedicated.
    let mut memory = explicit(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        vec![sliced(4096, 1024, None), exclusive(MIB, None)],
    );
    let check = |memory: &mut MemoryManagement<FakeStorage>, size: u64, cursor: u64| {
        let reserved = memory.reserve(size).unwrap();
        let assigned = ManagedMemoryHandle::new();
        memory.bind(reserved, assigned.clone(), cursor).unwrap();
        assert_eq!(
            memory.get_cursor(&assigned.binding()).unwrap(),
            cursor,
            "size {size}"
        );
    };
    check(&mut memory, 100, 7);
    check(&mut memory, 100 * KIB, 8);
    memory.mode(MemoryAllocationMode::Persistent);
    check(&mut memory, 100, 9);
    memory.mode(MemoryAllocationMode::Auto);
    memory.mode(MemoryAllocationMode::Dedicated);
    check(&mut memory, 100, 10);
}

/// §9.3 Persistent reuse must update the padding with the size: 1025 then 1026 at align 4
/// share the 1028-byte bucket; the reused slice's padding is 2, and it stays in the
/// right bucket through an explicit cleanup.
#[test]
fn s9_3_persistent_reuse_updates_padding() {
    let mut memory = memory_for_windows(4);
    memory.mode(MemoryAllocationMode::Persistent);
    let first = memory.reserve(1025).unwrap();
    assert_eq!(memory.memory_report().persistent.usage.bytes_padding, 3);
    drop(first);
    let second = memory.reserve(1026).unwrap();
    assert_eq!(
        memory.storage().allocations_made(),
        1,
        "1026 reuses the 1028 bucket"
    );
    let persistent = memory.memory_report().persistent.usage;
    assert_eq!(persistent.bytes_in_use, 1026);
    assert_eq!(persistent.bytes_padding, 2, "padding not updated on reuse");
    assert_eq!(persistent.bytes_reserved, 1028);
    assert_eq!(
        memory
            .get_storage(&second.clone().binding())
            .unwrap()
            .size(),
        1026
    );
    // A cleanup with it live keeps it keyed by its effective size: after it is freed, a
    // 1028 and a 1027 request both reuse it.
    memory.cleanup(Cleanup::Explicit);
    drop(second);
    let third = memory.reserve(1028).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
    assert_eq!(memory.memory_report().persistent.usage.bytes_padding, 0);
    drop(third);
    let fourth = memory.reserve(1027).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
    assert_eq!(memory.memory_report().persistent.usage.bytes_padding, 1);
    drop(fourth);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_report().persistent.usage.bytes_reserved, 0);
    assert_eq!(memory.storage().live_allocations(), 0);
}

/// §9.4 Persistent (and dedicated) allocations are bounded by `max_page_size`:
/// BufferTooBig naming the request and the limit, and no device allocation attempted.
#[test]
fn s9_4_persistent_allocations_bounded_by_max_page_size() {
    for mode in [
        MemoryAllocationMode::Persistent,
        MemoryAllocationMode::Dedicated,
    ] {
        let mut memory = explicit(
            FakeStorage::unbounded(),
            MIB,
            256,
            vec![sliced(MIB, MIB, None)],
        );
        memory.mode(mode);
        match memory.reserve(MIB + 1) {
            Err(ReserveError::BufferTooBig { requested, limit }) => {
                assert_eq!((requested, limit), (MIB + 1, MIB), "{mode:?}")
            }
            other => panic!("{mode:?}: expected BufferTooBig, got {other:?}"),
        }
        assert_eq!(memory.storage().alloc_calls(), 0, "{mode:?}");
        assert!(
            memory.reserve(MIB).is_ok(),
            "{mode:?}: the limit itself fits"
        );
    }
}

/// §9.5 `optimal_align` (cubecl-runtime's, re-exported) panics upstream when
/// `buffer_align < 16` for shape != 1 (`clamp(16, max)` with max < 16). We document what
/// it does here, and check that this crate never calls it itself (so the panic cannot be
/// reached through our API).
#[test]
fn s9_5_optimal_align_with_small_buffer_align() {
    // The documented rule on valid inputs (reference §6).
    for (shape, elem, align, expected) in [
        (1, 4, 256, 4),
        (1, 32, 16, 32),
        (0, 4, 256, 16),
        (2, 2, 256, 16),
        (3, 4, 256, 16),
        (5, 4, 256, 32),
        (3, 16, 1024, 64),
        (64, 4, 256, 256),
        (100, 4, 256, 256),
        (1000, 2, 64, 64),
        (4, 4, 16, 16),
    ] {
        assert_eq!(
            optimal_align(shape, elem, align),
            expected,
            "{shape} {elem} {align}"
        );
    }
    // buffer_align < 16: upstream panics. Record what the pinned version does.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let small = std::panic::catch_unwind(|| optimal_align(2, 4, 8));
    std::panic::set_hook(previous);
    match small {
        Ok(value) => eprintln!("optimal_align(2, 4, 8) = {value} (no panic in this version)"),
        Err(_) => eprintln!("optimal_align(2, 4, 8) panics (upstream bug 9.5, not ours)"),
    }
    // We never call it: no use of `optimal_align(` in src/.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut callers = Vec::new();
    visit(&src, &mut |path, text| {
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("optimal_align(") {
                callers.push(format!("{}:{}", path.display(), number + 1));
            }
        }
    });
    assert!(callers.is_empty(), "src/ calls optimal_align: {callers:?}");
}

fn visit(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &str)) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            visit(&path, f);
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            f(&path, &text);
        }
    }
}

/// §9.6 `MemoryUsage` Display divides by zero when nothing is reserved or in use: it must
/// not panic. (The Display is cubecl-runtime's; it prints NaN there.) Our own Display of
/// an empty memory must not panic and must not print NaN or inf.
#[test]
fn s9_6_memory_usage_display_with_nothing_reserved() {
    let text = std::panic::catch_unwind(|| MemoryUsage::default().to_string())
        .expect("MemoryUsage Display panicked with nothing reserved");
    if text.contains("NaN") {
        eprintln!("cubecl-runtime's MemoryUsage Display prints NaN when empty:\n{text}");
    }
    let memory = memory_for_windows(256);
    let text = memory.to_string();
    assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
    // In use but nothing reserved cannot happen; reserved but nothing in use is common.
    let mut memory = memory_for_windows(256);
    drop(memory.reserve(100).unwrap());
    let text = memory.to_string();
    assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
}

/// §9.7 An unaligned `ExclusivePages { max_alloc_size }` in an explicit layout must not
/// panic (upstream asserted divisibility).
#[test]
fn s9_7_unaligned_exclusive_max_alloc_size() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![exclusive(1000, Some(100))],
    );
    let handle = memory.reserve(1000).expect("the pool's own maximum");
    let storage = memory.get_storage(&handle.clone().binding()).unwrap();
    assert_eq!((storage.offset(), storage.size()), (0, 1000));
    assert!(memory.reserve(1).is_ok());
    // The pool takes what its `max_alloc_size` says, not that rounded up: 1001 bytes is
    // over the layout's limit, and the error names that limit.
    match memory.reserve(1001) {
        Err(ReserveError::BufferTooBig { requested, limit }) => {
            assert_eq!((requested, limit), (1001, 1000))
        }
        other => panic!("1001 bytes: {other:?}"),
    }
    match memory.memory_report().dynamic[0].kind {
        MemoryPoolKind::Exclusive { max_alloc_size } => {
            assert!(
                max_alloc_size >= 1000 && max_alloc_size % 256 == 0,
                "{max_alloc_size}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// §9.8 A sliced pool's `dealloc_period` is accepted (documented as ignored by sliced
/// pools): the layout builds, serves, and explicit cleanup gives its pages back.
#[test]
fn s9_8_sliced_dealloc_period_accepted() {
    let mut pool = sliced(MIB, MIB, None);
    pool.dealloc_period = Some(10);
    let mut memory = explicit(FakeStorage::unbounded(), GIB, 256, vec![pool]);
    let handle = memory.reserve(KIB).unwrap();
    drop(handle);
    for _ in 0..50 {
        drop(memory.reserve(KIB).unwrap());
    }
    eprintln!(
        "sliced pool with dealloc_period 10, idle 50 reservations: {} pages",
        memory.memory_report().dynamic[0].pages
    );
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 0);
    assert_eq!(memory.storage().live_allocations(), 0);
}

/// §9.9 Upstream flushed the storage after every pool even on periodic cleanups. Ours
/// must flush at most once per reservation — and a page the periodic cleanup gives back
/// must really reach the device (be flushed), or a deferring storage keeps it forever.
#[test]
fn s9_9_periodic_cleanup_flushes_once_and_releases_for_real() {
    let mut memory = preset(
        FakeStorage::unbounded(),
        GIB,
        256,
        MemoryConfiguration::ExclusivePages,
    );
    // 24 exclusive pools with period 5000: a 1 MiB page, then 7000 reservations of 64 KiB.
    drop(memory.reserve(MIB).unwrap());
    let mut most = 0;
    for _ in 0..7000 {
        let before = memory.storage().flushes();
        drop(memory.reserve(64 * KIB).unwrap());
        most = most.max(memory.storage().flushes() - before);
    }
    assert!(
        most <= 1,
        "{most} flushes in one reservation (one per pool?)"
    );
    let pages: u64 = memory.memory_report().dynamic.iter().map(|p| p.pages).sum();
    assert_eq!(pages, 1, "the idle 1 MiB page is released after its period");
    assert_eq!(
        memory.storage().live_allocations(),
        1,
        "released in the report but not on the device: {} deallocations never flushed",
        memory.storage().pending_deallocations()
    );
}

/// §9.10 Upstream grew the first accepting pool without looking at a later accepting
/// pool's free room. Layout [sliced 1 KiB pages] [sliced 4 KiB pages]: with 2 KiB free in
/// the second pool's page, a 1 KiB reservation needs no new page.
#[test]
fn s9_10_reserve_consults_free_room_of_later_pools() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![sliced(KIB, KIB, None), sliced(4 * KIB, 4 * KIB, None)],
    );
    let big = memory.reserve(2 * KIB).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
    let small = memory.reserve(KIB).unwrap();
    assert_eq!(
        memory.storage().allocations_made(),
        1,
        "a page was made although a later accepting pool had room"
    );
    drop((big, small));
}

/// §9.11 `test_fragmentation_resistance`, really freeing: sizes [50, 1000, 100, 5000, 200,
/// 10000, 300] on the default layout; drop every other handle (the handles themselves);
/// re-reserve the first half; reserved stays within 1.1x and no page is made.
#[test]
fn s9_11_fragmentation_resistance_really_frees() {
    let sizes = [50u64, 1000, 100, 5000, 200, 10000, 300];
    let mut memory = preset(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        MemoryConfiguration::default(),
    );
    let mut handles: Vec<Option<ManagedMemoryHandle>> = sizes
        .iter()
        .map(|&s| Some(memory.reserve(s).unwrap()))
        .collect();
    let before = memory.memory_usage();
    let made = memory.storage().allocations_made();
    let mut freed = 0;
    for (i, handle) in handles.iter_mut().enumerate() {
        if i % 2 == 0 {
            *handle = None;
            freed += sizes[i];
        }
    }
    let after_free = memory.memory_usage();
    assert_eq!(
        after_free.bytes_in_use,
        before.bytes_in_use - freed,
        "nothing was freed"
    );
    assert_eq!(after_free.number_allocs, 3);
    let again: Vec<_> = sizes[..sizes.len() / 2]
        .iter()
        .map(|&s| memory.reserve(s).unwrap())
        .collect();
    let after = memory.memory_usage();
    assert!(
        after.bytes_reserved * 10 <= before.bytes_reserved * 11,
        "reserved {} -> {}",
        before.bytes_reserved,
        after.bytes_reserved
    );
    assert_eq!(
        memory.storage().allocations_made(),
        made,
        "freed room was not reused"
    );
    drop(again);
}

/// 0b09f3cdd: a capped pool never accepts a size over its max slice (near-page strays
/// drained a small capped pool). [1 MiB pages, 64 KiB slices, cap 2 MiB] + [16 MiB
/// pages, cap 32 MiB]: four 1 MiB and a 900 KiB reservation go to the big pool. A 4 KiB
/// reservation then takes room the big pool already holds rather than a new small page
/// (room held anywhere comes before a new page: see `s9_10`).
#[test]
fn s9_capped_pool_never_accepts_over_max_slice_0b09f3cdd() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![
            sliced(MIB, 64 * KIB, Some(2 * MIB)),
            sliced(16 * MIB, 16 * MIB, Some(32 * MIB)),
        ],
    );
    let big: Vec<_> = (0..4).map(|_| memory.reserve(MIB).unwrap()).collect();
    let near = memory.reserve(900 * KIB).unwrap();
    let report = memory.memory_report();
    assert_eq!(
        report.dynamic[0].pages, 0,
        "the capped small pool took a big request"
    );
    assert_eq!(report.dynamic[1].usage.bytes_in_use, 4 * MIB + 900 * KIB);
    assert_eq!(report.usage().bytes_reserved, 16 * MIB);
    let small = memory.reserve(4 * KIB).unwrap();
    assert_eq!(memory.memory_report().dynamic[0].pages, 0);
    assert_eq!(
        memory.memory_usage().bytes_in_use,
        4 * MIB + 900 * KIB + 4 * KIB
    );
    assert_eq!(memory.memory_usage().bytes_reserved, 16 * MIB);
    drop((big, near, small));
}

// ---------------------------------------------------------------------------------------
// Section 8.5
// ---------------------------------------------------------------------------------------

/// 57487b4c1: persistent slices keyed by raw size on alloc and padded size on reuse were
/// never reused. An unaligned persistent reservation, dropped, serves the same size again.
#[test]
fn r_57487b4c1_persistent_padded_size_reuse() {
    let mut memory = memory_for_windows(32);
    memory.mode(MemoryAllocationMode::Persistent);
    drop(memory.reserve(100).unwrap());
    let again = memory.reserve(100).unwrap();
    assert_eq!(
        memory.storage().allocations_made(),
        1,
        "no reuse of the padded slice"
    );
    // And a size of the same aligned bucket.
    drop(again);
    let _other = memory.reserve(120).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
}

/// e0368c328: persistent reserved bytes must include padding: reserved == sum of
/// effective (aligned) sizes.
#[test]
fn r_e0368c328_persistent_reserved_is_sum_of_effective_sizes() {
    let mut memory = memory_for_windows(32);
    memory.mode(MemoryAllocationMode::Persistent);
    let handles: Vec<_> = [100u64, 1025, 33, 64]
        .iter()
        .map(|&s| memory.reserve(s).unwrap())
        .collect();
    let usage = memory.memory_report().persistent.usage;
    assert_eq!(usage.bytes_in_use, 100 + 1025 + 33 + 64);
    assert_eq!(usage.bytes_reserved, 128 + 1056 + 64 + 64);
    assert_eq!(usage.bytes_padding, 28 + 31 + 31);
    assert_eq!(memory.storage().bytes_held(), usage.bytes_reserved);
    drop(handles);
}

/// 586601e66: a reused persistent slice kept the previous request's stored size; it must
/// report the new request size.
#[test]
fn r_586601e66_reused_persistent_slice_reports_new_size() {
    let mut memory = memory_for_windows(32);
    memory.mode(MemoryAllocationMode::Persistent);
    drop(memory.reserve(1026).unwrap());
    let smaller = memory.reserve(1025).unwrap();
    assert_eq!(memory.storage().allocations_made(), 1);
    let storage = memory.get_storage(&smaller.clone().binding()).unwrap();
    assert_eq!(storage.size(), 1025);
    let resource = memory.get_resource(&smaller.binding(), None, None).unwrap();
    assert_eq!(resource.read().len(), 1025);
}

/// 0c6a6e829: stale locations panicked or resolved to another allocation. A stale binding
/// after bind is NotFound; after a renumbering cleanup a held binding still resolves to
/// its own slice; a held binding keeps its slice non-free.
#[test]
fn r_0c6a6e829_stale_binding_is_not_found() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        32,
        vec![exclusive(1024, None)],
    );
    let reserved = memory.reserve(1024).unwrap();
    let stale = reserved.clone().binding();
    let assigned = ManagedMemoryHandle::new();
    memory.bind(reserved, assigned.clone(), 3).unwrap();
    assert!(matches!(
        memory.get_storage(&stale),
        Err(IoError::NotFound { .. })
    ));
    assert!(matches!(
        memory.get_cursor(&stale),
        Err(IoError::NotFound { .. })
    ));
    assert!(matches!(
        memory.get_resource(&stale, None, None),
        Err(IoError::NotFound { .. })
    ));
    drop((stale, assigned));

    // Three pages; drop the first and third; the cleanup frees them.
    memory.cleanup(Cleanup::Explicit);
    let a = memory.reserve(1024).unwrap();
    let b = memory.reserve(1024).unwrap();
    let c = memory.reserve(1024).unwrap();
    let a_location = a.descriptor().location();
    let held = b.clone().binding();
    let b_id = memory.get_storage(&held).unwrap().id;
    let bind_b = ManagedMemoryHandle::new();
    memory.bind(b, bind_b.clone(), 11).unwrap();
    let held = bind_b.clone().binding();
    drop((a, c));
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 1024);
    assert_eq!(memory.get_storage(&held).unwrap().id, b_id);
    assert_eq!(memory.get_cursor(&held).unwrap(), 11);
    let forged = ManagedMemoryHandle::new();
    forged.descriptor().update_location(a_location);
    assert!(matches!(
        memory.get_storage(&forged.binding()),
        Err(IoError::NotFound { .. })
    ));

    // The held binding (handle dropped) keeps the slice: a new reservation gets a new page.
    drop(bind_b);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(memory.memory_usage().bytes_reserved, 1024);
    let other = memory.reserve(1024).unwrap();
    assert_ne!(memory.get_storage(&other.binding()).unwrap().id, b_id);
    assert_eq!(memory.get_storage(&held).unwrap().id, b_id);
}

/// 3a4e3fbe3: a 4 GiB max page overflowed 32-bit sizes. With a 4 GiB largest page, both
/// presets build and serve; a 4 GiB reservation on a 1 GiB device is an out-of-memory
/// error naming 4 GiB (no overflow, no panic); 4 GiB + 1 is BufferTooBig.
#[test]
fn r_3a4e3fbe3_four_gib_max_page_layout_builds() {
    for config in [
        MemoryConfiguration::default(),
        MemoryConfiguration::ExclusivePages,
    ] {
        let mut memory = preset(FakeStorage::new(GIB), 4 * GIB, 256, config.clone());
        let small = memory.reserve(KIB).unwrap();
        match memory.reserve(4 * GIB) {
            Err(ReserveError::OutOfMemory { requested, .. }) => {
                assert_eq!(requested, 4 * GIB, "{config:?}")
            }
            other => panic!("{config:?}: 4 GiB on a 1 GiB device: {other:?}"),
        }
        match memory.reserve(4 * GIB + 1) {
            Err(ReserveError::BufferTooBig { requested, limit }) => {
                assert_eq!((requested, limit), (4 * GIB + 1, 4 * GIB), "{config:?}")
            }
            other => panic!("{config:?}: 4 GiB + 1: {other:?}"),
        }
        let big = memory
            .reserve(512 * MIB)
            .expect("512 MiB on a 1 GiB device");
        assert!(memory.memory_usage().bytes_reserved <= GIB);
        drop((small, big));
    }
}

/// MIRROR tail change: a big allocation on a fresh memory reserves about its own size
/// (upstream's sliced tail made a quarter-of-memory page for it). Default layout, 1 GiB
/// largest page: reserved <= size + size / 16 + 2 MiB.
#[test]
fn r_mirror_tail_big_allocation_reserves_about_its_own_size() {
    for size in [100 * MIB, 130 * MIB, 300 * MIB, 700 * MIB, GIB] {
        let mut memory = preset(
            FakeStorage::unbounded(),
            GIB,
            256,
            MemoryConfiguration::default(),
        );
        let handle = memory.reserve(size).unwrap();
        let reserved = memory.memory_usage().bytes_reserved;
        let bound = size + size / 16 + 2 * MIB;
        assert!(
            reserved <= bound,
            "{} MiB reserved {} MiB (bound {} MiB)",
            size / MIB,
            reserved / MIB,
            bound / MIB
        );
        assert!(memory.storage().bytes_held() <= bound);
        drop(handle);
    }
}
