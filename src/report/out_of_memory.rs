//! What held a memory when a reservation ran out of room: its largest live allocations
//! and, pool by pool, the free room and how broken up it is. Computed from a
//! [`MemorySnapshot`] taken at that moment, so it is exactly what the snapshot shows.

use super::DeviceMemory;
use super::page_map::PageStats;
use super::snapshot::MemorySnapshot;
use crate::memory_management::{format_bytes, fragmentation};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How many of the largest live allocations an out-of-memory error names.
pub const OOM_LARGEST: usize = 5;

/// One live allocation named by an out-of-memory error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveAllocation {
    /// Bytes requested.
    pub size: u64,
    /// The label in force when it was reserved (known while history is on).
    pub label: Option<String>,
    /// µs since it was reserved (known while history is on).
    pub age_us: Option<u64>,
    /// The allocation id.
    pub id: Option<u64>,
    /// The pool holding it, by name.
    pub pool: String,
}

/// The free room of one pool that holds pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRoom {
    /// The pool, by name.
    pub pool: String,
    /// Its place in the memory's pool list.
    pub index: usize,
    /// Pages it holds.
    pub pages: u64,
    /// Bytes of its pages no live slice holds.
    pub bytes_free: u64,
    /// Maximal free ranges over its pages.
    pub free_ranges: u64,
    /// The largest free range, in bytes: the largest reservation it could still place
    /// without a new page (before alignment).
    pub largest_free_slice: u64,
    /// The share of free bytes outside the largest free range, 0 to 1
    /// ([`fragmentation`](crate::memory_management::fragmentation)).
    pub fragmentation: f64,
}

/// The bytes of the pages one memory holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryHeld {
    /// The memory, by name (`"main"`, `"staging"`, `"upload"`).
    pub memory: String,
    /// Bytes of its pages.
    pub bytes: u64,
}

/// Why the budget refused a reservation: the budget, what each memory holds against it,
/// the main memory's largest free slice, and the upload staging the operation needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetDetail {
    /// The budget over every memory, in bytes (`[memory] budget`, `Client::set_budget`).
    pub budget: u64,
    /// The memory whose reservation was refused.
    pub memory: String,
    /// Bytes the reservation asked for.
    pub requested: u64,
    /// Bytes of the page the budget refused: a reservation that fits in no free slice
    /// needs a whole new page, sized by its pool (often larger than `requested`). 0 when
    /// unknown (an export written before this field existed).
    #[serde(default)]
    pub page: u64,
    /// What each memory holds, in bytes; with `retiring`, what is held against the
    /// budget.
    pub held: Vec<MemoryHeld>,
    /// Bytes of pages given back that the device may still have been using (charged
    /// until it is done with them; the client waited for them before it refused).
    #[serde(default)]
    pub retiring: u64,
    /// The largest free slice of the main memory's pages, in bytes: the biggest
    /// reservation that fits there without a new page (the same figure as the largest
    /// of the pool lines of the error; the staging memories' free pages were given back
    /// before the refusal).
    pub largest_free_slice: u64,
    /// Bytes of upload staging the operation needed beside its main-memory bytes, from
    /// the same budget: a `create` or `write` of N bytes copies them through N bytes of
    /// upload staging. 0 for operations that upload nothing, and on the web (writes
    /// take no upload staging there).
    #[serde(default)]
    pub upload_staging: u64,
    /// Bytes of `retiring` the client could not wait for: on the web, where nothing may
    /// block, pages given back whose work the browser had not yet reported done. They
    /// are credited once it does: await `Client::sync_async` (or otherwise yield to the
    /// browser) and retry. 0 on native adapters, where the client waited for the device
    /// before it refused.
    #[serde(default)]
    pub awaiting_device: u64,
}

impl BudgetDetail {
    /// Bytes held against the budget: every memory's pages, and pages still retiring.
    pub fn held_total(&self) -> u64 {
        self.held.iter().map(|held| held.bytes).sum::<u64>() + self.retiring
    }

