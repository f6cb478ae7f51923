//! Slices the application was given (`Client::resource`), held past their last drop until
//! the application's own work recorded on them has been submitted.
//!
//! The contract (README, "What the client asks of the application"): the application
//! submits command buffers that use the client's slices through `Client::queue()`. A
//! slice whose resource was exported then stays reserved, after its last `Handle` and
//! `HandleResource` are dropped, until the exporting thread's next submission through
//! `Client::queue()` (per thread: another thread's submission says nothing of the
//! encoder this thread is still recording):
//!
//! 1. [`Server::export`] keeps a binding of the slice, stamped with the exporting thread
//!    and the number of that thread's submissions seen so far;
//! 2. the client counts each submission made through its queue, per thread
//!    ([`Server::app_submitted`], after wgpu took it);
//! 3. the first reservation after such a submission lets go of the bindings whose
//!    thread has submitted since their stamp ([`Server::release_exports`], one pass over
//!    the held exports per application submission), and releases their slices in O(1)
//!    when nothing else holds them.
//!
//! So work the application records on an exported slice, then submits through
//! `Client::queue()`, is on the queue before any new work of the client's can land on
//! that slice: the natural helper shape (record a pass on a resource, drop it, make a new
//! handle, submit) cannot be corrupted by accident. At most [`MAX_HELD_EXPORTS`] are held;
//! past that the oldest is let go (with a warning), which only an application that
//! exports that many slices without ever submitting through the client's queue meets.

use super::Server;
use super::handle::Handle;
use cubecl_runtime::memory_management::{ManagedMemoryBinding, ManagedMemoryId, MemoryLocation};
use std::collections::VecDeque;
use std::thread::ThreadId;

/// Bound on the exported slices held waiting for an application submission.
pub const MAX_HELD_EXPORTS: usize = 1 << 16;

/// Bound on the threads whose submissions are counted; past it the thread that
/// submitted longest ago is forgotten (its holds then last until
/// [`MAX_HELD_EXPORTS`] pushes them out).
pub const MAX_SUBMITTING_THREADS: usize = 1024;

/// Exported slices held, oldest first, and the application submissions counted.
#[derive(Default)]
pub(crate) struct Exports {
    held: VecDeque<Held>,
    /// Submissions through the client's queue, per thread (at most
    /// [`MAX_SUBMITTING_THREADS`], the most recent last).
    submits: Vec<(ThreadId, u64)>,
    /// Set by a submission, cleared by the pass that looks at the holds.
    submitted: bool,
}

struct Held {
    binding: ManagedMemoryBinding,
    /// The application may still use the slice's address: it must not move.
    _pin: super::compaction::PinGuard,
    id: ManagedMemoryId,
    location: MemoryLocation,
    /// The exporting thread, and its submissions counted when it exported.
    thread: ThreadId,
    stamp: u64,
}

impl Exports {
    /// The submissions counted for `thread` (0 for one never seen, or forgotten).
    fn submits_of(&self, thread: ThreadId) -> Option<u64> {
        self.submits
            .iter()
            .find(|(id, _)| *id == thread)
            .map(|(_, count)| *count)
    }
}

impl Server {
    /// Notes that `handle`'s slice was exported (step 1).
    pub(crate) fn export(&mut self, handle: &Handle) {
        let thread = std::thread::current().id();
        let stamp = self.exports.submits_of(thread).unwrap_or(0);
        let binding = handle.binding();
        let id = binding.id();
        let location = binding.descriptor().location();
        if self.exports.held.len() >= MAX_HELD_EXPORTS
            && let Some(oldest) = self.exports.held.pop_front()
        {
            tracing::warn!(
                held = MAX_HELD_EXPORTS,
                "exported slices held past the bound with no submission through Client::queue(): the oldest is let go"
            );
            self.let_go(oldest);
        }
        let pin = self.pin(handle);
        self.exports.held.push_back(Held {
            binding,
            _pin: pin,
            id,
            location,
            thread,
            stamp,
        });
    }

    /// Counts a submission of the application's through the client's queue, made by
    /// the calling thread (step 2).
    pub(crate) fn app_submitted(&mut self) {
        let thread = std::thread::current().id();
        let submits = &mut self.exports.submits;
        let count = match submits.iter().position(|(id, _)| *id == thread) {
            Some(at) => submits.remove(at).1 + 1,
            None => 1,
        };
        if submits.len() >= MAX_SUBMITTING_THREADS {
            submits.remove(0);
        }
        submits.push((thread, count));
        self.exports.submitted = true;
    }

    /// Lets go of every export whose thread submitted since it was stamped (step 3).
    /// O(1) unless an application submission happened since the last pass.
    pub(crate) fn release_exports(&mut self) {
        if !std::mem::take(&mut self.exports.submitted) {
            return;
        }
        let held = std::mem::take(&mut self.exports.held);
        let (done, kept): (VecDeque<Held>, VecDeque<Held>) = held
            .into_iter()
            .partition(|held| self.exports.submits_of(held.thread).unwrap_or(0) > held.stamp);
        self.exports.held = kept;
        for held in done {
            self.let_go(held);
        }
    }

    fn let_go(&mut self, held: Held) {
        let Held {
            binding,
            id,
            location,
            ..
        } = held;
        drop(binding);
        self.main.release(id, location);
    }
}
