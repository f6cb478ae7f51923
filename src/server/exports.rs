//! Slices the application was given (`Client::resource`), held past their last drop until
//! the application's own work recorded on them has been submitted.
//!
//! The contract (README, "What the client asks of the application"): the application
//! submits command buffers that use the client's slices through `Client::queue()`. A
//! slice whose resource was exported then stays reserved, after its last `Handle` and
//! `HandleResource` are dropped, until the application's next submission through
//! `Client::queue()`:
//!
//! 1. [`Server::export`] keeps a binding of the slice, stamped with the number of
//!    application submissions seen so far;
//! 2. the client counts each submission made through its queue
//!    ([`Server::app_submitted`], after wgpu took it);
//! 3. each reservation first lets go of the bindings stamped before the latest such
//!    submission ([`Server::release_exports`]), and releases their slices in O(1) when
//!    nothing else holds them.
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

/// Bound on the exported slices held waiting for an application submission.
pub const MAX_HELD_EXPORTS: usize = 1 << 16;

/// Exported slices held, oldest first, and the application submissions counted.
#[derive(Default)]
pub(crate) struct Exports {
    held: VecDeque<Held>,
    app_submits: u64,
}

struct Held {
    binding: ManagedMemoryBinding,
    id: ManagedMemoryId,
    location: MemoryLocation,
    /// Application submissions counted when the slice was (last) exported.
    stamp: u64,
}

impl Server {
    /// Notes that `handle`'s slice was exported (step 1).
    pub(crate) fn export(&mut self, handle: &Handle) {
        let stamp = self.exports.app_submits;
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
        self.exports.held.push_back(Held {
            binding,
            id,
            location,
            stamp,
        });
    }

    /// Counts a submission of the application's through the client's queue (step 2).
    pub(crate) fn app_submitted(&mut self) {
        self.exports.app_submits += 1;
    }

    /// Lets go of every export stamped before the latest application submission
    /// (step 3). O(1) when none is held.
    pub(crate) fn release_exports(&mut self) {
        let now = self.exports.app_submits;
        while self
            .exports
            .held
            .front()
            .is_some_and(|held| held.stamp < now)
        {
            if let Some(held) = self.exports.held.pop_front() {
                self.let_go(held);
            }
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
