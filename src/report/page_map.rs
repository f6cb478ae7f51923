//! A page as a row of columns, each coloured by what fills most of its bytes: the data
//! behind a page-map picture, with no drawing in it.
//!
//! A page of 1000 slices drawn 1000 pixels wide would be a thousand hairlines. Instead the
//! page is cut into `columns` equal byte ranges; each column takes the fill holding most of
//! its bytes (a label's series, counting its slices' padding, or free space) and the share of
//! its bytes that is padding, in quarters; neighbouring columns alike become one [`PageRun`].
//! A page never yields more runs than columns, whatever its slice count, and slices narrower
//! than a column merge into one run per label. [`PageStats`] keeps the exact numbers (free
//! ranges, largest free range) that the columns round away.

use super::snapshot::PageSnapshot;
use super::top_labels::TopLabels;
use core::ops::Range;

/// What fills most bytes of a run of columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunFill {
    /// Live slices of one series (index as in [`TopLabels::series`]), requested bytes and
    /// padding together.
    Series(usize),
    /// Bytes no live slice holds.
    Free,
}

/// Neighbouring columns alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRun {
    /// The columns, within `0 .. columns`; never empty.
    pub columns: Range<u32>,
    /// What holds most bytes of each of them.
    pub fill: RunFill,
    /// The share of each column's bytes that is padding, in quarters rounded to the nearest
    /// (0 to 4): a picture draws it as a dark band of that share of the bar's height, so a
    /// column of padding only is all dark.
    pub padding_quarters: u8,
    /// Whether a live slice starts in the run's first column right where another live
    /// slice ends, both at least [`BOUNDARY_COLUMNS`] columns wide: a picture draws a 1-px
    /// line there, so that two neighbouring slices of one label stay two. Runs never merge
    /// across such a column.
    pub boundary: bool,
}

/// How many columns a slice's footprint must span for its boundary with a neighbour to be
/// drawn: narrower slices would turn a bar into hairlines.
pub const BOUNDARY_COLUMNS: u64 = 2;

/// Exact numbers for one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Live slices.
    pub live_slices: u64,
    /// Requested bytes of live slices.
    pub bytes_in_use: u64,
    /// Padding bytes of live slices.
    pub bytes_padding: u64,
    /// Bytes no live slice holds: page size − in use − padding (overlaps counted once).
    pub bytes_free: u64,
    /// Maximal ranges of free bytes.
    pub free_ranges: u64,
    /// The longest of them, in bytes: the largest reservation that still fits (before alignment).
    pub largest_free: u64,
}

/// What fills one segment of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Requested bytes of a slice of this series.
    Data(usize),
    /// Padding of a slice of this series.
    Padding(usize),
    /// Free bytes.
    Free,
}

/// One byte range of a page and what fills it; ranges are sorted, disjoint, and cover the page.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    end: u64,
    part: Part,
}

/// The page as sorted, disjoint segments covering `0 .. page.size`. Live slices clipped to
/// the page; where live slices overlap (an unchecked snapshot), the earlier one wins.
fn segments(page: &PageSnapshot, labels: &TopLabels) -> Vec<Segment> {
    let mut live: Vec<_> = page.slices.iter().filter(|s| s.live).collect();
    live.sort_by_key(|slice| slice.offset);
    let mut out = Vec::with_capacity(live.len() * 3 + 1);
    let mut cursor = 0u64;
    let push = |out: &mut Vec<Segment>, start: u64, end: u64, part: Part| {
        if end > start {
            out.push(Segment { start, end, part });
        }
    };
    for slice in live {
        let start = slice.offset.min(page.size);
        let data_end = start.saturating_add(slice.size).min(page.size);
        let end = data_end.saturating_add(slice.padding).min(page.size);
        if start > cursor {
            push(&mut out, cursor, start, Part::Free);
        }
        let series = labels.series(slice.label.as_deref());
        push(
            &mut out,
            start.max(cursor),
            data_end.max(cursor),
            Part::Data(series),
        );
        push(
            &mut out,
            data_end.max(cursor),
            end.max(cursor),
            Part::Padding(series),
        );
        cursor = cursor.max(end);
    }
    push(&mut out, cursor, page.size, Part::Free);
    out
}

