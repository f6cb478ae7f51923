//! Work bounds of the sweeps for dropped handles, counted in slots visited (never timed):
//! a reservation visits a bounded number of slots on average however many slices live,
//! in each pool shape, including the moments a pool grows. Each test first fills the
//! table past [`CATCH_UP_WHOLE`] (below it, growth sweeps every slot by design) and
//! then counts.

use super::adaptive::AdaptivePool;
use super::sliced::SlicedPool;
use super::slices::{CATCH_UP_RATIO, CATCH_UP_WHOLE, POLL_LIMIT, SliceTable};
use super::whole_page::{Release, Reuse, WholePagePool};
use crate::storage::BytesStorage;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryPoolKind};

const KIB: u64 = 1 << 10;

/// The most slots a reservation may visit on average: a step, a poll, and the catch-up
/// sweeps before growth (a poll each, plus every slot once per `len / CATCH_UP_RATIO`
/// reservations, twice when try_reserve and grow both catch up).
const BOUND: usize = 4 + 3 * POLL_LIMIT + 2 * CATCH_UP_RATIO;

fn visits_per_reservation(table: &SliceTable, before: usize, reservations: usize) -> usize {
    (table.visits - before) / reservations
}

/// Weights loaded one by one into the persistent pool, every one a new page: before,
/// each miss swept every live slot (quadratic in the model's size).
#[test]
fn loading_many_weights_visits_a_bounded_number_of_slots_each() {
    let mut storage = BytesStorage::default();
    let mut pool = WholePagePool::new(
        255,
        MemoryPoolKind::Persistent,
        1 << 30,
        256,
        Reuse::Exact,
        Release::Explicit,
    );
    let mut weights: Vec<ManagedMemoryHandle> = Vec::new();
    let mut load = |count: usize| {
        for _ in 0..count {
            let now = weights.len() as u64;
            let size = 256 * (1 + now % 7);
            let handle = match pool.try_reserve(size, now) {
                Some(handle) => handle,
                None => pool.grow(&mut storage, size, now).unwrap(),
            };
            weights.push(handle);
        }
        pool.slices().visits
    };
    let before = load(2 * CATCH_UP_WHOLE);
    let count = 8192;
    let per = (load(count) - before) / count;
    assert!(
        per <= BOUND,
        "{per} slots visited per reservation (bound {BOUND})"
    );
}

/// Field scenario C25's shape, made to grow on every reservation: a fragmented page
/// that no request fits (1 KiB holes), then thousands of kept reservations of 40 KiB on
/// 64 KiB pages, each one a failed placement and a new page. Before, every failed
/// placement swept every slot.
#[test]
fn failed_placements_visit_a_bounded_number_of_slots_each() {
    let mut storage = BytesStorage::default();
    let mut pool = SlicedPool::new(0, 64 * KIB, 64 * KIB, None, 256);
    let reserve =
        |pool: &mut SlicedPool, storage: &mut BytesStorage, size| match pool.try_reserve(size) {
            Some(handle) => handle,
            None => pool.grow(storage, size).unwrap(),
        };
    let mut holes: Vec<_> = (0..64)
        .map(|_| reserve(&mut pool, &mut storage, KIB))
        .collect();
    let mut index = 0;
    holes.retain(|_| {
        index += 1;
        index % 2 == 0
    });
    let count = 4096;
    let mut kept: Vec<_> = (0..2 * CATCH_UP_WHOLE)
        .map(|_| reserve(&mut pool, &mut storage, 40 * KIB))
        .collect();
    let before = pool.slices().visits;
    kept.extend((0..count).map(|_| reserve(&mut pool, &mut storage, 40 * KIB)));
    assert_eq!(pool.report().pages, 1 + kept.len() as u64);
    let per = visits_per_reservation(pool.slices(), before, count);
    assert!(
        per <= BOUND,
        "{per} slots visited per reservation (bound {BOUND})"
    );
}

/// The adaptive pool's huge band (over a sixteenth of the largest page): its pages hold
/// about ten of these kept reservations, so the pool grows every tenth one.
#[test]
fn a_growing_adaptive_pool_visits_a_bounded_number_of_slots_each() {
    let mut storage = BytesStorage::default();
    let mut pool = AdaptivePool::new(0, 512 * KIB, 256);
    let reserve = |pool: &mut AdaptivePool, storage: &mut BytesStorage| match pool
        .try_reserve(storage, 48 * KIB)
    {
        Some(handle) => handle,
        None => pool.grow(storage, 48 * KIB).unwrap(),
    };
    let mut kept: Vec<_> = (0..2 * CATCH_UP_WHOLE)
        .map(|_| reserve(&mut pool, &mut storage))
        .collect();
    let count = 4096;
    let before = pool.slices().visits;
    kept.extend((0..count).map(|_| reserve(&mut pool, &mut storage)));
    assert!(pool.report().pages >= kept.len() as u64 / 16);
    let per = visits_per_reservation(pool.slices(), before, count);
    assert!(
        per <= BOUND,
        "{per} slots visited per reservation (bound {BOUND})"
    );
}
