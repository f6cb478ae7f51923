//! C13: a staging slice that is mapped or waiting on its map is never a copy destination.
//!
//! r1 = read(h) and r2 = read(h) are started (not awaited), then a launch fills h with 9;
//! both reads return h's bytes from before the launch. The slices themselves are not
//! visible: what is asserted is the bytes, and that the staging memory holds two
//! allocations while both results are held and none once they are dropped. Then, with
//! r1 still mapped, a third read after another launch sees the new bytes while r1 keeps
//! the old ones.

use crate::device::{fresh, pattern};
use wgpu_memory::{Client, Kernel};

const FILL: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> value: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) { data[id.x] = value[0]; }
}
";

const LEN: usize = 1024;

fn staging_allocs(client: &Client) -> u64 {
    client.memory_report().streams[0].auxiliary[0]
        .pools
        .usage()
        .number_allocs
}

fn words(value: u32) -> Vec<u8> {
    (0..LEN / 4).flat_map(|_| value.to_le_bytes()).collect()
}

#[test]
fn c13_mapped_staging_not_reused() {
    let Some(client) = fresh() else { return };
    let kernel = Kernel::new("fill", FILL, "main");
    let before = pattern(LEN, 13);
    let h = client.create(&before).unwrap();
    let nine = client.create(&9u32.to_le_bytes()).unwrap();
    let groups = (LEN / 4).div_ceil(64) as u32;

    let r1 = client.read(&h);
    let r2 = client.read(&h);
    assert_eq!(
        staging_allocs(&client),
        2,
        "two reads in flight, two staging slices"
    );
    client
        .launch(&kernel, [groups, 1, 1], &[&h, &nine])
        .unwrap();
    let b1 = pollster::block_on(r1).unwrap();
    let b2 = pollster::block_on(r2).unwrap();
    assert_eq!(b1, before, "r1 must return the bytes before the launch");
    assert_eq!(b2, before, "r2 must return the bytes before the launch");
    assert_eq!(
        staging_allocs(&client),
        2,
        "both held reads keep their own staging slice"
    );
    drop(b2);
    assert_eq!(staging_allocs(&client), 1);

    // r1 stays mapped: a new read after another launch must not copy into its slice.
    assert_eq!(client.read_blocking(&h).unwrap(), words(9));
    let seven = client.create(&7u32.to_le_bytes()).unwrap();
    client
        .launch(&kernel, [groups, 1, 1], &[&h, &seven])
        .unwrap();
    let b3 = client.read_blocking(&h).unwrap();
    assert_eq!(b3, words(7));
    assert_eq!(b1, before, "r1's mapped bytes changed under it");
    drop(b3);
    drop(b1);
    assert_eq!(
        staging_allocs(&client),
        0,
        "dropped reads give their slices back"
    );
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}
