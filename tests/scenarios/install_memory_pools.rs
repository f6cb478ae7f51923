//! `MemoryManagement::install_memory_pools`: a new layout replaces the pools in place,
//! only when nothing lives in them (gated in main.rs until the API lands in src/).

use crate::common::*;
use crate::fake::FakeStorage;
use wgpu_memory::memory_management::{Cleanup, InstallMemoryPoolsError, ReserveError};

/// Live blocks refuse an install with `PoolsInUse` (bytes > 0) and the old cap holds;
/// after they are dropped the install succeeds and the new layout serves.
#[test]
fn install_refused_while_in_use_then_applied() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![sliced(MIB, MIB, Some(2 * MIB))],
    );
    let a = memory.reserve(MIB).unwrap();
    let b = memory.reserve(MIB).unwrap();
    match memory.install_memory_pools(vec![sliced(4 * MIB, 4 * MIB, Some(8 * MIB))]) {
        Err(InstallMemoryPoolsError::PoolsInUse { bytes_in_use, .. }) => {
            assert_eq!(bytes_in_use, 2 * MIB)
        }
        other => panic!("expected PoolsInUse, got {other:?}"),
    }
    // The old cap still holds.
    assert!(matches!(
        memory.reserve(MIB),
        Err(ReserveError::PoolCapacityExceeded { .. })
    ));
    drop((a, b));
    memory
        .install_memory_pools(vec![sliced(4 * MIB, 4 * MIB, Some(8 * MIB))])
        .expect("nothing in use");
    let big = memory
        .reserve(2 * MIB)
        .expect("the new layout serves 2 MiB");
    assert_eq!(memory.memory_report().dynamic.len(), 1);
    drop(big);
    memory.cleanup(Cleanup::Explicit);
    assert_eq!(
        memory.storage().live_allocations(),
        0,
        "the old pages went back"
    );
}

/// C20 with the cap installed at run time rather than at construction.
#[test]
fn c20_useful_out_of_memory_text_installed_cap() {
    let mut memory = explicit(
        FakeStorage::unbounded(),
        GIB,
        256,
        vec![sliced(MIB, MIB, None)],
    );
    memory
        .install_memory_pools(vec![sliced(64 * MIB, 64 * MIB, Some(64 * MIB))])
        .unwrap();
    let keep = memory.reserve(48 * MIB).unwrap();
    let text = memory
        .reserve(32 * MIB)
        .unwrap_err()
        .to_string()
        .to_lowercase();
    assert!(
        text.contains("reserved") && text.contains("largest free") && text.contains("fragment"),
        "{text}"
    );
    drop(keep);
}
