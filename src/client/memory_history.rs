//! Where the memory went: history, label scopes, snapshots, out-of-memory details and
//! memory records.
//!
//! Lock order: the server's mutex, then the history's. A handle's last clone takes only
//! the history's (to record its free), wherever it is dropped.

use super::Client;
use crate::memory_management::MemoryRecord;
use crate::report::{
    BudgetDetail, EventKind, HistoryEvent, MAIN_MEMORY, MemorySnapshot, OutOfMemoryDetail,
};
use crate::server::{ClientError, FreeRecord, Handle, History, Server};
use parking_lot::Mutex;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

impl Client {
    /// Every page of every memory (`"main"`, then the readback staging `"staging"` and
    /// the upload staging `"upload"`), each slice in it in offset order (live slices:
    /// offset, requested size, padding, allocation id; free ranges: offset and size, with
    /// `live: false`), and the memory report, taken together under the client's lock. Write it with [`MemorySnapshot::to_json`](crate::report::MemorySnapshot::to_json);
    /// draw it with `examples/memory_viz`.
    ///
    /// Its slices sum to the report's numbers, memory by memory, and no two live slices
    /// overlap ([`check`](crate::report::MemorySnapshot::check),
    /// [`check_report`](crate::report::MemorySnapshot::check_report)). Times are µs since
    /// the client was made.
    ///
    /// With history on ([`record_history`](Self::record_history)) it carries the ring's
    /// events, and each slice reserved while history was on carries its label and age.
    ///
    /// # Complexity
    /// O(pages + slices held); the lock is held for the whole walk.
    pub fn memory_snapshot(&self) -> MemorySnapshot {
        let mut server = self.shared.server.lock();
        let mut history = self.shared.history.lock();
        server.record_page_events(&mut history, None);
        let taken_us = history.now_us();
        let mut snapshot = server.memory_snapshot(taken_us);
        let (events, dropped) = history.events();
        snapshot.history = events;
        snapshot.history_dropped = dropped;
        snapshot.started_unix_us = Some(history.started_unix_us());
        for slice in snapshot
            .memories
            .iter_mut()
            .filter(|memory| memory.name == MAIN_MEMORY)
            .flat_map(|memory| &mut memory.pools)
            .flat_map(|pool| &mut pool.pages)
            .flat_map(|page| &mut page.slices)
        {
            if let Some((label, at)) = slice.id.and_then(|id| history.label_of(id)) {
                slice.label = label.clone();
                slice.age_us = Some(taken_us.saturating_sub(*at));
            }
        }
        snapshot
    }

    /// Records at most `events` history events from now on, in a ring that keeps the
    /// newest (memory bounded by `events`); 0 turns history off and drops what it held.
    /// Changing the bound keeps the newest events that fit.
    ///
    /// Recorded, with times in µs since the client was made:
    /// - each main-memory reservation ([`EventKind::Reserve`]: requested bytes, pool, page,
    ///   offset, allocation id, label, and the caller's backtrace when
    ///   [`record_backtraces`](Self::record_backtraces) is on), and its free when the last
    ///   clone of its [`Handle`] is dropped ([`EventKind::Free`], same fields);
    /// - pages made and given back in every memory ([`EventKind::PageMade`],
    ///   [`EventKind::PageReleased`]: page size, memory, pool, page id) and reservations
    ///   that spilled past a full capped pool ([`EventKind::Spill`]);
    /// - readback and upload staging pages going idle and in use again
    ///   ([`EventKind::StagingIdle`], [`EventKind::StagingInUse`]: page size, memory, pool,
    ///   page id), stamped when the next client call that records history sees it;
    /// - compaction moves ([`EventKind::Move`]);
    /// - uploads and readbacks (bytes), launches (kernel label), cleanups (bytes
    ///   released), installs and out-of-memory failures.
    ///
    /// A page event is stamped when the client call that made or gave back the page
    /// records it, before that call returns. Handles made while history is off record no
    /// free. Also set by `[memory] history`.
    pub fn record_history(&self, events: usize) {
        let mut server = self.shared.server.lock();
        server.observe_pages(events > 0);
        let mut history = self.shared.history.lock();
        history.set_capacity(events);
        if events == 0 {
            history.forget_labels();
        }
    }

    /// Whether each reservation recorded in history also records the caller's backtrace
    /// (`std::backtrace::Backtrace::force_capture`, resolved to text at once: costly, for
    /// hunting down what holds memory). Off by default; also set by
    /// `[memory] history = { events = N, backtraces = true }`.
    pub fn record_backtraces(&self, on: bool) {
        self.shared.history.lock().backtraces = on;
    }

