//! C10: staging memory stays bounded while reads grow.
//!
//! For i in 1..=200: a handle of i * 16 KiB is created, read back (a few bytes checked)
//! and dropped. The largest read is 200 * 16 KiB = 3200 KiB (the scenario's "3.2 MiB").
//! Expect at the end, without an explicit cleanup: staging reserved <= 2 * 3200 KiB +
//! one page (the largest staging page, which is the largest read: staging pages are
//! exclusive, one per read), and at most 8 staging pages live; the same for the upload
//! staging the creates went through.

use crate::device::{fresh, pattern};
use wgpu_memory::memory_management::{MemoryPoolReport, MemoryPoolsReport};

const STEP: usize = 16 << 10;
const STEPS: usize = 200;
const LARGEST_READ: u64 = (STEPS * STEP) as u64;
const MAX_LIVE_PAGES: u64 = 8;

fn pools(report: &MemoryPoolsReport) -> impl Iterator<Item = &MemoryPoolReport> {
    report
        .dynamic
        .iter()
        .chain([&report.persistent, &report.dedicated])
}

#[test]
fn c10_staging_bounded_when_reads_grow() {
    let Some(client) = fresh() else { return };
    let mut peak_reserved = 0u64;
    for i in 1..=STEPS {
        let len = i * STEP;
        let data = pattern(len, i as u64);
        let handle = client.create(&data).unwrap();
        let read = client.read_blocking(&handle).unwrap();
        assert_eq!(read.len(), len, "step {i}");
        for at in [0, 1, len / 2, len - 2, len - 1] {
            assert_eq!(read[at], data[at], "step {i}, byte {at}");
        }
        drop(read);
        drop(handle);
        let report = client.memory_report();
        let reserved: u64 = pools(&report.streams[0].auxiliary[0].pools)
            .map(|pool| pool.usage.bytes_reserved)
            .sum();
        peak_reserved = peak_reserved.max(reserved);
    }

    let report = client.memory_report();
    let staging = &report.streams[0].auxiliary[0];
    assert_eq!(staging.name, "staging");
    let reserved: u64 = pools(&staging.pools)
        .map(|pool| pool.usage.bytes_reserved)
        .sum();
    let pages: u64 = pools(&staging.pools).map(|pool| pool.pages).sum();
    let largest_page = pools(&staging.pools)
        .map(|pool| pool.largest_alloc)
        .max()
        .unwrap_or(0)
        .max(LARGEST_READ)
        .next_multiple_of(wgpu::MAP_ALIGNMENT);
    let bound = 2 * LARGEST_READ + largest_page;
    let summary: Vec<(u64, u64)> = pools(&staging.pools)
        .filter(|pool| pool.pages > 0)
        .map(|pool| (pool.pages, pool.usage.bytes_reserved))
        .collect();
    eprintln!(
        "c10: staging reserved {reserved} bytes in {pages} pages (peak reserved during the \
         run {peak_reserved}); bound {bound} bytes, {MAX_LIVE_PAGES} pages; \
         (pages, reserved) per non-empty pool: {summary:?}"
    );
    assert_eq!(
        staging.pools.usage().number_allocs,
        0,
        "every read was dropped"
    );
    assert!(
        reserved <= bound,
        "staging reserved {reserved} bytes > 2 * {LARGEST_READ} + {largest_page} = {bound} \
         ({pages} pages; (pages, reserved) per pool: {summary:?})"
    );
    assert!(
        pages <= MAX_LIVE_PAGES,
        "{pages} staging pages live > {MAX_LIVE_PAGES} (reserved {reserved} bytes; \
         (pages, reserved) per pool: {summary:?})"
    );
    // The same bounds hold for the upload staging every create went through.
    let upload = report.streams[0]
        .auxiliary
        .iter()
        .find(|memory| memory.name == "upload")
        .expect("the upload staging memory");
    let upload_reserved: u64 = pools(&upload.pools)
        .map(|pool| pool.usage.bytes_reserved)
        .sum();
    let upload_pages: u64 = pools(&upload.pools).map(|pool| pool.pages).sum();
    eprintln!("c10: upload staging reserved {upload_reserved} bytes in {upload_pages} pages");
    assert!(
        upload_reserved <= bound,
        "upload staging reserved {upload_reserved} bytes > {bound} ({upload_pages} pages)"
    );
    assert!(
        upload_pages <= MAX_LIVE_PAGES,
        "{upload_pages} upload staging pages live > {MAX_LIVE_PAGES}"
    );
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
