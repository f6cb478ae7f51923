//! Reading the memory report in tests.

use wgpu_memory::memory_management::MemoryReport;

/// Live slices (allocations) of the auxiliary memory `name` of stream 0, or `None` when the
/// report has no such memory.
pub fn auxiliary_slices(report: &MemoryReport, name: &str) -> Option<u64> {
    report.streams[0]
        .auxiliary
        .iter()
        .find(|memory| memory.name == name)
        .map(|memory| memory.pools.usage().number_allocs)
}

/// Live slices of the main memory of stream 0.
pub fn main_slices(report: &MemoryReport) -> u64 {
    report.streams[0].pools.usage().number_allocs
}

/// Live slices of the upload staging memory (the `"upload"` auxiliary memory).
pub fn upload_slices(report: &MemoryReport) -> u64 {
    auxiliary_slices(report, "upload").expect("the report has the upload staging memory")
}
