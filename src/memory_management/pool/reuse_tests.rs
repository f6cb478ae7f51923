//! A dropped slice handed out again where it is (`SliceTable::step_reusing`), and the
//! cases where it must go back to the free space instead.

use super::sliced::SlicedPool;
use super::slices::Sweep;
use crate::memory_management::error_graph::ErrorGraph;
use crate::storage::BytesStorage;
use cubecl_runtime::memory_management::ManagedMemoryHandle;

const KIB: u64 = 1 << 10;

/// A pool of 64 KiB pages holding three 4 KiB slices side by side at 0, 4 and 8 KiB.
fn three_slices() -> (BytesStorage, SlicedPool, Vec<ManagedMemoryHandle>) {
    let mut storage = BytesStorage::default();
    let mut pool = SlicedPool::new(0, 64 * KIB, 64 * KIB, None, 256).without_near_page();
    let mut handles = vec![pool.grow(&mut storage, 4 * KIB).unwrap()];
    for _ in 0..2 {
        handles.push(pool.try_reserve(4 * KIB).unwrap());
    }
    let offsets: Vec<u64> = handles.iter().map(|h| offset(&pool, h)).collect();
    assert_eq!(offsets, [0, 4 * KIB, 8 * KIB]);
    (storage, pool, handles)
}

fn offset(pool: &SlicedPool, handle: &ManagedMemoryHandle) -> u64 {
    let binding = handle.clone().binding();
    pool.slices().find(&binding).unwrap().storage.offset()
}

/// Dropped and asked for again at the same aligned size, between two live slices: the
/// same bytes under a fresh id, the old allocation's weak bindings dead, the sizes
/// counted afresh, and the page's free space untouched.
#[test]
fn a_slice_dropped_between_live_neighbours_is_reissued_in_place_under_a_fresh_id() {
    let (_storage, mut pool, mut handles) = three_slices();
    let free_before = pool.sliced_pages().free_bytes();
    let old = handles.remove(1);
    let old_id = old.descriptor().id;
    let weak = old.clone().binding().downgrade();
    drop(old);
    // 4 KiB - 100 B aligns to the same 4 KiB block.
    let again = pool.try_reserve(4 * KIB - 100).unwrap();
    assert_eq!(offset(&pool, &again), 4 * KIB);
    assert_ne!(again.descriptor().id, old_id);
    assert!(
        weak.upgrade().is_none(),
        "a weak binding of the dropped slice"
    );
    assert_eq!(pool.sliced_pages().free_bytes(), free_before);
    let sums = pool.slices().sums();
    assert_eq!(sums.in_use, 8 * KIB + 4 * KIB - 100);
    assert_eq!(sums.padding, 100);
}

/// The last slice, below the page's free tail: freed, it would merge with the tail and
/// be split off its start again, so it is reissued in place as well.
#[test]
fn a_slice_dropped_below_the_free_tail_is_reissued_in_place() {
    let (_storage, mut pool, mut handles) = three_slices();
    let free_before = pool.sliced_pages().free_bytes();
    let old_id = handles[2].descriptor().id;
    drop(handles.remove(2));
    let again = pool.try_reserve(4 * KIB).unwrap();
    assert_eq!(offset(&pool, &again), 8 * KIB);
    assert_ne!(again.descriptor().id, old_id);
    assert_eq!(pool.sliced_pages().free_bytes(), free_before);
    assert_eq!(pool.slices().live(), 3);
}

/// A dropped slice whose lower neighbour is free would merge with it; it goes back to
/// the free space, and the placement takes the merged hole from its start.
#[test]
fn a_slice_dropped_after_a_hole_is_released_and_the_hole_placed_from_its_start() {
    let (_storage, mut pool, mut handles) = three_slices();
    let second = handles.remove(1);
    drop(handles.remove(0));
    pool.sweep(Sweep::All);
    drop(second);
    let again = pool.try_reserve(4 * KIB).unwrap();
    assert_eq!(offset(&pool, &again), 0);
    // The rest of the merged hole stayed free: 4 KiB of it, and the page after 12 KiB.
    assert_eq!(pool.sliced_pages().free_bytes(), 64 * KIB - 8 * KIB);
}

/// A request of another aligned size never takes a dropped slice's bytes in place.
#[test]
fn a_dropped_slice_of_another_size_is_released_not_reissued() {
    let (_storage, mut pool, mut handles) = three_slices();
    drop(handles.remove(1));
    let larger = pool.try_reserve(8 * KIB).unwrap();
    // The 4 KiB hole between the live slices cannot hold it.
    assert_eq!(offset(&pool, &larger), 12 * KIB);
    assert_eq!(pool.sliced_pages().free_bytes(), 64 * KIB - 16 * KIB);
    assert_eq!(pool.slices().live(), 3);
}

