//! The client's history ring and the record a handle carries to log its own free.
//!
//! The ring sits behind its own mutex, apart from the server's: a handle's last clone may
//! be dropped anywhere, even while the server's lock is held, and logging its free must
//! not take that lock. Nothing is dropped or called out while this mutex is held.

use crate::report::{EventKind, HistoryEvent, HistoryRing, LabelStack};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// The ring and the clock its times count from.
#[derive(Debug)]
pub(crate) struct History {
    ring: HistoryRing,
    started: Instant,
    /// The label scopes open now.
    pub(crate) labels: LabelStack,
    /// Live allocations reserved while history was on: id → (label, reserved at µs).
    pub(crate) live: HashMap<u64, (Option<String>, u64)>,
}

impl History {
    pub(crate) fn new(capacity: usize) -> Self {
        History {
            ring: HistoryRing::new(capacity),
            started: Instant::now(),
            labels: LabelStack::default(),
            live: HashMap::new(),
        }
    }

    /// µs since the client was made (saturating).
    pub(crate) fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
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

    /// The events held, oldest first, and how many older ones were dropped.
    pub(crate) fn events(&self) -> (Vec<HistoryEvent>, u64) {
        (self.ring.to_vec(), self.ring.dropped())
    }
}

/// Carried by every clone of a handle made while history is on; dropped with the last
/// clone, it records the allocation's [`EventKind::Free`].
#[derive(Debug)]
pub(crate) struct FreeRecord {
    pub(crate) history: Weak<Mutex<History>>,
    pub(crate) bytes: u64,
    pub(crate) id: u64,
    pub(crate) label: Option<String>,
}

impl FreeRecord {
    pub(crate) fn new(
        history: &Arc<Mutex<History>>,
        bytes: u64,
        id: u64,
        label: Option<String>,
    ) -> Arc<Self> {
        Arc::new(FreeRecord {
            history: Arc::downgrade(history),
            bytes,
            id,
            label,
        })
    }
}

impl Drop for FreeRecord {
    fn drop(&mut self) {
        // The client may be gone already: then there is no ring to record into.
        if let Some(history) = self.history.upgrade() {
            let label = self.label.take();
            let id = self.id;
            let mut history = history.lock();
            history.live.remove(&id);
            history.push(EventKind::Free, self.bytes, |event| {
                event.id = Some(id);
                event.label = label;
            });
        }
    }
}
