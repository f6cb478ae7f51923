//! Upload staging: pooled MAP_WRITE|COPY_SRC pages that writes fill in place.
//!
//! The rule that makes reuse safe: **a free staging slice lies in a mapped page.**
//!
//! 1. Pages are made mapped (`mapped_at_creation`), in few sizes
//!    ([`upload_page_size`]): [`SMALLEST_UPLOAD_PAGE`] and the powers of two above it. A
//!    page is one slice of the upload memory: a page maps and unmaps whole, so two
//!    batches never share one.
//! 2. The writes of one batch share its pages: a write takes the next bytes of the
//!    batch's open page, or, when they do not fit, a page of the smallest size that holds
//!    it (a free one of that size, or a new one; when no page of that size can be had,
//!    one of just the write's size); of the two, the page with more room left stays
//!    open. So a write of `n` bytes never takes a page larger than
//!    `max(2n, 256 KiB)` rounded to a power of two, whatever idle pages there are (the
//!    memory's exclusive pool reuses a free page at most half again the size asked:
//!    with page sizes a power of two apart, a page of the very size asked).
//! 3. A write fills its range through the mapped range's write-only view (the caller's
//!    bytes copied once, or `write_with`'s closure writing straight into it); nothing
//!    ever reads the mapped memory (wgpu's contract: it may be write-combined).
//! 4. The batch that carries the copies unmaps its pages just before its submit (a
//!    submission may not use a mapped buffer), then asks wgpu to map each page again for
//!    writing ([`UploadPage`]). wgpu runs that map only after the submission read the
//!    page: the map's completion is the fence the page waits behind. The remap runs even
//!    when an application callback panics inside the submit.
//! 5. The map callback drops the page's handle: the page is free again, mapped, for a
//!    later batch. Until then it counts as in flight ([`UploadStaging::in_flight`]); the
//!    client waits for the device when in-flight bytes pass [`MAX_IN_FLIGHT`], so a
//!    stream of writes holds a bounded amount of staging.
//! 6. Free pages go back to the driver by themselves (see [`STAGING_IDLE_RESERVATIONS`]
//!    and [`STAGING_IDLE_OPERATIONS`](crate::server::STAGING_IDLE_OPERATIONS)), without a
//!    cleanup, and free pages over a quarter of the main memory's working set go back
//!    at the next write ([`STAGING_FREE_FLOOR`]).
//!
//! On the web none of this is used: a page would come back only in a map callback the
//! browser runs once the program yields, so writes are handed to the queue instead
//! (`queued`), and the client holds no upload staging at all there.

use crate::memory_management::{
    MemoryConfiguration, MemoryManagement, MemoryManagementOptions, MemoryPoolOptions, PoolType,
};
use crate::server::batch::PendingWork;
use crate::server::faults::error::ClientError;
use crate::server::upload_page::UploadPage;
use crate::storage::WgpuStorage;
use crate::storage::wgpu_storage::budget::Budget;
use crate::storage::wgpu_storage::limits::{COPY_ALIGNMENT, staging_memory_properties};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The smallest upload staging page, in bytes: 256 KiB. Writes smaller than a page share
/// it with the other writes of their batch. A batch leaves its last page part empty
/// (half, on average) until the page comes back, so the smallest page is kept small;
/// 256 KiB still holds 64 writes of 4 KiB, so a batch of small writes maps and unmaps
/// few pages.
pub const SMALLEST_UPLOAD_PAGE: u64 = 256 << 10;

/// Upload staging bytes in flight (submitted, not yet mapped again) above which a write
/// first waits for the device: 256 MiB.
pub const MAX_IN_FLIGHT: u64 = 256 << 20;

/// Upload staging bytes in flight under which a write never waits for the device: 1 MiB.
/// Above it, a write waits while staging in flight is over half the main memory's working
/// set (`Client`'s staging bound), so small working sets are not doubled by staging.
pub const STAGING_FLOOR: u64 = 1 << 20;

/// A free staging page that this many reservations of its memory in a row did not take
/// goes back to the driver: 64. Staging pages serve bursts; a loop reuses its pages on
/// every pass, so a page 64 page reservations have passed by belongs to a burst that is
/// over. Re-making a page is one `create_buffer` (and the driver zeroing it), paid at
/// most once per 64 reservations per page.
pub const STAGING_IDLE_RESERVATIONS: u64 = 64;

