//! Slices the application was given (`Client::resource`), held past their last drop until
//! the work the application recorded on them has been submitted.
//!
//! The contract (README, "What the client asks of you"): the application
//! submits command buffers that use the client's slices through `Client::queue()`, on
//! the thread that dropped the resource. A slice whose resource was exported then stays
//! reserved and in place, after its last `Handle` and `HandleResource` are dropped,
//! until **the thread that dropped the resource's last clone** submits through
//! `Client::queue()`, or calls `Client::sync()`, `Client::cleanup()` or
//! `Client::install_memory_pools()`, or exits:
//!
//! 1. [`Server::export`] keeps a binding of the slice, and the resource it hands out
//!    carries an [`ExportLife`]: while any clone of that resource lives the slice is
//!    pinned whole (its page neither gives nor takes moved slices: the application holds
//!    the page's buffer, and may even destroy it);
//! 2. when the resource's last clone is dropped, its life records the dropping thread's
//!    own count of its submissions to this client ([`Dropped::On`]); each thread counts
//!    its submissions through the client's queue, syncs, cleanups and installs itself
//!    ([`ExportEpoch::counted`], after the wgpu submit returned), and a thread's exit
//!    marks its counts exited;
//! 3. the first reservation (or cleanup, compaction, install) after any count moved
//!    lets go of every hold whose thread has submitted since the drop, or exited
//!    ([`Server::release_exports`], one pass over the holds per change), and releases
//!    its slice in O(1) when nothing else holds it.
//!
//! So work a thread records on an exported slice of a live handle, then submits through
//! `Client::queue()`, lands in that handle's bytes whatever other threads submit, sync,
//! clean up or compact meanwhile, and whether or not the resource was dropped before the
//! submit: the slice neither moves nor is reused before that thread's submission has
//! returned, and a move or reuse recorded after it lands in a later submission. What the
//! rule cannot see is work recorded on one thread and submitted from another: the hold
//! ends with the dropping thread's own next submission, so such a program keeps the
//! resource alive until the work recorded on it is submitted. A thread that drops an
//! exported resource and then never submits, syncs, cleans up or exits keeps that slice
//! reserved ([`Client::held_exports`](crate::Client::held_exports) counts them; an
//! install refused for them names the threads).
//!
//! A hold whose resource is gone but whose thread has not submitted yet keeps only its
//! own slice in place ([`Pin::Slice`](crate::memory_management::Pin)): its page may
//! still take moved slices, once a probe has shown the application did not destroy it
//! while it held the buffer. At most [`MAX_HELD_EXPORTS`] are held; past that the oldest
//! is let go (with a warning), which only an application that exports that many slices
//! without the dropping threads ever submitting meets.

use super::export_life::{Dropped, ExportEpoch, ExportLife};
use super::handle::Handle;
use crate::memory_management::{MemoryManagement, Pin, page_id};
use crate::server::Server;
use crate::storage::WgpuStorage;
use cubecl_runtime::memory_management::{ManagedMemoryBinding, ManagedMemoryId};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

/// Bound on the exported slices held waiting for an application submission.
pub const MAX_HELD_EXPORTS: usize = 1 << 16;

/// Exported slices held, oldest first, and the epoch of the last pass over them.
#[derive(Default)]
pub(crate) struct Exports {
    held: VecDeque<Held>,
    epoch: Arc<ExportEpoch>,
    /// The epoch's changes the last pass over the holds saw.
    seen: u64,
    /// Pages of holds let go before a compaction probed them: probed at the next pass
    /// (at most one entry per page; emptied by every pass).
    unprobed: Vec<u64>,
}

struct Held {
    binding: ManagedMemoryBinding,
    id: ManagedMemoryId,
    /// The handle's size, in bytes (for messages).
    size: u64,
    /// Set when the resource's last clone is dropped; empty while it lives.
    dropped: Arc<OnceLock<Dropped>>,
    /// Whether a probe showed the slice's page intact after the resource was dropped.
    verified: bool,
}