    /// Whether the refusal came only from pages the device had not reported done
    /// ([`awaiting_device`](Self::awaiting_device)): without them, the page needed (or
    /// the bytes asked for, where the page is unknown) fits under the budget, so
    /// awaiting the device and retrying succeeds unless something else takes the room
    /// meanwhile.
    pub fn only_awaiting_device(&self) -> bool {
        self.awaiting_device > 0
            && (self.held_total().saturating_sub(self.awaiting_device))
                .saturating_add(self.page.max(self.requested))
                <= self.budget
    }
}

impl fmt::Display for BudgetDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.held_total();
        write!(
            f,
            "over the memory budget: reserving {} ({} bytes) in {} needs a new page",
            format_bytes(self.requested),
            self.requested,
            self.memory,
        )?;
        if self.page > 0 {
            write!(f, " of {} ({} bytes)", format_bytes(self.page), self.page)?;
        }
        write!(
            f,
            ", and the budget of {} ({} bytes) would be crossed; held: ",
            format_bytes(self.budget),
            self.budget
        )?;
        for (at, memory) in self.held.iter().enumerate() {
            let comma = if at == 0 { "" } else { ", " };
            write!(f, "{comma}{} {}", memory.memory, format_bytes(memory.bytes))?;
        }
        if self.retiring > 0 {
            write!(
                f,
                ", given back and still in use by the device {}",
                format_bytes(self.retiring)
            )?;
        }
        write!(
            f,
            " ({} together, {} left); largest free slice {} in main",
            format_bytes(held),
            format_bytes(self.budget.saturating_sub(held)),
            format_bytes(self.largest_free_slice)
        )?;
        if self.upload_staging > 0 {
            write!(
                f,
                "; the upload also needs {} of upload staging under the same budget (a create or write of N bytes copies them through N bytes of staging)",
                format_bytes(self.upload_staging)
            )?;
        }
        if self.awaiting_device > 0 {
            write!(
                f,
                "; {} of what is held is pages given back that the browser has not yet reported the GPU done with (the client cannot wait for that on the web)",
                format_bytes(self.awaiting_device)
            )?;
            if self.only_awaiting_device() {
                return write!(
                    f,
                    ", and without them the reservation fits: await `client.sync_async()` (or otherwise yield to the browser) and retry"
                );
            }
            write!(f, ": await `client.sync_async()` to get them back")?;
        }
        write!(f, "; free memory (drop handles) or raise the budget")
    }
}

/// What held one memory at an out-of-memory: the [`OOM_LARGEST`] largest live
/// allocations, largest first, and the free room of each pool that holds pages.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OutOfMemoryDetail {
    /// The largest live allocations, largest first (at most [`OOM_LARGEST`]).
    pub largest: Vec<LiveAllocation>,
    /// Each pool that holds pages, in the memory's order.
    pub pools: Vec<PoolRoom>,
    /// When the budget refused the reservation: the budget and what each memory holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetDetail>,
    /// What wgpu's allocator held on the device at that moment, beside our pages, where
    /// the backend reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceMemory>,
}

impl OutOfMemoryDetail {
    /// The detail of memory `memory` (e.g. `"main"`) in `snapshot`; empty when the
    /// snapshot has no memory of that name.
    ///
    /// # Complexity
    /// O(s log s) for s slices.
    pub fn from_snapshot(snapshot: &MemorySnapshot, memory: &str) -> Self {
        let Some(memory) = snapshot.memory(memory) else {
            return OutOfMemoryDetail::default();
        };
        let mut largest: Vec<LiveAllocation> = memory
            .pools
            .iter()
            .flat_map(|pool| {
                pool.pages
                    .iter()
                    .flat_map(|page| &page.slices)
                    .filter(|slice| slice.live)
                    .map(|slice| LiveAllocation {
                        size: slice.size,
                        label: slice.label.clone(),
                        age_us: slice.age_us,
                        id: slice.id,
                        pool: pool.pool.clone(),
                    })
            })
            .collect();
        // Largest first; ties by id, so the text is stable.
        largest.sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
        largest.truncate(OOM_LARGEST);
        let pools = memory
            .pools
            .iter()
            .filter(|pool| !pool.pages.is_empty())
            .map(|pool| {
                let mut room = PoolRoom {
                    pool: pool.pool.clone(),
                    index: pool.index,
                    pages: pool.pages.len() as u64,
                    bytes_free: 0,
                    free_ranges: 0,
                    largest_free_slice: 0,
                    fragmentation: 0.0,
                };
                for stats in pool.pages.iter().map(PageStats::of) {
                    room.bytes_free += stats.bytes_free;
                    room.free_ranges += stats.free_ranges;
                    room.largest_free_slice = room.largest_free_slice.max(stats.largest_free);
                }
                room.fragmentation = fragmentation(room.bytes_free, 0, room.largest_free_slice);
                room
            })
            .collect();
        OutOfMemoryDetail {
            largest,
            pools,
            budget: None,
            device: None,
        }
    }
}

