//! C01 Drifting sizes leave pages behind.
//!
//! Exclusive-pages layout. For step in 0..2000: size = 1 MiB * (1 + (step / 100) % 20);
//! reserve 8 buffers of that size, drop all. Expect: at the end reserved <= 2 * 8 * 20 MiB;
//! pages of sizes unused for a whole dealloc period are released; pages_peak stays bounded.

use crate::common::*;
use crate::fake::FakeStorage;
use std::collections::HashMap;
use wgpu_memory::memory_management::MemoryConfiguration;
use wgpu_memory::storage::ComputeStorage;

const STEPS: u64 = 2000;
const BUFFERS: u64 = 8;

#[test]
fn c01_drifting_sizes() {
    let mut memory = preset(
        FakeStorage::unbounded(),
        GIB,
        256,
        MemoryConfiguration::ExclusivePages,
    );
    // The dealloc period of the preset's buckets that serve 1..=20 MiB: presets scale it
    // with the bucket size, 5000 * round(1 + bytes / GiB) reservations = 5000 for all of
    // these (reference section 2.6).
    let period: u64 = 5000;

    let mut reservations = 0u64;
    // Reservation count at which each size was last reserved.
    let mut last_use: HashMap<u64, u64> = HashMap::new();
    let mut max_pages = 0u64;
    let mut max_pages_at = 0u64;
    for step in 0..STEPS {
        let size = MIB * (1 + (step / 100) % 20);
        let handles: Vec<_> = (0..BUFFERS)
            .map(|_| {
                reservations += 1;
                memory.reserve(size).expect("reserve")
            })
            .collect();
        last_use.insert(size, reservations);
        drop(handles);
        let pages: u64 = memory.memory_report().dynamic.iter().map(|p| p.pages).sum();
        if pages > max_pages {
            max_pages = pages;
            max_pages_at = step;
        }
    }

    let report = memory.memory_report();
    let usage = report.usage();
    let pages: u64 = report.dynamic.iter().map(|p| p.pages).sum();
    let peak_sum: u64 = report.dynamic.iter().map(|p| p.pages_peak).sum();
    let device_bytes = memory.storage().bytes_allocated();
    let device_live = memory.storage().live_allocations();
    eprintln!(
        "C01: period {period}, end reserved {} MiB ({pages} pages), device holds {} MiB in {device_live} allocations, \
         most pages at once {max_pages} (step {max_pages_at}), sum of pool pages_peak {peak_sum}",
        usage.bytes_reserved / MIB,
        device_bytes / MIB
    );

    // Every expectation is checked and all violations reported together.
    let mut violations = Vec::new();

    // At the end reserved <= 2 * 8 * 20 MiB (and the device really got the rest back).
    let bound = 2 * BUFFERS * 20 * MIB;
    if usage.bytes_reserved > bound {
        violations.push(format!(
            "reserved {} MiB at the end, expected <= {} MiB",
            usage.bytes_reserved / MIB,
            bound / MIB
        ));
    }
    if device_bytes > bound {
        violations.push(format!(
            "the device still holds {} MiB in {device_live} allocations at the end \
             ({} deallocations never flushed), expected <= {} MiB",
            device_bytes / MIB,
            memory.storage().pending_deallocations(),
            bound / MIB
        ));
    }

    // Pages of sizes unused for a whole dealloc period are released: only sizes reserved
    // within the last period (plus the check granularity of a fifth of it) may still
    // hold pages, at most 8 each.
    let window = period + period / 5;
    let recent = last_use
        .values()
        .filter(|&&at| reservations - at < window)
        .count() as u64;
    if pages > BUFFERS * recent {
        violations.push(format!(
            "{pages} pages held at the end; only {recent} sizes were used in the last {window} \
             reservations (at most {} pages)",
            BUFFERS * recent
        ));
    }
    if device_live > BUFFERS * recent {
        violations.push(format!(
            "{device_live} device allocations live at the end; at most {} expected",
            BUFFERS * recent
        ));
    }

    // pages_peak stays bounded: never more pages at once than 8 per size that can be
    // within one release window (one size lasts 800 reservations), plus the size coming in.
    let sizes_in_window = window.div_ceil(100 * BUFFERS) + 1;
    let peak_bound = BUFFERS * sizes_in_window;
    if max_pages > peak_bound {
        violations.push(format!(
            "{max_pages} pages held at once (step {max_pages_at}), expected <= {peak_bound}"
        ));
    }
    let device_peak = memory.storage().live_peak();
    if device_peak > peak_bound {
        violations.push(format!(
            "{device_peak} device allocations live at once, expected <= {peak_bound}"
        ));
    }
    if peak_sum > BUFFERS * 20 {
        violations.push(format!(
            "sum of pool pages_peak {peak_sum} > one set of pages per size"
        ));
    }
    assert!(violations.is_empty(), "C01:\n{}", violations.join("\n"));
}
