//! What `Client::cleanup` returns: the pages and bytes each memory gave back, and the
//! compaction it ran (issue 24, item 11: it returned nothing, while `compact()` returned
//! a `CompactionReport`).

use crate::device::{fresh, pattern};
use wgpu_memory::memory_management::{MemoryPoolsReport, parse_memory_config};
use wgpu_memory::{Client, GivenBack};

/// Pages and bytes of one memory's report.
fn held(pools: &MemoryPoolsReport) -> GivenBack {
    GivenBack {
        pages: pools.dynamic.iter().map(|pool| pool.pages).sum::<u64>()
            + pools.persistent.pages
            + pools.dedicated.pages,
        bytes: pools.usage().bytes_reserved,
    }
}

/// What the main, readback staging and upload staging memories hold now.
fn memories(client: &Client) -> [GivenBack; 3] {
    let report = client.memory_report();
    let stream = &report.streams[0];
    let aux = |name: &str| {
        let memory = stream
            .auxiliary
            .iter()
            .find(|aux| aux.name == name)
            .unwrap();
        held(&memory.pools)
    };
    [held(&stream.pools), aux("staging"), aux("upload")]
}

/// Eight 1 MiB pages of four 256 KiB slices each, every other slice dropped: the cleanup
/// moves four pages' slices into the other four's holes and gives those back, and the
/// idle staging of the uploads and the read goes back too; the report says so, memory
/// by memory, as the memory report counts it.
#[test]
fn cleanup_reports_what_each_memory_gave_back() {
    let Some(client) = fresh() else { return };
    let pools = parse_memory_config(
        "[memory]\npools = [{ type = \"sliced\", page_size = \"1 MiB\", max_slice_size = \"1 MiB\" }]\n",
    )
    .unwrap()
    .pools
    .unwrap();
    client.install_memory_pools(&pools).unwrap();
    let held_handles: Vec<_> = (0..32)
        .map(|i| client.create(&pattern(256 << 10, i)).unwrap())
        .collect();
    assert_eq!(
        client.read_blocking(&held_handles[0]).unwrap()[..],
        pattern(256 << 10, 0)[..]
    );
    let kept: Vec<_> = held_handles.into_iter().step_by(2).collect();
    client.sync().unwrap();
    let before = memories(&client);
    assert_eq!(before[0].pages, 8);
    assert!(before[1].pages > 0 && before[2].pages > 0, "{before:?}");

    let report = client.cleanup();

    let after = memories(&client);
    assert_eq!(report.moves, 8, "two slices of each of four pages");
    assert_eq!(report.bytes_moved, 8 * (256 << 10));
    assert_eq!(
        report.main,
        GivenBack {
            pages: 4,
            bytes: 4 << 20
        }
    );
    assert_eq!(
        after[0],
        GivenBack {
            pages: 4,
            bytes: 4 << 20
        }
    );
    // The staging memories were idle (everything submitted was done): all of it went.
    assert_eq!(report.readback_staging, before[1]);
    assert_eq!(report.upload_staging, before[2]);
    assert_eq!((after[1].pages, after[2].pages), (0, 0));
    assert_eq!(
        report.pages_given_back(),
        4 + before[1].pages + before[2].pages
    );
    assert_eq!(
        report.bytes_given_back(),
        (4 << 20) + before[1].bytes + before[2].bytes
    );
    // A second cleanup has nothing left to give.
    let again = client.cleanup();
    assert_eq!(
        (
            again.moves,
            again.pages_given_back(),
            again.bytes_given_back()
        ),
        (0, 0, 0)
    );
    for (i, handle) in kept.iter().enumerate() {
        let expected = pattern(256 << 10, 2 * i as u64);
        assert_eq!(client.read_blocking(handle).unwrap()[..], expected[..]);
    }
}
