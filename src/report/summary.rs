//! A human-readable summary of a [`MemoryReport`].

pub use crate::memory_management::pool_line;
use crate::memory_management::{MemoryPoolsReport, MemoryReport, format_bytes};
use core::fmt;

/// Displays a [`MemoryReport`]: one line of totals, then each memory (the main pools
/// and every auxiliary memory, such as staging) with its non-empty pools.
///
/// ```text
/// memory: 12.00 MiB in use (3 allocations, 0 B padding) of 16.00 MiB reserved, efficiency 75.0 %
///   main pools:
///     pool 0: sliced (8.00 MiB pages, slices up to 2.00 MiB): 1 pages (peak 1), ...
/// ```
pub struct MemorySummary<'a>(pub &'a MemoryReport);

fn write_pools(f: &mut fmt::Formatter<'_>, title: &str, pools: &MemoryPoolsReport) -> fmt::Result {
    writeln!(f, "  {title}:")?;
    let named = pools
        .dynamic
        .iter()
        .enumerate()
        .map(|(i, pool)| (format!("pool {i}"), pool))
        .chain([
            ("persistent".to_string(), &pools.persistent),
            ("dedicated".to_string(), &pools.dedicated),
        ]);
    let mut shown = 0;
    for (name, pool) in named {
        if pool.pages_peak > 0 {
            writeln!(f, "    {name}: {}", pool_line(pool))?;
            shown += 1;
        }
    }
    if shown == 0 {
        writeln!(f, "    (no pages ever held)")?;
    }
    Ok(())
}

impl fmt::Display for MemorySummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let usage = self.0.usage();
        let efficiency = match usage.bytes_reserved {
            0 => 100.0,
            reserved => usage.bytes_in_use as f64 * 100.0 / reserved as f64,
        };
        writeln!(
            f,
            "memory: {} in use ({} allocations, {} padding) of {} reserved, efficiency {efficiency:.1} %",
            format_bytes(usage.bytes_in_use),
            usage.number_allocs,
            format_bytes(usage.bytes_padding),
            format_bytes(usage.bytes_reserved),
        )?;
        for stream in &self.0.streams {
            write_pools(f, "main pools", &stream.pools)?;
            for auxiliary in &stream.auxiliary {
                write_pools(f, &auxiliary.name, &auxiliary.pools)?;
            }
        }
        Ok(())
    }
}
