//! Unit tests of the adaptive pool: bands, page sizes and the floor.

use super::*;

const MIB: u64 = 1 << 20;

/// Huge means over a sixteenth of the largest page and over 64 MiB.
#[test]
fn huge_is_over_a_sixteenth_of_the_largest_page_and_64_mib() {
    let pool = AdaptivePool::new(0, 1 << 30, 256);
    assert_eq!(pool.band_of(1), SHARED);
    assert_eq!(pool.band_of(64 * MIB), SHARED);
    assert_eq!(pool.band_of(64 * MIB + 256), HUGE);
    let small_device = AdaptivePool::new(0, 128 * MIB, 256);
    assert_eq!(small_device.band_of(16 * MIB), SHARED);
    assert_eq!(small_device.band_of(64 * MIB + 256), HUGE);
    let large_device = AdaptivePool::new(0, 4 << 30, 256);
    assert_eq!(large_device.band_of(256 * MIB), SHARED);
    assert_eq!(large_device.band_of(256 * MIB + 256), HUGE);
}

/// A new page holds the request, rounded up to a power of two up to 4 MiB, to the
/// ladder up to 16 MiB and to 2 MiB above (huge pages: to a MiB); shared pages are at
/// least twice the request within 1-2 MiB and an eighth of the band's peak live bytes.
#[test]
fn pages_are_sized_for_the_request() {
    let mut pool = AdaptivePool::new(0, 1 << 30, 256);
    assert_eq!(pool.page_for(SHARED, 1024), MIN_PAGE);
    assert_eq!(MIN_PAGE, MIB);
    assert_eq!(pool.page_for(SHARED, MIB / 2), MIB);
    assert_eq!(pool.page_for(SHARED, MIB / 2 + 256), 2 * MIB);
    assert_eq!(pool.page_for(SHARED, MIB), 2 * MIB);
    assert_eq!(pool.page_for(SHARED, 3 * MIB / 2), 2 * MIB);
    assert_eq!(pool.page_for(SHARED, 3 * MIB + 256), 4 * MIB);
    assert_eq!(pool.page_for(SHARED, 4 * MIB), 4 * MIB);
    assert_eq!(pool.page_for(SHARED, 4 * MIB + 256), 4 * MIB + MIB / 4);
    assert_eq!(pool.page_for(SHARED, 15 * MIB), 15 * MIB);
    assert_eq!(pool.page_for(SHARED, 16 * MIB - 256), 16 * MIB);
    assert_eq!(pool.page_for(SHARED, 17 * MIB - 256), 18 * MIB);
    assert_eq!(pool.page_for(HUGE, 800 * MIB), 800 * MIB);
    assert_eq!(pool.page_for(HUGE, 250 * MIB + 256), 251 * MIB);
    // A working set of 80 MiB: pages of at least 10 MiB.
    pool.band_mut(SHARED).peak_live = 80 * MIB;
    assert_eq!(pool.page_for(SHARED, 1024), 10 * MIB);
    assert_eq!(pool.page_for(SHARED, 12 * MIB), 12 * MIB);
    assert_eq!(ladder_up(1000), 1024);
    assert_eq!(ladder_up(17 << 20), 17 << 20);
}

/// A cleanup starts the working set afresh: pages made after it are sized for what
/// is live, not for the largest phase before it.
#[test]
fn a_cleanup_sizes_later_pages_for_the_working_set_after_it() {
    let mut storage = crate::storage::BytesStorage::default();
    let mut pool = AdaptivePool::new(0, 1 << 30, 256);
    pool.band_mut(SHARED).peak_live = 800 * MIB;
    pool.band_mut(SHARED).live = 3 * MIB;
    assert_eq!(pool.page_for(SHARED, 1024), 100 * MIB);
    pool.release_free_pages(&mut storage);
    assert_eq!(pool.band_mut(SHARED).peak_live, 3 * MIB);
    assert_eq!(pool.page_for(SHARED, 1024), MIN_PAGE);
}

/// Pages never exceed the largest page.
#[test]
fn pages_stay_within_the_largest_page() {
    let pool = AdaptivePool::new(0, 100 * MIB + 512 + 3, 256);
    assert_eq!(pool.max_accepted(), 100 * MIB + 512);
    assert_eq!(pool.page_for(HUGE, 100 * MIB + 256), pool.max_accepted());
    assert!(pool.page_for(SHARED, 2 * MIB) <= pool.max_accepted());
}
