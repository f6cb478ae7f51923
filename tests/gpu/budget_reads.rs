//! Reads under a tight budget: a read larger than the room the budget leaves is
//! streamed through one bounded staging slice, part by part, and still returns one
//! `ReadBytes` per handle with every byte right; the budget is never crossed.

use crate::device::{fresh, pattern};
use wgpu_memory::client::MIN_STREAMED_PART;
use wgpu_memory::{Client, ClientError, Handle};

const MIB: u64 = 1 << 20;
const BUDGET: u64 = 8 * MIB;

/// Live handles with the bytes each holds.
type Live = Vec<(Handle, Vec<u8>)>;

/// A client holding `sizes` (each filled with its pattern), with the work done, the
/// upload staging given back, and then an 8 MiB budget.
fn near_the_budget(sizes: &[usize]) -> Option<(Client, Live)> {
    let client = fresh()?;
    let live: Live = sizes
        .iter()
        .enumerate()
        .map(|(seed, &size)| {
            let bytes = pattern(size, seed as u64 + 1);
            (client.create(&bytes).unwrap(), bytes)
        })
        .collect();
    client.cleanup();
    client.sync().unwrap();
    client.set_budget(Some(BUDGET)).unwrap();
    Some((client, live))
}

/// Bytes the budget leaves beside the main memory's pages: the most a read's staging
/// can have once every free staging page went back.
fn room(client: &Client) -> u64 {
    BUDGET
        - client.memory_report().streams[0]
            .pools
            .usage()
            .bytes_reserved
}

/// Bytes of readback staging pages held now.
fn staging_held(client: &Client) -> u64 {
    let report = client.memory_report();
    let staging = report.streams[0]
        .auxiliary
        .iter()
        .find(|memory| memory.name == "staging")
        .expect("the readback staging memory");
    staging.pools.usage().bytes_reserved
}

/// A 4 MiB handle (unaligned length) read with about 2 MiB left under the budget: the
/// whole read's staging does not fit, so it streams, and every byte comes back.
#[test]
fn a_read_larger_than_the_room_left_streams_within_the_budget() {
    let Some((client, live)) = near_the_budget(&[(4 * MIB) as usize - 3, (2 * MIB) as usize])
    else {
        return;
    };
    let left = room(&client);
    assert!(left < 4 * MIB, "the read must not fit: {left} bytes left");
    let (handle, bytes) = &live[0];
    let read = client.read_blocking(handle).unwrap();
    assert_eq!(read.len(), bytes.len());
    assert!(*read == **bytes, "a streamed read came back wrong");
    assert_eq!(
        read.as_ptr() as usize % 4,
        0,
        "host bytes are 4-byte aligned"
    );
    let staging = staging_held(&client);
    assert!(
        staging > 0 && staging <= left,
        "the read streamed through {staging} bytes of staging, {left} were left"
    );
    assert!(client.budget().held <= BUDGET);
    // The async form streams too.
    let again = pollster::block_on(client.read(handle)).unwrap();
    assert!(*again == **bytes);
    assert!(client.uncaptured_errors().is_empty());
}

/// A read of many handles whose total does not fit while some of them would: all of them
/// come back, each in its own `ReadBytes`, in order, every byte right; zero-size and
/// repeated handles included.
#[test]
fn a_read_of_many_handles_whose_total_does_not_fit_streams_them_all() {
    let sizes = [
        100 * 1024 - 1,
        (MIB as usize) + 5,
        7,
        (3 * MIB) as usize / 2 + 2,
        0,
        (MIB as usize) - 4,
    ];
    let Some((client, live)) = near_the_budget(&sizes) else {
        return;
    };
    // Every handle, and the second one again at the end.
    let order: Vec<usize> = (0..live.len()).chain([1]).collect();
    let handles: Vec<&Handle> = order.iter().map(|&at| &live[at].0).collect();
    let total: usize = order.iter().map(|&at| live[at].1.len()).sum();
    let left = room(&client);
    assert!(left < total as u64, "{left} bytes left, {total} to read");
    let reads = client.read_many_blocking(&handles).unwrap();
    assert_eq!(reads.len(), handles.len());
    for (read, &at) in reads.iter().zip(&order) {
        assert!(**read == *live[at].1, "part {at} came back wrong");
    }
    let staging = staging_held(&client);
    assert!(
        staging <= left,
        "{staging} bytes of staging, {left} were left"
    );
    let floats: &[f32] = bytemuck::cast_slice(&reads[5]);
    assert_eq!(floats.len(), (MIB as usize - 4) / 4);
}

/// With less than [`MIN_STREAMED_PART`] left under the budget, a read that does not fit
/// is refused with the budget's out-of-memory error, which says what is left.
#[test]
fn with_almost_no_room_left_a_large_read_is_refused_by_the_budget() {
    let Some(client) = fresh() else { return };
    client.set_budget(Some(BUDGET)).unwrap();
    // Main pages that fill the budget to less than the smallest streamed part.
    let kept: Vec<Handle> = (0..4).map(|_| client.empty(2 * MIB).unwrap()).collect();
    client.cleanup();
    client.sync().unwrap();
    let left = BUDGET - client.budget().held;
    assert!(left < MIN_STREAMED_PART, "{left} bytes left");
    match client.read_blocking(&kept[0]) {
        Err(ClientError::OutOfMemory { detail, .. }) => {
            let budget = detail.budget.expect("the budget refused it");
            assert_eq!(budget.budget, BUDGET);
            assert!(
                budget.held_total() + MIN_STREAMED_PART > BUDGET,
                "{budget:?}"
            );
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}
