//! A human-readable summary of a [`MemoryReport`].

use super::DeviceMemory;
use crate::memory_management::{MemoryPoolsReport, MemoryReport, format_bytes};
pub use crate::memory_management::{pool_line, pool_line_on};
use core::fmt;

/// Displays a [`MemoryReport`]: one line of totals, the budget when one is given
/// ([`with_budget`](Self::with_budget)), what wgpu's allocator holds on the device when
/// that is given ([`with_device`](Self::with_device)), then each memory (the main pools
/// and every auxiliary memory, such as staging) with its non-empty pools.
///
/// ```text
/// memory: 12.00 MiB in use (3 allocations, 0 B padding) of 16.00 MiB reserved, efficiency 75.0 %
/// budget: 64.00 MiB, 16.00 MiB held, 48.00 MiB left (peak held 16.00 MiB)
///   peak held: the most bytes of pages held at once since the client started, ...
/// device (wgpu's allocator): 20.00 MiB in 3 blocks, 16.50 MiB allocated (16.00 MiB our pages, 512.00 KiB else: wgpu's own buffers, the application's), 3.50 MiB of the blocks unused
///   main pools:
///     pool 0: sliced (8.00 MiB pages, slices up to 2.00 MiB): 1 pages (peak 1), ...
/// ```
pub struct MemorySummary<'a> {
    report: &'a MemoryReport,
    budget: Option<BudgetUse>,
    device: Option<DeviceMemory>,
    largest_page: Option<u64>,
    largest_staging_page: Option<u64>,
}

impl<'a> MemorySummary<'a> {
    /// The summary of `report`, without a budget line.
    pub fn new(report: &'a MemoryReport) -> Self {
        Self {
            report,
            budget: None,
            device: None,
            largest_page: None,
            largest_staging_page: None,
        }
    }

    /// Adds the device's largest staging page, in bytes (the adapter's `max_buffer_size`:
    /// a staging buffer is no storage binding, so only that limit applies to it): a staging
    /// pool whose cap is above it is shown clamped, as the main pools are.
    pub fn with_largest_staging_page(mut self, largest_staging_page: u64) -> Self {
        self.largest_staging_page = Some(largest_staging_page);
        self
    }

    /// Adds the device's largest page, in bytes (`Client::largest_page`): a pool whose
    /// cap is above it is shown clamped, with the value in force and the one asked.
    pub fn with_largest_page(mut self, largest_page: u64) -> Self {
        self.largest_page = Some(largest_page);
        self
    }

    /// Adds the budget line: the budget (or "none"), what is held against it and what is
    /// left (`Client::budget` gives `budget`).
    pub fn with_budget(mut self, budget: BudgetUse) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Adds the device line: what wgpu's allocator holds on the device beside our pages
    /// (`Client::device_memory` gives it; `None`, a backend without an allocator report,
    /// adds nothing).
    pub fn with_device(mut self, device: Option<DeviceMemory>) -> Self {
        self.device = device;
        self
    }
}

/// The budget over every memory of a client and what is held against it, in bytes
/// (`Client::budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetUse {
    /// The cap on the bytes of every page of every memory (main, readback staging,
    /// upload staging together), or `None` for no cap.
    pub budget: Option<u64>,
    /// Bytes of every page held now (each buffer's real size), pages given back that the
    /// device may still use included (`retiring`).
    pub held: u64,
    /// The most bytes ever held at once: never above the budget in force when they were
    /// taken.
    pub peak_held: u64,
    /// Bytes of given-back pages still charged (part of `held`): recorded or submitted
    /// work may still use them, and they are credited once the device is done with it
    /// (a `flush` and the device finishing, or `sync`).
    pub retiring: u64,
}

impl BudgetUse {
    /// Bytes left under the budget (`None` without one).
    pub fn left(&self) -> Option<u64> {
        self.budget.map(|budget| budget.saturating_sub(self.held))
    }
}

impl fmt::Display for BudgetUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.budget, self.left()) {
            (Some(budget), Some(left)) => write!(
                f,
                "budget: {}, {} held, {} left (peak held {})",
                format_bytes(budget),
                format_bytes(self.held),
                format_bytes(left),
                format_bytes(self.peak_held)
            )?,
            _ => write!(
                f,
                "budget: none, {} held (peak held {})",
                format_bytes(self.held),
                format_bytes(self.peak_held)
            )?,
        }
        if self.retiring > 0 {
            write!(
                f,
                "; {} of given-back pages wait for the device",
                format_bytes(self.retiring)
            )?;
        }
        Ok(())
    }
}

