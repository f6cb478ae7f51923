//! Per device: the main memory, the staging memories, and the wgpu work around them.
//!
//! The [`Server`] sits behind the client's one mutex and only records work: launches,
//! upload copies and read copies go into one pending encoder ([`batch`]), in the order
//! they are asked for. The client takes the recorded [`Batch`] out and submits it
//! without holding that mutex (wgpu runs application callbacks inside `queue.submit`
//! and `device.poll`, and such a callback may call the client). Batches are submitted
//! one at a time in the order they were taken, so a slice freed by one operation and
//! reused by the next is never written before the earlier work that used it.
//!
//! Types the client hands out ([`Handle`], [`Kernel`], [`ReadBytes`], [`ClientError`])
//! are defined here, the layer that gives them meaning, and re-exported by the client.
//!
//! The rooms, each a concern (an arrow runs only downward, to a room listed later, or
//! up to this file's [`Server`]):
//!
//! - [`room`]: the budget over every memory, and what a reservation that runs out of
//!   room gives back and compacts;
//! - [`uploads`]: writes into handles through upload staging;
//! - [`reads`]: reads of handles through readback staging, and the poller that
//!   completes their maps;
//! - [`launches`]: kernels, their dispatch, and the pipelines and bind groups reused;
//! - [`memory`]: handles, exports, pins and compaction, the history and the snapshot;
//! - [`batch`]: the pending encoder everything records into, and its submission, with
//!   the upload pages it carries through a submit ([`upload_page`]);
//! - [`faults`]: the errors a caller matches on, a lost device, destroyed pages.

mod batch;
mod faults;
mod launches;
mod memory;
mod reads;
mod room;
mod segments;
mod upload_page;
mod uploads;

pub use batch::{MAX_BATCH_COMMANDS, SubmitPolicy};
pub use faults::error::ClientError;
pub use launches::caches::{MAX_BIND_GROUPS, MAX_PIPELINES};
pub use launches::kernel::Kernel;
pub use memory::export_life::MAX_CLIENTS_PER_THREAD;
pub use memory::exports::MAX_HELD_EXPORTS;
pub use memory::handle::{Handle, HandleResource, MAX_QUEUED_RELEASES};
pub use reads::read_bytes::ReadBytes;
pub use room::budget::BUDGET_FIELD;
pub use room::pending::STAGING_IDLE_OPERATIONS;
pub use uploads::upload::{
    MAX_IN_FLIGHT, SMALLEST_UPLOAD_PAGE, STAGING_FLOOR, STAGING_FREE_FLOOR,
    STAGING_IDLE_RESERVATIONS,
};

pub(crate) use batch::{Batch, BatchFailure};
#[cfg(target_arch = "wasm32")]
pub(crate) use faults::late::LateMarks;
pub(crate) use faults::late::{Late, LateStores};
pub(crate) use faults::lost::DeviceLoss;
pub(crate) use memory::export_life::ExportEpoch;
pub(crate) use memory::exports::Waiting;
use memory::handle::DropNotice;
pub(crate) use memory::history::{FreeRecord, History};
#[cfg(test)]
pub(crate) use reads::poller::poller_thread_name;
pub(crate) use reads::poller::{Poller, TurnHeld};
pub(crate) use reads::readback::{PendingMap, ReadFuture, ReadPlan};
pub(crate) use reads::streamed::{piece_sets, streamed_slice};
pub(crate) use reads::work_done::WorkDone;
pub(crate) use segments::SegmentQueue;
pub(crate) use uploads::upload::copy_bytes;

use crate::memory_management::{
    AuxiliaryMemoryReport, Cleanup, MemoryConfiguration, MemoryManagement, MemoryManagementOptions,
    MemoryPoolOptions, MemoryReport, PoolLayout, PoolType, StreamMemoryReport,
};
use crate::storage::WgpuStorage;
use crate::storage::wgpu_storage::budget::Budget;
use crate::storage::wgpu_storage::limits::{staging_memory_properties, storage_memory_properties};
use batch::PendingWork;
use cubecl_environment::stream::StreamId;
use cubecl_runtime::memory_management::{ManagedMemoryId, MemoryLocation};
use launches::caches::{BindGroupKey, CachedPipeline, Lru, PipelineKey};
use uploads::upload::UploadStaging;

/// The usages of main-memory pages: bound as storage buffers, copied from and into.
pub(crate) const MAIN_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The usages of readback staging pages: copied into, then mapped for reading.
pub(crate) const STAGING_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);

