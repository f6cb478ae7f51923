//! Slices the application was given (`Client::resource`), held past their last drop until
//! the application's own work recorded on them has been submitted.
//!
//! The contract (README, "What the client asks of the application"): the application
//! submits command buffers that use the client's slices through `Client::queue()`. A
//! slice whose resource was exported then stays reserved, after its last `Handle` and
//! `HandleResource` are dropped, until the application's next submission through
//! `Client::queue()` from any thread, or its next `Client::sync()` or
//! `Client::cleanup()`:
//!
//! 1. [`Server::export`] keeps a binding of the slice, and the resource it hands out
//!    carries an [`ExportLife`]: while any clone of that resource lives the slice is
//!    pinned whole (its page neither gives nor takes moved slices: the application holds
//!    the page's buffer, and may even destroy it);
//! 2. when the resource's last clone is dropped, its life records the **export epoch**
//!    at that moment; the epoch counts the application's submissions through the
//!    client's queue and its syncs and cleanups ([`ExportEpoch::advance`]), from any
//!    thread;
//! 3. the first reservation (or cleanup) after the epoch moved on lets go of every hold
//!    whose resource was dropped at an earlier epoch ([`Server::release_exports`], one
//!    pass over the holds per epoch), and releases its slice in O(1) when nothing else
//!    holds it.
//!
//! So work the application records on an exported slice, then submits through
//! `Client::queue()`, is on the queue before any new work of the client's can land on
//! that slice, when no other thread submits, syncs or cleans up in between: any
//! thread's does end the hold (that is what lets threads that never submit free what
//! they exported), so threads that share a client keep a resource alive until the work
//! recorded on it is submitted. A hold whose resource is gone but whose epoch has not passed yet keeps
//! only its own slice in place ([`Pin::Slice`](crate::memory_management::Pin)): its
//! page may still take moved slices, once a probe has shown the application did not
//! destroy it while it held the buffer. At most [`MAX_HELD_EXPORTS`] are held; past that
//! the oldest is let go (with a warning), which only an application that exports that
//! many slices without ever submitting, syncing or cleaning up meets.

use super::export_life::{ALIVE, ExportEpoch, ExportLife};
use super::handle::Handle;
use crate::memory_management::{MemoryManagement, Pin, page_id};
use crate::server::Server;
use crate::storage::WgpuStorage;
use cubecl_runtime::memory_management::{ManagedMemoryBinding, ManagedMemoryId};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bound on the exported slices held waiting for an application submission.
pub const MAX_HELD_EXPORTS: usize = 1 << 16;

/// Exported slices held, oldest first, and the epoch of the last pass over them.
#[derive(Default)]
pub(crate) struct Exports {
    held: VecDeque<Held>,
    epoch: Arc<ExportEpoch>,
    /// The epoch the last pass over the holds saw.
    seen: u64,
    /// Pages of holds let go before a compaction probed them: probed at the next pass
    /// (at most one entry per page; emptied by every pass).
    unprobed: Vec<u64>,
}

struct Held {
    binding: ManagedMemoryBinding,
    id: ManagedMemoryId,
    /// The epoch at which the resource's last clone was dropped ([`ALIVE`] until then).
    dropped_at: Arc<AtomicU64>,
    /// Whether a probe showed the slice's page intact after the resource was dropped.
    verified: bool,
}

impl Held {
    fn dropped_at(&self) -> u64 {
        self.dropped_at.load(Ordering::Acquire)
    }
}

impl Exports {
    /// The epoch the client advances on the application's submissions, syncs and
    /// cleanups.
    pub(crate) fn epoch(&self) -> Arc<ExportEpoch> {
        self.epoch.clone()
    }

    /// Exports held (tests check the bound and the releases).
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

impl Server {
    /// Notes that `handle`'s slice was exported (step 1); returns the life the exported
    /// resource carries.
    pub(crate) fn export(&mut self, handle: &Handle) -> Arc<ExportLife> {
        if self.exports.held.len() >= MAX_HELD_EXPORTS
            && let Some(oldest) = self.exports.held.pop_front()
        {
            tracing::warn!(
                held = MAX_HELD_EXPORTS,
                "exported slices held past the bound with no submission through Client::queue(), sync or cleanup: the oldest is let go"
            );
            self.let_go(oldest);
        }
        let dropped_at = Arc::new(AtomicU64::new(ALIVE));
        let binding = handle.binding();
        self.exports.held.push_back(Held {
            id: binding.id(),
            binding,
            dropped_at: dropped_at.clone(),
            verified: false,
        });
        Arc::new(ExportLife {
            epoch: self.exports.epoch.clone(),
            dropped_at,
        })
    }

    /// Lets go of every hold whose resource was dropped before the current epoch
    /// (step 3). O(1) unless the epoch moved since the last pass.
    pub(crate) fn release_exports(&mut self) {
        let now = self.exports.epoch.now();
        if now == self.exports.seen {
            return;
        }
        self.exports.seen = now;
        let held = std::mem::take(&mut self.exports.held);
        let (done, kept): (VecDeque<Held>, VecDeque<Held>) =
            held.into_iter().partition(|held| held.dropped_at() < now);
        self.exports.held = kept;
        for held in done {
            self.let_go(held);
        }
    }

    fn let_go(&mut self, held: Held) {
        if !held.verified
            && let Ok(storage) = self.main.get_storage(&held.binding)
            && !self.exports.unprobed.contains(&page_id(&storage.id))
        {
            self.exports.unprobed.push(page_id(&storage.id));
        }
        let Held { binding, id, .. } = held;
        let location = binding.descriptor().location();
        drop(binding);
        self.main.release(id, location);
    }
}

impl Exports {
    /// The holds' part of a compaction's pins: each held slice whose resource is gone
    /// stays where it is ([`Pin::Slice`]). Returns them with the pages not yet probed
    /// since their resource was dropped (held still, or let go since the last pass): the
    /// caller probes those (the application may have destroyed the buffer while it held
    /// it) before planning. Slices whose
    /// resource lives are pinned whole by the resource itself.
    pub(crate) fn pins(
        &mut self,
        main: &MemoryManagement<WgpuStorage>,
    ) -> (HashMap<ManagedMemoryId, Pin>, Vec<u64>) {
        let mut pins = HashMap::default();
        let mut probe: Vec<u64> = std::mem::take(&mut self.unprobed);
        for held in &mut self.held {
            if held.dropped_at() == ALIVE {
                continue;
            }
            pins.insert(held.id, Pin::Slice);
            if !held.verified {
                held.verified = true;
                if let Ok(storage) = main.get_storage(&held.binding)
                    && !probe.contains(&page_id(&storage.id))
                {
                    probe.push(page_id(&storage.id));
                }
            }
        }
        (pins, probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_life_records_the_epoch_of_its_drop() {
        let epoch = Arc::new(ExportEpoch::default());
        let dropped_at = Arc::new(AtomicU64::new(ALIVE));
        let life = ExportLife {
            epoch: epoch.clone(),
            dropped_at: dropped_at.clone(),
        };
        epoch.advance();
        assert_eq!(dropped_at.load(Ordering::Acquire), ALIVE);
        drop(life);
        assert_eq!(dropped_at.load(Ordering::Acquire), 1);
    }
}
