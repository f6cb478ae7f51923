//! [`Client`]: what an application calls.
//!
//! The client owns the locking: one mutex guards the server state, and a second,
//! re-entrant lock (the submit turn) orders submissions. Work is recorded under the
//! mutex; `queue.submit` and `device.poll` run with the mutex released, because wgpu
//! runs application callbacks inside them and such a callback may call the client. The
//! turn is taken before the mutex, never while holding it, so the two cannot deadlock,
//! and a callback running inside our own submit may take the turn again. Launches,
//! writes and reads take the turn too: a batch's failure is recorded before the turn is
//! let go, so no work is recorded against outputs a failed batch left unwritten without
//! seeing that failure (work a callback records inside our own submit, on the submitting
//! thread, is the one exception: wgpu reports the failure only when the submit returns).

#[cfg(test)]
mod batch_tests;
mod budget;
#[cfg(test)]
mod budget_tests;
mod cleanup;
mod compaction;
mod config;
mod configure;
mod device_memory;
mod exports;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod fault_tests;
mod fill_lock;
mod hooks;
mod memory_history;
mod mode;
#[cfg(test)]
mod move_tests;
mod polling;
mod queue;
#[cfg(test)]
mod queue_write_tests;
mod reads;
mod ring;
mod streamed_reads;
mod submit;
mod summary;
mod sync;
mod uploads;
#[cfg(target_arch = "wasm32")]
mod web_reads;

pub use crate::report::{BudgetUse, DeviceMemory};
pub use crate::server::{
    BUDGET_FIELD, ClientError, Handle, HandleResource, Kernel, MAX_BATCH_COMMANDS, MAX_BIND_GROUPS,
    MAX_CLIENTS_PER_THREAD, MAX_HELD_EXPORTS, MAX_IN_FLIGHT, MAX_PIPELINES, MAX_QUEUED_RELEASES,
    ReadBytes, SMALLEST_UPLOAD_PAGE, STAGING_FLOOR, STAGING_FREE_FLOOR, STAGING_IDLE_OPERATIONS,
    STAGING_IDLE_RESERVATIONS, SubmitPolicy,
};
pub use budget::RECLAIM_WAIT;
pub use cleanup::{CleanupReport, GivenBack};
pub use compaction::CompactionReport;
pub use config::{load_submit_policy, parse_submit_policy};
pub use device_memory::DEVICE_MEMORY_BLOCK;
pub use hooks::{DeviceLostCallback, MAX_CALLBACKS, UncapturedErrorCallback};
pub use memory_history::LabelScope;
pub use mode::ModeWindow;
pub use queue::{ClientQueue, ClientWriteBufferView};
pub use reads::WEB_BUDGET_WAITS;
pub use streamed_reads::MIN_STREAMED_PART;

use crate::memory_management::{
    InstallMemoryPoolsError, MemoryConfiguration, MemoryPoolsConfig, MemoryRecord, MemoryReport,
    PoolLayout,
};
use crate::report::EventKind;
use crate::server::History;
use crate::server::{DeviceLoss, Poller, Server, copy_bytes};
use crate::storage::wgpu_storage::limits::storage_memory_properties;
use parking_lot::{Mutex, ReentrantMutex};
use ring::Ring;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Memory records a client keeps by default (see [`Client::set_record_capacity`]).
pub const DEFAULT_RECORDS: usize = 1024;

/// Uncaptured wgpu errors a client keeps (the newest; see [`Client::uncaptured_errors`]).
pub const MAX_UNCAPTURED_ERRORS: usize = 256;

