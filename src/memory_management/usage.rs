//! Usage sums, the one byte formatter of the crate, and one pool's report on a line.

use cubecl_runtime::memory_management::{MemoryPoolKind, MemoryPoolReport, MemoryUsage};

/// Formats a byte count with binary units (B, KiB, MiB, GiB, TiB), two decimals above
/// 1 KiB: `1536` prints `1.50 KiB`.
///
/// The upstream `MemoryUsage` display prints decimal "KB"; this crate prints binary units
/// everywhere so a page of `64 MiB` reads as `64.00 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// Running sums of live slices, as `MemoryUsage` counts them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SliceSums {
    pub(crate) count: u64,
    pub(crate) in_use: u64,
    pub(crate) padding: u64,
}

impl SliceSums {
    pub(crate) fn add(&mut self, size: u64, padding: u64) {
        self.count += 1;
        self.in_use += size;
        self.padding += padding;
    }

    pub(crate) fn into_usage(self, bytes_reserved: u64) -> MemoryUsage {
        MemoryUsage {
            number_allocs: self.count,
            bytes_in_use: self.in_use,
            bytes_padding: self.padding,
            bytes_reserved,
        }
    }
}

/// One line for one pool: its kind, pages now and at peak, and its usage.
pub fn pool_line(pool: &MemoryPoolReport) -> String {
    pool_line_on(pool, None)
}

/// [`pool_line`] for a device whose largest page is `largest_page` bytes, when known: an
/// exclusive pool's cap above it takes reservations only up to it, and is shown clamped,
/// with the value in force and the one asked. A sliced pool holding its smaller first
/// page (a pool that starts small makes one while it holds no page) names that page's
/// size beside the page size.
pub fn pool_line_on(pool: &MemoryPoolReport, largest_page: Option<u64>) -> String {
    let kind = match (pool.kind, first_sliced_page(pool)) {
        (
            MemoryPoolKind::Sliced {
                page_size,
                max_slice_size,
            },
            Some(first),
        ) => format!(
            "sliced ({} pages, the first {}, slices up to {})",
            format_bytes(page_size),
            format_bytes(first),
            format_bytes(max_slice_size)
        ),
        _ => pool_kind_text(&pool.kind, largest_page),
    };
    let usage = &pool.usage;
    format!(
        "{kind}: {} pages (peak {}), {} allocations, {} in use, {} padding, {} reserved, largest allocation {}",
        pool.pages,
        pool.pages_peak,
        usage.number_allocs,
        format_bytes(usage.bytes_in_use),
        format_bytes(usage.bytes_padding),
        format_bytes(usage.bytes_reserved),
        format_bytes(pool.largest_alloc)
    )
}

/// The size of a sliced pool's smaller first page, in bytes, when the pool holds one:
/// its pages then add up to less than `pages` full pages, and only that one page is
/// smaller (a pool makes it only while it holds no page).
fn first_sliced_page(pool: &MemoryPoolReport) -> Option<u64> {
    let MemoryPoolKind::Sliced { page_size, .. } = pool.kind else {
        return None;
    };
    let full = pool.pages.checked_mul(page_size)?;
    let reserved = pool.usage.bytes_reserved;
    (pool.pages > 0 && reserved < full)
        .then(|| reserved.checked_sub((pool.pages - 1) * page_size))
        .flatten()
}