    /// Where a reservation that runs out of room (a main reservation out of device memory
    /// or finding its capped pools full, or a reservation in any memory the budget
    /// refuses) writes the memory snapshot of that moment, its
    /// [`EventKind::OutOfMemory`] in the history when history is on: as PyTorch's pickle
    /// (for memory_viz) when the path ends in `.pickle` or `.pkl`, as JSON otherwise;
    /// `None` writes none. The error ([`ClientError::OutOfMemory`]) then names the file. Each
    /// such failure overwrites the file. Also set by `[memory] oom_snapshot`.
    pub fn set_oom_snapshot(&self, path: Option<PathBuf>) {
        *self.shared.oom_snapshot.lock() = path;
    }

    /// `result`, or, for a reservation out of room (any memory the budget refused, or the
    /// main memory), [`ClientError::OutOfMemory`] with what held the memory then (and the
    /// snapshot written, when a path is set), naming the budget when `refusal` (the
    /// budget's refusal the reservation met, as it was then, from `retry_over_budget`)
    /// says it refused it. The failure's [`EventKind::OutOfMemory`] is recorded here,
    /// before the snapshot is taken, so that every out-of-memory snapshot carries its
    /// event. Takes the server's lock: call it without holding it.
    pub(super) fn explain_oom<T>(
        &self,
        result: Result<T, ClientError>,
        refusal: Option<BudgetDetail>,
    ) -> Result<T, ClientError> {
        let error = match result {
            Err(ClientError::Reserve(error)) if error.is_out_of_room() => error,
            other => return other,
        };
        let budget = {
            let mut server = self.shared.server.lock();
            let (memory, requested) = match &refusal {
                Some(refusal) => (refusal.memory.clone(), refusal.requested),
                None => (MAIN_MEMORY.to_string(), error.requested()),
            };
            let free_bytes = match &refusal {
                // The budget's room when it refused.
                Some(refusal) => {
                    let held: u64 = refusal.held.iter().map(|held| held.bytes).sum();
                    refusal.budget.saturating_sub(held + refusal.retiring)
                }
                None => {
                    let usage = crate::report::memory_usage(&server.memory_report(), &memory);
                    usage
                        .bytes_reserved
                        .saturating_sub(usage.bytes_in_use)
                        .saturating_sub(usage.bytes_padding)
                }
            };
            let refused = Refused {
                memory: &memory,
                bytes: requested,
                free_bytes,
                budget: refusal.as_ref(),
            };
            self.record_out_of_memory(&mut server, refused, &error);
            refusal
        };
        let snapshot = self.memory_snapshot();
        let mut detail = OutOfMemoryDetail::from_snapshot(&snapshot, MAIN_MEMORY);
        detail.budget = budget.map(|mut budget| {
            // The figure the pool lines show, from the same snapshot.
            budget.largest_free_slice = detail
                .pools
                .iter()
                .map(|pool| pool.largest_free_slice)
                .max()
                .unwrap_or(0);
            budget
        });
        if let Some(budget) = &detail.budget {
            // The memory layer's own warning can only say that the storage refused a page.
            tracing::warn!(%budget, "the memory budget refused a reservation");
        }
        detail.device = self.device_memory();
        let path = self.shared.oom_snapshot.lock().clone();
        let written = path.and_then(|path| match write_snapshot(&snapshot, &path) {
            Ok(()) => Some(path),
            Err(message) => {
                tracing::error!(path = %path.display(), %message, "writing the out-of-memory snapshot failed");
                None
            }
        });
        Err(ClientError::OutOfMemory {
            error: Box::new(error),
            detail: Box::new(detail),
            snapshot: written,
        })
    }

