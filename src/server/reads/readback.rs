//! Reading handles back through the staging memory, zero-copy.
//!
//! 1. One staging slice (an exclusive MAP_READ page: a mapped buffer maps whole, so two
//!    reads never share one) is reserved for every handle of the read, each part at a
//!    4-byte-aligned offset (`COPY_BUFFER_ALIGNMENT`); zero-size parts take no bytes.
//! 2. The copies join the pending encoder ([`Server::start_read`]), behind every launch
//!    and write made before, and the read submits that encoder. Only after the submit is
//!    the staging range mapped ([`ReadPlan::map`]): wgpu refuses a submission that uses a
//!    buffer with a map pending.
//! 3. The poller thread polls the device; the map callback stores the result, then wakes
//!    the read's future after letting go of the slot's lock. On the web there is no
//!    poller thread and no poll: the future returns `Pending`, the browser runs the map
//!    callback from its event loop, and the callback wakes it.
//! 4. The caller gets [`ReadBytes`]: views into the mapped range itself, no copy. When the
//!    last view of a read is dropped, the range is unmapped and the staging handle dropped:
//!    the slice is free for the next read.
//! 5. A future dropped before its map completed leaves the read in its slot; the map
//!    callback hands it to the poller thread, which unmaps it and lets the staging slice
//!    go. Every map callback runs exactly once (wgpu runs it with an error on a lost
//!    device), so no staging slice is ever forgotten.

use super::mapping::{Mapping, StagingRange};
use super::poller::{Deferrer, Expectation, Poller};
use super::read_bytes::ReadBytes;
use super::read_plan::{self, Layout, Source};
use crate::memory_management::{Claim, FailureReport};
use crate::server::faults::error::ClientError;
use crate::server::memory::handle::Handle;
use crate::server::{Server, lost_error};
use crate::storage::wgpu_storage::error::capture;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use cubecl_runtime::server::IoError;
use cubecl_runtime::storage::StorageId;
use parking_lot::Mutex;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The staging range of a read whose copies are recorded but not yet submitted.
pub(crate) struct ReadPlan {
    staging: ManagedMemoryHandle,
    buffer: wgpu::Buffer,
    range: Range<u64>,
    /// (offset in the range, length) of each part, in bytes.
    parts: Vec<(u64, u64)>,
    /// The parts' allocations stay where they are while the read is in flight.
    pins: crate::server::memory::pins::PinGuard,
}

#[derive(Default)]
struct MapState {
    result: Option<Result<(), wgpu::BufferAsyncError>>,
    waker: Option<Waker>,
    /// Set when the future was dropped before the map completed.
    abandoned: Option<StagingRange>,
}

/// A read whose copies are submitted and whose staging range has a map pending.
pub(crate) struct PendingMap {
    range: StagingRange,
    bounds: Range<u64>,
    parts: Vec<(u64, u64)>,
    /// Polled for where the poller cannot (native only: the browser polls on the web).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    submission: wgpu::SubmissionIndex,
    state: Arc<Mutex<MapState>>,
    started: web_time::Instant,
    /// The poller's ticket for this map (to park the reader's waker on).
    ticket: u64,
    /// Released with the read (see [`ReadPlan`]).
    _pins: crate::server::memory::pins::PinGuard,
}

impl ReadPlan {
    /// Requests the map of the staging range once `submission` (the one carrying the
    /// read's copies) is on the queue.
    pub(crate) fn map(
        self,
        device: &wgpu::Device,
        submission: wgpu::SubmissionIndex,
        poller: &Poller,
    ) -> PendingMap {
        let state = Arc::new(Mutex::new(MapState::default()));
        let callback = MapCallback {
            slot: state.clone(),
            expectation: poller.expect(submission.clone()),
            deferrer: poller.deferrer(),
        };
        let ticket = callback.expectation.ticket();
        let ((), error) = capture(device, || {
            self.buffer
                .map_async(wgpu::MapMode::Read, self.range.clone(), move |result| {
                    callback.complete(result)
                })
        });
        if let Some(error) = error {
            tracing::error!(%error, "wgpu refused to map a read's staging range");
        }
        PendingMap {
            range: StagingRange::new(device.clone(), self.buffer, self.staging),
            bounds: self.range,
            parts: self.parts,
            submission,
            state,
            started: web_time::Instant::now(),
            ticket,
            _pins: self.pins,
        }
    }

