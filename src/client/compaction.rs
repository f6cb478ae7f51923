//! Compaction and cleanup on request: moving live slices so free bytes come together,
//! and giving back the pages that empties.

use super::Client;
use crate::report::EventKind;
use std::time::{Duration, Instant};

/// What one [`Client::compact`] (or the compaction inside [`Client::cleanup`]) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionReport {
    /// Slices moved.
    pub moves: usize,
    /// Bytes moved (the requested sizes of the moved slices).
    pub bytes_moved: u64,
    /// Main-memory pages given back to the driver afterwards.
    pub pages_given_back: u64,
    /// Bytes of those pages.
    pub bytes_given_back: u64,
    /// Wall time of the call: planning, recording the copies and submitting them (not
    /// the GPU's time to run the copies, which overlaps later work).
    pub took: Duration,
}

impl Client {
    /// Moves live slices of the main memory out of their sparsest pages into the holes
    /// of fuller ones, then gives back every main page left empty. At most
    /// [`max_move_bytes`](Self::max_move_bytes) move per call. Handles, and launches
    /// recorded after it, follow the moved slices; a slice whose [`HandleResource`]
    /// the application holds, or that a read has in flight, does not move (nor does its
    /// page's other slices). The copies are submitted before it returns.
    ///
    /// Reservations compact by themselves when they would otherwise add a page while
    /// enough free bytes lie in holes, or fail for room; [`cleanup`](Self::cleanup)
    /// compacts too.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is
    /// lost; [`ClientError::Wgpu`] when wgpu refuses the batch
    /// carrying the copies (the moved slices' bytes are then claimed by that failure).
    ///
    /// [`HandleResource`]: super::HandleResource
    pub fn compact(&self) -> Result<CompactionReport, ClientError> {
        self.flush()?;
        self.compact_and_give_back(false)
    }

    /// Gives every page without a live slice back to the driver, in every memory (main,
    /// readback staging, upload staging), after a compaction of the main memory has
    /// emptied what it can (see [`compact`](Self::compact)). Submits the recorded work
    /// first, and lets wgpu finish the callbacks that hand staging pages back. Cached
    /// bind groups holding a given-back page are dropped with it, so wgpu frees the page
    /// once the device is done with it.
    pub fn cleanup(&self) {
        let _ = self.flush();
        self.shared.export_epoch.advance();
        self.poll(wgpu::PollType::Poll);
        if let Err(error) = self.compact_and_give_back(true) {
            tracing::warn!(%error, "cleanup: the compaction's copies were refused");
        }
        // The given-back pages' bucket goes to the device, to be credited once it is done.
        let _ = self.flush();
        self.poll(wgpu::PollType::Poll);
    }

    /// The bound on the bytes one compaction pass moves, in bytes (default
    /// [`DEFAULT_MAX_MOVE_BYTES`](crate::memory_management::DEFAULT_MAX_MOVE_BYTES),
    /// 256 MiB: about a millisecond of copies on a discrete GPU, so one pass never holds
    /// the queue for long).
    pub fn max_move_bytes(&self) -> u64 {
        self.shared.server.lock().max_move_bytes()
    }

    /// Sets the bound on the bytes one compaction pass moves, in bytes; 0 turns
    /// compaction off (reservations then grow pools as before, and
    /// [`compact`](Self::compact) moves nothing).
    pub fn set_max_move_bytes(&self, bytes: u64) {
        self.shared.server.lock().set_max_move_bytes(bytes);
    }

    /// Compacts the main memory and submits the batch carrying the copies (in the submit
    /// turn, so batches keep their order), then, with the turn let go as every cleanup
    /// does, gives back the pages left empty (every memory's when `everything`).
    fn compact_and_give_back(&self, everything: bool) -> Result<CompactionReport, ClientError> {
        let started = Instant::now();
        let (done, before, pages_before) = {
            let _turn = self.turn();
            let (done, batch, before, pages_before) = {
                let mut server = self.shared.server.lock();
                server.check_lost("compact")?;
                // Dropped handles and ended export holds first: their slices are
                // free, not moved.
                server.release_dropped();
                let before = reserved_bytes(&server);
                let pages_before = server.main_pages();
                let max = server.max_move_bytes();
                let done = server.compact(max);
                (done, server.take_batch(), before, pages_before)
            };
            self.submit_batch(batch)?;
            (done, before, pages_before)
        };
        let mut server = self.shared.server.lock();
        if everything {
            server.cleanup();
        } else {
            server.cleanup_main();
        }
        let given_back = before.saturating_sub(reserved_bytes(&server));
        self.record_pages(&mut server);
        if everything {
            self.record(EventKind::Cleanup, given_back, |_| {});
        }
        Ok(CompactionReport {
            moves: done.moves,
            bytes_moved: done.bytes_moved,
            pages_given_back: pages_before.saturating_sub(server.main_pages()),
            bytes_given_back: given_back,
            took: started.elapsed(),
        })
    }
}

use super::ClientError;

/// Bytes of every page held, in all three memories.
fn reserved_bytes(server: &crate::server::Server) -> u64 {
    super::reserved_bytes(&server.memory_report())
}
