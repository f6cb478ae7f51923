//! The write behind [`Client::create_with`] and [`Client::write_with`]: through upload
//! staging, or, on the web, handed to the queue after the recorded work that uses the
//! same page (see `server::uploads::queued`).

use super::{Client, ClientError, Handle};
use crate::server::Server;
use parking_lot::MutexGuard;
use std::cell::Cell;

/// The most times one write handed to the queue submits the open batch before it finds
/// its pages free of recorded work: 4. On the web (one thread) the first submit always
/// does it; on native adapters another thread may record on the same page while the
/// client's lock is let go for the submit.
const MAX_WRITE_SUBMITS: usize = 4;

impl Client {
    /// Writes `size` bytes at byte `offset` of `handle`, filled by the closure in `fill`
    /// (taken once), under `server` (the client's lock, taken with the submit turn held).
    /// Returns the lock: a write handed to the queue lets it go to submit the recorded
    /// work that uses the same page first, and takes it again.
    ///
    /// # Errors
    /// As [`write_with`](Self::write_with); [`ClientError::Wgpu`] when the submit made
    /// first fails (the write is not made then).
    pub(super) fn upload<'a, F: FnOnce(wgpu::WriteOnly<'_, [u8]>)>(
        &'a self,
        mut server: MutexGuard<'a, Server>,
        handle: &Handle,
        offset: u64,
        size: u64,
        fill: &Cell<Option<F>>,
    ) -> Result<MutexGuard<'a, Server>, ClientError> {
        let fill_view = |view: wgpu::WriteOnly<'_, [u8]>| self.shared.server.fill(fill, view);
        if !server.queues_writes() {
            server.write_with(handle, offset, size, fill_view)?;
            return Ok(server);
        }
        let Some(write) = server.queued_write(handle, offset, size)? else {
            return Ok(server);
        };
        for _ in 0..MAX_WRITE_SUBMITS {
            if !server.queued_write_waits(handle, &write)? {
                server.finish_queued_write(&self.shared.queue, handle, write, fill_view)?;
                return Ok(server);
            }
            // Recorded work uses the page: it goes first (the turn is still held, so
            // no launch, write or read of another thread records meanwhile).
            drop(server);
            self.flush()?;
            server = self.shared.server.lock();
        }
        Err(crate::server::wgpu_error(
            "write",
            format!(
                "work recorded on the written page kept coming back after {MAX_WRITE_SUBMITS} submits; nothing was written"
            ),
        ))
    }
}