/// Free upload staging (pages mapped again, taken by no batch) up to this many bytes is
/// always kept: 512 KiB, two of the smallest pages (and always one page of the size the
/// write takes: a loop that writes and syncs finds its last page not yet mapped again).
/// Above that, free staging over a quarter of the main memory's bytes in use goes back to
/// the driver at the next write: staging pages are a second copy of bytes on
/// their way, and a small working set is not doubled by pages kept for writes that may
/// not come (issue 23: the main job's chain kept 1.5 MiB of idle staging pages for 2.2 MiB
/// in use).
pub const STAGING_FREE_FLOOR: u64 = 2 * SMALLEST_UPLOAD_PAGE;

/// Copies of at least this many bytes are split over several threads.
const PARALLEL_COPY: usize = 8 << 20;

/// The upload staging memory of a client.
pub(crate) struct UploadStaging {
    pub(crate) memory: MemoryManagement<WgpuStorage>,
    /// The page of the open batch that has the most room left, if any.
    open: Option<OpenPage>,
    in_flight: Arc<AtomicU64>,
    /// Page reservations so far (the server's idle clock compares it).
    reservations: u64,
    /// The largest page reserved lately, and the reservation count when a page of that
    /// size was last reserved (see [`Self::recent_largest`]).
    recent: (u64, u64),
    device: wgpu::Device,
}

/// A page of the open batch: bytes `[cursor, end)` of `buffer` are free and mapped.
struct OpenPage {
    buffer: wgpu::Buffer,
    cursor: u64,
    end: u64,
}

/// A reserved, mapped staging range at `offset` of `buffer`.
pub(crate) struct Region {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) offset: u64,
}

/// The staging page size for a write of `len` bytes (aligned), on a device whose largest
/// page is `largest` bytes: [`SMALLEST_UPLOAD_PAGE`], or the next power of two of `len`
/// above it, or `len` itself where that power of two is over `largest`.
pub(crate) fn upload_page_size(len: u64, largest: u64) -> u64 {
    // No power of two holds a length over 2^63: such a length is over every limit, and
    // the reservation that follows refuses it.
    match len.max(SMALLEST_UPLOAD_PAGE).checked_next_power_of_two() {
        Some(size) if size <= largest => size,
        _ => len.max(SMALLEST_UPLOAD_PAGE.min(largest)),
    }
}

