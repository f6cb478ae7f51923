//! The memory summary of a client as text, with everything the client knows beside its
//! report: [`Client::memory_summary`], [`Client::largest_page`].

use super::Client;
use crate::report::MemorySummary;
use crate::storage::wgpu_storage::limits::storage_memory_properties;

impl Client {
    /// The largest page the main memory can make on this device, in bytes: the smaller
    /// of the adapter's `max_buffer_size` and `max_storage_buffer_binding_size`. A pool
    /// configured with a larger cap (an exclusive pool's `max_alloc_size`) takes
    /// reservations only up to it.
    pub fn largest_page(&self) -> u64 {
        storage_memory_properties(&self.device().limits()).max_page_size
    }

    /// The [`MemorySummary`] of [`memory_report`](Self::memory_report) as text, with the
    /// budget ([`budget`](Self::budget)), what wgpu's allocator holds on the device
    /// ([`device_memory`](Self::device_memory)) and the device's largest page
    /// ([`largest_page`](Self::largest_page): a pool cap above it is shown clamped; a
    /// staging pool's cap is clamped to the adapter's `max_buffer_size`).
    ///
    /// # Complexity
    /// O(pools + allocations on the device), under the client's lock.
    pub fn memory_summary(&self) -> String {
        let report = self.memory_report();
        MemorySummary::new(&report)
            .with_budget(self.budget())
            .with_device(self.device_memory())
            .with_largest_page(self.largest_page())
            .with_largest_staging_page(self.device().limits().max_buffer_size)
            .to_string()
    }
}