    /// As [`map`](Self::map), but the map is never requested: the returned callback is
    /// what wgpu would hold, and it never runs unless the test runs it (wgpu-core after a
    /// hal-level device loss returns from its maintenance before it runs map callbacks).
    #[cfg(test)]
    pub(crate) fn map_never_completing(
        self,
        device: &wgpu::Device,
        submission: wgpu::SubmissionIndex,
        poller: &Poller,
    ) -> (
        PendingMap,
        impl FnOnce(Result<(), wgpu::BufferAsyncError>) + use<>,
    ) {
        let state = Arc::new(Mutex::new(MapState::default()));
        let callback = MapCallback {
            slot: state.clone(),
            expectation: poller.expect(submission.clone()),
            deferrer: poller.deferrer(),
        };
        let ticket = callback.expectation.ticket();
        let map = PendingMap {
            range: StagingRange::new(device.clone(), self.buffer, self.staging),
            bounds: self.range,
            parts: self.parts,
            submission,
            state,
            started: web_time::Instant::now(),
            ticket,
            _pins: self.pins,
        };
        (map, move |result| callback.complete(result))
    }
}

/// What a map callback needs: the read's slot, the poller's count, and the way to hand
/// an abandoned read to the poller thread.
struct MapCallback {
    slot: Arc<Mutex<MapState>>,
    expectation: Expectation,
    deferrer: Deferrer,
}

impl MapCallback {
    fn complete(self, result: Result<(), wgpu::BufferAsyncError>) {
        let mapped = result.is_ok();
        let (waker, abandoned) = {
            let mut state = self.slot.lock();
            state.result = Some(result);
            (state.waker.take(), state.abandoned.take())
        };
        drop(self.expectation);
        // Woken and handed over only after the slot's lock is released.
        if let Some(waker) = waker {
            super::poller::wake(waker);
        }
        if let Some(range) = abandoned {
            self.deferrer.defer(Box::new(move || range.release(mapped)));
        }
    }
}

impl PendingMap {
    fn size(&self) -> u64 {
        self.bounds.end - self.bounds.start
    }

    /// Turns a completed map into the caller's views.
    fn into_bytes(
        self,
        result: Result<(), wgpu::BufferAsyncError>,
    ) -> Result<Vec<ReadBytes>, ClientError> {
        let size = self.size();
        tracing::debug!(
            bytes = size,
            parts = self.parts.len(),
            waited_us = self.started.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "readback"
        );
        let failed = |message: String| ClientError::Map { size, message };
        if let Err(error) = result {
            return Err(failed(error.to_string()));
        }
        let view = self
            .range
            .buffer()
            .slice(self.bounds.clone())
            .get_mapped_range()
            .map_err(|error| failed(error.to_string()));
        let view = match view {
            Ok(view) => view,
            Err(error) => {
                self.range.release(true);
                return Err(error);
            }
        };
        let mapping = Arc::new(Mapping::new(view, self.range));
        Ok(self
            .parts
            .into_iter()
            .map(|(offset, len)| {
                ReadBytes::mapped(mapping.clone(), offset as usize..(offset + len) as usize)
            })
            .collect())
    }

    /// Leaves the read to its map callback (or releases it now when the map completed).
    fn abandon(self) {
        let mut state = self.state.lock();
        match state.result.take() {
            None => state.abandoned = Some(self.range),
            Some(result) => {
                drop(state);
                self.range.release(result.is_ok());
            }
        }
    }
}

