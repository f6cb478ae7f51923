//! Helpers every side shares: test patterns, checks, touching mapped bytes, page counts.

use cubecl_runtime::memory_management::{MemoryPoolsReport, MemoryReport, MemoryUsage};
use std::hint::black_box;

/// Bytes apart of the bytes a reader touches: one per 4 KiB page of a mapped range.
const TOUCH_STRIDE: usize = 4096;

/// `size` bytes of a pattern that depends on `seed` (so two handles never look alike).
pub fn pattern(size: usize, seed: u32) -> Vec<u8> {
    (0..size)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(97)) as u8
        })
        .collect()
}

/// Touches one byte per page of `bytes`, as a caller using them would, and returns their
/// sum (kept alive with `black_box` so nothing is optimized out).
pub fn touch(bytes: &[u8]) -> u64 {
    let sum = bytes
        .iter()
        .step_by(TOUCH_STRIDE)
        .map(|&b| u64::from(b))
        .sum();
    black_box(sum)
}

/// The first little-endian `u32` of `bytes`.
pub fn first_word(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().expect("four bytes"))
}

/// Panics unless a ping-pong chain of `dispatches` in all left `word` in its last buffer.
pub fn check_chain(side: &str, word: u32, dispatches: u32) {
    assert_eq!(
        word, dispatches,
        "{side}: the ping-pong chain left {word}, expected {dispatches}"
    );
}

/// Panics unless `bytes` equal `expected`.
pub fn check_bytes(side: &str, what: &str, bytes: &[u8], expected: &[u8]) {
    assert_eq!(bytes.len(), expected.len(), "{side}: {what}: length");
    if let Some(at) = bytes.iter().zip(expected).position(|(a, b)| a != b) {
        panic!("{side}: {what}: first wrong byte at {at}");
    }
}

/// Panics unless `bytes` hold what the fill kernel writes.
pub fn check_fill(side: &str, bytes: &[u8]) {
    for (i, word) in bytes.chunks_exact(4).enumerate() {
        let word = u32::from_le_bytes(word.try_into().expect("four bytes"));
        assert_eq!(
            word,
            crate::kernels::fill_word(i as u32),
            "{side}: fill kernel, word {i}"
        );
    }
}

/// Device allocations (pages) a report holds, in the main pools and the auxiliary
/// memories (staging) together: the device buffers the memory owns right now.
pub fn pages(report: &MemoryReport) -> u64 {
    let pools = |pools: &MemoryPoolsReport| -> u64 {
        pools
            .dynamic
            .iter()
            .chain([&pools.persistent, &pools.dedicated])
            .map(|pool| pool.pages)
            .sum()
    };
    report
        .streams
        .iter()
        .map(|stream| {
            pools(&stream.pools)
                + stream
                    .auxiliary
                    .iter()
                    .map(|memory| pools(&memory.pools))
                    .sum::<u64>()
        })
        .sum()
}

/// Usage of the main pools only (what handles hold), every stream together; auxiliary
/// memories (staging, uniforms) are left out so both sides count the same thing.
pub fn main_usage(report: &MemoryReport) -> MemoryUsage {
    report
        .streams
        .iter()
        .fold(MemoryUsage::default(), |usage, stream| {
            usage.combine(stream.pools.usage())
        })
}

/// In use in the main pools, reserved over every memory (main, readback and upload
/// staging): what the model step's efficiency counts.
pub fn all_memories_usage(report: &MemoryReport) -> MemoryUsage {
    let mut usage = main_usage(report);
    for stream in &report.streams {
        for memory in &stream.auxiliary {
            usage.bytes_reserved += memory.pools.usage().bytes_reserved;
        }
    }
    usage
}

/// What workload (b) learns about a side's memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelMemory {
    /// Device buffers held after the warm-up steps (`None`: the side has no report).
    pub pages_after_warmup: Option<u64>,
    /// Device buffers created during the timed steps: for a pooled side the growth of
    /// its page count over the warm-up figure (the most seen after any timed sample);
    /// for bare wgpu one per temporary.
    pub created: Option<u64>,
    /// Most bytes live handles held at once during one instrumented step.
    pub peak_in_use: u64,
    /// Most bytes the memory held from the device at once during that step.
    pub peak_reserved: u64,
    /// The most wgpu's own allocator held on the side's device during that step, sampled
    /// after every temporary was made (`None`: the backend gives no allocator report).
    pub device: Option<DevicePeak>,
}

/// The peaks of wgpu's allocator report (`Device::generate_allocator_report`) over the
/// samples of one step, each its own maximum, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct DevicePeak {
    /// Bytes of device memory blocks wgpu held (`total_reserved_bytes`): what the driver
    /// gives the process.
    pub reserved: u64,
    /// Bytes of live allocations in them (`total_allocated_bytes`).
    pub allocated: u64,
}

impl DevicePeak {
    /// Takes one sample of `device`'s allocator report into the peaks; `None` stays
    /// `None` where the backend gives no report.
    pub fn sample(peak: &mut Option<Self>, device: &wgpu::Device) {
        if let Some(report) = device.generate_allocator_report() {
            Self::observe(
                peak,
                report.total_reserved_bytes,
                report.total_allocated_bytes,
            );
        }
    }

    /// Takes one sample (`reserved`, `allocated` bytes) into the peaks.
    pub fn observe(peak: &mut Option<Self>, reserved: u64, allocated: u64) {
        let peak = peak.get_or_insert_with(Self::default);
        peak.reserved = peak.reserved.max(reserved);
        peak.allocated = peak.allocated.max(allocated);
    }
}

/// Tracks page counts across the runs of a timed model bench: the first call (the
/// warm-up) sets the baseline, later ones the maximum.
#[derive(Debug, Default)]
pub struct PagesSeen {
    after_warmup: Option<u64>,
    most: u64,
}

impl PagesSeen {
    /// Records the page count after one run.
    pub fn observe(&mut self, pages: u64) {
        if self.after_warmup.is_none() {
            self.after_warmup = Some(pages);
        }
        self.most = self.most.max(pages);
    }

    /// (pages after warm-up, pages created since).
    pub fn figures(&self) -> (Option<u64>, Option<u64>) {
        (
            self.after_warmup,
            self.after_warmup.map(|base| self.most - base),
        )
    }
}
