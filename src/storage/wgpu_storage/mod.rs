//! [`WgpuStorage`]: one `wgpu::Buffer` per page.

pub mod budget;
mod copies;
mod device_memory;
pub mod error;
pub mod fences;
pub mod limits;
mod reclaimer;

pub use copies::PendingCopy;
pub use device_memory::DeviceMemory;
pub use reclaimer::RECLAIM_WAIT;

use super::{ComputeStorage, StorageHandle, StorageId, StorageUtilization};
use budget::Budget;
use cubecl_runtime::server::IoError;
use limits::COPY_ALIGNMENT;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Pages as wgpu buffers, all made with one set of usage flags.
///
/// - A page of `size` bytes is a buffer of `size` rounded up to
///   `wgpu::COPY_BUFFER_ALIGNMENT` (at least 4 bytes: wgpu forbids empty bindings);
///   [`bytes_allocated`](ComputeStorage::bytes_allocated) counts those real sizes.
/// - A page over the device's `max_buffer_size` is `IoError::BufferTooBig` without
///   calling wgpu; every `create_buffer` runs inside error scopes, so a driver refusal is
///   `IoError::OutOfMemory` (or `IoError::Unknown` with wgpu's message), never an
///   uncaptured error.
/// - Every page's bytes are taken from the storage's [`Budget`] before `create_buffer` is
///   called (several storages may share one: [`with_budget`](Self::with_budget)); a page
///   that would cross the budget is `IoError::OutOfMemory` without calling wgpu, so the
///   memory above cleans up and retries as it does when the device refuses a page.
/// - Every page remembers the last batch of recorded work it was handed out for (see
///   [`fences`]): [`get`](ComputeStorage::get), [`buffer`](Self::buffer) and the copies
///   a compaction queues stamp it, and [`lend`](Self::lend) marks it as the
///   application's, whose work the storage never sees finish.
/// - Deallocated buffers go at [`flush`](ComputeStorage::flush). One whose last batch
///   the device is known to be done with is destroyed (`wgpu::Buffer::destroy`: wgpu
///   frees its device memory at once, whatever still holds a clone) and then credited,
///   on the budget's reclaimer thread when it has one, which [`alloc`](ComputeStorage::alloc)
///   waits for before it creates a page: a pool that gives pages back before it grows
///   never has the device hold both. Any other is retired: dropped there (wgpu keeps a dropped buffer
///   alive until the work already submitted on it is done), or, under a budget
///   [`with_reclaimer`](Budget::with_reclaimer), held until the device is done and
///   dropped on the reclaimer's thread; its bytes stay charged in the budget until then
///   (see [`budget`]), so while such work runs the budget counts the old page and the
///   new one together, as the device holds them.
#[derive(Debug)]
pub struct WgpuStorage {
    device: wgpu::Device,
    usage: wgpu::BufferUsages,
    alignment: u64,
    max_buffer_size: u64,
    buffers: HashMap<StorageId, Page>,
    pending_dealloc: Vec<StorageId>,
    allocated: u64,
    mapped_at_creation: bool,
    deallocations: u64,
    /// Copies a compaction asked for, until the owner takes them.
    copies: Vec<PendingCopy>,
    budget: Arc<Budget>,
    /// Pages the browser refused after `create_buffer` returned (the web only, see
    /// [`error`]): the owner reports them at its next await point.
    late: error::LateErrors<error::RefusedPage>,
}

/// A page: its buffer, and the serial of the last batch it was handed out for (see
/// [`fences`]; [`fences::LENT`] once lent to the application).
#[derive(Debug)]
struct Page {
    buffer: wgpu::Buffer,
    last_use: AtomicU64,
}

impl Page {
    /// Notes a use in the batch `recording` (a lent page stays lent).
    fn stamp(&self, recording: u64) -> &wgpu::Buffer {
        self.last_use.fetch_max(recording, Ordering::Relaxed);
        &self.buffer
    }
}

