//! Upload staging: pooled MAP_WRITE|COPY_SRC pages that writes fill in place.
//!
//! The rule that makes reuse safe: **a free staging slice lies in a mapped page.**
//!
//! 1. Pages are made mapped (`mapped_at_creation`). A write reserves a slice, fills it
//!    through the mapped range (the caller's bytes copied once, or `write_with`'s closure
//!    writing straight into it), and records a copy from it into the target in the
//!    pending encoder. Writes up to [`SHARED_WRITE`] bytes share one slice of
//!    [`ARENA_BYTES`] (small writes share a staging page).
//! 2. The batch that carries the copies unmaps the pages just before its submit (a
//!    submission may not use a mapped buffer), then asks wgpu to map each page again for
//!    writing. wgpu runs that map only after the submission read the page: the map's
//!    completion is the fence that the staging slice waits behind.
//! 3. The map callback drops the staging handle: the slice is free again, in a mapped
//!    page, for the next write. Until then the page counts as in flight
//!    ([`UploadStaging::in_flight`]); the client waits for the device when in-flight
//!    bytes pass [`MAX_IN_FLIGHT`], so a stream of writes holds a bounded amount of
//!    staging.

use super::batch::PendingWork;
use super::error::ClientError;
use super::upload_page::UploadPage;
use crate::memory_management::{
    MemoryConfiguration, MemoryManagement, MemoryManagementOptions, MemoryPoolOptions, PoolType,
};
use crate::storage::WgpuStorage;
use crate::storage::wgpu_storage::limits::{COPY_ALIGNMENT, staging_memory_properties};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The usages of upload staging pages: mapped for writing, copied from.
pub(crate) const UPLOAD_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_WRITE.union(wgpu::BufferUsages::COPY_SRC);

/// Writes up to this many bytes share a staging slice with other small writes.
pub const SHARED_WRITE: u64 = 64 << 10;

/// Bytes of the staging slice small writes share.
pub const ARENA_BYTES: u64 = 1 << 20;

/// Upload staging bytes in flight (submitted, not yet mapped again) above which a write
/// first waits for the device: 256 MiB.
pub const MAX_IN_FLIGHT: u64 = 256 << 20;

/// Copies of at least this many bytes are split over several threads.
const PARALLEL_COPY: usize = 8 << 20;

/// The upload staging memory of a client.
pub(crate) struct UploadStaging {
    pub(crate) memory: MemoryManagement<WgpuStorage>,
    arena: Option<Arena>,
    in_flight: Arc<AtomicU64>,
}

/// The slice small writes of the current batch share: bytes `[cursor, end)` are free.
struct Arena {
    buffer: wgpu::Buffer,
    cursor: u64,
    end: u64,
}

/// A reserved, mapped staging range at `offset` of `buffer`.
pub(crate) struct Region {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) offset: u64,
}

