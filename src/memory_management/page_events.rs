//! What happened to a memory's pages: each page made and given back, and each reservation
//! that spilled past a full pool, kept for an owner that records history.
//!
//! Pools reach the storage only through an [`Observed`] storage, which forwards every call
//! and notes page allocations and deallocations with the pool that made them. The log
//! also emits a `tracing` event for each, with its fields, whether or not it keeps events.

use super::pool::page_map::page_id;
use crate::storage::{ComputeStorage, CopyStorage, StorageHandle, StorageId};
use cubecl_runtime::server::IoError;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// The next event's sequence number, process-wide: events of several memories (a client's
/// main memory and its two staging memories) merge in the order they happened, not memory
/// by memory (a history that listed the main memory's new page before the upload pages
/// given back just before it showed a peak that never was).
static NEXT_EVENT: AtomicU64 = AtomicU64::new(0);

/// The most [`MemoryEvent`]s a memory keeps between two
/// [`take_events`](super::MemoryManagement::take_events) calls; older ones are dropped
/// (and counted) when more arrive.
pub const MAX_MEMORY_EVENTS: usize = 4096;

/// A change to a memory's pages that its owner may want to record.
///
/// `pool` is the pool's place in [`MemoryManagement::page_map`](super::MemoryManagement::page_map)
/// (dynamic pools in layout order, then the persistent pool, then the dedicated pool), and
/// `page` the page's id there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryEvent {
    /// The storage made a page of `bytes` for `pool`.
    PageMade {
        /// The pool that asked for the page.
        pool: usize,
        /// The page's id.
        page: u64,
        /// The page's size in bytes.
        bytes: u64,
    },
    /// `pool` gave a page of `bytes` back to the storage.
    PageReleased {
        /// The pool that held the page.
        pool: usize,
        /// The page's id.
        page: u64,
        /// The page's size in bytes.
        bytes: u64,
    },
    /// A compaction moved the live slice of allocation `id` in `pool` from `from_page`
    /// at `from_offset` to `to_page` at `to_offset`; `bytes` is its requested size.
    Move {
        /// The pool the slice belongs to (it never leaves it).
        pool: usize,
        /// The allocation id (the value of its `ManagedMemoryId`).
        id: u64,
        /// The page it left.
        from_page: u64,
        /// Its offset in the page it left, in bytes.
        from_offset: u64,
        /// The page it moved to.
        to_page: u64,
        /// Its offset in the page it moved to, in bytes.
        to_offset: u64,
        /// The bytes requested for the allocation (what was copied, before rounding).
        bytes: u64,
    },
    /// A reservation of `bytes` found pool `from` at its cap and was served by pool `to`.
    Spill {
        /// The first pool that accepted the size and was full.
        from: usize,
        /// The pool that served it.
        to: usize,
        /// The bytes requested.
        bytes: u64,
    },
}

/// The page sizes a memory holds (always kept: a page given back must state its bytes) and,
/// while observed, the events since the owner last took them.
#[derive(Debug, Default)]
pub(crate) struct PageLog {
    /// The memory's name, for tracing.
    memory: String,
    observed: bool,
    /// Each with its sequence number ([`NEXT_EVENT`]).
    events: VecDeque<(u64, MemoryEvent)>,
    dropped: u64,
    /// Bytes of every page held, by storage id: bounded by the pages held.
    sizes: HashMap<StorageId, u64>,
}

impl PageLog {
    pub(crate) fn new(memory: &str) -> Self {
        PageLog {
            memory: memory.to_string(),
            ..PageLog::default()
        }
    }

    /// Starts or stops keeping events; stopping drops those kept.
    pub(crate) fn observe(&mut self, on: bool) {
        self.observed = on;
        if !on {
            self.events.clear();
        }
    }

    /// The events kept since the last call, oldest first, and how many were dropped since.
    pub(crate) fn take(&mut self) -> (Vec<MemoryEvent>, u64) {
        let (events, dropped) = self.take_sequenced();
        (
            events.into_iter().map(|(_, event)| event).collect(),
            dropped,
        )
    }

    /// As [`take`](Self::take), each event with its process-wide sequence number.
    pub(crate) fn take_sequenced(&mut self) -> (Vec<(u64, MemoryEvent)>, u64) {
        let dropped = std::mem::take(&mut self.dropped);
        (self.events.drain(..).collect(), dropped)
    }

    pub(crate) fn push(&mut self, event: MemoryEvent) {
        if !self.observed {
            return;
        }
        if self.events.len() == MAX_MEMORY_EVENTS {
            self.events.pop_front();
            self.dropped += 1;
        }
        let sequence = NEXT_EVENT.fetch_add(1, Ordering::Relaxed);
        self.events.push_back((sequence, event));
    }

