//! A handle's last drop queues its allocation, and the next reservation releases it in
//! O(1): a freed slice is reused at once, even in a pool too large for the bounded
//! sweeps to have seen the drop.

use crate::device::fresh;

/// 4096 slices of 256 B fill the small-slice pool's pages exactly. After a cleanup (a
/// full sweep, which may also pack the pool's first, smaller pages into full ones), one
/// slice in the middle is dropped and the same size reserved: it takes the freed slice's
/// place, and no page is added.
#[test]
fn a_dropped_slice_is_reused_by_the_next_reservation() {
    let Some(client) = fresh() else { return };
    let mut handles: Vec<_> = (0..4096).map(|_| client.empty(256).unwrap()).collect();
    client.cleanup();
    let pages = |client: &wgpu_memory::Client| {
        client.memory_report().streams[0]
            .pools
            .dynamic
            .iter()
            .map(|pool| pool.pages)
            .sum::<u64>()
    };
    let before = pages(&client);
    // Where the slice is now (a cleanup may have moved it since its reservation).
    let place = |client: &wgpu_memory::Client, handle: &wgpu_memory::Handle| {
        let id = handle.memory().descriptor().id.value as u64;
        let snapshot = client.memory_snapshot();
        let main = snapshot.memory("main").expect("the main memory");
        main.pools
            .iter()
            .flat_map(|pool| &pool.pages)
            .find_map(|page| {
                let slice = page.slices.iter().find(|slice| slice.id == Some(id))?;
                Some((page.id, slice.offset))
            })
            .expect("the slice is in the snapshot")
    };
    let dropped = handles.swap_remove(1234);
    let freed_at = place(&client, &dropped);
    drop(dropped);
    let again = client.empty(256).unwrap();
    assert_eq!(
        place(&client, &again),
        freed_at,
        "the freed slice is reused"
    );
    assert_eq!(pages(&client), before, "no page was added");
    drop((handles, again));
}
