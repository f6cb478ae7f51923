//! Reads: the handle's bytes back from the device, zero-copy, through pooled readback
//! staging.

use super::Client;
use crate::report::EventKind;
#[cfg(not(target_arch = "wasm32"))]
use crate::server::ReadFuture;
use crate::server::{ClientError, Handle, PendingMap, ReadBytes, ReadPlan, Server};

/// On the web, the most times a read the budget refused while pages given back were
/// still charged waits for the browser to report the device done with them, and is
/// recorded again, before it streams or fails (see [`Client::read`]). Each wait ends when
/// the browser reports the work done; a page given back is credited after one wait, so
/// more are needed only while other work keeps giving pages back.
pub const WEB_BUDGET_WAITS: usize = 4;

impl Client {
    /// Reads the whole handle back, zero-copy: the bytes are a view of the mapped
    /// staging range ([`ReadBytes`]).
    ///
    /// The read's copy joins the pending batch, which the read submits at once, so the
    /// bytes are those after every earlier launch and write and before every later one,
    /// whenever the future is awaited. The future completes without the caller polling
    /// wgpu (a background thread polls while maps are pending; on the web the browser
    /// does, and the future yields to it) and never holds the client's lock while it
    /// waits. Dropping it early gives its staging slice back once the map completes. A
    /// zero-size read issues no GPU work.
    ///
    /// Under a budget ([`set_budget`](Self::set_budget)), a read whose staging does not
    /// fit in the room left, even after every free page went back, is streamed: one
    /// staging slice of at most that room (at least
    /// [`MIN_STREAMED_PART`](super::MIN_STREAMED_PART)) is reserved, and the bytes are
    /// copied through it in parts, each part a round trip to the device, into host
    /// memory the returned `ReadBytes` owns (still one per handle, 4-byte aligned). This
    /// call then blocks the calling thread until every part is copied, and the future it
    /// returns is ready. The budget is never crossed. Work this thread records after the
    /// call is never seen by the read; work other threads record meanwhile on the same
    /// handles may land between two parts.
    ///
    /// On the web nothing blocks, so the future does that work when awaited:
    /// - a read the budget refuses while pages given back are still charged (they stay
    ///   charged until the browser reports the device done with the work that used
    ///   them) waits for that report and is recorded again, at most
    ///   [`WEB_BUDGET_WAITS`] times, before it streams or
    ///   fails;
    /// - a streamed read copies its parts as it is awaited.
    ///
    /// Either way work recorded after the call, before the future got there, may land
    /// before the read. And since the browser reports a refused operation only after it
    /// returned, the future also waits for its verdict on every operation made before
    /// the read, and resolves to the first error among them, as native would have
    /// returned it from that operation (a page the browser refused is
    /// [`ClientError::OutOfMemory`]).
    ///
    /// # Errors
    /// [`ClientError::Unwritten`] when a failure claims bytes of the handle (the report
    /// names the root wgpu error and the skipped kernels); [`ClientError::Unallocated`]
    /// when the handle has no slice; [`ClientError::Reserve`] when no staging memory is
    /// left ([`ClientError::OutOfMemory`] when the staging would cross the budget and
    /// less than [`MIN_STREAMED_PART`](super::MIN_STREAMED_PART) is left under it to
    /// stream it through); [`ClientError::DeviceLost`] when the device is lost before or during the
    /// read; [`ClientError::Wgpu`] when wgpu refuses the batch; [`ClientError::Map`] when
    /// mapping fails.
    pub fn read(
        &self,
        handle: &Handle,
    ) -> impl Future<Output = Result<ReadBytes, ClientError>> + Send + 'static {
        let started = self.start_read(&[handle]);
        async move {
            let mut parts = started.await?;
            Ok(parts.pop().unwrap_or_else(ReadBytes::empty))
        }
    }

    /// Reads many handles with one staging allocation, one submit and one map (small
    /// reads cost one round trip, not one each); one [`ReadBytes`] per handle, in order.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn read_many(
        &self,
        handles: &[&Handle],
    ) -> impl Future<Output = Result<Vec<ReadBytes>, ClientError>> + Send + 'static {
        self.start_read(handles)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn start_read(&self, handles: &[&Handle]) -> ReadFuture {
        self.notice_loss();
        let parts: Vec<(&Handle, u64, u64)> = handles.iter().map(|h| (*h, 0, h.size)).collect();
        let (started, refusal) = self.retry_over_budget(
            || self.record_and_submit(&parts, |server| server.start_read(&parts)),
            || true,
        );
        let refused = refusal.is_some()
            && matches!(&started, Err(ClientError::Reserve(error)) if error.is_out_of_room());
        if refused && let Some(streamed) = self.stream_read(&parts) {
            return ReadFuture::done(
                streamed,
                self.shared.poller.clone(),
                self.shared.device.clone(),
                self.shared.lost.clone(),
            );
        }
        let started = self.explain_budget(started, refusal);
        ReadFuture::new(
            started,
            parts.len(),
            self.shared.poller.clone(),
            self.shared.device.clone(),
            self.shared.lost.clone(),
        )
    }

    /// Records the copies of a read of `parts` (`start` records them), submits the batch
    /// that carries them, and requests the staging map behind that submission.
    pub(super) fn record_and_submit(
        &self,
        parts: &[(&Handle, u64, u64)],
        start: impl FnOnce(&mut Server) -> Result<Option<ReadPlan>, ClientError>,
    ) -> Result<Option<PendingMap>, ClientError> {
        let _turn = self.turn();
        let (plan, batch) = {
            let mut server = self.shared.server.lock();
            let plan = start(&mut server).inspect_err(|_| self.record_pages(&mut server))?;
            let bytes = parts.iter().map(|(_, _, len)| len).sum();
            // One handle's read names it; a read of many names none.
            let single = match parts {
                [(handle, _, _)] => Some(*handle),
                _ => None,
            };
            self.record_transfer(&mut server, EventKind::Readback, bytes, single);
            let batch = plan.as_ref().and_then(|_| server.take_batch());
            (plan, batch)
        };
        let Some(plan) = plan else {
            return Ok(None);
        };
        let submission = match self.submit_batch(batch)? {
            Some(submission) => submission,
            // Cannot happen (the read recorded copies), but a fence is still well defined.
            None => self.shared.queue.submit([]),
        };
        Ok(Some(plan.map(
            &self.shared.device,
            submission,
            &self.shared.poller,
        )))
    }

    /// [`read`](Self::read), blocking the calling thread.
    ///
    /// Native only: the web cannot block (the map completes only while the browser's
    /// event loop runs); await [`read`](Self::read) there.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_blocking(&self, handle: &Handle) -> Result<ReadBytes, ClientError> {
        let mut parts = self.start_read(&[handle]).wait()?;
        Ok(parts.pop().unwrap_or_else(ReadBytes::empty))
    }

    /// [`read_many`](Self::read_many), blocking the calling thread.
    ///
    /// Native only: the web cannot block; await [`read_many`](Self::read_many) there.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_many_blocking(&self, handles: &[&Handle]) -> Result<Vec<ReadBytes>, ClientError> {
        self.start_read(handles).wait()
    }
}
