//! Per device: the main memory, the staging memory, and the wgpu work around them.
//!
//! All of it sits behind the client's one mutex. Work is submitted in the order it is
//! asked for on one queue, so a slice freed by one operation and reused by the next is
//! never written before the earlier work that used it (the queue orders them).

mod fence;
mod launch;
mod poller;
mod readback;
mod transfer;

pub(crate) use poller::Poller;
pub(crate) use readback::{Mapping, ReadFuture};

use crate::client::{ClientError, Handle, HandleResource};
use crate::memory_management::drop_queue::PendingDropQueue;
use crate::memory_management::{
    AuxiliaryMemoryReport, Cleanup, MemoryConfiguration, MemoryManagement, MemoryManagementOptions,
    MemoryReport, StreamMemoryReport,
};
use crate::memory_management::{MemoryPoolOptions, PoolLayout, PoolType};
use crate::storage::WgpuStorage;
use crate::storage::wgpu_storage::limits::{staging_memory_properties, storage_memory_properties};
use cubecl_environment::stream::StreamId;
use fence::WgpuFence;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The usages of main-memory pages: bound as storage buffers, copied from and into.
pub(crate) const MAIN_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The usages of staging pages: copied into, then mapped for reading.
pub(crate) const STAGING_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::MAP_READ.union(wgpu::BufferUsages::COPY_DST);

/// The device-side state of a client.
pub(crate) struct Server {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) main: MemoryManagement<WgpuStorage>,
    pub(crate) staging: MemoryManagement<WgpuStorage>,
    /// Upload bytes, held until the submission that consumed them is done; bounds the
    /// bytes wgpu stages for writes nobody submitted yet.
    pub(crate) uploads: PendingDropQueue<WgpuFence>,
    pipelines: HashMap<u64, wgpu::ComputePipeline>,
    /// Set by the device-lost callback: every later launch fails with it.
    pub(crate) lost: Arc<Mutex<Option<String>>>,
}

impl Server {
    pub(crate) fn new(device: wgpu::Device, queue: wgpu::Queue, layout: PoolLayout) -> Self {
        let limits = device.limits();
        let main_properties = storage_memory_properties(&limits);
        let staging_properties = staging_memory_properties(&limits);
        let (config, options) = match layout {
            PoolLayout::Preset(config) => (config, MemoryManagementOptions::new("main")),
            PoolLayout::Explicit(pools) => (
                MemoryConfiguration::default(),
                MemoryManagementOptions::new("main").pools(pools),
            ),
        };
        let main = MemoryManagement::from_configuration(
            WgpuStorage::new(device.clone(), MAIN_USAGE, main_properties.alignment),
            &main_properties,
            config,
            options,
        );
        // A mapped buffer maps whole: two reads must never share one, so staging pages
        // are exclusive. One pool for every size, so a read that needs a new page gives
        // back the idle pages of other sizes first (field scenario C10).
        let staging_pool = MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: staging_properties.max_page_size,
            },
            dealloc_period: Some(5000),
        };
        let staging = MemoryManagement::from_configuration(
            WgpuStorage::new(device.clone(), STAGING_USAGE, staging_properties.alignment),
            &staging_properties,
            MemoryConfiguration::ExclusivePages,
            MemoryManagementOptions::new("staging")
                .pools(vec![staging_pool])
                .transient(),
        );
        Self {
            device,
            queue,
            main,
            staging,
            uploads: PendingDropQueue::default(),
            pipelines: HashMap::new(),
            lost: Arc::new(Mutex::new(None)),
        }
    }

    /// A new handle of `size` bytes in the main memory.
    pub(crate) fn empty(&mut self, size: u64) -> Result<Handle, ClientError> {
        let memory = self.main.reserve(size)?;
        Ok(Handle { memory, size })
    }

    /// Where a handle's bytes are.
    pub(crate) fn resource(&mut self, handle: &Handle) -> Result<HandleResource, ClientError> {
        let binding = handle.binding();
        let resource = self.main.get_resource(&binding, None, None)?;
        Ok(HandleResource {
            buffer: resource.buffer,
            offset: resource.offset,
            size: handle.size,
            _binding: binding,
        })
    }

    pub(crate) fn memory_report(&self) -> MemoryReport {
        MemoryReport {
            streams: vec![StreamMemoryReport {
                stream: StreamId { value: 0 },
                pools: self.main.memory_report(),
                auxiliary: vec![AuxiliaryMemoryReport {
                    name: "staging".to_string(),
                    pools: self.staging.memory_report(),
                }],
            }],
        }
    }

    /// Replaces the main memory's dynamic pools (staging is never affected).
    pub(crate) fn install(&mut self, layout: PoolLayout) -> Result<(), ClientError> {
        match layout {
            PoolLayout::Preset(config) => self.main.install_configuration(config)?,
            PoolLayout::Explicit(pools) => self.main.install_memory_pools(pools)?,
        }
        Ok(())
    }

    pub(crate) fn cleanup(&mut self) {
        // Pages dropped here may still be read by submitted work; wgpu keeps a dropped
        // buffer alive until that work is done.
        let (device, queue) = (self.device.clone(), self.queue.clone());
        self.uploads
            .drain(|| WgpuFence::new(device.clone(), queue.submit([])));
        self.main.cleanup(Cleanup::Explicit);
        self.staging.cleanup(Cleanup::Explicit);
    }

    /// Waits until every submitted operation is done.
    pub(crate) fn sync(&self) -> Result<(), ClientError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|error| ClientError::Wgpu {
                operation: "sync".to_string(),
                message: error.to_string(),
            })
    }
}

/// Turns a wgpu error caught around `operation` into a client error.
pub(crate) fn wgpu_error(operation: impl Into<String>, error: wgpu::Error) -> ClientError {
    ClientError::Wgpu {
        operation: operation.into(),
        message: error.to_string(),
    }
}
