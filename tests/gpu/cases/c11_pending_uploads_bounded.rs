//! C11: upload bytes held for writes nobody submitted stay bounded.
//!
//! The scenario writes 1 MiB 10,000 times (about 10 GiB through `queue.write_buffer`);
//! on lavapipe (software Vulkan, 2 CPU cores in CI) that takes minutes, so this test
//! writes 300 times: still 300 MiB, more than twice the drop queue's 64 MiB / 64-entry
//! flushing bound, so the bound is crossed several times. After every write the held
//! upload bytes must stay <= 2 * 64 MiB + 1 MiB; the read returns the last write.

use crate::device::fresh;

const MIB: usize = 1 << 20;
const WRITES: u32 = 300;
const BOUND: u64 = 2 * 64 * MIB as u64 + MIB as u64;

/// 1 MiB of `write`'s bytes: its index in the first 4 bytes, then a fill that changes
/// with it.
fn payload(write: u32) -> Vec<u8> {
    let mut data = vec![(write % 251) as u8; MIB];
    data[..4].copy_from_slice(&write.to_le_bytes());
    data[MIB - 4..].copy_from_slice(&(!write).to_le_bytes());
    data
}

#[test]
fn c11_pending_uploads_bounded() {
    let Some(client) = fresh() else { return };
    let handle = client.empty(MIB as u64).unwrap();
    let mut peak = 0u64;
    let mut data = Vec::new();
    for write in 0..WRITES {
        data = payload(write);
        client.write(&handle, 0, &data).unwrap();
        let pending = client.pending_upload_bytes();
        peak = peak.max(pending);
        assert!(
            pending <= BOUND,
            "after write {write}: {pending} pending upload bytes > bound {BOUND}"
        );
    }
    eprintln!("c11: peak pending upload bytes {peak} (bound {BOUND})");
    assert!(peak > 0, "the writes were never held at all");
    let read = client.read_blocking(&handle).unwrap();
    assert_eq!(read.len(), MIB);
    assert!(*read == *data, "the read does not return the last write");
    drop(read);
    client.cleanup();
    assert_eq!(
        client.pending_upload_bytes(),
        0,
        "cleanup releases every upload"
    );
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