/// The resource behind a storage handle: the page's buffer and the slice's range in it.
#[derive(Debug, Clone)]
pub struct WgpuResource {
    /// The page.
    pub buffer: wgpu::Buffer,
    /// Byte offset of the slice in the page.
    pub offset: u64,
    /// Bytes of the slice (the requested size, not rounded).
    pub size: u64,
}

impl WgpuResource {
    /// The bytes a binding or copy of this slice covers: its size rounded up to
    /// `wgpu::COPY_BUFFER_ALIGNMENT`, and at least 4 (wgpu rejects zero-size bindings).
    /// The rounding stays inside the slice, whose aligned size is at least this.
    pub fn binding_size(&self) -> u64 {
        self.size.max(1).next_multiple_of(COPY_ALIGNMENT)
    }

    /// The slice as a `wgpu::BufferBinding`, for a bind group entry.
    pub fn as_binding(&self) -> wgpu::BufferBinding<'_> {
        wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: wgpu::BufferSize::new(self.binding_size()),
        }
    }
}

impl WgpuStorage {
    /// A storage making buffers with `usage` on `device`; `alignment` is the offset
    /// alignment slices are placed at, in bytes.
    pub fn new(device: wgpu::Device, usage: wgpu::BufferUsages, alignment: u64) -> Self {
        let max_buffer_size = device.limits().max_buffer_size;
        Self {
            device,
            usage,
            alignment,
            max_buffer_size,
            buffers: HashMap::default(),
            pending_dealloc: Vec::new(),
            allocated: 0,
            mapped_at_creation: false,
            deallocations: 0,
            copies: Vec::new(),
            budget: Arc::default(),
            late: error::LateErrors::default(),
        }
    }

    /// Takes every page's bytes from `budget` (shared with other storages) instead of a
    /// budget of its own without a cap. Call it before the first page is made.
    pub fn with_budget(mut self, budget: Arc<Budget>) -> Self {
        self.budget = budget;
        self
    }

    /// Keeps the pages the browser refuses (on the web, where a refusal is known only
    /// after `create_buffer` returned, see [`error`]) in `late`, which the owner reads,
    /// instead of a store of the storage's own. Call it before the first page is made.
    pub fn with_late_errors(mut self, late: error::LateErrors<error::RefusedPage>) -> Self {
        self.late = late;
        self
    }

    /// The budget every page of this storage is taken from.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// Makes every new page mapped at creation (`mapped_at_creation`), for memories whose
    /// pages are filled by the host before their first use (upload staging). Needs
    /// `MAP_WRITE` in the usage, or a page size that is a multiple of
    /// `wgpu::COPY_BUFFER_ALIGNMENT` (pages always are).
    pub fn mapped_at_creation(mut self) -> Self {
        self.mapped_at_creation = true;
        self
    }

    /// Pages given back to wgpu so far. Grows by one per page; a cache that holds pages
    /// (bind groups) compares it to know when to let go of them.
    pub fn deallocations(&self) -> u64 {
        self.deallocations
    }

    /// Every page held, with its storage id, in no particular order. For inspection:
    /// a buffer taken here must not be recorded on (use [`buffer`](Self::buffer)).
    pub fn pages(&self) -> impl Iterator<Item = (&StorageId, &wgpu::Buffer)> {
        self.buffers.iter().map(|(id, page)| (id, &page.buffer))
    }

    /// The buffer of the page `id`, to record work on in the batch being recorded (the
    /// page is stamped with it, see [`fences`]), or `None` when no page of this storage
    /// has that id (given back, or another storage's). A borrow, not a clone: a read
    /// looks up one buffer per copy this way, not one per handle.
    pub fn buffer(&self, id: &StorageId) -> Option<&wgpu::Buffer> {
        let recording = self.budget.fences().recording();
        self.buffers.get(id).map(|page| page.stamp(recording))
    }

    /// Whether work recorded in the open batch (not yet taken for submission) may use the
    /// page `id`: it was handed out for that batch (see [`fences`]), or lent to the
    /// application. `false` when no page has that id. Reads the stamp without setting
    /// it: a write handed to the queue asks this before it resolves its target.
    pub fn in_open_batch(&self, id: &StorageId) -> bool {
        let recording = self.budget.fences().recording();
        self.buffers
            .get(id)
            .is_some_and(|page| page.last_use.load(Ordering::Relaxed) >= recording)
    }

