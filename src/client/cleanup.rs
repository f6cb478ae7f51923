//! [`Client::cleanup`] and what it reports: the pages and bytes each memory gave back.

use super::Client;
use crate::server::Server;
use std::time::Duration;

/// Pages and bytes one memory gave back to the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GivenBack {
    /// Pages (wgpu buffers) given back: the pages the memory held before the call
    /// minus those it holds after (net of any page made meanwhile, which a cleanup does
    /// not make itself).
    pub pages: u64,
    /// Bytes of those pages (each buffer's real size), net as `pages` is.
    pub bytes: u64,
}

/// What one [`Client::cleanup`] did: the compaction it ran first, and what each memory
/// gave back.
///
/// Given-back pages are dropped at once; wgpu frees a page's device memory once the
/// device is done with the work that uses it (the compaction's copies included), and
/// the budget keeps them charged until then
/// ([`BudgetUse::retiring`](crate::report::BudgetUse::retiring)). So the device's own
/// figures ([`Client::device_memory`]) may fall only after the submitted work
/// completes: they are not in this report for that reason; read them after a
/// [`Client::sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanupReport {
    /// Slices the compaction moved (0 when wgpu refused the batch carrying its copies).
    pub moves: usize,
    /// Bytes the compaction moved (the requested sizes of the moved slices).
    pub bytes_moved: u64,
    /// What the main memory gave back.
    pub main: GivenBack,
    /// What the readback staging memory (`"staging"` in reports) gave back.
    pub readback_staging: GivenBack,
    /// What the upload staging memory (`"upload"` in reports) gave back.
    pub upload_staging: GivenBack,
    /// Wall time of the call: submitting the recorded work, the compaction (planning,
    /// recording and submitting its copies, not the GPU's time to run them) and the
    /// give-back.
    pub took: Duration,
}

impl CleanupReport {
    /// Pages given back by all three memories.
    pub fn pages_given_back(&self) -> u64 {
        self.main.pages + self.readback_staging.pages + self.upload_staging.pages
    }

    /// Bytes given back by all three memories.
    pub fn bytes_given_back(&self) -> u64 {
        self.main.bytes + self.readback_staging.bytes + self.upload_staging.bytes
    }
}

/// Pages and bytes each memory holds (main, readback staging, upload staging).
#[derive(Debug, Clone, Copy)]
pub(super) struct Held([GivenBack; 3]);

impl Held {
    /// What `server`'s memories hold now.
    pub(super) fn of(server: &Server) -> Self {
        Self(server.memories().map(|(_, memory)| {
            let report = memory.memory_report();
            GivenBack {
                pages: report.dynamic.iter().map(|pool| pool.pages).sum::<u64>()
                    + report.persistent.pages
                    + report.dedicated.pages,
                bytes: memory.bytes_allocated(),
            }
        }))
    }

    /// What each memory gave back between `self` (before) and `after`.
    pub(super) fn given_back(self, after: Self) -> [GivenBack; 3] {
        std::array::from_fn(|index| GivenBack {
            pages: self.0[index].pages.saturating_sub(after.0[index].pages),
            bytes: self.0[index].bytes.saturating_sub(after.0[index].bytes),
        })
    }
}

impl Client {
    /// Gives every page without a live slice back to the driver, in every memory (main,
    /// readback staging, upload staging), after a compaction of the main memory has
    /// emptied what it can (see [`compact`](Self::compact)), and returns what each
    /// memory gave back. Submits the recorded work first, and lets wgpu finish the
    /// callbacks that hand staging pages back. Cached bind groups holding a given-back
    /// page are dropped with it, so wgpu frees the page once the device is done with it;
    /// pages the device is already done with are freed (on the client's reclaimer
    /// thread, waited for at most [`RECLAIM_WAIT`](super::RECLAIM_WAIT)) before it
    /// returns. Counts as the calling thread's submission for the exported slices it
    /// dropped (see [`resource`](Self::resource)); those other threads dropped stay held
    /// until those threads submit, sync, clean up or exit.
    ///
    /// Never fails: when wgpu refuses the batch carrying the compaction's copies (the
    /// moved slices are then claimed by that failure), a `tracing` warning says so, the
    /// report counts no move, and the free pages are given back all the same.
    pub fn cleanup(&self) -> CleanupReport {
        let started = web_time::Instant::now();
        // A cleanup counts as the calling thread's submission: it ends the holds of the
        // exports this thread dropped before it (`Client::resource`).
        let _ = self.shared.export_epoch.counted(|| self.flush());
        self.poll(wgpu::PollType::Poll);
        let before = self.held_after_releases();
        let (moves, bytes_moved) = self.compact_main().unwrap_or_else(|error| {
            tracing::warn!(%error, "cleanup: the compaction's copies were refused");
            (0, 0)
        });
        let [main, readback_staging, upload_staging] = self.give_back(true, before);
        // The given-back pages' retiring bucket goes to the device with this (maybe
        // empty) batch, so the budget credits them once the device is done with them.
        let _ = self.flush();
        self.poll(wgpu::PollType::Poll);
        // Pages the device was already done with are freed on the reclaimer thread; a
        // cleanup returns once they are, so the budget and wgpu's report show them gone.
        self.wait_reclaimed();
        CleanupReport {
            moves,
            bytes_moved,
            main,
            readback_staging,
            upload_staging,
            took: started.elapsed(),
        }
    }
}
