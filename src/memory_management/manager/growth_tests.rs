//! A page that raises the memory's high-water mark first takes back the empty pages of
//! the pools that could not serve it; a page made below the mark leaves them alone.

use super::test_memory::{free_now as free, host_memory};
use crate::memory_management::MemoryManagement;
use crate::storage::BytesStorage;
use cubecl_runtime::memory_management::MemoryConfiguration;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The default adaptive layout (a small-slice pool, then the adaptive pool) over host
/// memory, under wgpu's default 128 MiB binding limit.
fn memory() -> MemoryManagement<BytesStorage> {
    host_memory(MemoryConfiguration::Adaptive, 128 * MIB, "growth")
}

/// Small slices fill the small-slice pool's pages, then all go: those pages hold nothing.
/// A large slice then makes the memory's largest page so far.
#[test]
fn a_page_over_the_high_water_mark_takes_back_empty_pages_of_other_pools() {
    let mut memory = memory();
    let small: Vec<_> = (0..12)
        .map(|_| memory.reserve(64 * KIB).expect("a small slice"))
        .collect();
    let small_pages = memory.bytes_allocated();
    assert!(small_pages >= 12 * 64 * KIB, "{small_pages} B of pages");
    for handle in small {
        free(&mut memory, handle);
    }
    assert_eq!(
        memory.bytes_allocated(),
        small_pages,
        "empty pages are kept"
    );

    let large = memory.reserve(2 * MIB).expect("a large slice");
    let held = memory.bytes_allocated();
    assert!(
        held < small_pages + 2 * MIB,
        "the small pool's empty pages went back: {held} B held, {small_pages} B of them before"
    );
    assert!(held >= 2 * MIB, "the large slice's page is held: {held} B");
    drop(large);
}

/// Below the high-water mark a new page raises no peak, so empty pages stay: a loop that
/// comes back to them would otherwise give back and re-make them every pass.
#[test]
fn a_page_under_the_high_water_mark_leaves_empty_pages_alone() {
    let mut memory = memory();
    // Raise the mark well above what follows, then let it all go.
    let big = memory.reserve(16 * MIB).expect("a big slice");
    free(&mut memory, big);
    memory.cleanup(crate::memory_management::Cleanup::Explicit);
    let small: Vec<_> = (0..4)
        .map(|_| memory.reserve(64 * KIB).expect("a small slice"))
        .collect();
    let small_pages = memory.bytes_allocated();
    for handle in small {
        free(&mut memory, handle);
    }
    let large = memory.reserve(2 * MIB).expect("a large slice");
    assert!(
        memory.bytes_allocated() >= small_pages + 2 * MIB,
        "the empty small pages stay under the mark: {} B held, {small_pages} B of them",
        memory.bytes_allocated()
    );
    drop(large);
}
