//! Page maps: each page a pool holds and the live slices carved from it.
//!
//! Read-only walks over the pools' own bookkeeping, for snapshots; nothing here changes
//! a pool. A slice counts as live exactly when the pool's report counts it (some handle
//! or binding still holds it), so a page map's sums equal the report taken with it.

use super::DynamicPool;
use super::slices::SliceTable;
use super::whole_page::WholePagePool;
use crate::memory_management::page_map::{LiveSlice, PageSlices};
use crate::storage::{StorageHandle, StorageId};
use std::collections::HashMap;

impl DynamicPool {
    /// Each page the pool holds, with its live slices.
    pub(crate) fn page_map(&self) -> Vec<PageSlices> {
        match self {
            DynamicPool::Sliced(pool) => group(pool.sliced_pages().held_pages(), pool.slices()),
            DynamicPool::WholePage(pool) => pool.page_map(),
            DynamicPool::Adaptive(pool) => group(
                pool.tier_pages().flat_map(|pages| pages.held_pages()),
                pool.slices(),
            ),
        }
    }
}

impl WholePagePool {
    /// Each page the pool holds (free ones too), with its live slice, if any.
    pub(crate) fn page_map(&self) -> Vec<PageSlices> {
        group(self.solo_pages().held_pages(), self.slices())
    }
}

/// The number a page is known by: its storage id's value, unique in the process for as
/// long as it runs (storage ids are never reused).
///
/// Runs twice per move of a compaction and once per page of every census, so it reads the
/// value as the id's derived `Hash` feeds it to a hasher (one `write_usize`), with no
/// formatting (the value is private upstream). Should that ever change shape, the digits
/// `Display` writes (`StorageId(N)`) are read instead.
pub(crate) fn page_id(id: &StorageId) -> u64 {
    use std::hash::Hash;
    let mut capture = Capture::default();
    id.hash(&mut capture);
    match capture {
        Capture {
            value: Some(value),
            writes: 1,
        } => value,
        _ => page_id_from_display(id),
    }
}

/// What a derived `Hash` of a one-field struct of `usize` writes: one `write_usize`.
#[derive(Default)]
struct Capture {
    value: Option<u64>,
    writes: u32,
}

impl std::hash::Hasher for Capture {
    fn finish(&self) -> u64 {
        self.value.unwrap_or_default()
    }

    fn write(&mut self, _bytes: &[u8]) {
        self.writes += 1;
        self.value = None;
    }

    fn write_usize(&mut self, value: usize) {
        self.writes += 1;
        self.value = Some(value as u64);
    }
}

/// The page number from the id's `Display` (`StorageId(N)`), or a stable hash of the id
/// if that has no digits either.
fn page_id_from_display(id: &StorageId) -> u64 {
    use std::fmt::Write;
    let mut digits = Digits::default();
    match write!(digits, "{id}") {
        Ok(()) if digits.count > 0 && !digits.overflow => digits.value,
        _ => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            id.hash(&mut hasher);
            hasher.finish()
        }
    }
}

/// The decimal digits of what is written to it, as one number (other characters are
/// skipped).
#[derive(Default)]
struct Digits {
    value: u64,
    count: usize,
    overflow: bool,
}

impl std::fmt::Write for Digits {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        for digit in text.bytes().filter(u8::is_ascii_digit) {
            let next = self
                .value
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(digit - b'0')));
            match next {
                Some(value) => self.value = value,
                None => self.overflow = true,
            }
            self.count += 1;
        }
        Ok(())
    }
}