/// The device-side state of a client.
pub(crate) struct Server {
    pub(crate) device: wgpu::Device,
    limits: wgpu::Limits,
    pub(crate) main: MemoryManagement<WgpuStorage>,
    pub(crate) staging: MemoryManagement<WgpuStorage>,
    uploads: UploadStaging,
    pending: PendingWork,
    pub(crate) policy: SubmitPolicy,
    pipelines: Lru<PipelineKey, CachedPipeline>,
    next_pipeline_slot: u64,
    bind_groups: Lru<BindGroupKey, wgpu::BindGroup>,
    /// The bindings list of the last bind-group key a cache hit gave back, emptied: the
    /// next launch fills it instead of allocating one.
    binding_scratch: Vec<(wgpu::Buffer, u64, u64)>,
    seen_deallocations: u64,
    merge_kernel: Kernel,
    pub(crate) lost: DeviceLoss,
    /// This server's number, stamped on its handles.
    id: u64,
    /// Allocations whose handles are all dropped, released at the next reservation.
    released: std::sync::Arc<memory::handle::ReleaseQueue>,
    /// The queue's previous buffer, swapped in so draining it allocates nothing.
    spare_released: Vec<(ManagedMemoryId, MemoryLocation)>,
    /// Allocations whose address left the client: they never move.
    pins: std::sync::Arc<memory::pins::PinTable>,
    /// The bound on the bytes one compaction pass moves (0: compaction off).
    max_move_bytes: u64,
    /// The cap over the pages of all three memories, shared by their storages.
    budget: std::sync::Arc<Budget>,
    /// When the staging memories last reserved, in client operations.
    idle: room::pending::IdleClock,
    /// Main pages the application destroyed, and the slices that keep allocations out.
    destroyed: faults::destroyed::DestroyedPages,
    /// Exported slices held until the thread that dropped their resource submits (see
    /// `memory::exports`).
    exports: memory::exports::Exports,
    /// Whether the web's rules hold (on wasm32; tests set them on native adapters): writes
    /// go to the queue instead of upload staging (see `uploads::queued`), and the client
    /// never waits for the device (see `room::budget`).
    web: bool,
    /// Errors the browser reports after the operation returned (the web; see
    /// `faults::late`).
    late: LateStores,
}