    /// Records an [`EventKind::OutOfMemory`] of the reservation `refused` describes, for
    /// `error`, after the page events the failed reservation left, when history is on
    /// (`server` is the locked server). A capped main pool that is full names itself; the
    /// device or the budget refusing a page names no pool. A budget's refusal records the
    /// budget and what was held against it, so that the event's numbers add up.
    fn record_out_of_memory(
        &self,
        server: &mut Server,
        refused: Refused<'_>,
        error: &crate::memory_management::ReserveError,
    ) {
        let Refused {
            memory,
            bytes,
            free_bytes,
            budget,
        } = refused;
        let mut history = self.shared.history.lock();
        if !history.on() {
            return;
        }
        server.record_page_events(&mut history, None);
        let label = history.labels.current().map(str::to_string);
        let pool = match error {
            crate::memory_management::ReserveError::PoolCapacityExceeded { pool, .. }
                if memory == MAIN_MEMORY =>
            {
                Some(server.main_pool_name(*pool))
            }
            _ => None,
        };
        history.push(EventKind::OutOfMemory, bytes, |event| {
            event.label = label;
            event.memory = Some(memory.to_string());
            event.pool = pool;
            event.free_bytes = Some(free_bytes);
            if let Some(budget) = budget {
                event.budget = Some(budget.budget);
                event.held_bytes = Some(budget.held.iter().map(|held| held.bytes).sum());
                event.retiring_bytes = Some(budget.retiring);
            }
        });
    }

    /// Opens a label scope: reservations made while the returned guard lives carry
    /// `name` (nested scopes join as `"outer/inner"`) in their history events and
    /// snapshot slices. Dropping the guard closes this scope only: scopes opened after it
    /// whose guards still live stay open (see [`LabelStack`](crate::report::LabelStack)),
    /// so guards dropped out of order never close another's scope.
    ///
    /// Scopes belong to the client, not to a thread: a reservation on another thread
    /// while a scope is open carries its label too. Labels are kept only while history
    /// is on ([`record_history`](Self::record_history)).
    pub fn label(&self, name: &str) -> LabelScope {
        let id = self.shared.history.lock().labels.push(name);
        LabelScope {
            history: self.shared.history.clone(),
            id,
        }
    }

    /// The history ring's events, oldest first (empty while history is off). Page events
    /// not yet moved into the ring are moved first.
    pub fn history(&self) -> Vec<HistoryEvent> {
        let mut server = self.shared.server.lock();
        let mut history = self.shared.history.lock();
        server.record_page_events(&mut history, None);
        history.events().0
    }

    /// Records an event of `kind`, when history is on.
    pub(super) fn record(&self, kind: EventKind, bytes: u64, fill: impl FnOnce(&mut HistoryEvent)) {
        self.shared.history.lock().push(kind, bytes, fill);
    }

    /// Records an `Upload` or `Readback` of `bytes` touching `handle`: its id, pool, page,
    /// offset and label, after the staging pages the transfer made (`server` is the
    /// locked server). Nothing when history is off.
    pub(super) fn record_transfer(
        &self,
        server: &mut Server,
        kind: EventKind,
        bytes: u64,
        handle: Option<&Handle>,
    ) {
        let mut history = self.shared.history.lock();
        if !history.on() {
            return;
        }
        server.record_page_events(&mut history, None);
        let id = handle.map(|handle| handle.memory.descriptor().id.value as u64);
        let placement = handle.and_then(|handle| server.placement(handle));
        let label = id
            .and_then(|id| history.label_of(id))
            .and_then(|(label, _)| label.clone());
        history.push(kind, bytes, |event| {
            event.id = id;
            event.label = label;
            if let Some(placement) = placement {
                event.memory = Some(MAIN_MEMORY.to_string());
                event.pool = Some(placement.pool);
                event.page = Some(placement.page);
                event.offset = Some(placement.offset);
            }
        });
    }

    /// Moves the memories' page events into history, when it is on (`server` is the
    /// locked server).
    pub(super) fn record_pages(&self, server: &mut Server) {
        let mut history = self.shared.history.lock();
        if history.on() {
            server.record_page_events(&mut history, None);
        }
    }

    /// Records a new handle's reservation (after the pages it made) and sets the record
    /// of its free on its drop notice, when history is on. `server` is the locked server.
    pub(super) fn reserved(&self, server: &mut Server, handle: Handle) -> Handle {
        let mut history = self.shared.history.lock();
        if !history.on() {
            return handle;
        }
        let id = handle.memory.descriptor().id.value as u64;
        let label = history.labels.current().map(str::to_string);
        server.record_page_events(&mut history, Some((id, label.as_deref())));
        let placement = server.placement(&handle);
        let backtrace = history
            .backtraces
            .then(|| std::backtrace::Backtrace::force_capture().to_string());
        let now = history.now_us();
        history.live.insert(id, (label.clone(), now));
        let (event_label, event_placement) = (label.clone(), placement.clone());
        history.push(EventKind::Reserve, handle.size, |event| {
            event.id = Some(id);
            event.label = event_label;
            event.memory = Some(MAIN_MEMORY.to_string());
            event.backtrace = backtrace;
            if let Some(placement) = event_placement {
                event.pool = Some(placement.pool);
                event.page = Some(placement.page);
                event.offset = Some(placement.offset);
            }
        });
        // A new handle's notice has no record yet: the set cannot fail.
        let _ = handle.last_drop.free_record.set(FreeRecord {
            history: Arc::downgrade(&self.shared.history),
            bytes: handle.size,
            id,
            label,
            placement,
        });
        handle
    }

