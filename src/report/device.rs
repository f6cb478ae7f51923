//! The device figure as text: what wgpu's allocator holds, beside our pages
//! ([`DeviceMemory`], measured by the storage layer).

use crate::memory_management::format_bytes;
pub use crate::storage::wgpu_storage::DeviceMemory;
use std::fmt;

impl fmt::Display for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device (wgpu's allocator): {} in {} blocks, {} allocated ({} our pages, {} else: wgpu's own buffers, the application's), {} of the blocks unused",
            format_bytes(self.reserved),
            self.blocks,
            format_bytes(self.allocated),
            format_bytes(self.ours.min(self.allocated)),
            format_bytes(self.others()),
            format_bytes(self.unused())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_puts_our_pages_beside_the_blocks() {
        let device = DeviceMemory {
            allocated: 10 << 20,
            reserved: 16 << 20,
            blocks: 3,
            allocations: 7,
            ours: 8 << 20,
        };
        assert_eq!((device.others(), device.unused()), (2 << 20, 6 << 20));
        assert_eq!(
            device.to_string(),
            "device (wgpu's allocator): 16.00 MiB in 3 blocks, 10.00 MiB allocated (8.00 MiB our pages, 2.00 MiB else: wgpu's own buffers, the application's), 6.00 MiB of the blocks unused"
        );
    }
}