/// A pool's kind and shape for people, as [`pool_line_on`] starts: "sliced (512.00 KiB
/// pages, slices up to 64.00 KiB)", "exclusive (up to 8.00 KiB)"; an exclusive cap above
/// `largest_page` (bytes, when known) is shown clamped.
pub fn pool_kind_text(kind: &MemoryPoolKind, largest_page: Option<u64>) -> String {
    match *kind {
        MemoryPoolKind::Sliced {
            page_size,
            max_slice_size,
        } => format!(
            "sliced ({} pages, slices up to {})",
            format_bytes(page_size),
            format_bytes(max_slice_size)
        ),
        // Its pages have many sizes: `page_size` is the largest (no page is outdated,
        // `outdated_pages` stays 0).
        MemoryPoolKind::Adaptive { page_size: 0, .. } => "adaptive (no pages)".to_string(),
        MemoryPoolKind::Adaptive { page_size, .. } => {
            format!("adaptive (pages up to {})", format_bytes(page_size))
        }
        MemoryPoolKind::Exclusive { max_alloc_size } => match largest_page {
            Some(largest) if largest < max_alloc_size => format!(
                "exclusive (up to {}, the device's largest page; {} asked)",
                format_bytes(largest),
                format_bytes(max_alloc_size)
            ),
            _ => format!("exclusive (up to {})", format_bytes(max_alloc_size)),
        },
        MemoryPoolKind::Direct => "direct".to_string(),
        MemoryPoolKind::Persistent => "persistent".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{format_bytes, pool_line};
    use cubecl_runtime::memory_management::{MemoryPoolKind, MemoryPoolReport, MemoryUsage};

    /// An adaptive pool that gave every page back says so (it read "pages up to 0 B").
    #[test]
    fn an_adaptive_pool_without_pages_says_so() {
        let report = |page_size| MemoryPoolReport {
            kind: MemoryPoolKind::Adaptive {
                page_size,
                outdated_pages: 0,
            },
            usage: MemoryUsage::default(),
            pages: 0,
            pages_peak: 1,
            pages_unmapped: 0,
            largest_alloc: 0,
        };
        assert!(pool_line(&report(0)).starts_with("adaptive (no pages): 0 pages"));
        assert!(pool_line(&report(2 << 20)).starts_with("adaptive (pages up to 2.00 MiB)"));
    }

    /// An exclusive cap above the device's largest page is shown clamped, with the
    /// value in force and the one asked; one within it, or with no limit known, as is.
    #[test]
    fn an_exclusive_cap_over_the_largest_page_is_shown_clamped() {
        let report = MemoryPoolReport {
            kind: MemoryPoolKind::Exclusive {
                max_alloc_size: 2 << 30,
            },
            usage: MemoryUsage::default(),
            pages: 0,
            pages_peak: 1,
            pages_unmapped: 0,
            largest_alloc: 0,
        };
        assert!(super::pool_line_on(&report, Some(128 << 20)).starts_with(
            "exclusive (up to 128.00 MiB, the device's largest page; 2.00 GiB asked)"
        ));
        assert!(
            super::pool_line_on(&report, Some(4 << 30)).starts_with("exclusive (up to 2.00 GiB)")
        );
        assert!(pool_line(&report).starts_with("exclusive (up to 2.00 GiB)"));
    }

    /// A sliced pool holding its smaller first page names it: the main job's small pool
    /// read "512.00 KiB pages" while it held one page of 128 KiB.
    #[test]
    fn a_sliced_pool_names_its_smaller_first_page() {
        let report = |pages, reserved| MemoryPoolReport {
            kind: MemoryPoolKind::Sliced {
                page_size: 512 << 10,
                max_slice_size: 64 << 10,
            },
            usage: MemoryUsage {
                number_allocs: 1,
                bytes_in_use: 64 << 10,
                bytes_padding: 0,
                bytes_reserved: reserved,
            },
            pages,
            pages_peak: 2,
            pages_unmapped: 0,
            largest_alloc: 64 << 10,
        };
        assert!(
            pool_line(&report(1, 128 << 10)).starts_with(
                "sliced (512.00 KiB pages, the first 128.00 KiB, slices up to 64.00 KiB): 1 pages"
            ),
            "{}",
            pool_line(&report(1, 128 << 10))
        );
        assert!(pool_line(&report(3, (128 << 10) + (1 << 20))).contains("the first 128.00 KiB"));
        assert!(
            pool_line(&report(2, 1 << 20))
                .starts_with("sliced (512.00 KiB pages, slices up to 64.00 KiB)")
        );
        assert!(
            pool_line(&report(0, 0))
                .starts_with("sliced (512.00 KiB pages, slices up to 64.00 KiB)")
        );
    }

    /// Binary units, two decimals, plain bytes below 1 KiB.
    #[test]
    fn formats_binary_units() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(64 << 20), "64.00 MiB");
        assert_eq!(format_bytes(3 << 30), "3.00 GiB");
    }
}