impl Held {
    /// Whether the hold has ended: the resource was dropped and its thread has
    /// submitted since, or exited.
    fn ended(&self) -> bool {
        self.dropped.get().is_some_and(Dropped::ended)
    }
}

/// Exported slices whose resources are dropped, waiting for the dropping threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// Slices held.
    pub(crate) slices: usize,
    /// Their handles' bytes.
    pub(crate) bytes: u64,
    /// The threads they wait for (name and id), each once, at most eight.
    pub(crate) threads: Vec<String>,
}

impl Exports {
    /// The epoch the client's submissions, syncs, cleanups and installs count on.
    pub(crate) fn epoch(&self) -> Arc<ExportEpoch> {
        self.epoch.clone()
    }

    /// Exports held (tests check the bound and the releases).
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// The holds whose resource is dropped and whose thread has not submitted since.
    pub(crate) fn waiting(&self) -> Waiting {
        let mut waiting = Waiting::default();
        for held in &self.held {
            let Some(thread) = held.dropped.get().and_then(Dropped::waits_for) else {
                continue;
            };
            waiting.slices += 1;
            waiting.bytes += held.size;
            if waiting.threads.len() < 8 && !waiting.threads.iter().any(|t| t == thread) {
                waiting.threads.push(thread.to_string());
            }
        }
        waiting
    }
}

impl Server {
    /// Notes that `handle`'s slice was exported (step 1); returns the life the exported
    /// resource carries.
    pub(crate) fn export(&mut self, handle: &Handle) -> Arc<ExportLife> {
        if self.exports.held.len() >= MAX_HELD_EXPORTS
            && let Some(oldest) = self.exports.held.pop_front()
        {
            let thread = oldest.dropped.get().and_then(Dropped::waits_for);
            tracing::warn!(
                held = MAX_HELD_EXPORTS,
                waiting_for = thread.unwrap_or("none (its resource lives)"),
                "exported slices held past the bound with no submission through Client::queue(), sync or cleanup on the threads that dropped them: the oldest is let go"
            );
            self.let_go(oldest);
        }
        let dropped = Arc::new(OnceLock::new());
        let binding = handle.binding();
        self.exports.held.push_back(Held {
            id: binding.id(),
            binding,
            size: handle.size,
            dropped: dropped.clone(),
            verified: false,
        });
        Arc::new(ExportLife {
            epoch: self.exports.epoch.clone(),
            dropped,
        })
    }

    /// Lets go of every hold that ended (step 3). O(1) unless a thread's count moved
    /// (or a counting thread exited) since the last pass.
    pub(crate) fn release_exports(&mut self) {
        let now = self.exports.epoch.now();
        if now == self.exports.seen {
            return;
        }
        self.exports.seen = now;
        let held = std::mem::take(&mut self.exports.held);
        let (done, kept): (VecDeque<Held>, VecDeque<Held>) =
            held.into_iter().partition(Held::ended);
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
    /// stays where it is ([`Pin::Slice`]), and so does the page of each whose resource
    /// lives ([`Pin::Page`], as the resource's own pin: this one covers the moment the
    /// resource's last clone is being dropped). Returns them with the pages not yet
    /// probed since their resource was dropped (held still, or let go since the last
    /// pass): the caller probes those (the application may have destroyed the buffer
    /// while it held it) before planning.
    pub(crate) fn pins(
        &mut self,
        main: &MemoryManagement<WgpuStorage>,
    ) -> (HashMap<ManagedMemoryId, Pin>, Vec<u64>) {
        let mut pins = HashMap::default();
        let mut probe: Vec<u64> = std::mem::take(&mut self.unprobed);
        for held in &mut self.held {
            if held.dropped.get().is_none() {
                pins.insert(held.id, Pin::Page);
                continue;
            }
            pins.entry(held.id).or_insert(Pin::Slice);
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
