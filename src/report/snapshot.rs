//! A memory snapshot: every page of every memory, each slice in it, the history ring and
//! the report, as one serde value written as JSON.
//!
//! The shape, outermost first:
//!
//! ```text
//! MemorySnapshot { taken_us, memories: [ { name: "main" | "staging" | "upload",
//!                                          pools: [ { pool, index,
//!                                                     pages: [ { id, size,
//!                                                                slices: [ { offset, size, padding,
//!                                                                            live, id, label, age_us } ] } ] } ] } ],
//!                  history: [HistoryEvent], history_dropped, started_unix_us, budget,
//!                  report: MemoryReport }
//! ```
//!
//! Sizes and offsets are bytes (`u64`); times are µs since the client started. A slice's
//! footprint in its page is `offset .. offset + size + padding`; bytes of a page that no
//! slice covers are free.
//!
//! Filling one, so that [`check`](MemorySnapshot::check),
//! [`check_report`](MemorySnapshot::check_report) and the pictures agree:
//!
//! 1. Take the report and walk the pools under the same lock, so both see one state.
//! 2. Per page: its id (the one history events use), its size; per live slice: offset,
//!    requested size, padding (aligned size − requested), id, label, age. Free ranges may
//!    be listed (`live: false`) or left out.
//! 3. `size` and `padding` sum to the report's `bytes_in_use` and `bytes_padding`, and page
//!    sizes to `bytes_reserved`, memory by memory ("main" against the report's pools, every
//!    other name against the auxiliary memory of that name).
//! 4. History: a `Reserve` and a `Free` carry the requested bytes and the same label; a
//!    `PageMade` and a `PageReleased` carry the page size. The events of every memory listed
//!    go in one ring, oldest first.

use super::history::HistoryEvent;
use super::snapshot_error::SnapshotCheckError;
use crate::memory_management::{MemoryReport, MemoryUsage};
use serde::{Deserialize, Serialize};

/// The name of the memory holding the user's allocations; a report's auxiliary memories
/// ("staging", "upload") keep their own names.
pub const MAIN_MEMORY: &str = "main";

/// Every page of every memory, the history ring and the report, at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    /// When it was taken, in µs since the client started.
    pub taken_us: u64,
    /// One entry per memory: [`MAIN_MEMORY`] first, then the auxiliary memories.
    pub memories: Vec<MemorySnapshotMemory>,
    /// The history ring's events, oldest first; empty when history is not recorded.
    pub history: Vec<HistoryEvent>,
    /// How many older events the ring had dropped when the snapshot was taken.
    #[serde(default)]
    pub history_dropped: u64,
    /// When the client was made, in µs since 1970-01-01 UTC (Unix time): the moment
    /// every other time of the snapshot counts from. `None` where unknown (a snapshot
    /// written before this field existed); the PyTorch export then keeps times relative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_us: Option<u64>,
    /// The budget over every memory when it was taken, in bytes (`Client::set_budget`,
    /// `[memory] budget`); `None` without one, or where unknown (a snapshot written
    /// before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// The memory report taken with the snapshot.
    pub report: MemoryReport,
}

/// One memory (the main pools, or an auxiliary memory such as staging) and its pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySnapshotMemory {
    /// [`MAIN_MEMORY`], or the auxiliary memory's name as in the report ("staging", "upload").
    pub name: String,
    /// Its pools, in routing order, then the persistent and dedicated pools.
    pub pools: Vec<PoolSnapshot>,
}

/// One pool and its pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSnapshot {
    /// The pool's kind and shape, for people: "sliced 4.00 MiB", "exclusive", "persistent".
    pub pool: String,
    /// Its index in its memory's layout (persistent and dedicated come after the dynamic pools).
    pub index: usize,
    /// The pages it holds.
    pub pages: Vec<PageSnapshot>,
}

/// One page (one device allocation) and the slices carved from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageSnapshot {
    /// The page's id, unique within its memory; history events name pages by it.
    pub id: u64,
    /// The page's size in bytes.
    pub size: u64,
    /// Its slices, live and free, in any order. Bytes no slice covers are free too.
    pub slices: Vec<SliceSnapshot>,
}

/// A range of a page: a live allocation or a free range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceSnapshot {
    /// Where it starts in its page, in bytes.
    pub offset: u64,
    /// Requested bytes for a live slice; the range's length for a free one.
    pub size: u64,
    /// Bytes after `size` held by alignment (0 for a free range).
    pub padding: u64,
    /// Whether an allocation holds it.
    pub live: bool,
    /// The allocation id, as history events name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The label in force when it was reserved ("outer/inner").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// µs since it was reserved, at [`MemorySnapshot::taken_us`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_us: Option<u64>,
}