/// Padding out of total bytes, in quarters rounded to the nearest.
fn quarters(padding: u64, total: u64) -> u8 {
    if total == 0 {
        return 0;
    }
    let q = (u128::from(padding) * 8 / u128::from(total)).div_ceil(2);
    q.min(4) as u8
}

/// The page cut into `columns` equal byte ranges, runs of neighbouring columns alike, left
/// to right, covering `0 .. columns`.
///
/// A column takes the fill with the most bytes in it, a series counting its slices'
/// padding; ties go to the lower series, then to free. A page smaller than `columns` bytes
/// gives each byte several columns. An empty page is one free run; 0 columns give no run.
///
/// # Complexity
/// O(s log s + columns · t) for s slices and t top labels.
pub fn page_runs(page: &PageSnapshot, labels: &TopLabels, columns: u32) -> Vec<PageRun> {
    if columns == 0 {
        return Vec::new();
    }
    if page.size == 0 {
        return vec![PageRun {
            columns: 0..columns,
            fill: RunFill::Free,
            padding_quarters: 0,
            boundary: false,
        }];
    }
    let segments = segments(page, labels);
    let boundaries = boundary_columns(page, columns);
    let series = labels.series_count();
    // Bytes per fill in the current column: the series (data and padding), then free.
    let mut weights = vec![0u64; series + 1];
    let slot = |part: Part| match part {
        Part::Data(index) | Part::Padding(index) => index.min(series - 1),
        Part::Free => series,
    };
    let fill_of = |slot: usize| {
        if slot < series {
            RunFill::Series(slot)
        } else {
            RunFill::Free
        }
    };
    let bound = |column: u32| -> u64 {
        let byte = u128::from(page.size) * u128::from(column) / u128::from(columns);
        u64::try_from(byte).unwrap_or(page.size)
    };

    let mut runs: Vec<PageRun> = Vec::new();
    let mut first = 0usize;
    for column in 0..columns {
        let (lo, hi) = (bound(column), bound(column + 1));
        while first < segments.len() && segments[first].end <= lo {
            first += 1;
        }
        let (fill, padding_quarters) = if hi == lo {
            match segments.get(first).map(|s| s.part) {
                Some(Part::Data(index)) => (RunFill::Series(index), 0),
                Some(Part::Padding(index)) => (RunFill::Series(index), 4),
                _ => (RunFill::Free, 0),
            }
        } else {
            weights.fill(0);
            let mut padding = 0;
            for segment in segments[first..].iter().take_while(|s| s.start < hi) {
                let bytes = segment.end.min(hi) - segment.start.max(lo);
                weights[slot(segment.part)] += bytes;
                if let Part::Padding(_) = segment.part {
                    padding += bytes;
                }
            }
            let mut best = 0;
            for (slot, &bytes) in weights.iter().enumerate() {
                if bytes > weights[best] {
                    best = slot;
                }
            }
            (fill_of(best), quarters(padding, hi - lo))
        };
        let boundary = boundaries.binary_search(&column).is_ok();
        match runs.last_mut() {
            Some(run)
                if run.fill == fill && run.padding_quarters == padding_quarters && !boundary =>
            {
                run.columns.end = column + 1
            }
            _ => runs.push(PageRun {
                columns: column..column + 1,
                fill,
                padding_quarters,
                boundary,
            }),
        }
    }
    runs
}

/// The columns (sorted, distinct) where a live slice starts right at the end of another,
/// both footprints at least [`BOUNDARY_COLUMNS`] columns wide. Column 0 never is one.
fn boundary_columns(page: &PageSnapshot, columns: u32) -> Vec<u32> {
    let mut live: Vec<(u64, u64)> = page
        .slices
        .iter()
        .filter(|s| s.live)
        .filter_map(|s| s.end().map(|end| (s.offset, end)))
        .collect();
    live.sort_unstable();
    let wide = |(start, end): (u64, u64)| {
        u128::from(end.saturating_sub(start)) * u128::from(columns)
            >= u128::from(BOUNDARY_COLUMNS) * u128::from(page.size)
    };
    let mut out: Vec<u32> = live
        .windows(2)
        .filter(|pair| pair[0].1 == pair[1].0 && wide(pair[0]) && wide(pair[1]))
        .filter_map(|pair| {
            let column = u128::from(pair[1].0) * u128::from(columns) / u128::from(page.size);
            u32::try_from(column).ok().filter(|&c| c > 0 && c < columns)
        })
        .collect();
    out.dedup();
    out
}

