//! The run's high-water marks, read off the memory history: the most bytes in use at
//! once (main memory, requested sizes) and the most bytes reserved at once over every
//! memory the client made pages in (main, readback staging, upload staging).

use wgpu_memory::report::{EventKind, HistoryEvent};

/// `(peak in use, peak reserved)` in bytes, replaying `history` from an empty client.
pub fn peaks(history: &[HistoryEvent]) -> (u64, u64) {
    let (mut in_use, mut reserved) = (0i128, 0i128);
    let (mut peak_in_use, mut peak_reserved) = (0i128, 0i128);
    for event in history {
        let bytes = i128::from(event.bytes);
        match event.kind {
            EventKind::Reserve if event.memory.as_deref() == Some("main") => in_use += bytes,
            EventKind::Free => in_use -= bytes,
            EventKind::PageMade => reserved += bytes,
            EventKind::PageReleased => reserved -= bytes,
            _ => continue,
        }
        peak_in_use = peak_in_use.max(in_use);
        peak_reserved = peak_reserved.max(reserved);
    }
    (peak_in_use.max(0) as u64, peak_reserved.max(0) as u64)
}