impl fmt::Display for OutOfMemoryDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(budget) = &self.budget {
            writeln!(f, "{budget}")?;
        }
        if let Some(device) = &self.device {
            writeln!(f, "{device}")?;
        }
        if self.largest.is_empty() {
            write!(f, "no live allocation")?;
        } else {
            write!(f, "largest live allocations:")?;
        }
        for (rank, live) in self.largest.iter().enumerate() {
            write!(f, "\n  {}. {}", rank + 1, format_bytes(live.size))?;
            match &live.label {
                Some(label) => write!(f, " \"{label}\"")?,
                None => write!(f, " (no label)")?,
            }
            if let Some(age) = live.age_us {
                write!(f, ", {} old", format_age(age))?;
            }
            if let Some(id) = live.id {
                write!(f, ", id {id}")?;
            }
            write!(f, ", in {}", live.pool)?;
        }
        if self.largest.iter().any(|live| live.age_us.is_none()) {
            write!(
                f,
                "\n  (labels and ages are known for allocations made while history is on: Client::record_history)"
            )?;
        }
        write!(f, "\nfree room by pool:")?;
        if self.pools.is_empty() {
            write!(f, " no pool holds a page")?;
        }
        for room in &self.pools {
            write!(
                f,
                "\n  pool {} ({}): {} pages, {} free in {} ranges, largest free slice {}, fragmentation {:.1} %",
                room.index,
                room.pool,
                room.pages,
                format_bytes(room.bytes_free),
                room.free_ranges,
                format_bytes(room.largest_free_slice),
                room.fragmentation * 100.0
            )?;
        }
        Ok(())
    }
}