/// A device's pooled memory and the work on it. `Send + Sync`, cheap to clone: clones
/// share one device, one queue and one set of pools behind one mutex.
///
/// Every byte a client hands out lives in its pools: handles are slices of pages, and
/// reads go through pooled staging buffers.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: Option<wgpu::AdapterInfo>,
    server: fill_lock::ServerLock,
    /// The submit turn: taken before `server`, never while holding it; re-entrant so a
    /// wgpu callback running inside our submit can submit too. It holds the segments
    /// of the batches in submission, which every submission sends first.
    turn: ReentrantMutex<crate::server::SegmentQueue>,
    records: Mutex<Ring<MemoryRecord>>,
    poller: Arc<Poller>,
    uncaptured: Mutex<Ring<String>>,
    lost: DeviceLoss,
    /// The device's shared callbacks (see `hooks`); they reach this client weakly.
    _hooks: Arc<hooks::DeviceHooks>,
    /// The application's device-lost listeners, at most `MAX_CALLBACKS`.
    listeners: Mutex<Vec<DeviceLostCallback>>,
    /// The application's uncaptured-error handlers, at most `MAX_CALLBACKS`.
    error_handlers: Mutex<Vec<UncapturedErrorCallback>>,
    /// Upload staging bytes submitted and not yet mapped again.
    uploads_in_flight: Arc<AtomicU64>,
    /// The staging bound last computed from the working set (see `polling`), in bytes:
    /// recomputed only when staging in flight passes it, so a stream of writes walks the
    /// main memory's slices once per crossing, not once per write.
    staging_bound: AtomicU64,
    /// Counts each thread's submissions through `queue()`, syncs, cleanups and
    /// installs: ends the holds of the exported slices that thread dropped (see
    /// `server::memory::exports`).
    export_epoch: Arc<crate::server::ExportEpoch>,
    /// The history ring, label scopes and live allocations' labels (their own mutex:
    /// a handle's last clone records its free without the server's lock).
    history: Arc<Mutex<History>>,
    /// Where a main-memory out-of-memory writes the snapshot, if anywhere.
    oom_snapshot: Mutex<Option<std::path::PathBuf>>,
    /// Where `record_memory` appends JSON lines, if anywhere.
    records_file: Mutex<Option<std::path::PathBuf>>,
    /// Records that could not be appended to `records_file`.
    records_not_written: AtomicU64,
    /// Errors the browser reports after the operation returned, for the await points
    /// (the web only; see `server::faults::late`).
    #[cfg(target_arch = "wasm32")]
    late: crate::server::LateStores,
    /// Tests: run once right after a batch's submit returned, before its failure (if any)
    /// is recorded (the window another thread could record work in).
    #[cfg(test)]
    after_submit: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
};

impl core::fmt::Debug for Client {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("adapter", &self.shared.info.as_ref().map(|info| &info.name))
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client over an application's own device and queue, with the default layout.
    ///
    /// Installs the device's uncaptured-error handler and its device-lost callback. An
    /// error no scope caught is the application's own (see below); the handler keeps its
    /// text ([`uncaptured_errors`](Self::uncaptured_errors)) and passes it to the
    /// handlers registered with [`on_uncaptured_error`](Self::on_uncaptured_error), or,
    /// with none, panics with wgpu's message as wgpu's default handler does. wgpu
    /// keeps one handler and one device-lost callback per device, so this replaces any
    /// the application set before, and a second client made on the same device takes them
    /// over (use clones of one client per device). Pass the application's own through
    /// [`on_uncaptured_error`](Self::on_uncaptured_error) and
    /// [`on_device_lost`](Self::on_device_lost) instead of setting them on the device.
    /// Every operation of the client catches its own errors in error scopes, so none of
    /// its own reaches the handler.
    ///
    /// The device's memory hints decide whether the pages the client gives back return
    /// device memory: open it with [`Client::memory_hints`] (4 MiB blocks, what
    /// [`open_default`](Self::open_default) uses); wgpu's default `Performance` keeps
    /// 128-256 MiB blocks (see [`DEVICE_MEMORY_BLOCK`] for what each hint costs).
    ///
    /// Applies no configuration file: when one is present (`WGPU_MEMORY_CONFIG`, or
    /// `wgpu-memory.toml` in the working directory) one line on stderr names it and the
    /// call that applies it (once per process), and a `tracing` warning says the same
    /// each time. Use
    /// [`with_config_file`](Self::with_config_file) to apply it, or
    /// [`with_config`](Self::with_config) / [`apply_config`](Self::apply_config) with a
    /// [`MemoryConfig`](crate::memory_management::MemoryConfig).
    pub fn new(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        configure::warn_if_config_unapplied("Client::new");
        Self::build(
            device,
            queue,
            None,
            PoolLayout::Preset(MemoryConfiguration::default()),
        )
    }

