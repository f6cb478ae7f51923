//! Writes handed to the queue (the web's way, `server::uploads::queued`), run on the
//! native adapter: the bytes land where they belong, never ahead of recorded work on the
//! same page, without upload staging, and with the fence finished behind them.

use super::{Client, Handle, Kernel, SubmitPolicy};

const COPY: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y)) { y[id.x] = x[id.x]; }
}
";

const ADD_ONE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}
";

/// A client whose writes go to the queue and whose batches are submitted only when asked.
fn client() -> Option<Client> {
    let client = match Client::open_default() {
        Ok(client) => client,
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(_) => return None,
    };
    client.shared.server.lock().set_web_rules(true);
    client.set_submit_policy(SubmitPolicy {
        max_dispatches: u32::MAX,
        max_bytes: u64::MAX,
    });
    Some(client)
}

/// The page and offset of `handle`'s slice.
fn place(client: &Client, handle: &Handle) -> (crate::storage::StorageId, u64) {
    let storage = client
        .shared
        .server
        .lock()
        .main
        .get_storage(&handle.binding())
        .unwrap();
    (storage.id, storage.offset())
}

fn recording(client: &Client) -> u64 {
    client.shared.server.lock().budget().fences().recording()
}

#[test]
fn queued_writes_land_where_they_belong_aligned_or_not() {
    let Some(client) = client() else { return };
    let mut model = vec![0u8; 64];
    let handle = client.create(&model).unwrap();
    for (at, (offset, len)) in [(0, 64), (3, 1), (5, 2), (7, 9), (12, 4), (1, 62), (63, 1)]
        .into_iter()
        .enumerate()
    {
        let bytes: Vec<u8> = (0..len).map(|i| (10 * at + i + 1) as u8).collect();
        client.write(&handle, offset, &bytes).unwrap();
        model[offset as usize..offset as usize + len].copy_from_slice(&bytes);
    }
    assert_eq!(client.read_blocking(&handle).unwrap(), model);
    let odd = client.create(&[5, 6, 7]).unwrap();
    assert_eq!(client.read_blocking(&odd).unwrap(), [5, 6, 7]);
    assert_eq!(
        client.memory_report().streams[0].auxiliary[1]
            .pools
            .usage()
            .bytes_reserved,
        0
    );
}

/// A write into a handle that a recorded launch reads must not land before the launch.
#[test]
fn a_queued_write_lands_after_recorded_work_that_reads_its_bytes() {
    let Some(client) = client() else { return };
    let x = client.create(bytemuck::cast_slice(&[1u32; 64])).unwrap();
    let y = client.empty(256).unwrap();
    let copy = Kernel::new("copy", COPY, "main");
    client.launch(&copy, [1, 1, 1], &[&x, &y]).unwrap();
    client
        .write(&x, 0, bytemuck::cast_slice(&[2u32; 64]))
        .unwrap();
    let read =
        |handle| bytemuck::cast_slice::<u8, u32>(&client.read_blocking(handle).unwrap()).to_vec();
    assert_eq!(read(&y), [1; 64], "the launch saw the write");
    assert_eq!(read(&x), [2; 64]);
}

/// A slice freed while recorded work still reads it, and reused by a new upload at once:
/// the upload lands after that work.
#[test]
fn a_reused_slice_is_written_after_the_recorded_work_that_read_it() {
    let Some(client) = client() else { return };
    let y = client.empty(256).unwrap();
    let x = client.create(bytemuck::cast_slice(&[3u32; 64])).unwrap();
    let copy = Kernel::new("copy", COPY, "main");
    client.launch(&copy, [1, 1, 1], &[&x, &y]).unwrap();
    let was = place(&client, &x);
    drop(x);
    let z = client.create(bytemuck::cast_slice(&[4u32; 64])).unwrap();
    assert_eq!(place(&client, &z), was, "the test needs the slice reused");
    let read =
        |handle| bytemuck::cast_slice::<u8, u32>(&client.read_blocking(handle).unwrap()).to_vec();
    assert_eq!(read(&y), [3; 64], "the launch read the new upload");
    assert_eq!(read(&z), [4; 64]);
}

/// An unaligned write after a recorded launch on the same handle: the launch, then the
/// write's middle and edges.
#[test]
fn an_unaligned_queued_write_lands_after_a_recorded_launch_on_its_handle() {
    let Some(client) = client() else { return };
    let x = client.create(bytemuck::cast_slice(&[0u32; 8])).unwrap();
    let add_one = Kernel::new("add one", ADD_ONE, "main");
    client.launch(&add_one, [1, 1, 1], &[&x]).unwrap();
    client.write(&x, 3, &[9; 6]).unwrap();
    client.write(&x, 13, &[8; 2]).unwrap();
    let mut model: Vec<u8> = bytemuck::cast_slice(&[1u32; 8]).to_vec();
    model[3..9].fill(9);
    model[13..15].fill(8);
    assert_eq!(client.read_blocking(&x).unwrap(), model);
}

/// Writes with no recorded work between them submit nothing: each goes to the queue as
/// it comes. A launch between two writes to the same page submits once.
#[test]
fn queued_writes_submit_only_behind_recorded_work_on_their_page() {
    let Some(client) = client() else { return };
    let before = recording(&client);
    let handles: Vec<Handle> = (0..32u8)
        .map(|i| client.create(&[i; 1024]).unwrap())
        .collect();
    for (i, handle) in handles.iter().enumerate() {
        client.write(handle, 0, &[i as u8 + 100; 512]).unwrap();
    }
    assert_eq!(recording(&client), before, "a write submitted");
    let add_one = Kernel::new("add one", ADD_ONE, "main");
    client.launch(&add_one, [4, 1, 1], &[&handles[0]]).unwrap();
    client.write(&handles[0], 0, &[0; 4]).unwrap();
    assert_eq!(recording(&client), before + 1, "one submit for the launch");
    let mut expected = vec![u32::from_le_bytes([100; 4]) + 1; 128];
    expected.extend([1; 128]);
    expected[0] = 0;
    let bytes = client.read_blocking(&handles[0]).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, u32>(&bytes), expected);
    assert_eq!(
        client.read_blocking(&handles[31]).unwrap()[..512],
        [131; 512]
    );
}

/// 665 creates in a row hold no upload staging at all.
#[test]
fn queued_creates_hold_no_upload_staging() {
    let Some(client) = client() else { return };
    let handles: Vec<Handle> = (0..665u32)
        .map(|i| client.create(&[(i % 251) as u8; 12 << 10]).unwrap())
        .collect();
    let upload = &client.memory_report().streams[0].auxiliary[1];
    assert_eq!(upload.name, "upload");
    assert_eq!(upload.pools.usage().bytes_reserved, 0);
    assert_eq!(client.pending_upload_bytes(), 0);
    for i in [0, 331, 664] {
        assert_eq!(
            client.read_blocking(&handles[i]).unwrap(),
            [(i % 251) as u8; 12 << 10]
        );
    }
}

/// A page only ever written through the queue is known done once the device finished
/// the submit behind the write: given back after a sync, it is freed at once, not held
/// as retiring.
#[test]
fn a_page_written_through_the_queue_is_freed_at_once_after_a_sync() {
    let Some(client) = client() else { return };
    let handle = client.create(&[7; 4 << 20]).unwrap();
    client.sync().unwrap();
    drop(handle);
    let report = client.cleanup();
    assert!(report.main.bytes > 0, "{report:?}");
    assert_eq!(
        client.budget().retiring,
        0,
        "the page still counted as in use"
    );
}