/// Sums over live slices and pages, comparable with a [`MemoryUsage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotTotals {
    /// Live slices (a report's `number_allocs`).
    pub slices: u64,
    /// Requested bytes of live slices (`bytes_in_use`).
    pub bytes_in_use: u64,
    /// Padding bytes of live slices (`bytes_padding`).
    pub bytes_padding: u64,
    /// Bytes of all pages (`bytes_reserved`).
    pub bytes_reserved: u64,
    /// Pages counted.
    pub pages: u64,
}

impl SnapshotTotals {
    /// The sum of two totals (saturating: never overflows).
    pub fn combine(self, other: SnapshotTotals) -> SnapshotTotals {
        SnapshotTotals {
            slices: self.slices.saturating_add(other.slices),
            bytes_in_use: self.bytes_in_use.saturating_add(other.bytes_in_use),
            bytes_padding: self.bytes_padding.saturating_add(other.bytes_padding),
            bytes_reserved: self.bytes_reserved.saturating_add(other.bytes_reserved),
            pages: self.pages.saturating_add(other.pages),
        }
    }
}

impl SliceSnapshot {
    /// A live slice at `offset` of `size` requested bytes and `padding` bytes of
    /// alignment after them, with no id, label or age yet.
    pub fn live(offset: u64, size: u64, padding: u64) -> Self {
        SliceSnapshot {
            offset,
            size,
            padding,
            live: true,
            id: None,
            label: None,
            age_us: None,
        }
    }

    /// A free range of `size` bytes at `offset`.
    pub fn free(offset: u64, size: u64) -> Self {
        SliceSnapshot {
            live: false,
            ..SliceSnapshot::live(offset, size, 0)
        }
    }

    /// This slice with `label`.
    pub fn labelled(self, label: &str) -> Self {
        SliceSnapshot {
            label: Some(label.to_string()),
            ..self
        }
    }

    /// The end of its footprint, `offset + size + padding`, or `None` if that overflows `u64`.
    pub fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)
            .and_then(|end| end.checked_add(self.padding))
    }
}

impl PageSnapshot {
    /// Sums over this page's live slices; `bytes_reserved` is the page size.
    pub fn totals(&self) -> SnapshotTotals {
        self.slices.iter().filter(|slice| slice.live).fold(
            SnapshotTotals {
                bytes_reserved: self.size,
                pages: 1,
                ..SnapshotTotals::default()
            },
            |totals, slice| SnapshotTotals {
                slices: totals.slices + 1,
                bytes_in_use: totals.bytes_in_use.saturating_add(slice.size),
                bytes_padding: totals.bytes_padding.saturating_add(slice.padding),
                ..totals
            },
        )
    }
}

impl PoolSnapshot {
    /// Sums over this pool's pages.
    pub fn totals(&self) -> SnapshotTotals {
        self.pages
            .iter()
            .fold(SnapshotTotals::default(), |sum, page| {
                sum.combine(page.totals())
            })
    }
}

impl MemorySnapshotMemory {
    /// Sums over this memory's pools.
    pub fn totals(&self) -> SnapshotTotals {
        self.pools
            .iter()
            .fold(SnapshotTotals::default(), |sum, pool| {
                sum.combine(pool.totals())
            })
    }
}

impl MemorySnapshot {
    /// The snapshot as JSON (compact).
    ///
    /// # Errors
    /// A `serde_json::Error` only if serialization fails, which these types never cause.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// Reads a snapshot from JSON.
    ///
    /// # Errors
    /// A `serde_json::Error` (with line and column) when `json` is not a snapshot.
    /// The result is not [`check`](Self::check)ed.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The memory named `name`, if the snapshot has it.
    pub fn memory(&self, name: &str) -> Option<&MemorySnapshotMemory> {
        self.memories.iter().find(|memory| memory.name == name)
    }

    /// The slice of allocation `id` ([`Handle::id`](crate::Handle::id)) in any memory, if
    /// the snapshot lists it.
    ///
    /// # Complexity
    /// O(slices): a walk over every page.
    pub fn slice(&self, id: u64) -> Option<&SliceSnapshot> {
        self.memories
            .iter()
            .flat_map(|memory| &memory.pools)
            .flat_map(|pool| &pool.pages)
            .flat_map(|page| &page.slices)
            .find(|slice| slice.id == Some(id))
    }