    fn made(&mut self, pool: usize, id: StorageId, bytes: u64) {
        self.sizes.insert(id, bytes);
        if self.observed || tracing::enabled!(tracing::Level::DEBUG) {
            let page = page_id(&id);
            tracing::debug!(memory = %self.memory, pool, page, bytes, "page made");
            self.push(MemoryEvent::PageMade { pool, page, bytes });
        }
    }

    fn released(&mut self, pool: usize, id: StorageId) {
        let bytes = self.sizes.remove(&id).unwrap_or(0);
        if self.observed || tracing::enabled!(tracing::Level::DEBUG) {
            let page = page_id(&id);
            tracing::debug!(memory = %self.memory, pool, page, bytes, "page given back");
            self.push(MemoryEvent::PageReleased { pool, page, bytes });
        }
    }
}

/// A storage seen through one pool: every call is forwarded, and pages made or given back
/// are noted in the log under that pool.
pub(crate) struct Observed<'a, S> {
    pub(crate) storage: &'a mut S,
    pub(crate) log: &'a mut PageLog,
    pub(crate) pool: usize,
}

impl<S: ComputeStorage> ComputeStorage for Observed<'_, S> {
    type Resource = S::Resource;

    fn alignment(&self) -> usize {
        self.storage.alignment()
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<Self::Resource, IoError> {
        self.storage.get(handle)
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        let handle = self.storage.alloc(size)?;
        self.log.made(self.pool, handle.id, size);
        Ok(handle)
    }

    fn dealloc(&mut self, id: StorageId) {
        self.storage.dealloc(id);
        self.log.released(self.pool, id);
    }

    fn flush(&mut self) {
        self.storage.flush();
    }

    fn bytes_allocated(&self) -> u64 {
        self.storage.bytes_allocated()
    }
}

impl<S: CopyStorage> CopyStorage for Observed<'_, S> {
    fn copy(&mut self, from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError> {
        self.storage.copy(from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::BytesStorage;

    #[test]
    fn pages_made_and_given_back_are_logged_with_their_pool_and_size() {
        let mut storage = BytesStorage::default();
        let mut log = PageLog::new("main");
        log.observe(true);
        let page = {
            let mut seen = Observed {
                storage: &mut storage,
                log: &mut log,
                pool: 2,
            };
            let page = seen.alloc(4096).unwrap();
            seen.dealloc(page.id);
            page_id(&page.id)
        };
        let (events, dropped) = log.take();
        assert_eq!(dropped, 0);
        assert_eq!(
            events,
            vec![
                MemoryEvent::PageMade {
                    pool: 2,
                    page,
                    bytes: 4096
                },
                MemoryEvent::PageReleased {
                    pool: 2,
                    page,
                    bytes: 4096
                },
            ]
        );
        assert!(log.take().0.is_empty(), "taking empties the log");
    }

    #[test]
    fn the_log_keeps_the_newest_events_up_to_its_bound() {
        let mut log = PageLog::new("main");
        log.observe(true);
        for bytes in 0..(MAX_MEMORY_EVENTS as u64 + 10) {
            log.push(MemoryEvent::Spill {
                from: 0,
                to: 1,
                bytes,
            });
        }
        let (events, dropped) = log.take();
        assert_eq!(events.len(), MAX_MEMORY_EVENTS);
        assert_eq!(dropped, 10);
        assert_eq!(
            events[0],
            MemoryEvent::Spill {
                from: 0,
                to: 1,
                bytes: 10
            }
        );
    }

    /// Events of two logs, pushed in turn, sort back into the order they were pushed.
    #[test]
    fn sequence_numbers_merge_two_logs_in_the_order_of_their_events() {
        let (mut main, mut upload) = (PageLog::new("main"), PageLog::new("upload"));
        main.observe(true);
        upload.observe(true);
        let spill = |bytes| MemoryEvent::Spill {
            from: 0,
            to: 1,
            bytes,
        };
        upload.push(spill(0));
        main.push(spill(1));
        upload.push(spill(2));
        main.push(spill(3));
        let mut merged = main.take_sequenced().0;
        merged.extend(upload.take_sequenced().0);
        merged.sort_by_key(|(sequence, _)| *sequence);
        let order: Vec<MemoryEvent> = merged.into_iter().map(|(_, event)| event).collect();
        assert_eq!(order, (0..4).map(spill).collect::<Vec<_>>());
    }

    #[test]
    fn an_unobserved_log_keeps_nothing_but_still_knows_page_sizes() {
        let mut storage = BytesStorage::default();
        let mut log = PageLog::new("main");
        let page = Observed {
            storage: &mut storage,
            log: &mut log,
            pool: 0,
        }
        .alloc(512)
        .unwrap();
        log.observe(true);
        Observed {
            storage: &mut storage,
            log: &mut log,
            pool: 0,
        }
        .dealloc(page.id);
        let (events, _) = log.take();
        assert_eq!(
            events,
            vec![MemoryEvent::PageReleased {
                pool: 0,
                page: page_id(&page.id),
                bytes: 512
            }]
        );
    }
}