    /// A client whose main memory starts with `layout` (a preset, or explicit pools as
    /// [`MemoryPoolsConfig::resolve`] returns them); `info` describes the adapter, if known.
    /// Applies no configuration file, and warns as [`new`](Self::new) does when one is
    /// present.
    pub fn with_layout(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: Option<wgpu::AdapterInfo>,
        layout: PoolLayout,
    ) -> Self {
        configure::warn_if_config_unapplied("Client::with_layout");
        Self::build(device, queue, info, layout)
    }

    /// [`with_layout`](Self::with_layout) without the warning.
    fn build(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: Option<wgpu::AdapterInfo>,
        layout: PoolLayout,
    ) -> Self {
        let hooks = hooks::DeviceHooks::install_on(&device);
        let lost = DeviceLoss::default();
        let server = Server::new(device.clone(), layout, lost.clone());
        let uploads_in_flight = server.upload_in_flight();
        let export_epoch = server.export_epoch();
        let poller = Arc::new(Poller::new(device.clone()));
        let late = server.late_stores();
        let client = Self {
            shared: Arc::new(Shared {
                device,
                queue,
                info,
                server: fill_lock::ServerLock::new(server),
                turn: ReentrantMutex::new(crate::server::SegmentQueue::new(late.work.clone())),
                records: Mutex::new(Ring::new(DEFAULT_RECORDS)),
                poller,
                uncaptured: Mutex::new(Ring::new(MAX_UNCAPTURED_ERRORS)),
                lost,
                _hooks: hooks.clone(),
                listeners: Mutex::new(Vec::new()),
                error_handlers: Mutex::new(Vec::new()),
                uploads_in_flight,
                staging_bound: AtomicU64::new(STAGING_FLOOR),
                export_epoch,
                history: Arc::new(Mutex::new(History::new(0))),
                oom_snapshot: Mutex::new(None),
                records_file: Mutex::new(None),
                records_not_written: AtomicU64::new(0),
                #[cfg(target_arch = "wasm32")]
                late,
                #[cfg(test)]
                after_submit: Mutex::new(None),
            }),
        };
        hooks.join(&client.shared);
        client
    }

    /// The adapter the client opened, when it opened one itself.
    pub fn adapter_info(&self) -> Option<&wgpu::AdapterInfo> {
        self.shared.info.as_ref()
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.shared.device
    }

