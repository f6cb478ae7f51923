//! [`UploadPage`]: an upload staging page on its way through one batch.

use cubecl_runtime::memory_management::ManagedMemoryHandle;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A staging page a batch copies from: unmapped before the submit, mapped again after,
/// and given back (its handle dropped) when that map completes.
pub(crate) struct UploadPage {
    handle: ManagedMemoryHandle,
    buffer: wgpu::Buffer,
    in_flight: Arc<AtomicU64>,
}

impl UploadPage {
    /// A page whose slice `handle` holds, counted in `in_flight` (bytes) until it is
    /// mapped again.
    pub(crate) fn new(
        handle: ManagedMemoryHandle,
        buffer: wgpu::Buffer,
        in_flight: Arc<AtomicU64>,
    ) -> Self {
        Self {
            handle,
            buffer,
            in_flight,
        }
    }
    /// Unmaps the page before the submission that reads it.
    pub(crate) fn unmap(&self) {
        self.buffer.unmap();
    }

    /// Maps the page again behind the submission; the slice is free once mapped.
    pub(crate) fn remap(self, device: &wgpu::Device) {
        let UploadPage {
            handle,
            buffer,
            in_flight,
        } = self;
        let bytes = buffer.size();
        let ((), error) = crate::storage::wgpu_storage::error::capture(device, || {
            buffer.map_async(wgpu::MapMode::Write, .., move |result| {
                in_flight.fetch_sub(bytes, Ordering::Relaxed);
                if let Err(error) = result {
                    // Only a lost device refuses the map; every later write fails on
                    // the lost device before it reserves staging, so the slice can go
                    // back (and its page with the next cleanup) although unmapped.
                    tracing::debug!(%error, "upload staging page not mapped again");
                }
                drop(handle);
            })
        });
        if let Some(error) = error {
            tracing::debug!(%error, "wgpu refused to map an upload staging page again");
        }
    }
}