impl Server {
    /// Records the copies of every part into one staging slice, in the pending encoder.
    /// Zero-size parts issue no copy; a read of only zero-size parts records nothing and
    /// returns `None`.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`], [`ClientError::Unwritten`] or
    /// [`ClientError::Unallocated`] for claimed or unallocated bytes,
    /// [`ClientError::Reserve`] when the staging memory cannot hold the read.
    pub(crate) fn start_read(
        &mut self,
        parts: &[(&Handle, u64, u64)],
    ) -> Result<Option<ReadPlan>, ClientError> {
        self.check_lost("read")?;
        let sources = self.read_sources(parts)?;
        let pins = self.pin_all(parts.iter().map(|(handle, _, _)| *handle));
        let Layout { runs, parts, total } = read_plan::layout(&sources);
        if total == 0 {
            return Ok(None);
        }
        let limit = self.staging.properties().max_page_size;
        if total > limit {
            return Err(ClientError::ReadTooBig {
                requested: total,
                limit,
            });
        }
        let buffers = self.run_pages(&sources, &runs)?;
        let staging = self.reserve_readback(total)?;
        let layout = Layout { runs, parts, total };
        self.record_read(layout, &buffers, staging, pins).map(Some)
    }

    /// The page each run of a read copies from (a clone per run, not per part).
    pub(super) fn run_pages(
        &self,
        sources: &[Source],
        runs: &[read_plan::Run],
    ) -> Result<Vec<wgpu::Buffer>, ClientError> {
        runs.iter()
            .map(|run| self.read_page(sources[run.source].page).cloned())
            .collect()
    }

    /// Records the copies of `layout` (from `buffers`, one per run) into the start of
    /// the staging slice `staging`, in the pending encoder.
    pub(super) fn record_read(
        &mut self,
        layout: Layout,
        buffers: &[wgpu::Buffer],
        staging: ManagedMemoryHandle,
        pins: crate::server::memory::pins::PinGuard,
    ) -> Result<ReadPlan, ClientError> {
        let Layout { runs, parts, total } = layout;
        let target = self
            .staging
            .get_resource(&staging.clone().binding(), None, None)?;
        let encoder = self.pending.encoder(&self.device);
        for (run, buffer) in runs.iter().zip(buffers) {
            encoder.copy_buffer_to_buffer(
                buffer,
                run.start,
                &target.buffer,
                target.offset + run.at,
                run.len,
            );
        }
        // One command is counted by `encoder`; every further copy is one more.
        self.pending.count_commands(runs.len().saturating_sub(1));
        self.pending.count_bytes(total);
        Ok(ReadPlan {
            staging,
            buffer: target.buffer,
            range: target.offset..target.offset + total,
            parts,
            pins,
        })
    }

    /// Where each part's bytes are: its page and its byte range there. Refuses a read of
    /// a foreign handle, of a handle without a slice and of bytes a failure claims (naming
    /// the root failure and the chain of skipped kernels), the first such part's error.
    /// One binding and one slice lookup per part; no buffer is cloned here.
    pub(super) fn read_sources(
        &mut self,
        parts: &[(&Handle, u64, u64)],
    ) -> Result<Vec<Source>, ClientError> {
        let mut sources = Vec::with_capacity(parts.len());
        for (handle, offset, len) in parts {
            self.check_owner(handle, "read")?;
            let slice = match self
                .main
                .trusted_storage(&handle.binding(), *offset..offset + len)
            {
                Ok(slice) => slice,
                Err(Claim::Unallocated(id)) => return Err(ClientError::Unallocated(id.value)),
                Err(Claim::Failed(failure, id)) => {
                    let report = self.main.error_graph_mut().report(failure, id);
                    let report = report.unwrap_or_else(|| FailureReport {
                        failure,
                        error: "a failure that is no longer held".to_string(),
                        carriers: 0,
                        chain: Vec::new(),
                    });
                    return Err(ClientError::Unwritten(Box::new(report)));
                }
            };
            // Once some page is destroyed, every part's page is checked here, in read
            // order (a part of no bytes takes no copy, so no run would check it); the
            // fast path looks up no buffer per part.
            if !self.destroyed.is_empty() {
                self.read_page(slice.id)?;
            }
            sources.push(Source {
                page: slice.id,
                start: slice.offset() + offset,
                len: *len,
            });
        }
        Ok(sources)
    }