    /// The queue, for the application's own submissions and writes. Submits the client's
    /// recorded work first, so that what the application submits next runs after every
    /// create, write and launch made before this call (wgpu orders work by submission);
    /// [`ClientQueue::submit`] and [`ClientQueue::write_buffer`] do so again at the moment
    /// they are called. Submit work that uses the client's slices through it: an
    /// exported slice stays reserved and in place until the thread that dropped its
    /// resource submits so (see [`resource`](Self::resource)).
    /// A failed submit is kept as the outputs' claims (see [`flush`](Self::flush)).
    pub fn queue(&self) -> ClientQueue<'_> {
        let _ = self.flush();
        ClientQueue { client: self }
    }

    /// A handle of `data.len()` bytes holding `data`.
    ///
    /// The bytes are copied once, into pooled upload staging (mapped memory), and the copy
    /// into the handle joins the pending batch: nothing waits for the GPU. On the web they
    /// are copied once into host memory and handed to the browser (`queue.write_buffer`),
    /// after the recorded work that uses the same page is submitted.
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is lost; [`ClientError::Reserve`] when
    /// the main or the upload staging memory cannot hold it
    /// ([`ClientError::OutOfMemory`] instead when the main memory is out of room, or when
    /// either would cross the budget); [`ClientError::Map`] when the staging range is not
    /// mapped; [`ClientError::Wgpu`] when a due submit fails.
    pub fn create(&self, data: &[u8]) -> Result<Handle, ClientError> {
        self.create_with(data.len() as u64, |bytes| copy_bytes(bytes, data))
    }

    /// A handle of `size` bytes, filled by `fill` writing straight into the mapped upload
    /// staging range (no host copy at all). `fill` gets a write-only view of exactly
    /// `size` bytes (wgpu's [`WriteOnly`](wgpu::WriteOnly): mapped memory may be
    /// write-combined, and is never read); every byte it leaves unwritten is unspecified.
    /// It runs under the client's lock, so it must not call the client: a client call
    /// from inside it panics naming this rule (another client may be called). A panic in
    /// `fill` passes through; no handle is made, and the client goes on.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub fn create_with(
        &self,
        size: u64,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<Handle, ClientError> {
        self.before_upload(size);
        let mut main_failed = false;
        // Kept until used, so an attempt the budget refused before filling can be retried.
        let fill = std::cell::Cell::new(Some(fill));
        let (created, refusal) = self.retry_over_budget(
            || {
                main_failed = false;
                // The submit turn first (see `submit_batch`): no batch fails unrecorded
                // while this write is recorded.
                let _turn = self.turn();
                let mut server = self.shared.server.lock();
                server.bound_free_staging(size);
                let reserved = server.empty(size);
                let handle = self
                    .record_failure(&mut server, reserved)
                    .inspect_err(|_| main_failed = true)?;
                let handle = self.reserved(&mut server, handle);
                let mut server = self.upload(server, &handle, 0, size, &fill)?;
                self.record_transfer(&mut server, EventKind::Upload, size, Some(&handle));
                Ok((handle, server.submit_due()))
            },
            || budget::fill_left(&fill),
        );
        // The server's lock is released: the out-of-memory detail takes it again.
        let explained = if main_failed {
            self.explain_oom(created, refusal)
        } else {
            self.explain_budget(created, refusal)
        };
        let (handle, due) = self.refused_upload(explained, size)?;
        if due {
            self.flush()?;
        }
        Ok(handle)
    }

    /// A handle of `size` bytes whose contents are unspecified (a reused slice keeps its
    /// old bytes).
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is lost; [`ClientError::Reserve`] when
    /// no pool takes the size; [`ClientError::OutOfMemory`] when the memory is out of
    /// room (it names the largest live allocations and each pool's free room, and the
    /// snapshot file when [`set_oom_snapshot`](Self::set_oom_snapshot) set one).
    pub fn empty(&self, size: u64) -> Result<Handle, ClientError> {
        let (reserved, refusal) = self.retry_over_budget(
            || {
                let mut server = self.shared.server.lock();
                let reserved = server.empty(size);
                self.record_failure(&mut server, reserved)
                    .map(|handle| self.reserved(&mut server, handle))
            },
            || true,
        );
        self.explain_oom(reserved, refusal)
    }

    /// Writes `data` at byte `offset` of `handle`, ordered after every launch and write
    /// already made and before every later one. Unaligned offsets and lengths are fine:
    /// the partly covered edge words are merged on the GPU, in order, without a round
    /// trip.
    ///
    /// # Errors
    /// [`ClientError::OutOfBounds`] when the range leaves the handle; [`ClientError::Memory`]
    /// for a stale handle; otherwise as [`create`](Self::create).
    pub fn write(&self, handle: &Handle, offset: u64, data: &[u8]) -> Result<(), ClientError> {
        self.write_with(handle, offset, data.len() as u64, |bytes| {
            copy_bytes(bytes, data)
        })
    }

    /// Writes `size` bytes at byte `offset` of `handle`, filled by `fill` straight into
    /// the mapped upload staging range through a write-only view of exactly `size` bytes
    /// (see [`create_with`](Self::create_with)). `fill` runs under the client's lock, so
    /// it must not call the client: a client call from inside it panics naming this
    /// rule. A panic in `fill` passes through; nothing is written.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub fn write_with(
        &self,
        handle: &Handle,
        offset: u64,
        size: u64,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<(), ClientError> {
        self.before_upload(size);
        let fill = std::cell::Cell::new(Some(fill));
        let (due, refusal) = self.retry_over_budget(
            || {
                let _turn = self.turn();
                let server = self.shared.server.lock();
                let mut server = self.upload(server, handle, offset, size, &fill)?;
                self.record_transfer(&mut server, EventKind::Upload, size, Some(handle));
                Ok(server.submit_due())
            },
            || budget::fill_left(&fill),
        );
        let due = self.refused_upload(self.explain_budget(due, refusal), size)?;
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// Failures the device still holds: allocations carry bytes a failed operation left
    /// unwritten. Dropped handles count until the next reservation or cleanup.
    pub fn failures_held(&self) -> usize {
        self.shared.server.lock().main.error_graph().len()
    }

    /// Upload staging the device has not given back yet, in bytes: pages submitted and
    /// not yet mapped again. A write waits for the device while this is over half the
    /// main memory's working set (its bytes in use plus the write), at least
    /// [`STAGING_FLOOR`] (1 MiB) and at most [`MAX_IN_FLIGHT`] (256 MiB), so it stays
    /// under that bound plus one write. Always 0 on the web, where writes take no upload
    /// staging of ours (each is handed to the browser with `queue.write_buffer`).
    pub fn pending_upload_bytes(&self) -> u64 {
        self.shared.uploads_in_flight.load(Ordering::Relaxed)
    }

    /// Dispatches `kernel` over `workgroups`, binding the i-th handle as
    /// `@group(0) @binding(i)` (a storage buffer at the handle's offset, its size rounded
    /// up to 4 bytes, at least 4). Storage bindings only: a kernel that declares one
    /// `var<uniform>` is refused (see [`Kernel`]).
    ///
    /// Every check below runs first. Then, when an input carries a failure (bytes an
    /// earlier failed operation left unwritten), the launch is not dispatched and returns
    /// `Ok(())`: its outputs take the same failure, which a read of them reports with
    /// this kernel in its chain.
    ///
    /// # Errors
    /// [`ClientError::TooManyWorkgroups`], [`ClientError::TooManyBindings`] against the
    /// device's limits; [`ClientError::Wgpu`] when the shader does not compile or has no
    /// such compute entry point (with naga's message: the source is checked by naga, the
    /// WGSL compiler wgpu uses, before wgpu or the browser is handed it, on every
    /// target), or the bindings do not match it (a `var<uniform>` binding included); [`ClientError::UnsupportedGroup`] when the entry point uses a
    /// group other than 0; [`ClientError::MissingBinding`] when it uses a binding past
    /// the handles given; [`ClientError::DeviceLost`] once the device is lost;
    /// [`ClientError::ReadOnlyAliasesWritable`] when a `var<storage, read>` binding
    /// shares a page with a writable one; [`ClientError::Memory`] for a stale handle. A
    /// launch that returns an error ran nothing and claims nothing: every handle keeps
    /// its bytes, whether or not an input carries a failure.
    pub fn launch(
        &self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        let launched = {
            // The submit turn first (see `submit_batch`): the claims this launch looks at
            // include every failure of a batch already submitted.
            let _turn = self.turn();
            let mut server = self.shared.server.lock();
            server.tick();
            let launched = server
                .launch(kernel, workgroups, handles)
                .map(|()| server.submit_due());
            if launched.is_ok() {
                self.record(EventKind::Launch, 0, |event| {
                    event.label = Some(kernel.label.to_string())
                });
            }
            launched
        };
        let due = launched.map_err(|error| self.lost_or(error))?;
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// The memory report: the main pools, and the staging memory as the auxiliary memory
    /// `"staging"`. Display it with [`MemorySummary`](crate::report::MemorySummary).
    pub fn memory_report(&self) -> MemoryReport {
        self.shared.server.lock().memory_report()
    }

    /// Installs a new pool layout in the main memory: resolves `config` against the
    /// device's limits, submits the recorded work, gives every free page back, then swaps
    /// the pools (fresh high-water marks). Staging memory is never affected.
    ///
    /// Counts as the calling thread's [`sync`](Self::sync) for the exported slices it
    /// dropped (see [`resource`](Self::resource)), without waiting for the device: once
    /// the application dropped every handle and resource on this thread, the install
    /// succeeds.
    ///
    /// # Errors
    /// [`ClientError::Config`] when `config` is invalid for this device;
    /// [`ClientError::ExportsHeld`] when allocations remain in the main pools and some
    /// are exported slices whose resources other threads dropped and that those threads
    /// have not submitted, synced, cleaned up or exited since (the old layout stays; it
    /// names the threads: let them submit, then retry); [`ClientError::Install`] with
    /// `PoolsInUse` when live handles or resources remain (the old layout stays; retry
    /// after dropping them).
    pub fn install_memory_pools(&self, config: &MemoryPoolsConfig) -> Result<(), ClientError> {
        let layout = config.resolve(&storage_memory_properties(&self.device().limits()))?;
        // The flush also frees the ranges that moved slices left (they wait for the batch
        // carrying the copies). A failed batch is kept as its outputs' claims.
        let _ = self.shared.export_epoch.counted(|| self.flush());
        let mut server = self.shared.server.lock();
        server.release_dropped();
        let before = reserved_bytes(&server.memory_report());
        // The install gives every free page back before it swaps the pools; doing that
        // here first, and recording those pages now, names them after the pools that
        // held them.
        server
            .main
            .cleanup(crate::memory_management::Cleanup::Explicit);
        self.record_pages(&mut server);
        server
            .install(layout)
            .map_err(|error| held_exports_error(&server, error))?;
        let dropped = before.saturating_sub(reserved_bytes(&server.memory_report()));
        self.record(EventKind::Install, dropped, |_| {});
        Ok(())
    }

    /// The policy that submits recorded work without a read, flush or sync asking.
    pub fn submit_policy(&self) -> SubmitPolicy {
        self.shared.server.lock().policy
    }

    /// Replaces the submit policy (see [`SubmitPolicy`]).
    pub fn set_submit_policy(&self, policy: SubmitPolicy) {
        self.shared.server.lock().policy = policy;
    }

    /// Compute pipelines the client holds compiled: one per WGSL source and entry point,
    /// at most [`MAX_PIPELINES`].
    pub fn cached_pipelines(&self) -> usize {
        self.shared.server.lock().cached_pipelines()
    }
}

/// Bytes of every page of every memory in `report`.
fn reserved_bytes(report: &MemoryReport) -> u64 {
    report
        .streams
        .iter()
        .map(|stream| {
            stream.pools.usage().bytes_reserved
                + stream
                    .auxiliary
                    .iter()
                    .map(|aux| aux.pools.usage().bytes_reserved)
                    .sum::<u64>()
        })
        .sum()
}

/// `error` as [`ClientError::ExportsHeld`] when an install found the pools in use and
/// some of what holds them are exports waiting for the threads that dropped them.
fn held_exports_error(server: &Server, error: ClientError) -> ClientError {
    let ClientError::Install(InstallMemoryPoolsError::PoolsInUse {
        bytes_in_use,
        allocations,
    }) = error
    else {
        return error;
    };
    let waiting = server.exports_waiting();
    if waiting.slices == 0 {
        return error;
    }
    ClientError::ExportsHeld {
        operation: "install_memory_pools".to_string(),
        allocations,
        bytes_in_use,
        slices: waiting.slices,
        bytes: waiting.bytes,
        threads: waiting.threads,
    }
}
