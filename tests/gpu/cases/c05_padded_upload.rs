//! C05: an upload padded to whole words never spills into the neighbouring slice.
//!
//! The device's alignment is its `min_storage_buffer_offset_alignment` (the scenario
//! assumes 32). Whether B directly follows A in the same page is checked through
//! `Client::resource` and printed, not asserted, since it depends on the adapter and the
//! layout: on lavapipe (alignment 32) with a fresh client's default layout, A is at
//! offset 0 and B at offset 64 of the same page, so B is A's neighbour, as in the
//! scenario. The contents are asserted either way.

use crate::device::fresh;

fn padded_upload(a_len: usize) {
    let Some(client) = fresh() else { return };
    let alignment = u64::from(client.device().limits().min_storage_buffer_offset_alignment);
    let a = client.empty(a_len as u64).unwrap();
    let b = client.empty(64).unwrap();

    let (ra, rb) = (client.resource(&a).unwrap(), client.resource(&b).unwrap());
    let neighbours = ra.buffer == rb.buffer
        && rb.offset == ra.offset + (a_len as u64).next_multiple_of(alignment);
    eprintln!(
        "c05 ({a_len} bytes): alignment {alignment}, A at {}, B at {}, same page {}, B right after A: {neighbours}",
        ra.offset,
        rb.offset,
        ra.buffer == rb.buffer,
    );
    drop((ra, rb));

    client.write(&b, 0, &[0xBB; 64]).unwrap();
    client.write(&a, 0, &vec![0xAA; a_len]).unwrap();
    let read = client.read_many_blocking(&[&a, &b]).unwrap();
    assert_eq!(read[0], vec![0xAA; a_len], "A reads what was written");
    assert_eq!(read[1], [0xBB; 64], "B is untouched by A's padded upload");
    drop(read);

    // Single reads agree with the batched one.
    assert_eq!(client.read_blocking(&b).unwrap(), [0xBB; 64]);
    assert_eq!(client.read_blocking(&a).unwrap(), vec![0xAA; a_len]);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

#[test]
fn c05_padded_upload_36() {
    padded_upload(36);
}

#[test]
fn c05_padded_upload_37() {
    padded_upload(37);
}
