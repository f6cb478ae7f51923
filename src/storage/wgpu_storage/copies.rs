//! The copies a [`WgpuStorage`] owes: moves a compaction asked for, recorded by the owner.

use super::WgpuStorage;
use crate::storage::copy::{check_copy, refused};
use crate::storage::{ComputeStorage, CopyStorage, StorageHandle};
use cubecl_runtime::server::IoError;

/// One buffer-to-buffer copy the storage's owner must record, in order, before any other
/// work: `size` bytes (a multiple of `wgpu::COPY_BUFFER_ALIGNMENT`) from `source` at
/// `source_offset` to `target` at `target_offset`.
#[derive(Debug, Clone)]
pub struct PendingCopy {
    /// The page copied from.
    pub source: wgpu::Buffer,
    /// Byte offset in `source`.
    pub source_offset: u64,
    /// The page copied into.
    pub target: wgpu::Buffer,
    /// Byte offset in `target`.
    pub target_offset: u64,
    /// Bytes copied.
    pub size: u64,
}

impl PendingCopy {
    /// Records the copy into `encoder`.
    pub fn record(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.copy_buffer_to_buffer(
            &self.source,
            self.source_offset,
            &self.target,
            self.target_offset,
            self.size,
        );
    }
}

impl WgpuStorage {
    /// Takes the copies asked for since the last call, oldest first. The owner records
    /// them before any later work on these pages; until it does, the copies are not made.
    /// Bounded by the moves of the compactions since the last call.
    pub fn take_copies(&mut self) -> Vec<PendingCopy> {
        std::mem::take(&mut self.copies)
    }
}

impl CopyStorage for WgpuStorage {
    /// Queues the copy for the owner ([`WgpuStorage::take_copies`]): wgpu copies only
    /// inside a command encoder, which the owner holds. The size is rounded up to
    /// `wgpu::COPY_BUFFER_ALIGNMENT`; that stays inside both slices, whose aligned sizes
    /// are at least as large.
    fn copy(&mut self, from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError> {
        check_copy(from, to)?;
        let size = from
            .size()
            .max(1)
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let source = self.get(from)?;
        let target = self.get(to)?;
        if source.offset % wgpu::COPY_BUFFER_ALIGNMENT != 0
            || target.offset % wgpu::COPY_BUFFER_ALIGNMENT != 0
        {
            return Err(refused(format!(
                "a copy between offsets {} and {}: wgpu copies need multiples of {}",
                source.offset,
                target.offset,
                wgpu::COPY_BUFFER_ALIGNMENT
            )));
        }
        self.copies.push(PendingCopy {
            source: source.buffer,
            source_offset: source.offset,
            target: target.buffer,
            target_offset: target.offset,
            size,
        });
        Ok(())
    }
}
