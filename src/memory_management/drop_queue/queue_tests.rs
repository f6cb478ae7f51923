//! The drop queue's lifecycle against a fake device whose fences pass, fail or lose it.

use super::FlushingPolicy;
use super::{Fence, FenceError, PendingDropQueue};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a fake fence's wait reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Lost,
}

/// A fake device: numbers the fences it makes and records which ones were waited on.
#[derive(Default)]
struct Device {
    made: AtomicUsize,
    waits: Arc<Mutex<Vec<usize>>>,
}

struct FakeFence {
    id: usize,
    outcome: Outcome,
    waits: Arc<Mutex<Vec<usize>>>,
}

impl Fence for FakeFence {
    fn wait(self) -> Result<(), FenceError> {
        self.waits.lock().unwrap().push(self.id);
        match self.outcome {
            Outcome::Passed => Ok(()),
            Outcome::Failed => Err(FenceError::Failed {
                message: "timeout".into(),
            }),
            Outcome::Lost => Err(FenceError::DeviceLost {
                message: "lost".into(),
            }),
        }
    }
}

impl Device {
    /// A factory whose fences report `outcome` when waited on.
    fn fence(&self, outcome: Outcome) -> impl FnMut() -> FakeFence + '_ {
        move || FakeFence {
            id: self.made.fetch_add(1, Ordering::SeqCst),
            outcome,
            waits: Arc::clone(&self.waits),
        }
    }

    fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }

    fn waits(&self) -> Vec<usize> {
        self.waits.lock().unwrap().clone()
    }
}

/// An item whose drop is counted.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn drops() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

fn count(drops: &Arc<AtomicUsize>) -> usize {
    drops.load(Ordering::SeqCst)
}

#[test]
fn nothing_is_freed_before_its_fence() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    for _ in 0..5 {
        queue.push(Tracked(Arc::clone(&dropped)), 16);
    }
    assert_eq!((queue.staged_len(), queue.staged_bytes()), (5, 80));

    // First flush: moves to pending and makes a fence, waits on nothing.
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(count(&dropped), 0, "freed before its fence");
    assert_eq!(device.made(), 1);
    assert!(device.waits().is_empty());
    assert_eq!((queue.staged_len(), queue.pending_len()), (0, 5));
    assert_eq!(queue.staged_bytes(), 0);

    // A new item lands in staged while the first batch is pending.
    queue.push(Tracked(Arc::clone(&dropped)), 16);

    // Second flush: waits exactly once, on fence 0, and frees the 5.
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(device.waits(), vec![0]);
    assert_eq!(count(&dropped), 5);
    assert_eq!((queue.staged_len(), queue.pending_len()), (0, 1));
    assert_eq!(device.made(), 2);

    // Third flush frees the last one.
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(device.waits(), vec![0, 1]);
    assert_eq!(count(&dropped), 6);
    assert_eq!(queue.pending_len(), 0);
    assert_eq!(queue.leaked(), 0);
}

#[test]
fn idle_flush_makes_no_fence() {
    let device = Device::default();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    for _ in 0..3 {
        queue.flush(device.fence(Outcome::Passed));
    }
    assert_eq!(device.made(), 0, "factory called on an idle queue");
    assert!(device.waits().is_empty());

    // Once the last batch is freed the queue is idle again: no new fence.
    let dropped = drops();
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    queue.flush(device.fence(Outcome::Passed));
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(count(&dropped), 1);
    assert_eq!(device.made(), 1);
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(device.made(), 1, "fence made after the queue went idle");
    assert_eq!(device.waits(), vec![0]);
}

#[test]
fn n_flushes_wait_n_minus_one_times() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    let flushes = 7;
    for _ in 0..flushes {
        queue.push(Tracked(Arc::clone(&dropped)), 8);
        queue.flush(device.fence(Outcome::Passed));
    }
    assert_eq!(device.made(), flushes);
    assert_eq!(device.waits(), (0..flushes - 1).collect::<Vec<_>>());
    assert_eq!(count(&dropped), flushes - 1);
    assert_eq!(queue.pending_len(), 1);
}

#[test]
fn failed_fence_wait_keeps_the_memory() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push(Tracked(Arc::clone(&dropped)), 4096);
    queue.flush(device.fence(Outcome::Failed));
    queue.flush(device.fence(Outcome::Failed));

    assert_eq!(device.waits(), vec![0]);
    assert_eq!(count(&dropped), 0, "freed although the fence wait failed");
    assert_eq!(queue.leaked(), 1);
    assert_eq!(queue.pending_len(), 0);

    // The queue goes on working: the next batch is freed on a passed fence.
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    queue.drain(device.fence(Outcome::Passed));
    assert_eq!(count(&dropped), 1);
    assert_eq!(queue.leaked(), 1);
}

#[test]
fn lost_device_frees_the_memory() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push(Tracked(Arc::clone(&dropped)), 4096);
    queue.push(Tracked(Arc::clone(&dropped)), 4096);
    queue.flush(device.fence(Outcome::Lost));
    assert_eq!(count(&dropped), 0);
    queue.flush(device.fence(Outcome::Lost));
    assert_eq!(device.waits(), vec![0]);
    assert_eq!(count(&dropped), 2);
    assert_eq!(queue.leaked(), 0);
}