/// An age for people: µs, ms or s.
fn format_age(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.1} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{MemorySnapshotMemory, PageSnapshot, PoolSnapshot, SliceSnapshot};

    fn slice(offset: u64, size: u64, id: u64) -> SliceSnapshot {
        SliceSnapshot {
            id: Some(id),
            age_us: Some(id * 1500),
            ..SliceSnapshot::live(offset, size, 0).labelled(&format!("tensor {id}"))
        }
    }

    fn snapshot() -> MemorySnapshot {
        // Pool 0: one page of 100 bytes, slices at 0..10, 30..40, 70..100: free 10..30
        // and 40..70 (50 bytes, largest 30). Pool 1: one page of 1000 bytes, one slice of
        // 600 at 0: free 400 in one range. Pool 2: no page.
        let pools = vec![
            PoolSnapshot {
                pool: "sliced 100 B".into(),
                index: 0,
                pages: vec![PageSnapshot {
                    id: 1,
                    size: 100,
                    slices: vec![slice(0, 10, 1), slice(30, 10, 2), slice(70, 30, 3)],
                }],
            },
            PoolSnapshot {
                pool: "exclusive".into(),
                index: 1,
                pages: vec![PageSnapshot {
                    id: 2,
                    size: 1000,
                    slices: vec![slice(0, 600, 4)],
                }],
            },
            PoolSnapshot {
                pool: "dedicated".into(),
                index: 2,
                pages: vec![],
            },
        ];
        MemorySnapshot {
            taken_us: 0,
            memories: vec![MemorySnapshotMemory {
                name: "main".into(),
                pools,
            }],
            history: Vec::new(),
            history_dropped: 0,
            started_unix_us: None,
            budget: None,
            report: crate::memory_management::MemoryReport { streams: vec![] },
        }
    }

    fn budget_detail(retiring: u64, awaiting_device: u64) -> BudgetDetail {
        BudgetDetail {
            budget: 8 << 20,
            memory: "main".into(),
            requested: 2 << 20,
            page: 2 << 20,
            held: vec![MemoryHeld {
                memory: "main".into(),
                bytes: 4 << 20,
            }],
            retiring,
            largest_free_slice: 0,
            upload_staging: 0,
            awaiting_device,
        }
    }

    /// On the web a refusal that only pages awaiting the browser caused says how many
    /// bytes await it and to await `sync_async` and retry; one that would not fit even
    /// without them says to get them back, and to free memory.
    #[test]
    fn a_refusal_names_the_bytes_that_await_the_browser() {
        let only = budget_detail(3 << 20, 3 << 20);
        assert!(only.only_awaiting_device());
        let text = only.to_string();
        assert!(
            text.contains(
                "3.00 MiB of what is held is pages given back that the browser has not yet reported"
            ) && text.contains("the reservation fits: await `client.sync_async()`")
                && !text.contains("raise the budget"),
            "{text}"
        );
        let also = BudgetDetail {
            page: 6 << 20,
            ..budget_detail(3 << 20, 3 << 20)
        };
        assert!(!also.only_awaiting_device(), "4 + 6 MiB > 8 MiB");
        let text = also.to_string();
        assert!(
            text.contains("await `client.sync_async()` to get them back")
                && text.contains("raise the budget"),
            "{text}"
        );
        let native = budget_detail(3 << 20, 0);
        assert!(!native.only_awaiting_device());
        assert!(!native.to_string().contains("sync_async"));
    }

    #[test]
    fn the_largest_allocations_come_first_with_label_and_age() {
        let detail = OutOfMemoryDetail::from_snapshot(&snapshot(), "main");
        let sizes: Vec<u64> = detail.largest.iter().map(|l| l.size).collect();
        assert_eq!(sizes, vec![600, 30, 10, 10]);
        assert_eq!(detail.largest[0].label.as_deref(), Some("tensor 4"));
        assert_eq!(detail.largest[0].age_us, Some(6000));
        assert_eq!(detail.largest[0].pool, "exclusive");
        let text = detail.to_string();
        assert!(
            text.contains("1. 600 B \"tensor 4\", 6.0 ms old, id 4, in exclusive"),
            "{text}"
        );
    }

    #[test]
    fn each_pool_with_pages_states_its_largest_free_slice_and_fragmentation() {
        let detail = OutOfMemoryDetail::from_snapshot(&snapshot(), "main");
        assert_eq!(detail.pools.len(), 2, "the pool without pages is left out");
        let sliced = &detail.pools[0];
        assert_eq!(
            (
                sliced.bytes_free,
                sliced.free_ranges,
                sliced.largest_free_slice
            ),
            (50, 2, 30)
        );
        assert!((sliced.fragmentation - 0.4).abs() < 1e-9);
        assert_eq!(detail.pools[1].fragmentation, 0.0);
        let text = detail.to_string();
        assert!(
            text.contains("pool 0 (sliced 100 B): 1 pages, 50 B free in 2 ranges, largest free slice 30 B, fragmentation 40.0 %"),
            "{text}"
        );
    }

    #[test]
    fn at_most_five_allocations_are_named() {
        let mut snapshot = snapshot();
        let page = &mut snapshot.memories[0].pools[1].pages[0];
        page.slices = (0..9).map(|i| slice(i * 100, 100 - i, i)).collect();
        let detail = OutOfMemoryDetail::from_snapshot(&snapshot, "main");
        assert_eq!(detail.largest.len(), OOM_LARGEST);
        assert_eq!(detail.largest[0].size, 100);
    }
}
