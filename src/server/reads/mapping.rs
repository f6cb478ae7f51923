//! The mapped staging range of a read, and its release: what a read's views hold.

use crate::storage::wgpu_storage::error::capture;
use cubecl_runtime::memory_management::ManagedMemoryHandle;

/// A staging range to unmap (when its map succeeded) and give back.
pub(crate) struct StagingRange {
    device: wgpu::Device,
    buffer: wgpu::Buffer,
    _staging: ManagedMemoryHandle,
}

impl StagingRange {
    /// The range of `buffer` whose slice `staging` holds.
    pub(crate) fn new(
        device: wgpu::Device,
        buffer: wgpu::Buffer,
        staging: ManagedMemoryHandle,
    ) -> Self {
        Self {
            device,
            buffer,
            _staging: staging,
        }
    }

    /// The staging page.
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Unmaps inside error scopes (a lost device reports the unmap as an error, which
    /// must not reach the uncaptured-error handler), then drops the staging handle.
    pub(crate) fn release(self, mapped: bool) {
        if mapped {
            let ((), _) = capture(&self.device, || self.buffer.unmap());
        }
    }
}

/// The mapped staging range of one read; unmapped, and its slice released, on drop.
pub(crate) struct Mapping {
    view: Option<wgpu::BufferView>,
    range: Option<StagingRange>,
}

impl Mapping {
    /// The mapped view of `range`, released when dropped.
    pub(crate) fn new(view: wgpu::BufferView, range: StagingRange) -> Self {
        Self {
            view: Some(view),
            range: Some(range),
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        self.view.as_deref().unwrap_or(&[])
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // The view must go before the unmap; the staging handle goes last.
        drop(self.view.take());
        if let Some(range) = self.range.take() {
            range.release(true);
        }
    }
}
