//! Reading handles back through the staging memory, zero-copy.
//!
//! 1. One staging slice (an exclusive MAP_READ page: a mapped buffer maps whole, so two
//!    reads never share one) is reserved for every handle of the read, each part at a
//!    4-byte-aligned offset (`COPY_BUFFER_ALIGNMENT`); zero-size parts take no bytes.
//! 2. One encoder copies every part into it, one submit sends it, one `map_async` maps
//!    it. The staging handle is held by the read, so the slice is never reserved again,
//!    and never a copy destination, while its map is pending or mapped.
//! 3. The poller thread polls the device; the map callback wakes the read's future.
//! 4. The caller gets [`ReadBytes`]: views into the mapped range itself, no copy. When the
//!    last view of a read is dropped, the range is unmapped and the staging handle dropped:
//!    the slice is free for the next read.
//! 5. A future dropped before its map completed hands the read to the poller, which
//!    unmaps and releases it once the map completes.

use super::poller::{PollGuard, Poller};
use super::{Server, wgpu_error};
use crate::client::{ClientError, Handle, ReadBytes};
use crate::memory_management::drop_queue::{Fence, FenceError};
use crate::memory_management::{Claim, FailureReport};
use crate::storage::wgpu_storage::error::capture;
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use parking_lot::Mutex;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct MapState {
    result: Option<Result<(), wgpu::BufferAsyncError>>,
    waker: Option<Waker>,
}

/// A read whose copies are submitted and whose staging range has a map pending.
pub(crate) struct PendingMap {
    staging: ManagedMemoryHandle,
    buffer: wgpu::Buffer,
    range: Range<u64>,
    /// (offset in the range, length) of each part, in bytes.
    parts: Vec<(u64, u64)>,
    state: Arc<Mutex<MapState>>,
}

/// The mapped staging range of one read; unmapped, and its slice released, on drop.
pub(crate) struct Mapping {
    view: Option<wgpu::BufferView>,
    buffer: wgpu::Buffer,
    _staging: ManagedMemoryHandle,
}

impl Mapping {
    pub(crate) fn bytes(&self) -> &[u8] {
        self.view.as_deref().unwrap_or(&[])
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // The view must go before the unmap; the staging handle goes last.
        drop(self.view.take());
        self.buffer.unmap();
    }
}

/// A read nobody awaits any more, held in the poller's drop queue until its map
/// completed; dropping it then unmaps the range and lets the staging slice go back.
pub(crate) struct AbandonedRead(PendingMap);

impl AbandonedRead {
    pub(crate) fn new(map: PendingMap) -> Self {
        Self(map)
    }

    /// The map's completion slot, for the fence that guards it.
    pub(crate) fn map_state(&self) -> MapSlot {
        MapSlot(self.0.state.clone())
    }

    /// Bytes of its staging range.
    pub(crate) fn size(&self) -> u64 {
        self.0.size()
    }
}

impl Drop for AbandonedRead {
    fn drop(&mut self) {
        if !self.0.finish_abandoned() {
            // Still pending (the fence lied or the device is gone): keep the slice out
            // of reuse for good rather than let a copy target a buffer being mapped.
            std::mem::forget(self.0.staging.clone());
        }
    }
}

/// The completion slot of one map.
pub(crate) struct MapSlot(Arc<Mutex<MapState>>);

/// A [`Fence`] passed once every map of a batch of abandoned reads completed (with or
/// without success): polls the device until then.
pub(crate) struct MapFence {
    pub(crate) device: wgpu::Device,
    pub(crate) maps: Vec<MapSlot>,
}

impl Fence for MapFence {
    /// # Errors
    /// [`FenceError::Failed`] when polling fails or the maps never complete: the
    /// staging slices are then kept, not reused.
    fn wait(self) -> Result<(), FenceError> {
        for _ in 0..1000 {
            if self.maps.iter().all(|map| map.0.lock().result.is_some()) {
                return Ok(());
            }
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|error| FenceError::Failed {
                    message: error.to_string(),
                })?;
        }
        Err(FenceError::Failed {
            message: "abandoned reads' maps never completed".to_string(),
        })
    }
}

