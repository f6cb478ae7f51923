//! C04: writes keep their order around launches, also when a freed slice is reused.

use crate::device::fresh;
use wgpu_memory::{Client, Handle, Kernel};

/// Copies `src_buf` into `dst_buf`, one u32 per invocation.
const COPY: &str = "
@group(0) @binding(0) var<storage, read_write> src_buf: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst_buf: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst_buf)) { dst_buf[id.x] = src_buf[id.x]; }
}
";

fn copy(client: &Client, kernel: &Kernel, from: &Handle, to: &Handle) {
    client.launch(kernel, [1, 1, 1], &[from, to]).unwrap();
}

/// h = reserve(16); write [1; 16]; copy h -> out1; write [2; 16]; copy h -> out2.
#[test]
fn c04_writes_keep_their_order() {
    let Some(client) = fresh() else { return };
    let kernel = Kernel::new("copy", COPY, "main");
    let out1 = client.create(&[0; 16]).unwrap();
    let out2 = client.create(&[0; 16]).unwrap();
    let h = client.empty(16).unwrap();

    client.write(&h, 0, &[1; 16]).unwrap();
    copy(&client, &kernel, &h, &out1);
    client.write(&h, 0, &[2; 16]).unwrap();
    copy(&client, &kernel, &h, &out2);

    let outs = client.read_many_blocking(&[&out1, &out2]).unwrap();
    assert_eq!(outs[0], [1u8; 16], "out1 must see the first write");
    assert_eq!(outs[1], [2u8; 16], "out2 must see the second write");
    assert_eq!(client.read_blocking(&h).unwrap(), [2u8; 16]);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

/// As above, but h is dropped after the first launch and h2 = reserve(16) (possibly the
/// same slice) gets [3; 16]: out1 keeps [1; 16], out2 gets [3; 16].
#[test]
fn c04_writes_keep_their_order_across_reuse() {
    let Some(client) = fresh() else { return };
    let kernel = Kernel::new("copy", COPY, "main");
    let out1 = client.create(&[0; 16]).unwrap();
    let out2 = client.create(&[0; 16]).unwrap();
    let h = client.empty(16).unwrap();

    client.write(&h, 0, &[1; 16]).unwrap();
    copy(&client, &kernel, &h, &out1);
    let before = client.resource(&h).unwrap();
    let place = (before.buffer.clone(), before.offset);
    drop(before);
    drop(h);

    let h2 = client.empty(16).unwrap();
    let after = client.resource(&h2).unwrap();
    let reused = after.buffer == place.0 && after.offset == place.1;
    drop(after);
    eprintln!("c04 variant: h2 reuses h's slice: {reused}");
    client.write(&h2, 0, &[3; 16]).unwrap();
    copy(&client, &kernel, &h2, &out2);

    let outs = client.read_many_blocking(&[&out1, &out2]).unwrap();
    assert_eq!(
        outs[0], [1u8; 16],
        "out1 must see the write before h was dropped (h2 reused h's slice: {reused})"
    );
    assert_eq!(outs[1], [3u8; 16], "out2 must see h2's write");
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
