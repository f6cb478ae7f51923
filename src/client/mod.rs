//! [`Client`]: what an application calls.

mod error;
mod handle;
mod kernel;
mod mode;
mod read_bytes;

pub use error::ClientError;
pub use handle::{Handle, HandleResource};
pub use kernel::Kernel;
pub use mode::ModeWindow;
pub use read_bytes::ReadBytes;

use crate::memory_management::{
    MemoryConfiguration, MemoryPoolsConfig, MemoryRecord, MemoryReport, PoolLayout,
    load_memory_config,
};
use crate::server::{Poller, ReadFuture, Server};
use crate::storage::wgpu_storage::limits::storage_memory_properties;
use parking_lot::Mutex;
use std::sync::Arc;

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
    server: Mutex<Server>,
    records: Mutex<Vec<MemoryRecord>>,
    poller: Arc<Poller>,
    uncaptured: Arc<Mutex<Vec<String>>>,
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
    /// Installs an uncaptured-error handler on `device` that records errors instead of
    /// panicking (see [`uncaptured_errors`](Self::uncaptured_errors)); every operation of
    /// the client catches its own errors in error scopes, so none should arrive there.
    pub fn new(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self::with_layout(
            device,
            queue,
            None,
            PoolLayout::Preset(MemoryConfiguration::default()),
        )
    }

    /// A client whose main memory starts with `layout` (a preset, or explicit pools as
    /// [`MemoryPoolsConfig::resolve`] returns them); `info` describes the adapter, if known.
    pub fn with_layout(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: Option<wgpu::AdapterInfo>,
        layout: PoolLayout,
    ) -> Self {
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            tracing::error!(%error, "uncaptured wgpu error");
            sink.lock().push(error.to_string());
        }));
        let server = Server::new(device.clone(), queue.clone(), layout);
        let lost = server.lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            tracing::error!(?reason, %message, "wgpu device lost");
            *lost.lock() = Some(format!("{reason:?}: {message}"));
        });
        let poller = Arc::new(Poller::new(device.clone()));
        Self {
            shared: Arc::new(Shared {
                device,
                queue,
                info,
                server: Mutex::new(server),
                records: Mutex::new(Vec::new()),
                poller,
                uncaptured,
            }),
        }
    }

    /// Opens the default adapter (a discrete GPU when there is one, then any other,
    /// software adapters such as lavapipe included) of the Vulkan, Metal or DX12 backend
    /// (or the backends named in `WGPU_BACKEND`) with its own limits, and makes a
    /// client over it, laid out by the `memory.pools` config when one is found (the file
    /// named by `WGPU_MEMORY_CONFIG`, else `wgpu-memory.toml` in the working directory),
    /// else by the default (adaptive) layout.
    ///
    /// # Errors
    /// [`ClientError::Config`] when the config cannot be read or is invalid;
    /// [`ClientError::NoAdapter`] when wgpu finds no adapter;
    /// [`ClientError::RequestDevice`] when the adapter refuses a device.
    pub fn open_default() -> Result<Self, ClientError> {
        pollster::block_on(Self::open_default_async())
    }

    async fn open_default_async() -> Result<Self, ClientError> {
        let pools = load_memory_config()?.and_then(|config| config.pools);
        // Vulkan, Metal and DX12 (lavapipe is Vulkan); `WGPU_BACKEND` overrides.
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
        let instance = wgpu::Instance::new(descriptor);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|error| ClientError::NoAdapter(error.to_string()))?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgpu-memory"),
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|error| ClientError::RequestDevice(error.to_string()))?;
        let layout = match pools {
            Some(pools) => pools.resolve(&storage_memory_properties(&device.limits()))?,
            None => PoolLayout::Preset(MemoryConfiguration::default()),
        };
        Ok(Self::with_layout(
            device,
            queue,
            Some(adapter.get_info()),
            layout,
        ))
    }

    /// The adapter the client opened, when it opened one itself.
    pub fn adapter_info(&self) -> Option<&wgpu::AdapterInfo> {
        self.shared.info.as_ref()
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.shared.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.shared.queue
    }

    /// A handle of `data.len()` bytes holding `data`.
    ///
    /// # Errors
    /// [`ClientError::Reserve`] when the memory cannot hold it; [`ClientError::Wgpu`] when
    /// wgpu rejects the write.
    pub fn create(&self, data: &[u8]) -> Result<Handle, ClientError> {
        let mut server = self.shared.server.lock();
        let handle = server.empty(data.len() as u64)?;
        server.write(&handle, 0, data)?;
        Ok(handle)
    }

    /// A handle of `size` bytes whose contents are unspecified (a reused slice keeps its
    /// old bytes).
    ///
    /// # Errors
    /// [`ClientError::Reserve`] when the memory cannot hold it.
    pub fn empty(&self, size: u64) -> Result<Handle, ClientError> {
        self.shared.server.lock().empty(size)
    }

    /// Writes `data` at byte `offset` of `handle`, ordered after every launch already made
    /// and before every later one.
    ///
    /// # Errors
    /// [`ClientError::OutOfBounds`] when the range leaves the handle; [`ClientError::Memory`]
    /// for a stale handle; [`ClientError::Wgpu`] when wgpu rejects it.
    pub fn write(&self, handle: &Handle, offset: u64, data: &[u8]) -> Result<(), ClientError> {
        self.shared.server.lock().write(handle, offset, data)
    }

    /// Reads the whole handle back, zero-copy: the bytes are a view of the mapped
    /// staging range ([`ReadBytes`]).
    ///
    /// The copy is submitted when `read` is called, so the bytes are those after every
    /// earlier launch and write and before every later one, whenever the future is
    /// awaited. The future completes without the caller polling wgpu (a background thread
    /// polls while reads are in flight) and never holds the client's lock while it waits.
    /// Dropping it early gives its staging slice back once the map completes. A zero-size
    /// read issues no GPU work.
    ///
    /// # Errors
    /// [`ClientError::Unwritten`] when a failure claims bytes of the handle (the report
    /// names the root wgpu error and the skipped kernels); [`ClientError::Unallocated`]
    /// when the handle has no slice; [`ClientError::Reserve`] when no staging memory is
    /// left; [`ClientError::Wgpu`] when wgpu refuses the copy; [`ClientError::Map`] when
    /// mapping fails.
    pub fn read(
        &self,
        handle: &Handle,
    ) -> impl Future<Output = Result<ReadBytes, ClientError>> + Send + 'static {
        let started = self.start_read(&[handle]);
        async move {
            let mut parts = started?.await?;
            Ok(parts.pop().unwrap_or_else(ReadBytes::empty))
        }
    }

    /// Reads many handles with one staging allocation, one encoder, one submit and one map
    /// (small reads cost one round trip, not one each); one [`ReadBytes`] per handle, in
    /// order.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn read_many(
        &self,
        handles: &[&Handle],
    ) -> impl Future<Output = Result<Vec<ReadBytes>, ClientError>> + Send + 'static {
        let started = self.start_read(handles);
        async move { started?.await }
    }

    fn start_read(&self, handles: &[&Handle]) -> Result<ReadFuture, ClientError> {
        let parts: Vec<(&Handle, u64, u64)> = handles.iter().map(|h| (*h, 0, h.size)).collect();
        let map = self.shared.server.lock().start_read(&parts)?;
        Ok(ReadFuture::new(
            map,
            parts.len(),
            self.shared.poller.clone(),
            self.shared.device.clone(),
        ))
    }

    /// [`read`](Self::read), blocking the calling thread.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn read_blocking(&self, handle: &Handle) -> Result<ReadBytes, ClientError> {
        pollster::block_on(self.read(handle))
    }

    /// [`read_many`](Self::read_many), blocking the calling thread.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn read_many_blocking(&self, handles: &[&Handle]) -> Result<Vec<ReadBytes>, ClientError> {
        pollster::block_on(self.read_many(handles))
    }

    /// Failures the device still holds: allocations carry bytes a failed operation left
    /// unwritten. Dropped handles count until the next reservation or cleanup.
    pub fn failures_held(&self) -> usize {
        self.shared.server.lock().main.error_graph().len()
    }

    /// Upload bytes the client holds until the device has consumed them, in bytes
    /// (bounded by the drop queue's flushing policy: at most about twice 64 MiB).
    pub fn pending_upload_bytes(&self) -> u64 {
        self.shared.server.lock().uploads.held_bytes()
    }

    /// Dispatches `kernel` over `workgroups`, binding the i-th handle as
    /// `@group(0) @binding(i)` (a storage buffer at the handle's offset, its size rounded
    /// up to 4 bytes, at least 4).
    ///
    /// When an input carries a failure (bytes an earlier failed operation left
    /// unwritten), the launch is not dispatched and returns `Ok(())`: its outputs take the
    /// same failure, which a read of them reports with this kernel in its chain.
    ///
    /// # Errors
    /// [`ClientError::TooManyWorkgroups`], [`ClientError::TooManyBindings`] against the
    /// device's limits; [`ClientError::Wgpu`] when the shader does not compile, the
    /// bindings do not match it, or the device was lost (the outputs then carry that
    /// error); [`ClientError::Memory`] for a stale handle.
    pub fn launch(
        &self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        self.shared
            .server
            .lock()
            .launch(kernel, workgroups, handles)
    }

    /// Where `handle`'s bytes are, for the application's own bind groups and copies.
    ///
    /// # Errors
    /// [`ClientError::Memory`] for a stale handle.
    pub fn resource(&self, handle: &Handle) -> Result<HandleResource, ClientError> {
        self.shared.server.lock().resource(handle)
    }

    /// The memory report: the main pools, and the staging memory as the auxiliary memory
    /// `"staging"`. Display it with [`MemorySummary`](crate::report::MemorySummary).
    pub fn memory_report(&self) -> MemoryReport {
        self.shared.server.lock().memory_report()
    }

    /// Installs a new pool layout in the main memory: resolves `config` against the
    /// device's limits, gives every free page back, then swaps the pools (fresh high-water
    /// marks). Staging memory is never affected.
    ///
    /// # Errors
    /// [`ClientError::Config`] when `config` is invalid for this device;
    /// [`ClientError::Install`] with `PoolsInUse` when live handles remain in the main
    /// pools (the old layout stays; retry after dropping them).
    pub fn install_memory_pools(&self, config: &MemoryPoolsConfig) -> Result<(), ClientError> {
        let layout = config.resolve(&storage_memory_properties(&self.device().limits()))?;
        self.shared.server.lock().install(layout)
    }

    /// Records the memory report under `label` (what the program was doing: `"model
    /// loaded"`, `"after step 10"`) and returns the record; the client keeps every record
    /// for [`memory_records`](Self::memory_records). Records are serde values, ready for a
    /// JSON-lines log or a timeline.
    pub fn record_memory(&self, label: impl Into<String>) -> MemoryRecord {
        let record = MemoryRecord {
            label: label.into(),
            report: self.memory_report(),
        };
        self.shared.records.lock().push(record.clone());
        record
    }

    /// Every record made by [`record_memory`](Self::record_memory), oldest first.
    pub fn memory_records(&self) -> Vec<MemoryRecord> {
        self.shared.records.lock().clone()
    }

    /// Gives every page without a live slice back to the driver, in both memories.
    pub fn cleanup(&self) {
        self.shared.server.lock().cleanup()
    }

    /// Waits until every submitted operation is done.
    ///
    /// # Errors
    /// [`ClientError::Wgpu`] when polling the device fails (a lost device).
    pub fn sync(&self) -> Result<(), ClientError> {
        let server = self.shared.server.lock();
        server.sync()
    }

    /// The wgpu errors that reached the device's uncaptured-error handler since the client
    /// was made (none should: each operation catches its own).
    pub fn uncaptured_errors(&self) -> Vec<String> {
        self.shared.uncaptured.lock().clone()
    }
}