    /// Sums over every memory.
    pub fn totals(&self) -> SnapshotTotals {
        self.memories
            .iter()
            .fold(SnapshotTotals::default(), |sum, memory| {
                sum.combine(memory.totals())
            })
    }

    /// Checks that every slice lies inside its page and no two live slices of a page overlap.
    ///
    /// # Errors
    /// - [`SnapshotCheckError::SliceOutsidePage`]: a slice's footprint
    ///   (`offset + size + padding`) ends past its page's size, or overflows `u64`.
    /// - [`SnapshotCheckError::Overlap`]: two live slices of one page share a byte.
    ///
    /// The first problem found is returned, in memory, pool, page order.
    ///
    /// # Complexity
    /// O(s log s) for the s slices of the largest page.
    pub fn check(&self) -> Result<(), SnapshotCheckError> {
        for memory in &self.memories {
            for pool in &memory.pools {
                for page in &pool.pages {
                    check_page(&memory.name, &pool.pool, page)?;
                }
            }
        }
        Ok(())
    }

    /// Checks that each memory's totals equal the report's usage for it: [`MAIN_MEMORY`]
    /// against the report's pools, every other memory against the auxiliary memory of the
    /// same name (summed over streams). A memory the snapshot lacks counts as empty.
    ///
    /// # Errors
    /// [`SnapshotCheckError::ReportMismatch`] naming the memory and the first field
    /// (`number_allocs`, `bytes_in_use`, `bytes_padding`, `bytes_reserved`) that differs.
    pub fn check_report(&self) -> Result<(), SnapshotCheckError> {
        let mut names: Vec<&str> = vec![MAIN_MEMORY];
        for stream in &self.report.streams {
            for aux in &stream.auxiliary {
                if !names.contains(&aux.name.as_str()) {
                    names.push(&aux.name);
                }
            }
        }
        for memory in &self.memories {
            if !names.contains(&memory.name.as_str()) {
                names.push(&memory.name);
            }
        }
        for name in names {
            let usage = self.report_usage(name);
            let totals = self.memory(name).map(|m| m.totals()).unwrap_or_default();
            let fields = [
                ("number_allocs", totals.slices, usage.number_allocs),
                ("bytes_in_use", totals.bytes_in_use, usage.bytes_in_use),
                ("bytes_padding", totals.bytes_padding, usage.bytes_padding),
                (
                    "bytes_reserved",
                    totals.bytes_reserved,
                    usage.bytes_reserved,
                ),
            ];
            for (field, snapshot, report) in fields {
                if snapshot != report {
                    return Err(SnapshotCheckError::ReportMismatch {
                        memory: name.to_string(),
                        field,
                        snapshot,
                        report,
                    });
                }
            }
        }
        Ok(())
    }

    /// The report's usage for the memory named `name`, summed over streams.
    fn report_usage(&self, name: &str) -> MemoryUsage {
        memory_usage(&self.report, name)
    }
}

/// `report`'s usage for the memory named `name` ([`MAIN_MEMORY`]: the report's pools;
/// any other name: the auxiliary memory of that name), summed over streams.
pub(crate) fn memory_usage(report: &MemoryReport, name: &str) -> MemoryUsage {
    report
        .streams
        .iter()
        .fold(MemoryUsage::default(), |usage, stream| {
            if name == MAIN_MEMORY {
                usage.combine(stream.pools.usage())
            } else {
                stream
                    .auxiliary
                    .iter()
                    .filter(|aux| aux.name == name)
                    .fold(usage, |usage, aux| usage.combine(aux.pools.usage()))
            }
        })
}

fn check_page(memory: &str, pool: &str, page: &PageSnapshot) -> Result<(), SnapshotCheckError> {
    let mut live: Vec<(u64, u64)> = Vec::with_capacity(page.slices.len());
    for slice in &page.slices {
        let end = slice.end().filter(|&end| end <= page.size);
        let Some(end) = end else {
            return Err(SnapshotCheckError::SliceOutsidePage {
                memory: memory.to_string(),
                pool: pool.to_string(),
                page: page.id,
                offset: slice.offset,
                end: slice.end(),
                page_size: page.size,
            });
        };
        if slice.live && end > slice.offset {
            live.push((slice.offset, end));
        }
    }
    live.sort_unstable();
    for pair in live.windows(2) {
        let (first, second) = (pair[0], pair[1]);
        if second.0 < first.1 {
            return Err(SnapshotCheckError::Overlap {
                memory: memory.to_string(),
                pool: pool.to_string(),
                page: page.id,
                first: first.0..first.1,
                second: second.0..second.1,
            });
        }
    }
    Ok(())
}
