//! C20 Useful out-of-memory text.
//!
//! Pool cap 64 MiB; keep = reserve(48 MiB); reserve(32 MiB). Expect: the error states
//! requested (32 MiB), cap (64 MiB), in use (48 MiB), reserved, the largest free block and
//! a fragmentation ratio.
//!
//! The cap is an explicit layout of one sliced pool of 64 MiB pages capped at 64 MiB (the
//! only pool, so nothing spills), `MemoryDeviceProperties::new(1 GiB, 256)`. The numbers
//! are looked for in the message in the crate's byte format (`format_bytes`) or as plain
//! byte counts.

use crate::common::*;
use wgpu_memory::memory_management::format_bytes;
use wgpu_memory::storage::BytesStorage;

fn states(text: &str, bytes: u64) -> bool {
    text.contains(&format_bytes(bytes)) || text.contains(&bytes.to_string())
}

#[test]
fn c20_useful_out_of_memory_text() {
    let mut memory = explicit(
        BytesStorage::default(),
        GIB,
        256,
        vec![sliced(64 * MIB, 64 * MIB, Some(64 * MIB))],
    );
    let keep = memory.reserve(48 * MIB).unwrap();
    let error = memory
        .reserve(32 * MIB)
        .expect_err("48 MiB + 32 MiB exceeds a 64 MiB cap");
    let text = error.to_string();
    eprintln!("C20 error: {error:?}\nC20 text: {text}");
    assert_eq!(error.requested(), 32 * MIB);
    assert!(states(&text, 32 * MIB), "requested 32 MiB missing: {text}");
    assert!(states(&text, 64 * MIB), "cap 64 MiB missing: {text}");
    assert!(states(&text, 48 * MIB), "in use 48 MiB missing: {text}");
    let lower = text.to_lowercase();
    assert!(
        lower.contains("reserved"),
        "the bytes reserved are not stated: {text}"
    );
    assert!(
        lower.contains("largest free") && states(&text, 16 * MIB),
        "the largest free block (16 MiB) is not stated: {text}"
    );
    assert!(
        lower.contains("fragment"),
        "no fragmentation ratio in the message: {text}"
    );
    // Nothing changed.
    assert_eq!(memory.memory_usage().bytes_reserved, 64 * MIB);
    drop(keep);
}