/// `pages` with the live slices of `table` placed in them by storage id. A live slice
/// whose page is not among `pages` (never the case: a slice keeps its page) is left out.
fn group<'a>(
    pages: impl Iterator<Item = &'a StorageHandle>,
    table: &SliceTable,
) -> Vec<PageSlices> {
    let mut index: HashMap<StorageId, usize> = HashMap::new();
    let mut out: Vec<PageSlices> = Vec::new();
    for page in pages {
        index.insert(page.id, out.len());
        out.push(PageSlices {
            id: page_id(&page.id),
            size: page.size(),
            slices: Vec::new(),
        });
    }
    for (handle, slice) in table.live_slices() {
        if let Some(&at) = index.get(&slice.storage.id) {
            out[at].slices.push(LiveSlice {
                offset: slice.storage.offset(),
                size: slice.storage.size(),
                padding: slice.padding,
                id: handle.descriptor().id.value as u64,
            });
        }
    }
    for page in &mut out {
        page.slices.sort_unstable_by_key(|slice| slice.offset);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{page_id, page_id_from_display};
    use crate::memory_management::{
        MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryManagement,
        MemoryManagementOptions, MemoryPoolOptions, PoolType,
    };
    use crate::storage::{BytesStorage, StorageId};

    #[test]
    fn page_ids_are_the_storage_ids_numbers() {
        let (a, b) = (StorageId::new(), StorageId::new());
        assert_eq!(format!("StorageId({})", page_id(&a)), a.to_string());
        assert_eq!(page_id(&b), page_id(&a) + 1);
        assert_eq!(page_id(&a), page_id_from_display(&a));
    }

    /// Every live slice is listed once, in a page of its pool, without overlap; the sums
    /// equal each pool's report; dropped handles are not listed.
    #[test]
    fn a_page_map_matches_the_report_pool_by_pool() {
        let pools = vec![
            MemoryPoolOptions {
                pool_type: PoolType::SlicedPages {
                    page_size: 4096,
                    max_slice_size: 1024,
                    max_pool_size: None,
                },
                dealloc_period: None,
            },
            MemoryPoolOptions {
                pool_type: PoolType::ExclusivePages {
                    max_alloc_size: 1 << 20,
                },
                dealloc_period: None,
            },
        ];
        let mut memory = MemoryManagement::from_configuration(
            BytesStorage::default(),
            &MemoryDeviceProperties::new(1 << 20, 32),
            MemoryConfiguration::default(),
            MemoryManagementOptions::new("test").pools(pools),
        );
        let mut kept = Vec::new();
        for (i, size) in [3u64, 100, 1000, 0, 5000, 700, 64, 20_000, 1]
            .into_iter()
            .enumerate()
        {
            let handle = memory.reserve(size).expect("fits");
            if i % 3 != 1 {
                kept.push((handle, size));
            }
        }
        memory.mode(MemoryAllocationMode::Persistent);
        kept.push((memory.reserve(77).expect("fits"), 77));
        memory.mode(MemoryAllocationMode::Auto);

        let map = memory.page_map();
        let report = memory.memory_report();
        let reports: Vec<_> = report
            .dynamic
            .iter()
            .chain([&report.persistent, &report.dedicated])
            .collect();
        assert_eq!(map.len(), reports.len());
        for (pool, report) in map.iter().zip(&reports) {
            let usage = &report.usage;
            assert_eq!(
                pool.totals(),
                (
                    usage.number_allocs,
                    usage.bytes_in_use,
                    usage.bytes_padding,
                    usage.bytes_reserved
                ),
                "pool {}",
                pool.index
            );
            assert_eq!(pool.kind, report.kind);
            for page in &pool.pages {
                let mut end = 0;
                for slice in &page.slices {
                    assert!(slice.offset >= end, "overlap in page {}", page.id);
                    end = slice.offset + slice.size + slice.padding;
                    assert!(end <= page.size);
                }
            }
        }
        let mut listed: Vec<(u64, u64)> = map
            .iter()
            .flat_map(|pool| &pool.pages)
            .flat_map(|page| &page.slices)
            .map(|slice| (slice.id, slice.size))
            .collect();
        listed.sort_unstable();
        let mut expected: Vec<(u64, u64)> = kept
            .iter()
            .map(|(handle, size)| (handle.descriptor().id.value as u64, *size))
            .collect();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        let persistent = &map[2];
        assert_eq!(persistent.index, 2);
        assert_eq!(persistent.pages.len(), 1);
        assert_eq!(persistent.pages[0].slices[0].size, 77);
    }
}