/// The failures a dropped slice carried leave with it when its bytes are reissued: the
/// new allocation starts clean and the error graph counts no carrier for them.
#[test]
fn a_reissued_slice_starts_clean_and_sheds_the_failures_of_the_dropped_one() {
    let (_storage, mut pool, mut handles) = three_slices();
    let mut graph = ErrorGraph::default();
    let failure = graph.insert("a kernel failed writing the middle slice");
    let old = handles.remove(1);
    let binding = old.clone().binding();
    let slice = pool.slices_mut().find_mut(&binding).unwrap();
    slice.taint.taint(0..KIB, failure, &mut graph);
    assert_eq!(graph.carriers(failure), 1);
    drop((old, binding));
    let again = pool.try_reserve(4 * KIB).unwrap();
    assert_eq!(offset(&pool, &again), 4 * KIB);
    let binding = again.clone().binding();
    assert!(pool.slices().find(&binding).unwrap().taint.is_clean());
    pool.slices_mut().settle(&mut graph);
    assert_eq!(graph.carriers(failure), 0);
}

/// A pool of one 256 KiB page holding `sizes` side by side, in order, from offset 0.
fn slices_of(sizes: &[u64]) -> (BytesStorage, SlicedPool, Vec<ManagedMemoryHandle>) {
    let mut storage = BytesStorage::default();
    let mut pool = SlicedPool::new(0, 256 * KIB, 256 * KIB, None, 256).without_near_page();
    let mut handles = vec![pool.grow(&mut storage, sizes[0]).unwrap()];
    for &size in &sizes[1..] {
        handles.push(pool.try_reserve(size).unwrap());
    }
    (storage, pool, handles)
}

/// A step that stops at the slice it keeps leaves the rest of its visits to the next
/// step, so drops are released as fast as without the reuse: over reservations that
/// end with a miss, the sweep visits exactly four slots per reservation.
#[test]
fn a_step_stopped_at_a_reused_slice_hands_its_other_visits_to_the_next_step() {
    let (_storage, mut pool, mut handles) = slices_of(&[4 * KIB; 40]);
    // Drop every other slice: the steps meet live slots between the dropped ones.
    let dropped: Vec<_> = (0..40)
        .step_by(2)
        .rev()
        .map(|i| handles.remove(i))
        .collect();
    drop(dropped);
    let before = pool.slices().visits;
    let mut kept = Vec::new();
    for _ in 0..10 {
        kept.push(pool.try_reserve(4 * KIB).unwrap());
    }
    let reused = pool.slices().visits - before;
    assert!(reused < 40, "ten hits stop early: {reused} visits");
    // A miss (another size) makes up what the hits left undone.
    kept.push(pool.try_reserve(8 * KIB).unwrap());
    assert_eq!(pool.slices().visits - before, 11 * 4);
    // The ten reissued slices sit at the offsets of dropped ones, not past the tail.
    assert!(kept[..10].iter().all(|h| offset(&pool, h) < 160 * KIB));
}

/// Three neighbours dropped together and asked for again in slot order: each is found
/// in place (at the hint, or by a step that stops at it), so the next one is still
/// there for the next request (a step that went on would have released it, and the
/// placement index would have served it afresh).
#[test]
fn neighbours_dropped_together_come_back_in_place_one_step_each() {
    let (_storage, mut pool, mut handles) = three_slices();
    let free_before = pool.sliced_pages().free_bytes();
    handles.clear();
    let before = pool.slices().visits;
    let reissued = pool.slices().reissued;
    let again: Vec<_> = (0..3).map(|_| pool.try_reserve(4 * KIB).unwrap()).collect();
    let offsets: Vec<u64> = again.iter().map(|h| offset(&pool, h)).collect();
    assert_eq!(offsets, [0, 4 * KIB, 8 * KIB]);
    assert_eq!(pool.slices().reissued - reissued, 3);
    assert!(
        pool.slices().visits - before <= 3,
        "at most one slot visited per reservation"
    );
    assert_eq!(pool.sliced_pages().free_bytes(), free_before);
}

/// An inference loop: 50 tensors of 1 KiB to 16 MiB (log-uniform) reserved in order,
/// then all dropped, round after round. From the third round on every reservation is
/// the slice its size had the round before, handed out again in place: the round's
/// first requests must not release, by sweeping past them, the slices it asks for next.
#[test]
fn a_loop_that_drops_everything_and_asks_again_in_order_reuses_every_slice() {
    const MIB: u64 = 1 << 20;
    let mut storage = BytesStorage::default();
    let mut pool = super::adaptive::AdaptivePool::new(0, 2048 * MIB, 256);
    let mut seed: u64 = 0x5EED;
    let sizes: Vec<u64> = (0..50)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (seed >> 11) as f64 / (1u64 << 53) as f64;
            (KIB as f64 * (16384f64).powf(unit)) as u64
        })
        .collect();
    let mut offsets = Vec::new();
    for round in 0..6 {
        let before = pool.slices().reissued;
        let handles: Vec<ManagedMemoryHandle> = sizes
            .iter()
            .map(|&size| match pool.try_reserve(&mut storage, size) {
                Some(handle) => handle,
                None => pool.grow(&mut storage, size).unwrap(),
            })
            .collect();
        let round_offsets: Vec<(u64, u64)> = handles
            .iter()
            .map(|h| {
                let binding = h.clone().binding();
                let slice = pool.slices().find(&binding).unwrap();
                (slice.page as u64, slice.storage.offset())
            })
            .collect();
        if round >= 2 {
            assert_eq!(
                pool.slices().reissued - before,
                sizes.len(),
                "round {round}"
            );
            assert_eq!(round_offsets, offsets, "round {round} moved a tensor");
        }
        offsets = round_offsets;
        drop(handles);
    }
}