impl UploadStaging {
    pub(crate) fn new(device: &wgpu::Device, budget: Arc<Budget>) -> Self {
        let properties = staging_memory_properties(&device.limits());
        // A page maps whole, so slices are pages of their own (exclusive pages); not
        // transient: a request takes a free page at most half again its size.
        let pool = MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: properties.max_page_size,
            },
            dealloc_period: Some(STAGING_IDLE_RESERVATIONS),
        };
        let memory = MemoryManagement::from_configuration(
            WgpuStorage::new(device.clone(), UPLOAD_USAGE, properties.alignment)
                .mapped_at_creation()
                .with_budget(budget),
            &properties,
            MemoryConfiguration::ExclusivePages,
            MemoryManagementOptions::new("upload").pools(vec![pool]),
        );
        Self {
            memory,
            open: None,
            in_flight: Arc::new(AtomicU64::new(0)),
            reservations: 0,
            recent: (0, 0),
            device: device.clone(),
        }
    }

    /// Staging bytes submitted and not yet mapped again, in bytes.
    pub(crate) fn in_flight(&self) -> Arc<AtomicU64> {
        self.in_flight.clone()
    }

    /// Bytes of free staging pages: held, and taken by no batch.
    fn free_bytes(&self) -> u64 {
        self.memory
            .bytes_allocated()
            .saturating_sub(self.in_flight.load(Ordering::Relaxed))
    }

    /// Gives every free staging page back when their bytes are over
    /// [`STAGING_FREE_FLOOR`], one page of a write of `len` bytes, and a quarter of the
    /// main memory's bytes in use (`in_use`, asked only past the first two: it walks the
    /// main memory's slices). Pages taken by a batch stay. O(1) when under the first two;
    /// otherwise a cleanup of the staging memory.
    ///
    /// Runs after every write, and before a `create` reserves its handle, so free staging
    /// over its bound goes back before the main memory may make a page for the handle
    /// (the main job's chain peaked with a new main page beside 1.5 MiB of free upload
    /// pages that the write then gave back). A free staging page whose last batch the
    /// device is known to be done with is freed at the device at once, so the device
    /// never holds it beside the new page; one whose batch may still run (its map came
    /// back before the fence of its batch was seen) stays until the device is done, and
    /// the budget counts both meanwhile. There, the free page the write would have taken
    /// goes too; it is made again, once.
    pub(crate) fn give_back_free_over_bound(&mut self, len: u64, in_use: impl FnOnce() -> u64) {
        let free = self.free_bytes();
        // One free page of the write's size always stays: a loop that writes and syncs
        // finds its last page not yet mapped again, and takes it on the pass after. So
        // do twice the largest page of the recent writes: one free page of each power of
        // two up to it sums to less, so a loop whose writes vary in size keeps a page of
        // every size it writes instead of giving them back and making them again each
        // step (400 steps of 256 KiB-2 MiB writes made an upload page almost every step).
        let this_write = upload_page_size(aligned(len), self.memory.largest_page());
        let keep = STAGING_FREE_FLOOR
            .max(this_write)
            .max(self.recent_largest().saturating_mul(2));
        if free <= keep {
            return;
        }
        let bound = keep.max(in_use() / 4);
        if free <= bound {
            return;
        }
        self.memory
            .cleanup(crate::memory_management::Cleanup::Explicit);
        tracing::debug!(
            free,
            bound,
            held = self.memory.bytes_allocated(),
            "free upload staging over its bound given back"
        );
    }

    /// Page reservations made so far.
    pub(crate) fn reservations(&self) -> u64 {
        self.reservations
    }

    /// The largest page size reserved lately, in bytes: a size counts until
    /// [`STAGING_IDLE_RESERVATIONS`] page reservations passed since a page of it was last
    /// reserved, as a free page that long untaken goes back anyway; 0 when none is recent.
    fn recent_largest(&self) -> u64 {
        let (size, at) = self.recent;
        if self.reservations.saturating_sub(at) < STAGING_IDLE_RESERVATIONS {
            size
        } else {
            0
        }
    }

    /// Notes a page of `size` bytes reserved (see [`Self::recent_largest`]).
    fn note_page(&mut self, size: u64) {
        if size >= self.recent_largest() {
            self.recent = (size, self.reservations);
        }
    }

    /// Reserves `len` bytes of mapped staging for the pending batch: the next bytes of
    /// its open page, or the start of a new page. The offset is a multiple of
    /// `wgpu::MAP_ALIGNMENT`.
    ///
    /// # Errors
    /// [`ClientError::Reserve`] when the staging memory cannot hold `len` bytes (over the
    /// device's largest buffer, or out of room: the device or the budget refused a page).
    pub(crate) fn region(
        &mut self,
        len: u64,
        pending: &mut PendingWork,
    ) -> Result<Region, ClientError> {
        let len = aligned(len);
        if let Some(open) = self
            .open
            .as_mut()
            .filter(|open| open.end - open.cursor >= len)
        {
            let offset = open.cursor;
            open.cursor += len;
            return Ok(Region {
                buffer: open.buffer.clone(),
                offset,
            });
        }
        let size = upload_page_size(len, self.memory.largest_page());
        let (buffer, offset, size) = match self.page(size, pending) {
            Ok((buffer, offset)) => (buffer, offset, size),
            // Out of room for a page of the usual size (a budget near its end, a device
            // near full): a page of just the write's size may still fit.
            Err(error) if out_of_room(&error) && size > len => {
                let (buffer, offset) = self.page(len, pending)?;
                (buffer, offset, len)
            }
            Err(error) => return Err(error),
        };
        let page = OpenPage {
            buffer: buffer.clone(),
            cursor: offset + len,
            end: offset + size,
        };
        // Of the old open page and the new one, the one with more room stays open.
        if self
            .open
            .as_ref()
            .is_none_or(|open| open.end - open.cursor < page.end - page.cursor)
        {
            self.open = Some(page);
        }
        Ok(Region { buffer, offset })
    }

    /// Closes the batch's pages: the batch that used them is being submitted.
    pub(crate) fn close_batch(&mut self) {
        self.open = None;
    }

    /// A staging page of `size` bytes, noted in the pending batch.
    fn page(
        &mut self,
        size: u64,
        pending: &mut PendingWork,
    ) -> Result<(wgpu::Buffer, u64), ClientError> {
        self.reservations += 1;
        self.note_page(size);
        let handle = self.memory.reserve(size)?;
        let resource = self
            .memory
            .get_resource(&handle.clone().binding(), None, None)?;
        self.in_flight
            .fetch_add(resource.buffer.size(), Ordering::Relaxed);
        pending.upload(UploadPage::new(
            &self.device,
            handle,
            resource.buffer.clone(),
            self.in_flight.clone(),
        ));
        Ok((resource.buffer, resource.offset))
    }
}

/// `len` bytes as staging takes them: at least one, a multiple of `wgpu::MAP_ALIGNMENT`
/// (`u64::MAX` for a length that has none: over every limit, refused by the reservation).
fn aligned(len: u64) -> u64 {
    len.max(1)
        .checked_next_multiple_of(wgpu::MAP_ALIGNMENT)
        .unwrap_or(u64::MAX)
}

