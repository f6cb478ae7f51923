//! Upload staging in flight follows the working set: a stream of creates that nothing
//! submits keeps at most half the main memory's bytes in use (at least
//! `STAGING_FLOOR`) in staging, the write's own bytes counted before its page is made
//! (so the page passes the bound by at most its room beyond the write), and every byte
//! still lands.

use crate::device::fresh;
use wgpu_memory::Client;
use wgpu_memory::client::STAGING_FLOOR;

const KIB: u64 = 1 << 10;

/// The main memory's bytes in use.
fn in_use(client: &Client) -> u64 {
    client.memory_report().streams[0].pools.usage().bytes_in_use
}

#[test]
fn staging_in_flight_stays_within_half_the_working_set() {
    let Some(client) = fresh() else { return };
    // Weights of a small model, as the main job's chain makes them: 384 KiB each (a
    // 512 KiB staging page apiece), 24 of them, none read until the end.
    let size = 384 * KIB;
    let page = 512 * KIB;
    let mut made = Vec::new();
    let mut peak = 0;
    for i in 0..24u8 {
        let before = in_use(&client);
        let data = vec![i.wrapping_mul(37).wrapping_add(1); size as usize];
        made.push((client.create(&data).unwrap(), data));
        let pending = client.pending_upload_bytes();
        peak = peak.max(pending);
        // The write's own bytes count before its page is made: the page can pass the
        // bound by no more than what it holds beyond the write.
        let bound = ((before + size) / 2).max(STAGING_FLOOR) + (page - size);
        assert!(
            pending <= bound,
            "create {i}: {pending} B of staging in flight for {before} B in use (bound {bound} B)"
        );
    }
    assert!(
        peak > STAGING_FLOOR,
        "the stream never crossed the floor: {peak} B"
    );
    for (i, (handle, data)) in made.iter().enumerate() {
        let read = client.read_blocking(handle).unwrap();
        assert!(*read == **data, "create {i} reads back other bytes");
    }
    assert!(client.uncaptured_errors().is_empty());
}