    /// The buffer of a page a read copies from, refused when the page was destroyed.
    fn read_page(&self, page: StorageId) -> Result<&wgpu::Buffer, ClientError> {
        let buffer = self.main.storage_ref().buffer(&page).ok_or_else(|| {
            ClientError::from(IoError::StorageHandleNotFound {
                reason: format!("a read's page {page} is not held by the main memory").into(),
                backtrace: Default::default(),
            })
        })?;
        self.check_destroyed(buffer, "read")?;
        Ok(buffer)
    }
}

/// A read in flight: resolves to one [`ReadBytes`] per part once its staging range is
/// mapped. Dropping it early gives its staging slice back once the map completes.
pub(crate) struct ReadFuture {
    started: Result<Option<PendingMap>, Option<ClientError>>,
    /// Zero-size reads: the parts' count, answered without GPU work.
    empty_parts: usize,
    /// A read already done when the future was made (a streamed read): its answer.
    done: Option<Result<Vec<ReadBytes>, ClientError>>,
    poller: Arc<Poller>,
    device: wgpu::Device,
    lost: crate::server::faults::lost::DeviceLoss,
    /// A read that failed while the poller's poll ran, with its map's ticket: it ends
    /// once that poll returned, as lost if the poll found the loss (see
    /// [`end_failed`](Self::end_failed)).
    unconfirmed: Option<(u64, ClientError)>,
}

impl ReadFuture {
    pub(crate) fn new(
        started: Result<Option<PendingMap>, ClientError>,
        parts: usize,
        poller: Arc<Poller>,
        device: wgpu::Device,
        lost: crate::server::faults::lost::DeviceLoss,
    ) -> Self {
        Self {
            started: started.map_err(Some),
            empty_parts: parts,
            done: None,
            poller,
            device,
            lost,
            unconfirmed: None,
        }
    }

    /// A future that answers `result` at once: a read done before it was made (a
    /// streamed read, native only: on the web the future streams as it is awaited).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn done(
        result: Result<Vec<ReadBytes>, ClientError>,
        poller: Arc<Poller>,
        device: wgpu::Device,
        lost: crate::server::faults::lost::DeviceLoss,
    ) -> Self {
        let mut future = Self::new(Ok(None), 0, poller, device, lost);
        future.done = Some(result);
        future
    }

    /// Blocks the calling thread until the read completes (the poller thread waits on
    /// the device; a second waiter on the same submission was measured to add about
    /// 10 ms per read on the H200's driver). Native only: the web cannot block.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn wait(self) -> Result<Vec<ReadBytes>, ClientError> {
        pollster::block_on(self)
    }

    /// When the poller thread is gone: waits on the device here for the read's own
    /// submission (untimed; a lost device answers at once). Native only: on the web the
    /// browser polls, and a wait is no wait.
    #[cfg(not(target_arch = "wasm32"))]
    fn poll_here(&self, submission: &wgpu::SubmissionIndex) {
        self.poll_device(wgpu::PollType::Wait {
            submission_index: Some(submission.clone()),
            timeout: None,
        });
    }

    /// Polls the device, a panic inside wgpu caught (the read then fails or retries).
    fn poll_device(&self, poll: wgpu::PollType) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.device.poll(poll)));
    }
}