impl Server {
    pub(crate) fn new(device: wgpu::Device, layout: PoolLayout, lost: DeviceLoss) -> Self {
        let limits = device.limits();
        let main_properties = storage_memory_properties(&limits);
        let (config, options) = match layout {
            PoolLayout::Preset(config) => (config, MemoryManagementOptions::new("main")),
            PoolLayout::Explicit(pools) => (
                MemoryConfiguration::default(),
                MemoryManagementOptions::new("main").pools(pools),
            ),
        };
        let budget = std::sync::Arc::new(Budget::with_reclaimer());
        let late = LateStores::default();
        let main = MemoryManagement::from_configuration(
            WgpuStorage::new(device.clone(), MAIN_USAGE, main_properties.alignment)
                .with_budget(budget.clone())
                .with_late_errors(late.pages.clone()),
            &main_properties,
            config,
            options,
        );
        Self {
            staging: readback_staging(&device, &limits, budget.clone(), &late),
            uploads: UploadStaging::new(&device, budget.clone()),
            budget,
            idle: room::pending::IdleClock::default(),
            device,
            limits,
            main,
            pending: PendingWork::default(),
            policy: SubmitPolicy::default(),
            pipelines: Lru::new(MAX_PIPELINES),
            next_pipeline_slot: 0,
            bind_groups: Lru::new(MAX_BIND_GROUPS),
            binding_scratch: Vec::new(),
            seen_deallocations: 0,
            merge_kernel: uploads::transfer::merge_kernel(),
            lost,
            released: std::sync::Arc::default(),
            spare_released: Vec::new(),
            pins: std::sync::Arc::default(),
            max_move_bytes: memory::compaction::default_max_move_bytes(),
            destroyed: Default::default(),
            exports: Default::default(),
            web: cfg!(target_arch = "wasm32"),
            late,
            id: {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
        }
    }

    /// Sets the web's rules (writes through the queue, no waiting for the device) on or
    /// off: tests run the web's way on native adapters with it.
    #[cfg(test)]
    pub(crate) fn set_web_rules(&mut self, on: bool) {
        self.web = on;
    }

    /// A new handle of `size` bytes in the main memory.
    pub(crate) fn empty(&mut self, size: u64) -> Result<Handle, ClientError> {
        self.check_lost("create")?;
        self.release_dropped();
        let mut memory = self.reserve_main(size)?;
        let (mut tries, mut pages) = (0, Vec::new());
        while let Some(page) = self.quarantined(&memory) {
            tries += 1;
            if !pages.contains(&page) {
                pages.push(page);
            }
            if tries >= faults::destroyed::MAX_QUARANTINE_TRIES
                || pages.len() >= faults::destroyed::MAX_QUARANTINED_PAGES
            {
                return Err(ClientError::Memory(
                    cubecl_runtime::server::IoError::Unknown {
                        description: format!(
                            "a reservation of {size} bytes landed {tries} times in {} pages the application destroyed; none outside them",
                            pages.len()
                        ),
                        backtrace: Default::default(),
                    },
                ));
            }
            memory = self.main.reserve(size)?;
        }
        Ok(Handle {
            last_drop: DropNotice::new(&self.released, &memory),
            memory,
            size,
            owner: self.id,
        })
    }

    /// Releases, O(1) each, the allocations whose handles were all dropped since the last
    /// call, and the exported slices whose hold ended (see `memory::exports`). One still
    /// held by a `HandleResource` or an export stays; the memory's sweeps free it once
    /// that binding is gone.
    pub(crate) fn release_dropped(&mut self) {
        self.release_exports();
        let mut dropped = std::mem::take(&mut self.spare_released);
        std::mem::swap(&mut *self.released.lock(), &mut dropped);
        for (id, location) in dropped.drain(..) {
            self.main.release(id, location);
        }
        self.spare_released = dropped;
    }

    /// Where a handle's bytes are, for the server's own recording (not pinned: it is
    /// dropped before the lock is let go). No reservation may come between this and the
    /// recording that uses it: a reservation may compact and move the slice (see
    /// `compaction`; `check_unmoved` guards the rule).
    pub(crate) fn resource(&mut self, handle: &Handle) -> Result<HandleResource, ClientError> {
        self.check_owner(handle, "using a handle")?;
        let binding = handle.binding();
        let resource = self.main.get_resource(&binding, None, None)?;
        self.check_destroyed(&resource.buffer, "using a handle")?;
        Ok(HandleResource {
            buffer: resource.buffer,
            offset: resource.offset,
            size: handle.size,
            _binding: binding,
            _pin: None,
            _export: None,
        })
    }

    /// Where a handle's bytes are, for the application, under `pin` (taken before the
    /// client submitted the moves recorded so far: see `Client::resource`): the slice
    /// stays pinned while the resource or a clone of it lives, and is held, in place,
    /// after that until the thread that dropped its last clone submits through
    /// `Client::queue()`, syncs, cleans up, installs or exits (see `memory::exports`).
    pub(crate) fn export_resource(
        &mut self,
        handle: &Handle,
        pin: memory::pins::PinGuard,
    ) -> Result<HandleResource, ClientError> {
        let mut resource = self.resource(handle)?;
        self.lend_page(handle)?;
        resource._pin = Some(pin);
        resource._export = Some(self.export(handle));
        Ok(resource)
    }

    /// Marks the page of `handle`'s slice as lent to the application: its own work on
    /// it is never seen finished, so once given back the page waits for the device to
    /// finish the work submitted before (see `storage::wgpu_storage::fences`).
    fn lend_page(&self, handle: &Handle) -> Result<(), ClientError> {
        let page = self.main.get_storage(&handle.binding())?.id;
        self.main.storage_ref().lend(&page);
        Ok(())
    }

    /// The epoch the threads' submissions, syncs, cleanups and installs count on (see
    /// `memory::exports`).
    pub(crate) fn export_epoch(&self) -> std::sync::Arc<memory::export_life::ExportEpoch> {
        self.exports.epoch()
    }

    /// Exported slices held: resources alive, and dropped ones waiting for their thread.
    pub(crate) fn held_exports(&self) -> usize {
        self.exports.len()
    }

    /// The held exports whose resources are dropped and whose threads have not
    /// submitted since.
    pub(crate) fn exports_waiting(&self) -> Waiting {
        self.exports.waiting()
    }

    /// Pins `handle`'s allocation until the guard is dropped.
    pub(crate) fn pin(&self, handle: &Handle) -> memory::pins::PinGuard {
        self.pins.pin(handle.memory.descriptor().id)
    }

    /// Pins the allocations of `handles` until the guard is dropped (one lock for all).
    pub(crate) fn pin_all<'a>(
        &self,
        handles: impl Iterator<Item = &'a Handle>,
    ) -> memory::pins::PinGuard {
        self.pins.pin_all(
            handles
                .map(|handle| handle.memory.descriptor().id)
                .collect(),
        )
    }