/// The free ranges of a page (bytes no live slice covers), in offset order.
///
/// # Complexity
/// O(s log s) for s slices.
pub fn free_ranges(page: &PageSnapshot) -> Vec<Range<u64>> {
    let labels = TopLabels::rank([], 0);
    segments(page, &labels)
        .into_iter()
        .filter(|segment| segment.part == Part::Free)
        .map(|segment| segment.start..segment.end)
        .collect()
}

/// Exact free-space numbers for one pool: its pages' [`PageStats`] together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Pages.
    pub pages: u64,
    /// Bytes of all pages.
    pub bytes_reserved: u64,
    /// Bytes no live slice holds, over all pages.
    pub bytes_free: u64,
    /// Maximal free ranges, over all pages.
    pub free_ranges: u64,
    /// The longest free range of any page, in bytes: the largest reservation the pool can
    /// still place without a new page.
    pub largest_free: u64,
    /// Pages that hold no live slice (what a cleanup can give back).
    pub empty_pages: u64,
    /// Free bytes of the pages that hold at least one live slice.
    pub bytes_free_in_used_pages: u64,
    /// The longest free range of a page that holds at least one live slice, in bytes.
    pub largest_free_in_used_pages: u64,
}

impl PoolStats {
    /// The numbers of `pool`.
    ///
    /// # Complexity
    /// O(s log s) for the s slices of the pool.
    pub fn of(pool: &super::snapshot::PoolSnapshot) -> PoolStats {
        pool.pages.iter().fold(PoolStats::default(), |sum, page| {
            let stats = PageStats::of(page);
            let used = stats.live_slices > 0;
            PoolStats {
                pages: sum.pages + 1,
                bytes_reserved: sum.bytes_reserved.saturating_add(page.size),
                bytes_free: sum.bytes_free.saturating_add(stats.bytes_free),
                free_ranges: sum.free_ranges + stats.free_ranges,
                largest_free: sum.largest_free.max(stats.largest_free),
                empty_pages: sum.empty_pages + u64::from(!used),
                bytes_free_in_used_pages: sum.bytes_free_in_used_pages
                    + if used { stats.bytes_free } else { 0 },
                largest_free_in_used_pages: if used {
                    sum.largest_free_in_used_pages.max(stats.largest_free)
                } else {
                    sum.largest_free_in_used_pages
                },
            }
        })
    }

    /// How fragmented the free bytes between live slices are, from 0 (all in one range, or
    /// none free) towards 1 (scattered in many small ranges): 1 − the largest free range /
    /// the free bytes, over the pages that hold a live slice. Empty pages are not
    /// fragmentation (a cleanup gives them back whole), so they do not count.
    pub fn fragmentation(&self) -> f64 {
        if self.bytes_free_in_used_pages == 0 {
            return 0.0;
        }
        1.0 - self.largest_free_in_used_pages as f64 / self.bytes_free_in_used_pages as f64
    }
}

