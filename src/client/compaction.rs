//! Compaction and cleanup on request: moving live slices so free bytes come together,
//! and giving back the pages that empties (the cleanup itself is in `cleanup`).

use super::Client;
use super::cleanup::{GivenBack, Held};
use crate::report::EventKind;
use std::time::Duration;
use web_time::Instant;

/// What one [`Client::compact`] did ([`Client::cleanup`] returns a
/// [`CleanupReport`](super::CleanupReport)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionReport {
    /// Slices moved.
    pub moves: usize,
    /// Bytes moved (the requested sizes of the moved slices).
    pub bytes_moved: u64,
    /// Main-memory pages given back to the driver afterwards (net, as
    /// [`GivenBack::pages`](super::GivenBack::pages)).
    pub pages_given_back: u64,
    /// Bytes of those pages (each buffer's real size).
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
        self.compact_and_give_back()
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

    /// Compacts the main memory and gives back the main pages left empty.
    fn compact_and_give_back(&self) -> Result<CompactionReport, ClientError> {
        let started = Instant::now();
        let before = self.held_after_releases();
        let (moves, bytes_moved) = self.compact_main()?;
        let [main, ..] = self.give_back(false, before);
        Ok(CompactionReport {
            moves,
            bytes_moved,
            pages_given_back: main.pages,
            bytes_given_back: main.bytes,
            took: started.elapsed(),
        })
    }

    /// What the memories hold once the dropped handles and ended export holds are
    /// released: their slices are free, not moved.
    pub(super) fn held_after_releases(&self) -> Held {
        let mut server = self.shared.server.lock();
        server.release_dropped();
        Held::of(&server)
    }

    /// Compacts the main memory and submits the batch carrying the copies, in the
    /// submit turn, so batches keep their order. Returns the slices and bytes moved.
    pub(super) fn compact_main(&self) -> Result<(usize, u64), ClientError> {
        let _turn = self.turn();
        let (done, batch) = {
            let mut server = self.shared.server.lock();
            server.check_lost("compact")?;
            let max = server.max_move_bytes();
            let done = server.compact(max);
            (done, server.take_batch())
        };
        self.submit_batch(batch)?;
        Ok((done.moves, done.bytes_moved))
    }

    /// With the submit turn let go, as every cleanup does: gives back the pages left
    /// empty (every memory's when `everything`, else the main memory's), records them,
    /// and returns what each memory gave back since `before`.
    pub(super) fn give_back(&self, everything: bool, before: Held) -> [GivenBack; 3] {
        let mut server = self.shared.server.lock();
        if everything {
            server.cleanup();
        } else {
            server.cleanup_main();
        }
        let given_back = before.given_back(Held::of(&server));
        self.record_pages(&mut server);
        if everything {
            let bytes = given_back.iter().map(|memory| memory.bytes).sum();
            self.record(EventKind::Cleanup, bytes, |_| {});
        }
        given_back
    }
}

use super::ClientError;