    /// Drops the cached bind groups once the main memory gave a page back: each holds
    /// its pages' buffers (in the group and in its key), which would keep a given-back
    /// page alive inside wgpu until the cache let go of it. Runs whenever the pending
    /// work is taken ([`take_batch`](Self::take_batch)), before the pages given back so
    /// far are closed into the bucket the budget credits once the device is done: the
    /// bind groups are the only cache of ours that holds main pages' buffers.
    pub(crate) fn forget_given_back_pages(&mut self) {
        let deallocations = self.main.storage().deallocations();
        if deallocations != self.seen_deallocations {
            self.bind_groups.clear();
            self.seen_deallocations = deallocations;
        }
    }

    /// The main pools, and the readback and upload staging as auxiliary memories.
    pub(crate) fn memory_report(&self) -> MemoryReport {
        MemoryReport {
            streams: vec![StreamMemoryReport {
                stream: StreamId { value: 0 },
                pools: self.main.memory_report(),
                auxiliary: vec![
                    AuxiliaryMemoryReport {
                        name: "staging".to_string(),
                        pools: self.staging.memory_report(),
                    },
                    AuxiliaryMemoryReport {
                        name: "upload".to_string(),
                        pools: self.uploads.memory.memory_report(),
                    },
                ],
            }],
        }
    }

    /// Replaces the main memory's dynamic pools (staging is never affected).
    pub(crate) fn install(&mut self, layout: PoolLayout) -> Result<(), ClientError> {
        match layout {
            PoolLayout::Preset(config) => {
                tracing::debug!(?config, "install");
                self.main.install_configuration(config)?;
            }
            PoolLayout::Explicit(pools) => {
                tracing::debug!(pools = pools.len(), "install");
                self.main.install_memory_pools(pools)?;
            }
        }
        Ok(())
    }

    /// Gives every free page back, in every memory. Pages dropped here may still be used
    /// by submitted work; wgpu keeps a dropped buffer alive until that work is done.
    pub(crate) fn cleanup(&mut self) {
        let before = self.reserved_bytes();
        self.release_dropped();
        self.settle_destroyed();
        self.main.cleanup(Cleanup::Explicit);
        self.staging.cleanup(Cleanup::Explicit);
        self.uploads.memory.cleanup(Cleanup::Explicit);
        self.forget_given_back_pages();
        let released = before.saturating_sub(self.reserved_bytes());
        tracing::debug!(bytes_released = released, "cleanup");
    }

    /// Gives every free page of the main memory back (after a compaction).
    pub(crate) fn cleanup_main(&mut self) {
        self.main.cleanup(Cleanup::Explicit);
        self.forget_given_back_pages();
    }

    /// Bytes of every page held, in all three memories.
    fn reserved_bytes(&self) -> u64 {
        self.main.bytes_allocated()
            + self.staging.bytes_allocated()
            + self.uploads.memory.bytes_allocated()
    }

