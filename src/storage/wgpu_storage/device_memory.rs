//! [`DeviceMemory`]: what wgpu's own allocator holds on a device, beside our pages.
//!
//! Below the storage layer sits wgpu's allocator: on Vulkan and DX12, wgpu-hal
//! sub-allocates buffers from device memory blocks (gpu-allocator) whose sizes the
//! device's `MemoryHints` set, and a block goes back to the driver only when every buffer
//! in it is gone (one empty block per memory type is kept). What the driver counts
//! (nvidia-smi, for one) is the blocks, not our pages; this is that figure, as
//! `wgpu::Device::generate_allocator_report` gives it. Reports draw it
//! (`report::MemorySummary::with_device`, the out-of-memory message).

use serde::{Deserialize, Serialize};

/// What wgpu's allocator holds on one device, in bytes, with this client's pages beside
/// it (`Client::device_memory`). The allocator's figures cover the whole device: the
/// application's own buffers and textures and wgpu's internal buffers (zero-init,
/// indirect-validation and queue-write staging buffers) count too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// Bytes of every live allocation in wgpu's blocks (`total_allocated_bytes`).
    pub allocated: u64,
    /// Bytes of the device memory blocks wgpu holds (`total_reserved_bytes`, the blocks'
    /// capacity): what the device really gives the process.
    pub reserved: u64,
    /// Device memory blocks held (each a driver allocation).
    pub blocks: u64,
    /// Allocations in them.
    pub allocations: u64,
    /// Bytes of this client's pages the device may hold at the same moment (every
    /// memory's pages, and pages given back that the device may still use: the budget's
    /// `held`), for comparison.
    pub ours: u64,
}

impl DeviceMemory {
    /// wgpu's allocator report for `device`, with `ours` bytes of this client's pages;
    /// `None` where the backend gives no report (Metal, GL, WebGPU).
    ///
    /// # Complexity
    /// O(allocations on the device): wgpu builds the whole report (one entry per buffer).
    pub fn of(device: &wgpu::Device, ours: u64) -> Option<Self> {
        let report = device.generate_allocator_report()?;
        Some(Self {
            allocated: report.total_allocated_bytes,
            reserved: report.total_reserved_bytes,
            blocks: report.blocks.len() as u64,
            allocations: report.allocations.len() as u64,
            ours,
        })
    }

    /// Bytes wgpu has allocated that are not this client's pages (the application's own
    /// resources, wgpu's internal buffers); 0 when ours are more (a page rounded up by
    /// the driver is counted at its size in both).
    pub fn others(&self) -> u64 {
        self.allocated.saturating_sub(self.ours)
    }

    /// Bytes of wgpu's blocks no allocation holds: device memory held for nothing.
    pub fn unused(&self) -> u64 {
        self.reserved.saturating_sub(self.allocated)
    }
}
