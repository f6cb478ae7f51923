//! The client's history ring and the record a handle carries to log its own free.
//!
//! The ring sits behind its own mutex, apart from the server's: a handle's last clone may
//! be dropped anywhere, even while the server's lock is held, and logging its free must
//! not take that lock. Nothing is dropped or called out while this mutex is held.

use super::handle::Handle;
use super::snapshot::place_name;
use crate::memory_management::{MemoryEvent, MemoryManagement};
use crate::report::{EventKind, HistoryEvent, HistoryRing, LabelStack, MAIN_MEMORY};
use crate::server::Server;
use crate::storage::WgpuStorage;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many freed allocations keep their label for snapshots (see
/// `History::label_of`).
pub(crate) const RECENTLY_FREED: usize = 4096;
use std::sync::Weak;
use web_time::Instant;

/// The ring and the clock its times count from.
#[derive(Debug)]
pub(crate) struct History {
    ring: HistoryRing,
    started: Instant,
    /// `started` as Unix time, in µs since 1970 (0 if the system clock is before 1970).
    started_unix_us: u64,
    /// The label scopes open now.
    pub(crate) labels: LabelStack,
    /// Live allocations reserved while history was on: id → (label, reserved at µs).
    /// Bounded by the live handles: an entry goes with the handle's last clone.
    pub(crate) live: HashMap<u64, (Option<String>, u64)>,
    /// The labels of the newest [`RECENTLY_FREED`] allocations whose handles are gone:
    /// a binding still in flight (or a `HandleResource`) may keep such a slice live a
    /// little longer, and a snapshot then still names it.
    recently_freed: HashMap<u64, (Option<String>, u64)>,
    /// The order `recently_freed` was filled in, oldest first.
    freed_order: VecDeque<u64>,
    /// Where a compaction last moved each live allocation reserved while history was on:
    /// id → placement. Its free names this place, not the one it was reserved in (the
    /// handle's [`FreeRecord`] only knows that one). Bounded by `live`: an entry is made
    /// only for an id in `live` and goes with its free.
    moved: HashMap<u64, Placement>,
    /// Whether each staging page (memory, page id) held a slice when history last looked:
    /// a change is a `StagingInUse` / `StagingIdle` event. Bounded by the staging pages
    /// held: a page's entry goes when the page does.
    staging: BTreeMap<(&'static str, u64), bool>,
    /// Whether each reservation records the caller's backtrace.
    pub(crate) backtraces: bool,
}

impl History {
    pub(crate) fn new(capacity: usize) -> Self {
        History {
            ring: HistoryRing::new(capacity),
            started: Instant::now(),
            started_unix_us: web_time::SystemTime::now()
                .duration_since(web_time::UNIX_EPOCH)
                .map_or(0, |since| {
                    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
                }),
            labels: LabelStack::default(),
            live: HashMap::default(),
            recently_freed: HashMap::default(),
            freed_order: VecDeque::new(),
            moved: HashMap::default(),
            staging: BTreeMap::new(),
            backtraces: false,
        }
    }

    /// µs since the client was made (saturating).
    pub(crate) fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// When the client was made, in µs since 1970 (Unix time): what
    /// [`now_us`](Self::now_us) counts from.
    pub(crate) fn started_unix_us(&self) -> u64 {
        self.started_unix_us
    }

    /// Whether events are recorded (a capacity above 0).
    pub(crate) fn on(&self) -> bool {
        self.ring.capacity() > 0
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.ring.set_capacity(capacity);
    }

    /// Pushes an event of `kind` about `bytes`, stamped now, after `fill` sets its other
    /// fields; nothing when history is off.
    pub(crate) fn push(
        &mut self,
        kind: EventKind,
        bytes: u64,
        fill: impl FnOnce(&mut HistoryEvent),
    ) {
        if !self.on() {
            return;
        }
        let mut event = HistoryEvent::new(self.now_us(), kind, bytes);
        fill(&mut event);
        self.ring.push(event);
    }

    /// The label and reservation time (µs) of allocation `id`: a live one, or one of the
    /// newest [`RECENTLY_FREED`] whose handles are gone.
    pub(crate) fn label_of(&self, id: u64) -> Option<&(Option<String>, u64)> {
        self.live.get(&id).or_else(|| self.recently_freed.get(&id))
    }

    /// Moves allocation `id` from the live ones to the recently freed ones (the oldest of
    /// those is forgotten past [`RECENTLY_FREED`]).
    fn freed(&mut self, id: u64) {
        self.moved.remove(&id);
        let Some(entry) = self.live.remove(&id) else {
            return;
        };
        if self.freed_order.len() == RECENTLY_FREED
            && let Some(oldest) = self.freed_order.pop_front()
        {
            self.recently_freed.remove(&oldest);
        }
        self.freed_order.push_back(id);
        self.recently_freed.insert(id, entry);
    }

    /// Forgets every live and recently freed allocation's label.
    pub(crate) fn forget_labels(&mut self) {
        self.freed_order.clear();
        self.live.clear();
        self.moved.clear();
        self.staging.clear();
        self.recently_freed.clear();
    }

    /// The events held, oldest first, and how many older ones were dropped.
    pub(crate) fn events(&self) -> (Vec<HistoryEvent>, u64) {
        (self.ring.to_vec(), self.ring.dropped())
    }
}

/// Set on a handle's drop notice when it is made while history is on; dropped with the
/// handle's last clone, it records the allocation's [`EventKind::Free`].
#[derive(Debug)]
pub(crate) struct FreeRecord {
    pub(crate) history: Weak<Mutex<History>>,
    pub(crate) bytes: u64,
    pub(crate) id: u64,
    pub(crate) label: Option<String>,
    /// Where the slice was reserved; a compaction's move since then overrides it (see
    /// `History::moved`).
    pub(crate) placement: Option<Placement>,
}

impl Drop for FreeRecord {
    fn drop(&mut self) {
        // The client may be gone already: then there is no ring to record into.
        if let Some(history) = self.history.upgrade() {
            let label = self.label.take();
            let id = self.id;
            let mut history = history.lock();
            let placement = history.moved.get(&id).cloned().or(self.placement.take());
            history.freed(id);
            history.push(EventKind::Free, self.bytes, |event| {
                event.id = Some(id);
                event.label = label;
                event.memory = Some(MAIN_MEMORY.to_string());
                if let Some(placement) = placement {
                    event.pool = Some(placement.pool);
                    event.page = Some(placement.page);
                    event.offset = Some(placement.offset);
                }
            });
        }
    }
}

/// Where a reservation landed: the pool's name, the page id and the offset in bytes.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) pool: String,
    pub(crate) page: u64,
    pub(crate) offset: u64,
}

impl Server {
    /// Starts or stops keeping page and spill events in every memory (main, readback
    /// staging, upload staging), for [`record_page_events`](Self::record_page_events).
    pub(crate) fn observe_pages(&mut self, on: bool) {
        for memory in [&mut self.main, &mut self.staging, &mut self.uploads.memory] {
            memory.observe_pages(on);
        }
    }

    /// Moves the page and spill events every memory kept into `history`, stamped now.
    /// A spill is the reservation `reservation` (its id and label) when one is given.
    pub(crate) fn record_page_events(
        &mut self,
        history: &mut History,
        reservation: Option<(u64, Option<&str>)>,
    ) {
        let mut memories = [
            (MAIN_MEMORY, &mut self.main),
            ("staging", &mut self.staging),
            ("upload", &mut self.uploads.memory),
        ];
        // The three memories' events, merged into the order they happened: a write gives
        // free upload pages back before its handle's main page is made.
        let mut events: Vec<(u64, usize, MemoryEvent)> = Vec::new();
        for (index, (name, memory)) in memories.iter_mut().enumerate() {
            let (taken, dropped) = memory.take_sequenced_events();
            if dropped > 0 {
                tracing::warn!(
                    memory = *name,
                    dropped,
                    "page events dropped before history took them"
                );
            }
            events.extend(taken.into_iter().map(|(seq, event)| (seq, index, event)));
        }
        events.sort_by_key(|(seq, _, _)| *seq);
        let mut made: BTreeSet<(&'static str, u64)> = BTreeSet::new();
        for (_, index, event) in events {
            let (name, memory) = &memories[index];
            if let MemoryEvent::PageMade { page, .. } = event {
                made.insert((name, page));
            }
            push_page_event(history, name, memory, event, reservation);
        }
        if history.on() {
            self.record_staging_states(history, &made);
        }
    }

    /// Records each staging page that took its first slice since it was idle
    /// ([`EventKind::StagingInUse`]) or held its last one ([`EventKind::StagingIdle`])
    /// since history last looked; `made` lists the pages made since then, which start in
    /// use (a staging page is only made to serve a reservation). A page history has not
    /// seen before and did not see made (it existed when history was turned on) records
    /// nothing: a snapshot states it.
    ///
    /// # Complexity
    /// O(pages + slots) of the two staging memories.
    fn record_staging_states(&self, history: &mut History, made: &BTreeSet<(&'static str, u64)>) {
        let memories = [("staging", &self.staging), ("upload", &self.uploads.memory)];
        let mut seen: BTreeSet<(&'static str, u64)> = BTreeSet::new();
        for (name, memory) in memories {
            for pool in memory.page_map() {
                for page in &pool.pages {
                    let key = (name, page.id);
                    seen.insert(key);
                    let in_use = !page.slices.is_empty();
                    let was = match history.staging.insert(key, in_use) {
                        Some(was) => was,
                        None if made.contains(&key) => true,
                        None => continue,
                    };
                    if was == in_use {
                        continue;
                    }
                    let kind = if in_use {
                        EventKind::StagingInUse
                    } else {
                        EventKind::StagingIdle
                    };
                    history.push(kind, page.size, |record| {
                        record.memory = Some(name.to_string());
                        record.pool = Some(pool_at(memory, pool.index));
                        record.page = Some(page.id);
                    });
                }
            }
        }
        history.staging.retain(|key, _| seen.contains(key));
    }

    /// The name of the main memory's pool at layout position `position` (as a
    /// `MemoryLocation` or a `ReserveError` states it).
    pub(crate) fn main_pool_name(&self, position: u8) -> String {
        pool_at(&self.main, self.main.place(position))
    }

    /// Where `handle`'s slice lies in the main memory, or `None` for a stale handle.
    pub(crate) fn placement(&self, handle: &Handle) -> Option<Placement> {
        let (place, page, offset) = self.main.locate(&handle.binding()).ok()?;
        Some(Placement {
            pool: pool_at(&self.main, place),
            page,
            offset,
        })
    }
}

fn pool_at(memory: &MemoryManagement<WgpuStorage>, place: usize) -> String {
    match memory.pool_kind(place) {
        Some(kind) => place_name(memory.pool_count(), place, &kind),
        None => format!("pool {place}"),
    }
}

fn push_page_event(
    history: &mut History,
    name: &str,
    memory: &MemoryManagement<WgpuStorage>,
    event: MemoryEvent,
    reservation: Option<(u64, Option<&str>)>,
) {
    if let MemoryEvent::Move { .. } = event {
        push_move(history, name, memory, event);
        return;
    }
    let (kind, pool, page, bytes) = match event {
        MemoryEvent::PageMade { pool, page, bytes } => {
            (EventKind::PageMade, pool, Some(page), bytes)
        }
        MemoryEvent::PageReleased { pool, page, bytes } => {
            (EventKind::PageReleased, pool, Some(page), bytes)
        }
        MemoryEvent::Spill { to, bytes, .. } => (EventKind::Spill, to, None, bytes),
        MemoryEvent::Move { .. } => return,
    };
    history.push(kind, bytes, |record| {
        record.memory = Some(name.to_string());
        record.pool = Some(pool_at(memory, pool));
        record.page = page;
        if kind == EventKind::Spill
            && let Some((id, label)) = reservation
        {
            record.id = Some(id);
            record.label = label.map(str::to_string);
        }
    });
}

/// A compaction's move: where the slice went (`page`, `offset`), where it came from, and
/// the allocation's id and label.
fn push_move(
    history: &mut History,
    name: &str,
    memory: &MemoryManagement<WgpuStorage>,
    event: MemoryEvent,
) {
    let MemoryEvent::Move {
        pool,
        id,
        from_page,
        from_offset,
        to_page,
        to_offset,
        bytes,
    } = event
    else {
        return;
    };
    let label = history.label_of(id).and_then(|(label, _)| label.clone());
    let pool = pool_at(memory, pool);
    if name == MAIN_MEMORY && history.live.contains_key(&id) {
        let placement = Placement {
            pool: pool.clone(),
            page: to_page,
            offset: to_offset,
        };
        history.moved.insert(id, placement);
    }
    history.push(EventKind::Move, bytes, |record| {
        record.memory = Some(name.to_string());
        record.pool = Some(pool);
        record.page = Some(to_page);
        record.offset = Some(to_offset);
        record.from_page = Some(from_page);
        record.from_offset = Some(from_offset);
        record.id = Some(id);
        record.label = label;
    });
}