impl PendingMap {
    /// Whether the map completed; if so, unmaps (when it succeeded) and lets the staging
    /// handle go. Used on reads nobody awaits any more.
    pub(crate) fn finish_abandoned(&self) -> bool {
        match self.state.lock().result.as_ref() {
            None => false,
            Some(result) => {
                if result.is_ok() {
                    self.buffer.unmap();
                }
                true
            }
        }
    }

    fn size(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// Turns a completed map into the caller's views.
    fn into_bytes(
        self,
        result: Result<(), wgpu::BufferAsyncError>,
    ) -> Result<Vec<ReadBytes>, ClientError> {
        let failed = |message: String, size| ClientError::Map { size, message };
        result.map_err(|error| failed(error.to_string(), self.size()))?;
        let view = self
            .buffer
            .slice(self.range.clone())
            .get_mapped_range()
            .map_err(|error| failed(error.to_string(), self.size()))?;
        let mapping = Arc::new(Mapping {
            view: Some(view),
            buffer: self.buffer,
            _staging: self.staging,
        });
        Ok(self
            .parts
            .into_iter()
            .map(|(offset, len)| {
                ReadBytes::mapped(mapping.clone(), offset as usize..(offset + len) as usize)
            })
            .collect())
    }
}

impl Server {
    /// Copies every handle into one staging slice and starts mapping it. Zero-size parts
    /// issue no copy; a read of only zero-size parts issues no GPU work at all.
    pub(crate) fn start_read(
        &mut self,
        parts: &[(&Handle, u64, u64)],
    ) -> Result<Option<PendingMap>, ClientError> {
        self.check_claims(parts)?;
        self.start_read_unchecked(parts)
    }

    /// Refuses a read of bytes a failure claims (naming the root failure and the chain of
    /// skipped kernels) or of a handle without a slice.
    fn check_claims(&mut self, parts: &[(&Handle, u64, u64)]) -> Result<(), ClientError> {
        for (handle, offset, len) in parts {
            match self.main.claim(&handle.binding(), *offset..offset + len) {
                None => {}
                Some(Claim::Unallocated(id)) => return Err(ClientError::Unallocated(id.value)),
                Some(Claim::Failed(failure, id)) => {
                    let report = self.main.error_graph_mut().report(failure, id);
                    let report = report.unwrap_or_else(|| FailureReport {
                        failure,
                        error: "a failure that is no longer held".to_string(),
                        carriers: 0,
                        chain: Vec::new(),
                    });
                    return Err(ClientError::Unwritten(Box::new(report)));
                }
            }
        }
        Ok(())
    }

