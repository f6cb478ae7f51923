//! The device memory under our pages: the memory hints a device should be opened with
//! ([`Client::memory_hints`]) and what wgpu's allocator holds ([`Client::device_memory`]).
//!
//! On Vulkan and DX12, wgpu-hal sub-allocates every buffer from device memory blocks
//! (gpu-allocator). A buffer larger than the block size gets a block of its own, freed
//! with the buffer; smaller buffers share blocks, and a block goes back to the driver only
//! once every buffer in it is gone (the last empty block of each memory type is kept).
//! The block size comes from the device's `wgpu::MemoryHints`:
//!
//! | hints | device blocks | host-visible blocks |
//! |---|---|---|
//! | `Performance` (wgpu's default) | 128 MiB, growing to 256 MiB | 64-128 MiB |
//! | `MemoryUsage` | 8 MiB, growing to 64 MiB | 4-32 MiB |
//! | `Manual { suballocated_device_memory_block_size: a..b }` | `a`, growing to `b`, both clamped to 4-256 MiB | half of those, clamped the same |
//!
//! Blocks grow with the number of blocks a memory type holds (doubling per block, up to
//! the end of the range). Our pages are 512 KiB (small slices), 1 MiB, 2 MiB, 4 MiB and then
//! sizes at most 1/16 over the request that made them (the adaptive pool), and 256 KiB
//! and up in powers of two (upload staging): with fixed 4 MiB blocks
//! ([`DEVICE_MEMORY_BLOCK`]) every page over 4 MiB has a block of its own and returns its
//! memory when it is given back, pages of 4 MiB and less pack into blocks whose size they
//! divide (the adaptive pool makes no page of 4 MiB or less but powers of two), and a
//! memory type keeps at most one empty 4 MiB block.

use super::Client;
use crate::report::DeviceMemory;

/// The device memory block size [`Client::memory_hints`] asks for, in bytes: 4 MiB, the
/// smallest wgpu-hal and gpu-allocator allow (they clamp block sizes to 4-256 MiB).
///
/// What each hint costs, on Vulkan and DX12 (wgpu sub-allocates buffers from blocks; a
/// block goes back only once every buffer in it is gone, one empty block per memory type
/// being kept): `Performance` (wgpu's default) makes 128-256 MiB blocks, so a client with
/// everything dropped still holds 64-256 MiB per memory type it used, and a given-back
/// page frees nothing while another page shares its block; `MemoryUsage` makes 8-64 MiB
/// blocks; `Manual` with 4 MiB blocks gives every page over 4 MiB a block of its own
/// (freed with the page) and packs smaller pages into few blocks.
pub const DEVICE_MEMORY_BLOCK: u64 = 4 << 20;

impl Client {
    /// The memory hints a device for a client should be opened with, and those
    /// [`open_default`](Self::open_default) opens its device with:
    /// `MemoryHints::Manual` with fixed [`DEVICE_MEMORY_BLOCK`] (4 MiB) blocks, so a page
    /// the client gives back returns its device memory (see the module doc for what each
    /// hint costs). Pass them in the application's `wgpu::DeviceDescriptor` when it opens
    /// the device a client will use ([`new`](Self::new)).
    ///
    /// The cost: every page over 4 MiB is one driver allocation of its own; a driver that
    /// caps allocations (`maxMemoryAllocationCount`, 4096 on some Windows drivers) caps the
    /// pages a client can hold at that many.
    pub fn memory_hints() -> wgpu::MemoryHints {
        wgpu::MemoryHints::Manual {
            suballocated_device_memory_block_size: DEVICE_MEMORY_BLOCK..DEVICE_MEMORY_BLOCK,
        }
    }

    /// What wgpu's own allocator holds on the device, beside the bytes of this client's
    /// pages it may hold: bytes allocated, bytes of device memory blocks (what the driver
    /// counts, e.g. nvidia-smi), blocks and allocations (wgpu's
    /// `Device::generate_allocator_report`, Vulkan and DX12). Covers the whole device,
    /// the application's own resources and wgpu's internal buffers included.
    /// [`MemorySummary::with_device`](crate::report::MemorySummary::with_device) prints
    /// it; out-of-memory errors carry it (`detail.device`).
    ///
    /// `None` where the backend gives no allocator report (Metal, GL, WebGPU).
    ///
    /// Pages given back are freed on the client's reclaimer thread once the device is
    /// done with them (so the driver's free never runs inside [`sync`](Self::sync) or a
    /// cleanup); this first waits, at most [`RECLAIM_WAIT`](super::RECLAIM_WAIT), until
    /// that thread has freed every page whose work the client has seen done, so a
    /// `sync()` followed by `device_memory()` shows them gone.
    ///
    /// # Complexity
    /// O(allocations on the device), under the client's lock.
    pub fn device_memory(&self) -> Option<DeviceMemory> {
        self.wait_reclaimed();
        self.shared.server.lock().device_memory()
    }
}

#[cfg(test)]
mod tests {
    /// The adaptive pool makes pages up to the device memory block a power of two, so
    /// they pack the blocks [`Client::memory_hints`](super::Client::memory_hints) asks for.
    #[test]
    fn adaptive_powers_of_two_end_at_the_device_block() {
        assert_eq!(
            crate::memory_management::ADAPTIVE_POW2_UP_TO,
            super::DEVICE_MEMORY_BLOCK
        );
    }
}
