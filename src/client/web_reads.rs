//! Reads on the web (wasm32): futures that yield to the browser instead of blocking.
//!
//! On the web nothing may block and the device makes progress only while the browser's
//! event loop runs, that is while our futures are pending. So what a native read does
//! before it returns its future (waiting for pages given back to be credited, streaming
//! a read the budget refuses) happens here inside the future, and every read also waits
//! for the browser's verdict on the operations made before it (see
//! `server::faults::late`), reporting the first error as native would have returned it.

use super::{Client, ClientError};
use crate::report::BudgetDetail;
use crate::server::{Handle, LateMarks, PendingMap, ReadBytes, ReadFuture};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;

/// A read in flight on the web.
pub(super) type WebRead = Pin<Box<dyn Future<Output = Result<Vec<ReadBytes>, ClientError>> + Send>>;

/// What the budget's refusal of a read's staging looks like (see `retry_over_budget`).
fn refused(
    started: &Result<Option<PendingMap>, ClientError>,
    refusal: &Option<BudgetDetail>,
) -> bool {
    refusal.is_some()
        && matches!(started, Err(ClientError::Reserve(error)) if error.is_out_of_room())
}

impl Client {
    /// Records and submits a read of `handles` now, as natively; a read the budget
    /// refused is finished by the future (see [`read_refused`](Self::read_refused)).
    pub(super) fn start_read(&self, handles: &[&Handle]) -> WebRead {
        self.notice_loss();
        let parts: Vec<(&Handle, u64, u64)> = handles.iter().map(|h| (*h, 0, h.size)).collect();
        let (started, refusal) = self.attempt_read(&parts);
        let marks = self.shared.late.mark();
        let client = self.clone();
        if refused(&started, &refusal) {
            let owned: Vec<(Handle, u64, u64)> = parts
                .iter()
                .map(|(handle, offset, len)| ((*handle).clone(), *offset, *len))
                .collect();
            return Box::pin(async move { client.read_refused(owned, started, refusal).await });
        }
        let read = self.read_future(self.explain_budget(started, refusal), parts.len());
        Box::pin(async move {
            let result = read.await;
            client.settle_late(marks).await.and(result)
        })
    }

    /// One attempt at recording and submitting the read of `parts`, with the budget's
    /// refusal it met (the client cleans up and retries once inside, without waiting).
    fn attempt_read(
        &self,
        parts: &[(&Handle, u64, u64)],
    ) -> (
        Result<Option<PendingMap>, ClientError>,
        Option<BudgetDetail>,
    ) {
        self.retry_over_budget(
            || self.record_and_submit(parts, |server| server.start_read(parts)),
            || true,
        )
    }

    fn read_future(
        &self,
        started: Result<Option<PendingMap>, ClientError>,
        parts: usize,
    ) -> ReadFuture {
        ReadFuture::new(
            started,
            parts,
            self.shared.poller.clone(),
            self.shared.device.clone(),
            self.shared.lost.clone(),
        )
    }

    /// A read whose staging the budget refused. While bytes are on their way back to the
    /// budget (pages given back that the device may still use, upload staging in
    /// flight) it submits what gives them back, awaits the browser's word that the
    /// device is done with everything submitted (whose callbacks credit them), and is
    /// recorded again, at most [`WEB_BUDGET_WAITS`](super::WEB_BUDGET_WAITS) times; then
    /// it streams when the room left allows, and otherwise fails with the budget's
    /// [`ClientError::OutOfMemory`].
    async fn read_refused(
        self,
        parts: Vec<(Handle, u64, u64)>,
        mut started: Result<Option<PendingMap>, ClientError>,
        mut refusal: Option<BudgetDetail>,
    ) -> Result<Vec<ReadBytes>, ClientError> {
        let parts: Vec<(&Handle, u64, u64)> = parts
            .iter()
            .map(|(handle, offset, len)| (handle, *offset, *len))
            .collect();
        let mut waits = 0;
        while refused(&started, &refusal)
            && waits < super::WEB_BUDGET_WAITS
            && self.bytes_coming_back()
        {
            waits += 1;
            tracing::debug!(
                waits,
                "a read over the budget waits for the device to give bytes back"
            );
            self.work_done()?.await;
            self.notice_loss();
            (started, refusal) = self.attempt_read(&parts);
        }
        let marks = self.shared.late.mark();
        let result = if refused(&started, &refusal) {
            match self.stream_read_async(&parts).await {
                Some(streamed) => streamed,
                None => self.explain_budget(started, refusal).map(|_| Vec::new()),
            }
        } else {
            let started = self.explain_budget(started, refusal);
            self.read_future(started, parts.len()).await
        };
        self.settle_late(marks).await.and(result)
    }

    /// Whether bytes the budget holds are on their way back: pages given back that the
    /// device may still use, or upload staging in flight.
    fn bytes_coming_back(&self) -> bool {
        self.shared.server.lock().budget().retiring() > 0
            || self.shared.uploads_in_flight.load(Ordering::Relaxed) > 0
    }

    /// Waits for the browser's verdict on every operation made before `marks`, then
    /// reports what it refused (see `server::faults::late`): the first error, as native
    /// would have returned it; the others are logged.
    ///
    /// # Errors
    /// The first error the browser reported, if any.
    pub(super) async fn settle_late(&self, marks: LateMarks) -> Result<(), ClientError> {
        let late = self.shared.late.clone();
        std::future::poll_fn(|context| late.poll_settled(marks, context)).await;
        let faults = self.shared.server.lock().take_late();
        let mut first = None;
        for fault in faults {
            let error = if fault.main_out_of_room {
                match self.explain_oom::<()>(Err(fault.error), None) {
                    Err(error) => error,
                    Ok(()) => continue,
                }
            } else {
                fault.error
            };
            match first {
                None => first = Some(error),
                Some(_) => tracing::warn!(%error, "the browser refused another operation"),
            }
        }
        first.map_or(Ok(()), Err)
    }
}