    /// [`start_read`](Self::start_read) without the claim check (the server's own reads
    /// of bytes it is about to overwrite).
    fn start_read_unchecked(
        &mut self,
        parts: &[(&Handle, u64, u64)],
    ) -> Result<Option<PendingMap>, ClientError> {
        let mut layout = Vec::with_capacity(parts.len());
        let mut total = 0u64;
        for &(_, _, len) in parts {
            layout.push((total, len));
            total += len.next_multiple_of(COPY_ALIGNMENT);
        }
        if total == 0 {
            return Ok(None);
        }
        let sources = parts
            .iter()
            .map(|(handle, offset, len)| Ok((self.resource(handle)?, *offset, *len)))
            .collect::<Result<Vec<_>, ClientError>>()?;
        let staging = self.staging.reserve(total)?;
        let target = self
            .staging
            .get_resource(&staging.clone().binding(), None, None)?;
        let range = target.offset..target.offset + total;
        let state = Arc::new(Mutex::new(MapState::default()));
        let (_, error) = capture(&self.device, || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("readback"),
                });
            for ((source, offset, len), (at, _)) in sources.iter().zip(&layout) {
                if *len > 0 {
                    encoder.copy_buffer_to_buffer(
                        &source.buffer,
                        source.offset + offset,
                        &target.buffer,
                        target.offset + at,
                        len.next_multiple_of(COPY_ALIGNMENT),
                    );
                }
            }
            self.queue.submit([encoder.finish()]);
            let slot = state.clone();
            target
                .buffer
                .slice(range.clone())
                .map_async(wgpu::MapMode::Read, move |result| {
                    let mut state = slot.lock();
                    state.result = Some(result);
                    if let Some(waker) = state.waker.take() {
                        waker.wake();
                    }
                });
        });
        let map = PendingMap {
            staging,
            buffer: target.buffer,
            range,
            parts: layout,
            state,
        };
        if let Some(error) = error {
            // The map may still be pending: keep the staging slice out of reuse until it
            // completes (an error path, so waiting here is fine).
            self.settle_failed_map(&map);
            return Err(wgpu_error("read", error));
        }
        Ok(Some(map))
    }

    /// Polls until a map whose read failed completes, and unmaps it if it mapped.
    fn settle_failed_map(&self, map: &PendingMap) {
        for _ in 0..1000 {
            if map.finish_abandoned() {
                return;
            }
            if self
                .device
                .poll(wgpu::PollType::wait_indefinitely())
                .is_err()
            {
                break;
            }
        }
        tracing::error!("a failed read's staging map never completed; its slice is leaked");
        std::mem::forget(map.staging.clone());
    }

    /// Reads `size` bytes at `offset` of `handle`, polling the device on this thread (for
    /// reads the server needs itself, under its lock).
    pub(crate) fn read_range_blocking(
        &mut self,
        handle: &Handle,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, ClientError> {
        let size = size.min(handle.size.saturating_sub(offset));
        let Some(map) = self.start_read_unchecked(&[(handle, offset, size)])? else {
            return Ok(Vec::new());
        };
        loop {
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|error| ClientError::Map {
                    size,
                    message: error.to_string(),
                })?;
            let result = map.state.lock().result.take();
            if let Some(result) = result {
                let parts = map.into_bytes(result)?;
                return Ok(parts
                    .first()
                    .map(|bytes| bytes.to_vec())
                    .unwrap_or_default());
            }
        }
    }
}

/// A read in flight: resolves to one [`ReadBytes`] per part once its staging range is
/// mapped. Dropping it early gives its staging slice back once the map completes.
pub(crate) struct ReadFuture {
    map: Option<PendingMap>,
    /// Zero-size reads: the parts' count, answered without GPU work.
    empty_parts: usize,
    poller: Arc<Poller>,
    guard: Option<PollGuard>,
    device: wgpu::Device,
}

impl ReadFuture {
    pub(crate) fn new(
        map: Option<PendingMap>,
        parts: usize,
        poller: Arc<Poller>,
        device: wgpu::Device,
    ) -> Self {
        let guard = map.as_ref().map(|_| poller.start());
        Self {
            map,
            empty_parts: parts,
            poller,
            guard,
            device,
        }
    }
}

impl Future for ReadFuture {
    type Output = Result<Vec<ReadBytes>, ClientError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(map) = self.map.as_ref() else {
            return Poll::Ready(Ok((0..self.empty_parts)
                .map(|_| ReadBytes::empty())
                .collect()));
        };
        if !self.poller.running() {
            // No thread: poll here, without blocking.
            let _ = self.device.poll(wgpu::PollType::Poll);
        }
        let result = {
            let mut state = map.state.lock();
            match state.result.take() {
                Some(result) => result,
                None => {
                    state.waker = Some(context.waker().clone());
                    if !self.poller.running() {
                        context.waker().wake_by_ref();
                    }
                    return Poll::Pending;
                }
            }
        };
        self.guard = None;
        let map = self.map.take().expect("checked above");
        Poll::Ready(map.into_bytes(result))
    }
}

impl Drop for ReadFuture {
    fn drop(&mut self) {
        if let Some(map) = self.map.take() {
            self.poller.abandon(map);
        }
    }
}