    /// Marks the page `id` as lent to the application (its buffer handed out for the
    /// application's own work, which the storage never sees finish): given back, it is
    /// never destroyed at once, only retired until the device is done with the work
    /// submitted before it (see the type's doc). Nothing when no page has that id.
    pub fn lend(&self, id: &StorageId) {
        if let Some(page) = self.buffers.get(id) {
            page.last_use.store(fences::LENT, Ordering::Relaxed);
        }
    }

    /// The usage flags of every page.
    pub fn usage(&self) -> wgpu::BufferUsages {
        self.usage
    }

    /// The device's `max_buffer_size`, in bytes.
    pub fn max_buffer_size(&self) -> u64 {
        self.max_buffer_size
    }
}

impl ComputeStorage for WgpuStorage {
    type Resource = WgpuResource;

    fn alignment(&self) -> usize {
        self.alignment as usize
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<WgpuResource, IoError> {
        let buffer = self
            .buffer(&handle.id)
            .ok_or_else(|| IoError::StorageHandleNotFound {
                reason: "no buffer with this id".into(),
                backtrace: Default::default(),
            })?;
        Ok(WgpuResource {
            buffer: buffer.clone(),
            offset: handle.offset(),
            size: handle.size(),
        })
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        if size > self.max_buffer_size {
            return Err(IoError::BufferTooBig {
                size,
                backtrace: Default::default(),
            });
        }
        let real_size = size.max(1).next_multiple_of(COPY_ALIGNMENT);
        // Pages given back that no unfinished work uses, and buckets whose work the
        // device has finished, may still be on their way out on the reclaimer's thread:
        // let them go first, so the device does not hold them beside this one. (Pages
        // work in flight may still use stay until it is done, charged in the budget
        // beside this one.)
        if !self.budget.wait_reclaimed(RECLAIM_WAIT) {
            tracing::warn!(waited = ?RECLAIM_WAIT, "creating a page while given-back pages are still being freed");
        }
        if !self.budget.try_hold(real_size) {
            tracing::debug!(
                size = real_size,
                held = self.budget.held(),
                budget = self.budget.limit(),
                "the budget refused a page"
            );
            return Err(IoError::OutOfMemory {
                size,
                backtrace: Default::default(),
            });
        }
        let refused = || error::RefusedPage {
            size,
            usage: self.usage,
        };
        let (buffer, error) = error::capture_late(&self.device, &self.late, refused, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgpu-memory page"),
                size: real_size,
                usage: self.usage,
                mapped_at_creation: self.mapped_at_creation,
            })
        });
        if let Some(error) = error {
            self.budget.release(real_size);
            return Err(error::page_error(error, size));
        }
        let id = StorageId::new();
        self.buffers.insert(
            id,
            Page {
                buffer,
                last_use: AtomicU64::new(0),
            },
        );
        self.allocated += real_size;
        Ok(StorageHandle::new(
            id,
            StorageUtilization { offset: 0, size },
        ))
    }

    fn dealloc(&mut self, id: StorageId) {
        self.pending_dealloc.push(id);
    }

    fn flush(&mut self) {
        for id in self.pending_dealloc.drain(..) {
            if let Some(Page { buffer, last_use }) = self.buffers.remove(&id) {
                let size = buffer.size();
                self.allocated -= size;
                self.deallocations += 1;
                if self.budget.fences().finished(last_use.into_inner()) {
                    // No unfinished work uses it: its device memory goes now (before the
                    // next page is made), even while a cache still holds a clone.
                    tracing::trace!(size, "a given-back page freed at once");
                    self.budget.free_page(buffer);
                } else {
                    // Work recorded or submitted may still use the buffer: its bytes stay
                    // charged until the device is done with it (see `budget`).
                    self.budget.retire_page(buffer);
                }
            }
        }
    }

    fn bytes_allocated(&self) -> u64 {
        self.allocated
    }
}