impl UploadStaging {
    pub(crate) fn new(device: &wgpu::Device) -> Self {
        let properties = staging_memory_properties(&device.limits());
        // A page maps whole, so slices are pages of their own (exclusive pages).
        let pool = MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: properties.max_page_size,
            },
            dealloc_period: Some(5000),
        };
        let memory = MemoryManagement::from_configuration(
            WgpuStorage::new(device.clone(), UPLOAD_USAGE, properties.alignment)
                .mapped_at_creation(),
            &properties,
            MemoryConfiguration::ExclusivePages,
            MemoryManagementOptions::new("upload")
                .pools(vec![pool])
                .transient(),
        );
        Self {
            memory,
            arena: None,
            in_flight: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Staging bytes submitted and not yet mapped again, in bytes.
    pub(crate) fn in_flight(&self) -> Arc<AtomicU64> {
        self.in_flight.clone()
    }

    /// Reserves `len` bytes of mapped staging for the pending batch: a share of the
    /// small-write slice, or a slice of its own. The offset is a multiple of
    /// `wgpu::MAP_ALIGNMENT`.
    ///
    /// # Errors
    /// [`ClientError::Reserve`] when the staging memory cannot hold `len` bytes.
    pub(crate) fn region(
        &mut self,
        len: u64,
        pending: &mut PendingWork,
    ) -> Result<Region, ClientError> {
        let len = len.max(1).next_multiple_of(wgpu::MAP_ALIGNMENT);
        if len > SHARED_WRITE {
            let (buffer, offset) = self.page(len, pending)?;
            return Ok(Region { buffer, offset });
        }
        if self
            .arena
            .as_ref()
            .is_none_or(|arena| arena.end - arena.cursor < len)
        {
            let (buffer, offset) = self.page(ARENA_BYTES, pending)?;
            self.arena = Some(Arena {
                buffer,
                cursor: offset,
                end: offset + ARENA_BYTES,
            });
        }
        let arena = self.arena.as_mut().expect("made above");
        let offset = arena.cursor;
        arena.cursor += len;
        Ok(Region {
            buffer: arena.buffer.clone(),
            offset,
        })
    }

    /// Closes the small-write slice: the batch that used it is being submitted.
    pub(crate) fn close_arena(&mut self) {
        self.arena = None;
    }

    /// A new staging slice of `len` bytes, noted in the pending batch.
    fn page(
        &mut self,
        len: u64,
        pending: &mut PendingWork,
    ) -> Result<(wgpu::Buffer, u64), ClientError> {
        let handle = self.memory.reserve(len)?;
        let resource = self
            .memory
            .get_resource(&handle.clone().binding(), None, None)?;
        self.in_flight
            .fetch_add(resource.buffer.size(), Ordering::Relaxed);
        pending.upload(UploadPage::new(
            handle,
            resource.buffer.clone(),
            self.in_flight.clone(),
        ));
        Ok((resource.buffer, resource.offset))
    }
}

impl Region {
    /// Fills `[at, at + len)` of the region through its mapped range with `fill`, and
    /// returns the bytes of the region's first and last 4-byte words as written (what an
    /// unaligned write's edge words need).
    ///
    /// # Errors
    /// [`ClientError::Map`] when the range is not mapped (a lost device).
    pub(crate) fn fill(
        &self,
        at: u64,
        len: u64,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<Edges, ClientError> {
        let end = (at + len)
            .next_multiple_of(COPY_ALIGNMENT)
            .max(COPY_ALIGNMENT);
        let mut view = self
            .buffer
            .get_mapped_range_mut(self.offset..self.offset + end)
            .map_err(|error| ClientError::Map {
                size: len,
                message: format!("upload staging range not mapped: {error}"),
            })?;
        let mut write = view.slice(..);
        let pointer = write.as_raw_element_ptr();
        // SAFETY: the view is a live, exclusive mapping of `end` bytes (wgpu refuses
        // overlapping views), which wgpu initialised (zeroed when the page was made,
        // our own bytes since), and it outlives `bytes`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(pointer.as_ptr(), end as usize) };
        let data = &mut bytes[at as usize..(at + len) as usize];
        fill(data);
        let word =
            |start: usize| -> [u8; 4] { bytes[start..start + 4].try_into().unwrap_or([0; 4]) };
        Ok(Edges {
            head: word(0),
            tail: word(end as usize - 4),
        })
    }
}

/// The first and last 4-byte words of a filled region.
pub(crate) struct Edges {
    pub(crate) head: [u8; 4],
    pub(crate) tail: [u8; 4],
}

/// Copies `source` into `target` (same length), over several threads when large.
pub(crate) fn copy_bytes(target: &mut [u8], source: &[u8]) {
    if source.len() < PARALLEL_COPY {
        target.copy_from_slice(source);
        return;
    }
    let threads = std::thread::available_parallelism()
        .map(|count| count.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let chunk = source.len().div_ceil(threads).next_multiple_of(4096);
    std::thread::scope(|scope| {
        for (target, source) in target.chunks_mut(chunk).zip(source.chunks(chunk)) {
            scope.spawn(move || target.copy_from_slice(source));
        }
    });
}