    /// Records the pages the reservation gave back trying, when `result` is out of room
    /// (`server` is the locked server). Its [`EventKind::OutOfMemory`] is recorded by
    /// `explain_oom`, which every out-of-room failure goes through.
    pub(super) fn record_failure<T>(
        &self,
        server: &mut Server,
        result: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if let Err(ClientError::Reserve(error)) = &result
            && error.is_out_of_room()
        {
            self.record_pages(server);
        }
        result
    }

    /// Records the memory report under `label` (what the program was doing: `"model
    /// loaded"`, `"after step 10"`) and returns the record; the client keeps the newest
    /// ones for [`memory_records`](Self::memory_records) (a bounded ring). When a records
    /// file is set ([`set_records_file`](Self::set_records_file), `[memory] records`),
    /// the record is also appended to it as one JSON line; a failed append is logged
    /// (`tracing` error) and counted in [`records_not_written`](Self::records_not_written),
    /// and the record is still returned and kept.
    pub fn record_memory(&self, label: impl Into<String>) -> MemoryRecord {
        let record = MemoryRecord {
            label: label.into(),
            report: self.memory_report(),
        };
        self.shared.records.lock().push(record.clone());
        let file = self.shared.records_file.lock().clone();
        if let Some(path) = file
            && let Err(message) = append_json_line(&path, &record)
        {
            tracing::error!(path = %path.display(), %message, "appending a memory record failed");
            self.shared
                .records_not_written
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        record
    }

    /// The file [`record_memory`](Self::record_memory) appends each record to as a JSON
    /// line (created when missing); `None` appends nowhere. Also set by
    /// `[memory] records = "path"`.
    pub fn set_records_file(&self, path: Option<PathBuf>) {
        *self.shared.records_file.lock() = path;
    }

    /// How many records could not be appended to the records file.
    pub fn records_not_written(&self) -> u64 {
        self.shared
            .records_not_written
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The newest records made by [`record_memory`](Self::record_memory), oldest first:
    /// at most [`DEFAULT_RECORDS`](super::DEFAULT_RECORDS) (1024), or the capacity set
    /// with [`set_record_capacity`](Self::set_record_capacity).
    pub fn memory_records(&self) -> Vec<MemoryRecord> {
        self.shared.records.lock().to_vec()
    }

    /// Keeps at most `capacity` memory records (the newest), dropping older ones now and
    /// later. Each record holds a whole report, so the bound is what keeps a long run's
    /// records from growing without end.
    pub fn set_record_capacity(&self, capacity: usize) {
        self.shared.records.lock().set_capacity(capacity);
    }
}

/// A reservation out of room, as its out-of-memory event records it.
struct Refused<'a> {
    /// The memory that refused it.
    memory: &'a str,
    /// Bytes it asked for.
    bytes: u64,
    /// Bytes still free to that memory then (see [`HistoryEvent::free_bytes`]).
    free_bytes: u64,
    /// The budget's detail, when the budget refused it.
    budget: Option<&'a BudgetDetail>,
}

/// JSON, or PyTorch's pickle for a `.pickle` / `.pkl` path (see `MemorySnapshot::write_to`).
fn write_snapshot(snapshot: &MemorySnapshot, path: &std::path::Path) -> Result<(), String> {
    snapshot.write_to(path)
}

fn append_json_line(path: &std::path::Path, record: &MemoryRecord) -> Result<(), String> {
    let mut line = serde_json::to_string(record).map_err(|e| e.to_string())?;
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    // One write call per line, so lines of concurrent clients do not interleave.
    file.write_all(line.as_bytes()).map_err(|e| e.to_string())
}

/// A label scope opened by [`Client::label`]; dropping it closes that scope.
#[must_use = "the scope closes when the guard is dropped"]
pub struct LabelScope {
    history: Arc<Mutex<History>>,
    id: u64,
}

impl core::fmt::Debug for LabelScope {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LabelScope").field("id", &self.id).finish()
    }
}

impl Drop for LabelScope {
    fn drop(&mut self) {
        self.history.lock().labels.close(self.id);
    }
}