#[test]
fn drain_releases_everything() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    for _ in 0..3 {
        queue.push(Tracked(Arc::clone(&dropped)), 10);
    }
    queue.flush(device.fence(Outcome::Passed));
    for _ in 0..2 {
        queue.push(Tracked(Arc::clone(&dropped)), 10);
    }
    assert_eq!((queue.pending_len(), queue.staged_len()), (3, 2));

    queue.drain(device.fence(Outcome::Passed));
    assert_eq!(count(&dropped), 5);
    assert_eq!((queue.pending_len(), queue.staged_len()), (0, 0));
    assert_eq!(queue.staged_bytes(), 0);
    assert_eq!(device.made(), 2);
    assert_eq!(device.waits(), vec![0, 1]);
    assert_eq!(queue.leaked(), 0);
}

#[test]
fn drain_on_an_idle_queue_makes_no_fence() {
    let device = Device::default();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.drain(device.fence(Outcome::Passed));
    assert_eq!(device.made(), 0);
    assert_eq!((queue.pending_len(), queue.staged_len()), (0, 0));
}

#[test]
fn should_flush_after_64_entries_or_64_mib() {
    let device = Device::default();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    for _ in 0..63 {
        queue.push([0u8; 4], 4);
    }
    assert!(!queue.should_flush(), "63 entries");
    queue.push([0u8; 4], 4);
    assert!(queue.should_flush(), "64 entries");
    queue.flush(device.fence(Outcome::Passed));
    assert!(!queue.should_flush(), "counters not reset by flush");

    queue.push(Vec::<u8>::new(), 64 * 1024 * 1024 - 1);
    assert!(!queue.should_flush(), "one byte under 64 MiB");
    queue.push(Vec::<u8>::new(), 1);
    assert!(queue.should_flush(), "64 MiB");
    assert_eq!(queue.staged_bytes(), 64 * 1024 * 1024);
}

#[test]
fn custom_policy_is_used() {
    let policy = FlushingPolicy::new(2, u64::MAX);
    let mut queue = PendingDropQueue::<FakeFence>::new(policy);
    assert_eq!(queue.policy(), policy);
    queue.push((), 0);
    assert!(!queue.should_flush());
    queue.push((), 0);
    assert!(queue.should_flush());
}

#[test]
fn byte_counter_saturates() {
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push((), u64::MAX);
    queue.push((), u64::MAX);
    assert_eq!(queue.staged_bytes(), u64::MAX);
    assert!(queue.should_flush());
}

#[test]
fn safety_net_after_a_panicking_factory() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push(Tracked(Arc::clone(&dropped)), 1);

    let panicked = catch_unwind(AssertUnwindSafe(|| {
        queue.flush(|| -> FakeFence { panic!("factory failed") });
    }));
    assert!(panicked.is_err());
    assert_eq!(queue.pending_len(), 1, "pending without a fence");
    assert_eq!((queue.staged_len(), queue.staged_bytes()), (0, 0));
    assert_eq!(count(&dropped), 0);

    // Next flush: one fresh fence, waited at once, covers pending and staged alike.
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    queue.flush(device.fence(Outcome::Passed));
    assert_eq!(device.made(), 1);
    assert_eq!(device.waits(), vec![0]);
    assert_eq!(count(&dropped), 2);
    assert_eq!((queue.pending_len(), queue.staged_len()), (0, 0));
    assert!(!queue.should_flush());
}

#[test]
fn safety_net_with_a_failed_wait_leaks_both_batches() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        queue.flush(|| -> FakeFence { panic!("factory failed") });
    }));
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    queue.flush(device.fence(Outcome::Failed));
    assert_eq!(count(&dropped), 0);
    assert_eq!(queue.leaked(), 2);
    assert_eq!((queue.pending_len(), queue.staged_len()), (0, 0));
}

#[test]
fn sync_is_true_for_passed_and_lost_false_for_failed() {
    let device = Device::default();
    assert!(device.fence(Outcome::Passed)().sync());
    assert!(device.fence(Outcome::Lost)().sync());
    assert!(!device.fence(Outcome::Failed)().sync());
    assert_eq!(device.waits(), vec![0, 1, 2]);
}

#[test]
fn fence_errors_say_what_happened() {
    let lost = FenceError::DeviceLost {
        message: "gone".into(),
    };
    let failed = FenceError::Failed {
        message: "timeout".into(),
    };
    assert_eq!(
        lost.to_string(),
        "the device was lost before the fence was reached: gone"
    );
    assert_eq!(failed.to_string(), "waiting on the fence failed: timeout");
}

#[test]
fn dropping_the_queue_drops_what_it_holds() {
    let device = Device::default();
    let dropped = drops();
    let mut queue = PendingDropQueue::<FakeFence>::default();
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    queue.flush(device.fence(Outcome::Passed));
    queue.push(Tracked(Arc::clone(&dropped)), 1);
    drop(queue);
    assert_eq!(count(&dropped), 2);
}

#[test]
fn queue_is_send_when_its_fence_is() {
    fn assert_send<T: Send>() {}
    assert_send::<PendingDropQueue<FakeFence>>();
    let queue = PendingDropQueue::<FakeFence>::default();
    assert_eq!(queue.leaked(), 0);
    assert!(format!("{queue:?}").contains("PendingDropQueue"));
}