/// Whether `error` is a reservation out of room (so giving back other memories' free
/// pages may help).
pub(crate) fn out_of_room(error: &ClientError) -> bool {
    matches!(error, ClientError::Reserve(error) if error.is_out_of_room())
}

impl Region {
    /// Fills `[at, at + len)` of the region through the write-only view of its mapped
    /// range with `fill`. Nothing of the mapped range is read.
    ///
    /// # Errors
    /// [`ClientError::Map`] when the range is not mapped (a lost device).
    pub(crate) fn fill(
        &self,
        at: u64,
        len: u64,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<(), ClientError> {
        // wgpu maps ranges that start at MAP_ALIGNMENT and span whole 4-byte words.
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
        fill(view.slice(at as usize..(at + len) as usize));
        Ok(())
    }
}

/// The piece of a large copy one thread takes at a time, in bytes.
const COPY_PIECE: usize = 64 << 10;

/// Copies `source` into `target` (same length), over several threads when large (on
/// the calling thread on the web, which has none).
///
/// wgpu's write-only view of a byte slice cannot move to another thread, but a view of a
/// fixed-size array can: the target is cut into [`COPY_PIECE`]-byte arrays, dealt out to
/// the threads in runs, and the tail is copied here.
pub(crate) fn copy_bytes(target: wgpu::WriteOnly<'_, [u8]>, source: &[u8]) {
    let mut target = target;
    if source.len() < PARALLEL_COPY || cfg!(target_arch = "wasm32") {
        target.copy_from_slice(source);
        return;
    }
    let threads = std::thread::available_parallelism()
        .map(|count| count.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let (pieces, mut tail) = target.into_chunks::<COPY_PIECE>();
    let whole = pieces.len() * COPY_PIECE;
    let per_thread = pieces.len().div_ceil(threads);
    let mut runs: Vec<Vec<wgpu::WriteOnly<'_, [u8; COPY_PIECE]>>> = Vec::with_capacity(threads);
    for piece in pieces {
        match runs.last_mut() {
            Some(run) if run.len() < per_thread => run.push(piece),
            _ => runs.push(vec![piece]),
        }
    }
    std::thread::scope(|scope| {
        for (run, source) in runs
            .into_iter()
            .zip(source[..whole].chunks(per_thread * COPY_PIECE))
        {
            scope.spawn(move || {
                for (piece, source) in run.into_iter().zip(source.chunks_exact(COPY_PIECE)) {
                    wgpu::WriteOnly::<'_, [u8]>::from(piece).copy_from_slice(source);
                }
            });
        }
        tail.copy_from_slice(&source[whole..]);
    });
}

/// The usages of upload staging pages: mapped for writing, copied from.
pub(crate) const UPLOAD_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_WRITE.union(wgpu::BufferUsages::COPY_SRC);

#[cfg(test)]
mod tests {
    use super::*;

    /// A large copy cut into pieces over threads lands every byte where it belongs.
    #[test]
    fn a_parallel_copy_copies_every_byte() {
        let len = PARALLEL_COPY + 3 * COPY_PIECE + 5;
        let source: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut target = vec![0u8; len];
        copy_bytes(wgpu::WriteOnly::from_mut(target.as_mut_slice()), &source);
        assert!(target == source);
    }

    /// Sizes a power of two apart from 256 KiB up; a page never more than twice the write
    /// above that; a write over the largest power of two gets a page of its own size.
    #[test]
    fn page_sizes_are_few_and_never_much_larger_than_the_write() {
        let largest = 256 << 20;
        let smallest = SMALLEST_UPLOAD_PAGE;
        assert_eq!(upload_page_size(8, largest), smallest);
        assert_eq!(upload_page_size(smallest, largest), smallest);
        assert_eq!(upload_page_size(smallest + 8, largest), 2 * smallest);
        assert_eq!(upload_page_size(100 << 20, largest), 128 << 20);
        assert_eq!(upload_page_size(200 << 20, largest), 256 << 20);
        assert_eq!(
            upload_page_size(200 << 20, largest - 8),
            200 << 20,
            "no power of two fits under the device's largest page"
        );
        for len in (8..(200u64 << 20)).step_by(3_999_992) {
            let page = upload_page_size(len, largest);
            assert!(
                page >= len && page <= (2 * len).max(smallest),
                "{len}: {page}"
            );
        }
        assert_eq!(
            upload_page_size(8, 4096),
            4096,
            "a device with tiny buffers"
        );
    }
}
