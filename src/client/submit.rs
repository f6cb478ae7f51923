//! Submitting: the submit turn, and the batch's way to wgpu.

use super::Client;
use crate::server::{ClientError, SegmentQueue, TurnHeld};

impl Client {
    /// Submits the work recorded so far (launches, copies, uploads) now, without waiting
    /// for it. Work is also submitted when a read needs it, on [`sync`](Self::sync), and
    /// when the [`SubmitPolicy`](super::SubmitPolicy) says so.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is lost; [`ClientError::Wgpu`] when
    /// wgpu refuses the batch (its outputs then carry that error, see the crate docs).
    pub fn flush(&self) -> Result<(), ClientError> {
        self.submit().map(|_| ())
    }

    /// Takes the recorded batch and submits it in the submit turn, without the mutex.
    pub(super) fn submit(&self) -> Result<Option<wgpu::SubmissionIndex>, ClientError> {
        let _turn = self.turn();
        let batch = {
            let mut server = self.shared.server.lock();
            server.check_lost("submit")?;
            server.take_batch()
        };
        self.submit_batch(batch)
    }

    pub(super) fn submit_batch(
        &self,
        batch: Option<crate::server::Batch>,
    ) -> Result<Option<wgpu::SubmissionIndex>, ClientError> {
        // Segments of a batch whose submit runs the callback this call may come from go
        // first (see `server::segments`).
        let turn = self.turn();
        turn.segments()
            .drain(&self.shared.device, &self.shared.queue);
        let Some(mut batch) = batch else {
            return Ok(None);
        };
        if batch.is_empty() {
            // Only pages given back: credited once the work already submitted is done.
            if let Some(retiring) = batch.retiring.take() {
                self.shared
                    .queue
                    .on_submitted_work_done(move || drop(retiring));
            }
            return Ok(None);
        }
        let submitted = batch.submit(&self.shared.device, &self.shared.queue, turn.segments());
        #[cfg(test)]
        if let Some(hook) = self.shared.after_submit.lock().take() {
            hook();
        }
        // Still in the submit turn: work that reads or rewrites this batch's outputs
        // (launches, writes, reads all take the turn) is recorded after its failure.
        match submitted {
            Ok(submission) => Ok(Some(submission)),
            Err(failure) => Err(self.shared.server.lock().batch_failed(failure)),
        }
    }

    /// Takes the submit turn (re-entrant); while held, reads awaited on this thread poll
    /// the device themselves (see `server::reads::poller::reads_poll_inline`).
    pub(crate) fn turn(&self) -> Turn<'_> {
        let guard = self.shared.turn.lock();
        Turn {
            guard,
            _held: TurnHeld::enter(),
        }
    }
}

/// A held submit turn.
pub(crate) struct Turn<'a> {
    guard: parking_lot::ReentrantMutexGuard<'a, SegmentQueue>,
    _held: TurnHeld,
}

impl Turn<'_> {
    /// The segments of the batches in submission (see `server::segments`).
    pub(crate) fn segments(&self) -> &SegmentQueue {
        &self.guard
    }
}
