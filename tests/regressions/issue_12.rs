//! Issue 12's field failures, each as the scenario that showed it. Every test here
//! failed before its fix.

use crate::common::{GIB, KIB, MIB, exclusive, explicit, preset, sliced};
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{
    MemoryConfiguration, MemoryManagement, PendingRelease, ReserveError,
};

/// Runs `pass` `passes` times on `memory` and returns the pages made during each pass.
fn pages_per_pass(
    memory: &mut MemoryManagement<FakeStorage>,
    passes: usize,
    mut pass: impl FnMut(&mut MemoryManagement<FakeStorage>),
) -> Vec<u64> {
    (0..passes)
        .map(|_| {
            let before = memory.storage().allocations_made();
            pass(memory);
            memory.storage().allocations_made() - before
        })
        .collect()
}

/// Field failure 1: one exclusive pool with a `dealloc_period`, serving three sizes in
/// turn, each dropped before the next. Growth gave back the free pages (free bytes over
/// the bytes in use, 0 here), which were exactly what the next pass asked for: 30 pages
/// in ten passes. Now the second pass re-makes the two pages the first gave back, which
/// stops growth from giving pages back for a period: no page after that.
#[test]
fn exclusive_pool_with_a_period_keeps_the_pages_a_loop_comes_back_for() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        vec![exclusive(32 * KIB, Some(5000))],
    );
    let made = pages_per_pass(&mut memory, 10, |memory| {
        for size in [1000, 4000, 16000] {
            drop(memory.reserve(size).unwrap());
        }
    });
    assert_eq!(made, [3, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
}

/// Field failure 1, on the `ExclusivePages` preset: a mixed loop (sizes across many
/// buckets, some kept for the pass, some dropped at once, a run of rising sizes inside
/// one bucket) makes its pages during warm-up and none after.
#[test]
fn exclusive_pages_preset_makes_no_page_after_warm_up() {
    let mut memory = preset(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        MemoryConfiguration::ExclusivePages,
    );
    let sizes: [u64; 17] = [
        1000, 40_000, 300_000, 2_000_000, 16_000, 5_000_000, 100_000, 700_000, 64_000, 12_000_000,
        3_000, 1_500_000, 50_000, 55_000, 60_000, 65_000, 8_000_000,
    ];
    let made = pages_per_pass(&mut memory, 10, |memory| {
        let mut kept = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let handle = memory.reserve(size).unwrap();
            if i % 3 == 0 {
                kept.push(handle);
            }
        }
    });
    assert!(
        made[2..].iter().all(|&n| n == 0),
        "pages made per pass: {made:?}"
    );
}

/// Field failure 2: the default (adaptive) layout, sizes k * 100 KiB for k = 1..=16 all
/// kept, 128 MiB pages, alignment 256. Pages sized after the first allocations held one
/// allocation each once the sizes grew: 20 MiB reserved for 13.3 MiB in use (1.5x).
/// The target is at most 1.25x.
///
/// Not met yet (still 1.506x, the same as cubecl-server): an online rule meets it only
/// with pages several times the largest allocation from the start, and every such rule
/// measured (pages at least 3, 4 or 8 times the largest allocation, or geometric pages
/// while a band only accumulates) cost other traces of the allocator bench far more
/// (drifting 1.000 -> 0.625, inference 0.953 -> 0.747, phases 0.852 -> 0.650). Kept as
/// the failing scenario; run with `--ignored`.
#[test]
#[ignore = "issue 12 field failure 2 is not fixed: 1.506x reserved over in use, target 1.25x"]
fn adaptive_layout_packs_ascending_sizes_within_a_quarter() {
    let mut memory = preset(
        FakeStorage::unbounded(),
        128 * MIB,
        256,
        MemoryConfiguration::default(),
    );
    let handles: Vec<_> = (1..=16u64)
        .map(|k| memory.reserve(k * 100 * KIB).unwrap())
        .collect();
    let usage = memory.memory_usage();
    let ratio = usage.bytes_reserved as f64 / usage.bytes_in_use as f64;
    assert_eq!(usage.bytes_in_use, 136 * 100 * KIB);
    assert!(
        ratio <= 1.25,
        "reserved {} for {} in use: {ratio:.3}x",
        usage.bytes_reserved,
        usage.bytes_in_use
    );
    drop(handles);
}