impl Future for ReadFuture {
    type Output = Result<Vec<ReadBytes>, ClientError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(result) = self.done.take() {
            return Poll::Ready(result);
        }
        if let Some((ticket, error)) = self.unconfirmed.take() {
            if self.poller.still_after_poll(ticket, context.waker()) {
                self.unconfirmed = Some((ticket, error));
                return Poll::Pending;
            }
            return Poll::Ready(Err(match self.lost.message() {
                Some(message) => lost_error("read", message),
                None => error,
            }));
        }
        let map = match &mut self.started {
            Err(error) => {
                let error = error.take().unwrap_or_else(|| ClientError::Map {
                    size: 0,
                    message: "the read was polled after it completed".to_string(),
                });
                return Poll::Ready(Err(error));
            }
            Ok(None) => {
                return Poll::Ready(Ok((0..self.empty_parts)
                    .map(|_| ReadBytes::empty())
                    .collect()));
            }
            Ok(Some(map)) => map,
        };
        let state = map.state.clone();
        #[cfg(not(target_arch = "wasm32"))]
        let submission = map.submission.clone();
        let ticket = map.ticket;
        loop {
            let result = {
                let mut state = state.lock();
                match state.result.take() {
                    Some(result) => result,
                    None => {
                        state.waker = Some(context.waker().clone());
                        drop(state);
                        // A lost device may never run the map's callback (wgpu-core
                        // returns early after a hal-level loss): the loss ends the read.
                        if let Some(message) = self.lost.message() {
                            return Poll::Ready(Err(self.end_lost(message)));
                        }
                        // The web: the map callback runs from the browser's event loop,
                        // which runs once this returns, and wakes the read; parked too,
                        // so a lost device wakes it.
                        #[cfg(target_arch = "wasm32")]
                        {
                            self.poller.park(ticket, context.waker());
                            return Poll::Pending;
                        }
                        // On the poller thread (inside a wgpu callback), or holding
                        // the submit turn, waiting for the poller may wait for
                        // ourselves: poll here, as when the thread is gone.
                        #[cfg(not(target_arch = "wasm32"))]
                        {
                            if self.poller.alive()
                                && !super::poller::reads_poll_inline()
                                && self.poller.park(ticket, context.waker())
                            {
                                return Poll::Pending;
                            }
                            if !self.poller.alive() || super::poller::reads_poll_inline() {
                                self.poll_here(&submission);
                            }
                            continue;
                        }
                    }
                }
            };
            let Ok(Some(map)) = std::mem::replace(&mut self.started, Ok(None)) else {
                unreachable!("checked above");
            };
            self.empty_parts = 0;
            let failed = result.is_err();
            // A map can complete on a device destroyed after the copy was submitted, with
            // bytes nobody can vouch for: the poller wakes readers only after its poll
            // returned, so a loss that poll found is already recorded here.
            let outcome = map.into_bytes(result);
            if failed && self.lost.message().is_none() {
                // wgpu fails a map on a lost device and runs the device-lost callback
                // right after the map callbacks of that poll, possibly on another
                // thread: a poll here lets it run before the error is named.
                self.poll_device(wgpu::PollType::Poll);
            }
            return match (outcome, self.lost.message()) {
                (_, Some(message)) => Poll::Ready(Err(lost_error("read", message))),
                (Err(error), None) => self.end_failed(ticket, error, context.waker()),
                (outcome, None) => Poll::Ready(outcome),
            };
        }
    }
}

impl ReadFuture {
    /// Ends a read that failed with the device not known to be lost. While the poller
    /// thread polls, that poll may be the one that found the device destroyed: wgpu's
    /// maintenance then destroys every buffer of the device (this read's mapped staging
    /// page included, so its view fails) before it runs the device-lost callback, after
    /// the map callbacks. The read then waits for that poll to return and ends as lost
    /// if the loss was recorded. A reader that polls inline (see
    /// `poller::reads_poll_inline`) cannot wait for the poller and ends with `error`.
    fn end_failed(
        &mut self,
        ticket: u64,
        error: ClientError,
        waker: &Waker,
    ) -> Poll<Result<Vec<ReadBytes>, ClientError>> {
        if !super::poller::reads_poll_inline() && self.poller.wake_after_poll(ticket, waker) {
            self.unconfirmed = Some((ticket, error));
            return Poll::Pending;
        }
        // Looked at again: a poll that returned meanwhile recorded its loss first.
        Poll::Ready(Err(match self.lost.message() {
            Some(message) => lost_error("read", message),
            None => error,
        }))
    }

    /// Ends a read whose map has not completed on a lost device: the map is left to its
    /// callback (which gives the staging slice back if wgpu ever runs it).
    fn end_lost(&mut self, message: String) -> ClientError {
        if let Ok(Some(map)) = std::mem::replace(&mut self.started, Ok(None)) {
            map.abandon();
        }
        self.empty_parts = 0;
        lost_error("read", message)
    }
}

impl Drop for ReadFuture {
    fn drop(&mut self) {
        if let Ok(Some(map)) = std::mem::replace(&mut self.started, Ok(None)) {
            map.abandon();
        }
    }
}