/// What the budget line's "peak held" counts, and why a timeline's "peak reserved" of the
/// same run can be smaller.
pub const PEAK_HELD: &str = "peak held: the most bytes of pages held at once since the client started, \
     every memory (main, readback and upload staging), given-back pages the device still used \
     included; a timeline's \"peak reserved\" counts only the pages at the events of the history \
     it kept, so it can be smaller";

fn write_pools(
    f: &mut fmt::Formatter<'_>,
    title: &str,
    pools: &MemoryPoolsReport,
    largest_page: Option<u64>,
) -> fmt::Result {
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
            writeln!(f, "    {name}: {}", pool_line_on(pool, largest_page))?;
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
        let usage = self.report.usage();
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
        if let Some(budget) = &self.budget {
            writeln!(f, "{budget}")?;
            writeln!(f, "  {PEAK_HELD}")?;
        }
        if let Some(device) = &self.device {
            writeln!(f, "{device}")?;
        }
        for stream in &self.report.streams {
            write_pools(f, "main pools", &stream.pools, self.largest_page)?;
            for auxiliary in &stream.auxiliary {
                // The staging memories' pages are not storage bindings: their largest page
                // is the buffer size limit alone.
                write_pools(
                    f,
                    &auxiliary.name,
                    &auxiliary.pools,
                    self.largest_staging_page,
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_management::{
        AuxiliaryMemoryReport, MemoryPoolKind, MemoryPoolReport, MemoryPoolsReport, MemoryReport,
        MemoryUsage, StreamMemoryReport,
    };

    fn exclusive_pool(max_alloc_size: u64) -> MemoryPoolReport {
        MemoryPoolReport {
            kind: MemoryPoolKind::Exclusive { max_alloc_size },
            usage: MemoryUsage::default(),
            pages: 1,
            pages_peak: 1,
            pages_unmapped: 0,
            largest_alloc: 0,
        }
    }

    fn pools(dynamic: Vec<MemoryPoolReport>) -> MemoryPoolsReport {
        let empty = MemoryPoolReport {
            pages_peak: 0,
            ..exclusive_pool(0)
        };
        MemoryPoolsReport {
            dynamic,
            persistent: empty.clone(),
            dedicated: empty,
        }
    }

    /// On lavapipe the staging pools said "exclusive (up to 2.00 GiB)" while the device
    /// makes no buffer above its `max_buffer_size`: a staging cap above that limit is shown
    /// clamped, with the value asked beside it, as a main pool's is.
    #[test]
    fn a_staging_cap_above_the_buffer_limit_is_shown_clamped() {
        let report = MemoryReport {
            streams: vec![StreamMemoryReport {
                stream: cubecl_environment::stream::StreamId { value: 0 },
                pools: pools(vec![exclusive_pool(1 << 20)]),
                auxiliary: vec![AuxiliaryMemoryReport {
                    name: "readback staging".to_string(),
                    pools: pools(vec![exclusive_pool(2 << 30)]),
                }],
            }],
        };
        let text = MemorySummary::new(&report)
            .with_largest_page(128 << 20)
            .with_largest_staging_page(256 << 20)
            .to_string();
        let staging = text
            .lines()
            .skip_while(|line| !line.contains("readback staging"))
            .nth(1)
            .unwrap_or_else(|| panic!("no staging pool line:\n{text}"));
        assert!(
            staging.contains("up to 256.00 MiB, the device's largest page; 2.00 GiB asked"),
            "{staging}"
        );
    }

    /// The summary's "peak held" and a timeline's "peak reserved" of one run differ
    /// (153.48 MiB against 134.15 MiB) with nothing saying why: the summary says what its
    /// peak counts, and how that differs from the timeline's.
    #[test]
    fn the_summary_says_what_peak_held_counts() {
        let report = MemoryReport { streams: vec![] };
        let budget = BudgetUse {
            budget: Some(64 << 20),
            held: 1 << 20,
            peak_held: 2 << 20,
            retiring: 0,
        };
        let text = MemorySummary::new(&report).with_budget(budget).to_string();
        let line = text
            .lines()
            .find(|line| line.trim_start().starts_with("peak held:"))
            .unwrap_or_else(|| panic!("no line says what peak held counts:\n{text}"));
        for part in [
            "since the client started",
            "given-back pages",
            "peak reserved",
        ] {
            assert!(line.contains(part), "{line:?} lacks {part:?}");
        }
    }
}