/// Field failure 4: with a layout of 1 MiB pages whose slices are at most 64 KiB, a
/// reservation over what the layout accepts named the device's 128 MiB page as the
/// limit. It names the layout's own limit: a near-page size of 1 MiB.
#[test]
fn buffer_too_big_names_the_layouts_limit() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        128 * MIB,
        32,
        vec![sliced(MIB, 64 * KIB, None)],
    );
    let error = memory.reserve(411_041_792).unwrap_err();
    let text = error.to_string();
    match error {
        ReserveError::BufferTooBig { requested, limit } => {
            assert_eq!((requested, limit), (411_041_792, MIB), "{text}");
        }
        other => panic!("expected BufferTooBig, got {other:?}"),
    }
    assert!(
        text.contains("1.00 MiB") && !text.contains("128.00 MiB"),
        "{text}"
    );
    // Under the device's page but over the layout's: the same error.
    assert!(matches!(
        memory.reserve(2 * MIB),
        Err(ReserveError::BufferTooBig { limit, .. }) if limit == MIB
    ));
}

/// What a server holds for the memory until submitted work completes: handles kept
/// alive for a fence. `release_pending` drops them if `releases` (a fence that passes),
/// and keeps them otherwise (work that never completes).
struct HeldForFence {
    held: Vec<wgpu_memory::memory_management::ManagedMemoryHandle>,
    bytes: u64,
    releases: bool,
    waits: usize,
}

impl PendingRelease for HeldForFence {
    fn bytes_pending_release(&self) -> u64 {
        self.bytes
    }

    fn release_pending(&mut self) {
        self.waits += 1;
        if self.releases {
            self.held.clear();
            self.bytes = 0;
        }
    }
}

/// Field failure 3, the memory's part: 80 MiB of a 100 MiB device wait on the queue
/// (the owner holds their handles until a fence). A 60 MiB reservation waits for them
/// through the owner and then succeeds; the plain `reserve`, which knows of nothing
/// pending, fails.
#[test]
fn out_of_memory_waits_for_bytes_pending_release() {
    let mut memory = preset(
        FakeStorage::new(100 * MIB),
        GIB,
        256,
        MemoryConfiguration::default(),
    );
    let held = memory.reserve(80 * MIB).unwrap();
    let mut pending = HeldForFence {
        held: vec![held],
        bytes: 80 * MIB,
        releases: true,
        waits: 0,
    };
    let plain = memory.reserve(60 * MIB).unwrap_err();
    assert!(
        matches!(
            plain,
            ReserveError::OutOfMemory {
                bytes_pending_release: 0,
                ..
            }
        ),
        "{plain:?}"
    );
    // cubecl-runtime's storage error ends with "No backtrace available": not ours.
    assert!(!plain.to_string().contains("backtrace"), "{plain}");
    let handle = memory.reserve_with(60 * MIB, &mut pending).unwrap();
    assert_eq!(pending.waits, 1);
    assert_eq!(memory.memory_usage().bytes_in_use, 60 * MIB);
    drop(handle);
    // Room at once: the owner is not asked to wait.
    let _again = memory.reserve_with(60 * MIB, &mut pending).unwrap();
    assert_eq!(pending.waits, 1);
}

/// Field failure 3: when what is pending is not released, the error names it (a repro
/// said "0 B reserved" while 80 MiB waited), and its text carries no backtrace line.
#[test]
fn out_of_memory_names_bytes_still_pending_release() {
    let mut memory = preset(
        FakeStorage::new(100 * MIB),
        GIB,
        256,
        MemoryConfiguration::default(),
    );
    let held = memory.reserve(80 * MIB).unwrap();
    let mut pending = HeldForFence {
        held: vec![held],
        bytes: 80 * MIB,
        releases: false,
        waits: 0,
    };
    let error = memory.reserve_with(60 * MIB, &mut pending).unwrap_err();
    let text = error.to_string();
    match error {
        ReserveError::OutOfMemory {
            requested,
            bytes_pending_release,
            ..
        } => assert_eq!((requested, bytes_pending_release), (60 * MIB, 80 * MIB)),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert_eq!(pending.waits, 1);
    assert!(text.contains("80.00 MiB still pending release"), "{text}");
    assert!(!text.contains("backtrace"), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    drop(pending.held);
}
