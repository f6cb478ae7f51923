//! Reading handles back through the staging memory.
//!
//! 1. A staging slice (an exclusive MAP_READ page: a mapped buffer maps whole, so two
//!    reads never share one) is reserved for the read's size rounded up to 4 bytes.
//! 2. The handle's bytes are copied into it and the copy is submitted.
//! 3. `map_async` is requested; its callback runs when the device is polled.
//! 4. The reader waits for the submission (polling the device itself, off the client's
//!    lock, so other threads keep submitting), copies the bytes out, unmaps, and drops
//!    the staging handle: the page is free for the next read.

use super::{Server, wgpu_error};
use crate::client::{ClientError, Handle};
use crate::storage::wgpu_storage::error::capture;
use crate::storage::wgpu_storage::limits::COPY_ALIGNMENT;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use parking_lot::Mutex;
use std::sync::Arc;

type MapResult = Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>;

/// A read whose copy is submitted and whose staging buffer has a map pending.
pub(crate) struct PendingRead {
    inner: Option<PendingMap>,
}

struct PendingMap {
    /// Keeps the staging slice out of reuse until the bytes are copied out.
    _staging: ManagedMemoryHandle,
    buffer: wgpu::Buffer,
    range: std::ops::Range<u64>,
    size: u64,
    submission: wgpu::SubmissionIndex,
    mapped: MapResult,
}

impl Server {
    /// Copies `size` bytes from byte `offset` of `handle` into a staging slice and starts
    /// mapping it. A zero-size read issues no GPU work.
    pub(crate) fn start_read(
        &mut self,
        handle: &Handle,
        offset: u64,
        size: u64,
    ) -> Result<PendingRead, ClientError> {
        if size == 0 {
            return Ok(PendingRead { inner: None });
        }
        let source = self.resource(handle)?;
        let copied = size.next_multiple_of(COPY_ALIGNMENT);
        let staging = self.staging.reserve(copied)?;
        let target = self
            .staging
            .get_resource(&staging.clone().binding(), None, None)?;
        let range = target.offset..target.offset + copied;
        let mapped: MapResult = Arc::new(Mutex::new(None));
        let (submission, error) = capture(&self.device, || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("readback"),
                });
            encoder.copy_buffer_to_buffer(
                &source.buffer,
                source.offset + offset,
                &target.buffer,
                target.offset,
                copied,
            );
            let submission = self.queue.submit([encoder.finish()]);
            let slot = mapped.clone();
            target
                .buffer
                .slice(range.clone())
                .map_async(wgpu::MapMode::Read, move |result| {
                    *slot.lock() = Some(result)
                });
            submission
        });
        if let Some(error) = error {
            return Err(wgpu_error("read", error));
        }
        Ok(PendingRead {
            inner: Some(PendingMap {
                _staging: staging,
                buffer: target.buffer,
                range,
                size,
                submission,
                mapped,
            }),
        })
    }

    /// Reads `size` bytes at `offset` of `handle`, waiting for the device.
    pub(crate) fn read_range_blocking(
        &mut self,
        handle: &Handle,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, ClientError> {
        let size = size.min(handle.size.saturating_sub(offset));
        let pending = self.start_read(handle, offset, size)?;
        pending.wait(&self.device)
    }
}

impl PendingRead {
    /// Waits until the copy is done and the staging buffer mapped, then returns the bytes.
    pub(crate) fn wait(self, device: &wgpu::Device) -> Result<Vec<u8>, ClientError> {
        let Some(map) = self.inner else {
            return Ok(Vec::new());
        };
        let failed = |message: String| ClientError::Map {
            size: map.size,
            message,
        };
        loop {
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(map.submission.clone()),
                    timeout: None,
                })
                .map_err(|error| failed(error.to_string()))?;
            if let Some(result) = map.mapped.lock().take() {
                result.map_err(|error| failed(error.to_string()))?;
                break;
            }
        }
        let bytes = {
            let view = map
                .buffer
                .slice(map.range.clone())
                .get_mapped_range()
                .map_err(|error| failed(error.to_string()))?;
            view[..map.size as usize].to_vec()
        };
        map.buffer.unmap();
        Ok(bytes)
    }
}
