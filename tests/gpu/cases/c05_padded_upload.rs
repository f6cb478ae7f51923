//! C05: an upload padded to whole words never spills into the neighbouring slice.
//!
//! The scenario needs B to be A's neighbour: in the same page, right after A's aligned
//! slice. A fresh client places its first two small reservations that way on any
//! adapter (the first two slices of the default layout's small pool: A at the start of
//! a page, B at A's size rounded up to the device's alignment, its
//! `min_storage_buffer_offset_alignment`, which the scenario assumes is 32). The layout
//! is asserted first, so a change that separated them would fail here rather than test
//! nothing; then the contents.

use crate::device::fresh;

fn padded_upload(a_len: usize) {
    let Some(client) = fresh() else { return };
    let alignment = u64::from(client.device().limits().min_storage_buffer_offset_alignment);
    let a = client.empty(a_len as u64).unwrap();
    let b = client.empty(64).unwrap();

    let (ra, rb) = (client.resource(&a).unwrap(), client.resource(&b).unwrap());
    assert!(
        ra.buffer == rb.buffer,
        "c05 ({a_len} bytes): A and B share a page"
    );
    assert_eq!(
        rb.offset,
        ra.offset + (a_len as u64).next_multiple_of(alignment),
        "c05 ({a_len} bytes): B starts right after A's slice (alignment {alignment})"
    );
    assert_eq!(
        (ra.size, rb.size),
        (a_len as u64, 64),
        "c05 ({a_len} bytes): each binding is its requested size"
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