impl PageStats {
    /// The exact numbers of `page`.
    ///
    /// # Complexity
    /// O(s log s) for s slices.
    pub fn of(page: &PageSnapshot) -> PageStats {
        let mut stats = PageStats::default();
        for slice in page.slices.iter().filter(|s| s.live) {
            stats.live_slices += 1;
            stats.bytes_in_use = stats.bytes_in_use.saturating_add(slice.size);
            stats.bytes_padding = stats.bytes_padding.saturating_add(slice.padding);
        }
        // Series indices do not matter here: one label for all.
        let labels = TopLabels::rank([], 0);
        for segment in segments(page, &labels) {
            if segment.part == Part::Free {
                let bytes = segment.end - segment.start;
                stats.bytes_free += bytes;
                stats.free_ranges += 1;
                stats.largest_free = stats.largest_free.max(bytes);
            }
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::snapshot::SliceSnapshot;

    fn slice(offset: u64, size: u64, padding: u64, label: &str) -> SliceSnapshot {
        SliceSnapshot::live(offset, size, padding).labelled(label)
    }

    fn labels() -> TopLabels {
        TopLabels::rank([("a".to_string(), 2), ("b".to_string(), 1)], 2)
    }

    #[test]
    fn slices_are_drawn_to_scale_with_padding_and_free_space() {
        let page = PageSnapshot {
            id: 0,
            size: 100,
            slices: vec![slice(0, 30, 10, "a"), slice(60, 20, 0, "b")],
        };
        let runs = page_runs(&page, &labels(), 10);
        let expected = [
            (0..3, RunFill::Series(0), 0),
            (3..4, RunFill::Series(0), 4),
            (4..6, RunFill::Free, 0),
            (6..8, RunFill::Series(1), 0),
            (8..10, RunFill::Free, 0),
        ];
        let got: Vec<(Range<u32>, RunFill, u8)> = runs
            .into_iter()
            .map(|r| (r.columns, r.fill, r.padding_quarters))
            .collect();
        assert_eq!(got, expected);
        let stats = PageStats::of(&page);
        assert_eq!(stats.bytes_free, 40);
        assert_eq!(stats.free_ranges, 2);
        assert_eq!(stats.largest_free, 20);
        assert_eq!(stats.live_slices, 2);
    }

    #[test]
    fn a_thousand_slices_merge_into_one_run_per_label() {
        // 500 slices of "a" then 500 of "b", each 1000 bytes + 24 padding: far narrower than a
        // column of a 100-column bar.
        let slices: Vec<SliceSnapshot> = (0..1000u64)
            .map(|i| slice(i * 1024, 1000, 24, if i < 500 { "a" } else { "b" }))
            .collect();
        let page = PageSnapshot {
            id: 0,
            size: 1024 * 1000,
            slices,
        };
        let runs = page_runs(&page, &labels(), 100);
        let got: Vec<(Range<u32>, RunFill, u8)> = runs
            .into_iter()
            .map(|r| (r.columns, r.fill, r.padding_quarters))
            .collect();
        assert_eq!(
            got,
            [
                (0..50, RunFill::Series(0), 0),
                (50..100, RunFill::Series(1), 0)
            ]
        );
        // Small slices mostly padding (24 bytes + 232 padding): the band covers the bar.
        let tiny = PageSnapshot {
            id: 1,
            size: 256 * 1000,
            slices: (0..1000u64).map(|i| slice(i * 256, 24, 232, "a")).collect(),
        };
        let runs = page_runs(&tiny, &labels(), 10);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].padding_quarters, 4);
        assert_eq!(runs[0].fill, RunFill::Series(0));
    }

    #[test]
    fn padding_share_is_rounded_to_quarters() {
        assert_eq!(quarters(0, 100), 0);
        assert_eq!(quarters(12, 100), 0);
        assert_eq!(quarters(13, 100), 1);
        assert_eq!(quarters(50, 100), 2);
        assert_eq!(quarters(100, 100), 4);
        assert_eq!(quarters(5, 0), 0);
    }

    #[test]
    fn runs_never_outnumber_columns_and_cover_the_bar() {
        let slices: Vec<SliceSnapshot> = (0..1000u64)
            .map(|i| slice(i * 10, 5, 1, if i % 2 == 0 { "a" } else { "b" }))
            .collect();
        let page = PageSnapshot {
            id: 0,
            size: 10_000,
            slices,
        };
        for columns in [1, 7, 64, 999, 1000, 5000] {
            let runs = page_runs(&page, &labels(), columns);
            assert!(runs.len() <= columns as usize);
            assert_eq!(runs.first().unwrap().columns.start, 0);
            assert_eq!(runs.last().unwrap().columns.end, columns);
            assert!(
                runs.windows(2)
                    .all(|w| w[0].columns.end == w[1].columns.start)
            );
        }
    }

    #[test]
    fn overlapping_or_outside_slices_do_not_panic() {
        let page = PageSnapshot {
            id: 0,
            size: 50,
            slices: vec![
                slice(0, 40, 0, "a"),
                slice(10, 100, 5, "b"),
                slice(u64::MAX, 9, 9, "a"),
            ],
        };
        let runs = page_runs(&page, &labels(), 5);
        assert_eq!(runs.last().unwrap().columns.end, 5);
        assert_eq!(PageStats::of(&page).bytes_free, 0);
        let empty = PageSnapshot {
            id: 1,
            size: 0,
            slices: vec![],
        };
        assert_eq!(page_runs(&empty, &labels(), 3).len(), 1);
    }
}