    /// The three memories, by the names reports give them.
    pub(crate) fn memories(&self) -> [(&'static str, &MemoryManagement<WgpuStorage>); 3] {
        [
            (crate::report::MAIN_MEMORY, &self.main),
            ("staging", &self.staging),
            ("upload", &self.uploads.memory),
        ]
    }

    /// Counts one client operation on the staging memories' idle clock
    /// ([`STAGING_IDLE_OPERATIONS`]): a staging memory idle that long gives its free
    /// pages back.
    pub(crate) fn tick(&mut self) {
        self.idle.tick(&mut self.staging, &mut self.uploads);
    }

    /// Takes the recorded work out as one batch, or `None` when nothing is recorded.
    ///
    /// The ranges that slices moved by a compaction left are released here: the batch
    /// carries their copies, and whatever is recorded next lands in a later submission.
    /// The batch also carries the budget's bucket of pages given back so far (a batch
    /// with no work when only that is there), credited once the device is done with it,
    /// and, when it carries work, its fence, completed then.
    pub(crate) fn take_batch(&mut self) -> Option<Batch> {
        self.uploads.close_batch();
        self.main.release_moved();
        // Every path that gives a page back (a cleanup, a reservation, an install, a
        // compaction) ends up here before the page's bytes can be credited: the caches
        // let go of it first, so a credited page is gone from the device too.
        self.forget_given_back_pages();
        let retiring = self.budget.close_retiring();
        if self.pending.is_empty() && retiring.is_none() {
            return None;
        }
        // The batch's serial ends here: pages handed out for work recorded from now on
        // are stamped with the next one (see `storage::wgpu_storage::fences`).
        let fence = (!self.pending.is_empty()).then(|| self.budget.fences().close());
        let mut batch = self.pending.take();
        batch.retiring = retiring;
        batch.fence = fence;
        Some(batch)
    }

    /// The stores of errors the browser reports late (see `faults::late`), shared with
    /// the client's await points and its submits.
    pub(crate) fn late_stores(&self) -> LateStores {
        self.late.clone()
    }

    /// Whether the submit policy (or [`MAX_BATCH_COMMANDS`]) makes a submit due.
    pub(crate) fn submit_due(&self) -> bool {
        self.pending.due(&self.policy)
    }

    /// Commands in the open batch.
    #[cfg(test)]
    pub(crate) fn pending_commands(&self) -> u32 {
        self.pending.commands()
    }

    /// Records a batch wgpu refused: its outputs carry the failure. Returns the error for
    /// the operation that submitted it: [`ClientError::PageDestroyed`] when wgpu named a
    /// destroyed resource and a page of ours is (the application destroyed it),
    /// [`ClientError::DeviceLost`] once the device-lost callback has run, else
    /// [`ClientError::Wgpu`].
    pub(crate) fn batch_failed(&mut self, failure: BatchFailure) -> ClientError {
        let message = format!("a batch of recorded work failed: {}", failure.message);
        let id = self.main.error_graph_mut().insert(message.clone());
        for (binding, range) in &failure.outputs {
            self.main.taint(binding, range.clone(), id);
        }
        self.main.error_graph_mut().prune(id);
        if failure.destroyed {
            let handles = self.find_destroyed(None);
            if !handles.is_empty() {
                return faults::destroyed::page_destroyed("submit", handles);
            }
        }
        match self.lost.message() {
            Some(lost) => lost_error("submit", lost),
            None => wgpu_error("submit", message),
        }
    }

    /// Upload staging bytes in flight (shared with the client, read without the lock).
    pub(crate) fn upload_in_flight(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.uploads.in_flight()
    }

    /// Fails with [`ClientError::ForeignHandle`] when `handle` was made by another client.
    pub(crate) fn check_owner(&self, handle: &Handle, operation: &str) -> Result<(), ClientError> {
        if self.owns(handle) {
            return Ok(());
        }
        Err(ClientError::ForeignHandle {
            operation: operation.to_string(),
            owner: handle.owner,
            client: self.id,
        })
    }

    /// Whether `handle` was made by this client.
    pub(crate) fn owns(&self, handle: &Handle) -> bool {
        handle.owner == self.id
    }

    /// Fails with [`ClientError::DeviceLost`] once the device is known to be lost.
    pub(crate) fn check_lost(&self, operation: &str) -> Result<(), ClientError> {
        match self.lost.message() {
            Some(message) => Err(lost_error(operation, message)),
            None => Ok(()),
        }
    }
}

/// The readback staging memory: exclusive MAP_READ pages (a mapped buffer maps whole, so
/// two reads never share one), one pool for every size, so a read that needs a new page
/// gives back the idle pages of other sizes first (field scenario C10). A free page not
/// taken over [`STAGING_IDLE_RESERVATIONS`] reservations goes back, and so does every
/// free page once the memory is idle for [`STAGING_IDLE_OPERATIONS`]. Its pages are
/// taken from `budget`.
fn readback_staging(
    device: &wgpu::Device,
    limits: &wgpu::Limits,
    budget: std::sync::Arc<Budget>,
    late: &LateStores,
) -> MemoryManagement<WgpuStorage> {
    let properties = staging_memory_properties(limits);
    let pool = MemoryPoolOptions {
        pool_type: PoolType::ExclusivePages {
            max_alloc_size: properties.max_page_size,
        },
        dealloc_period: Some(STAGING_IDLE_RESERVATIONS),
    };
    MemoryManagement::from_configuration(
        WgpuStorage::new(device.clone(), STAGING_USAGE, properties.alignment)
            .with_budget(budget)
            .with_late_errors(late.pages.clone()),
        &properties,
        MemoryConfiguration::ExclusivePages,
        MemoryManagementOptions::new("staging")
            .pools(vec![pool])
            .transient(),
    )
}

/// Turns a wgpu error raised around `operation` into a client error.
pub(crate) fn wgpu_error(
    operation: impl Into<String>,
    error: impl std::fmt::Display,
) -> ClientError {
    ClientError::Wgpu {
        operation: operation.into(),
        message: error.to_string(),
    }
}

/// The error of an operation on a lost device.
pub(crate) fn lost_error(operation: impl Into<String>, message: String) -> ClientError {
    ClientError::DeviceLost {
        operation: operation.into(),
        message,
    }
}
