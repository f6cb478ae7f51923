//! Issue 12's field failures, each as the scenario that showed it. Every test here
//! failed before its fix.

use crate::common::{KIB, MIB, exclusive, explicit, preset, sliced};
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{MemoryConfiguration, MemoryManagement, ReserveError};

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
