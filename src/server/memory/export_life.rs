//! The life of an exported resource: the epoch that counts the application's
//! submissions, and what the last clone of an exported resource records when dropped
//! (see `exports`, steps 1 and 2).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A resource's life still going on.
pub(super) const ALIVE: u64 = u64::MAX;

/// The application's submissions through the client's queue, syncs and cleanups,
/// counted (shared with the client, advanced without the server's lock).
#[derive(Debug, Default)]
pub(crate) struct ExportEpoch(AtomicU64);

impl ExportEpoch {
    /// Counts one submission, sync or cleanup of the application's.
    pub(crate) fn advance(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn now(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Carried by every clone of an exported [`HandleResource`](crate::server::HandleResource):
/// dropped with the last one, it records the epoch at which the application let go of
/// the slice's address.
#[derive(Debug)]
pub(crate) struct ExportLife {
    pub(super) epoch: Arc<ExportEpoch>,
    pub(super) dropped_at: Arc<AtomicU64>,
}

impl Drop for ExportLife {
    fn drop(&mut self) {
        self.dropped_at.store(self.epoch.now(), Ordering::Release);
    }
}
