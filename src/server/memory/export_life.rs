//! The life of an exported resource: each thread's submissions to a client, counted by
//! that thread, and what the last clone of an exported resource records when dropped
//! (see `exports`, steps 1 and 2).
//!
//! Every thread keeps, for each client it dropped an exported resource of, a
//! [`ThreadCount`]: the submissions it began and the highest one that returned (through
//! `ClientQueue::submit`, `Client::sync`, `Client::cleanup`,
//! `Client::install_memory_pools`). The table lives in a thread-local, holds at most
//! [`MAX_CLIENTS_PER_THREAD`] clients (dead clients pruned first) and marks every count
//! of the thread exited when the thread ends.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Clients one thread keeps a count for. Past it, clients no longer alive are pruned,
/// then the oldest count is let go as if its thread had exited: the holds of resources
/// the thread dropped for that client end at the next pass, without waiting for the
/// thread's next submission.
pub const MAX_CLIENTS_PER_THREAD: usize = 64;

/// Shared by a client and every resource it exports: its number in the threads' tables,
/// and a counter of changes that may end holds (any thread's counted submission
/// returning, or a counting thread's exit), which tells a pass over the holds whether
/// to look at them at all.
#[derive(Debug)]
pub(crate) struct ExportEpoch {
    client: u64,
    changes: AtomicU64,
}

impl Default for ExportEpoch {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            client: NEXT.fetch_add(1, Ordering::Relaxed),
            changes: AtomicU64::new(0),
        }
    }
}

impl ExportEpoch {
    /// Runs `submit` (a submission of the application's, or the submit of a sync,
    /// cleanup or install) as one counted submission of the calling thread: once it
    /// returned, the holds of every resource this thread dropped before `submit` began
    /// end at the next pass. A resource dropped while `submit` runs (in a wgpu callback)
    /// waits for the thread's next one.
    pub(crate) fn counted<T>(self: &Arc<Self>, submit: impl FnOnce() -> T) -> T {
        // A thread with no count for this client dropped none of its resources: there
        // is nothing to end.
        let began = with_count(self, false, |count| {
            (
                count.clone(),
                count.begun.fetch_add(1, Ordering::AcqRel) + 1,
            )
        });
        let result = submit();
        if let Some((count, number)) = began {
            count.returned.fetch_max(number, Ordering::AcqRel);
            self.changes.fetch_add(1, Ordering::AcqRel);
        }
        result
    }

    /// The changes so far (see the type's docs).
    pub(super) fn now(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
}

/// One thread's submissions to one client.
#[derive(Debug)]
pub(crate) struct ThreadCount {
    /// Submissions begun (written by the thread itself only).
    begun: AtomicU64,
    /// The number of the latest submission that returned (numbers start at 1).
    returned: AtomicU64,
    /// Set when the thread exits (or its table let the count go).
    exited: AtomicBool,
    /// The thread, for messages: its name and id.
    thread: String,
}

impl ThreadCount {
    fn new() -> Self {
        let current = std::thread::current();
        Self {
            begun: AtomicU64::new(0),
            returned: AtomicU64::new(0),
            exited: AtomicBool::new(false),
            thread: match current.name() {
                Some(name) => format!("'{name}' ({:?})", current.id()),
                None => format!("{:?}", current.id()),
            },
        }
    }
}

/// What the last clone of an exported resource recorded when it was dropped.
#[derive(Debug)]
pub(crate) enum Dropped {
    /// Dropped on a thread that had begun `begun` submissions: held until one begun
    /// later returns, or the thread exits.
    On { count: Arc<ThreadCount>, begun: u64 },
    /// Dropped while its thread was exiting: nothing recorded on it can be submitted
    /// by that thread any more.
    Ended,
}

impl Dropped {
    /// Whether the hold of a slice whose resource was dropped so has ended.
    pub(super) fn ended(&self) -> bool {
        match self {
            Dropped::On { count, begun } => {
                count.exited.load(Ordering::Acquire)
                    || count.returned.load(Ordering::Acquire) > *begun
            }
            Dropped::Ended => true,
        }
    }

    /// The thread the hold waits for, when it still waits.
    pub(super) fn waits_for(&self) -> Option<&str> {
        match self {
            Dropped::On { count, .. } if !self.ended() => Some(&count.thread),
            _ => None,
        }
    }
}

/// Carried by every clone of an exported [`HandleResource`](crate::server::HandleResource):
/// dropped with the last one, it records the dropping thread and how many submissions
/// that thread had begun.
#[derive(Debug)]
pub(crate) struct ExportLife {
    pub(super) epoch: Arc<ExportEpoch>,
    pub(super) dropped: Arc<OnceLock<Dropped>>,
}

impl Drop for ExportLife {
    fn drop(&mut self) {
        let mark = with_count(&self.epoch, true, |count| Dropped::On {
            count: count.clone(),
            begun: count.begun.load(Ordering::Acquire),
        })
        .unwrap_or(Dropped::Ended);
        let _ = self.dropped.set(mark);
    }
}

/// One thread's counts, by client.
#[derive(Default)]
struct ThreadCounts {
    entries: Vec<Entry>,
}

struct Entry {
    client: u64,
    epoch: Weak<ExportEpoch>,
    count: Arc<ThreadCount>,
}

impl Entry {
    /// The thread is done with this client: holds waiting for it end.
    fn let_go(&self) {
        self.count.exited.store(true, Ordering::Release);
        if let Some(epoch) = self.epoch.upgrade() {
            epoch.changes.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for ThreadCounts {
    fn drop(&mut self) {
        for entry in &self.entries {
            entry.let_go();
        }
    }
}

thread_local! {
    static COUNTS: RefCell<ThreadCounts> = RefCell::default();
}

/// Runs `f` on the calling thread's count for `epoch`'s client; with `make`, a count is
/// made when there is none. `None` when there is none (and `make` is off), or while the
/// thread is exiting (its table is gone).
fn with_count<T>(
    epoch: &Arc<ExportEpoch>,
    make: bool,
    f: impl FnOnce(&Arc<ThreadCount>) -> T,
) -> Option<T> {
    COUNTS
        .try_with(|counts| {
            let mut counts = counts.try_borrow_mut().ok()?;
            if let Some(entry) = counts
                .entries
                .iter()
                .find(|entry| entry.client == epoch.client)
            {
                return Some(f(&entry.count));
            }
            if !make {
                return None;
            }
            counts.make_room();
            let count = Arc::new(ThreadCount::new());
            let result = f(&count);
            counts.entries.push(Entry {
                client: epoch.client,
                epoch: Arc::downgrade(epoch),
                count,
            });
            Some(result)
        })
        .ok()
        .flatten()
}

impl ThreadCounts {
    /// Leaves room for one more entry: prunes dead clients, then lets the oldest go.
    fn make_room(&mut self) {
        if self.entries.len() < MAX_CLIENTS_PER_THREAD {
            return;
        }
        self.entries.retain(|entry| entry.epoch.strong_count() > 0);
        if self.entries.len() >= MAX_CLIENTS_PER_THREAD {
            let oldest = self.entries.remove(0);
            oldest.let_go();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(epoch: &Arc<ExportEpoch>) -> (ExportLife, Arc<OnceLock<Dropped>>) {
        let dropped = Arc::new(OnceLock::new());
        let life = ExportLife {
            epoch: epoch.clone(),
            dropped: dropped.clone(),
        };
        (life, dropped)
    }

    fn ended(dropped: &OnceLock<Dropped>) -> bool {
        dropped.get().expect("dropped").ended()
    }

    #[test]
    fn a_hold_ends_only_at_the_dropping_threads_next_submission() {
        let epoch = Arc::new(ExportEpoch::default());
        epoch.counted(|| ());
        let (life, dropped) = exported(&epoch);
        assert!(dropped.get().is_none(), "alive");
        drop(life);
        assert!(!ended(&dropped));
        // Another thread's submission, sync or cleanup does not end it.
        let (other, done) = (epoch.clone(), std::sync::mpsc::channel::<()>());
        let (stay, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let (life, _) = exported(&other);
            drop(life);
            other.counted(|| ());
            done.0.send(()).unwrap();
            wait.recv().unwrap();
        });
        done.1.recv().unwrap();
        assert!(!ended(&dropped), "another thread's submission ended it");
        let before = epoch.now();
        epoch.counted(|| ());
        assert!(ended(&dropped));
        assert!(epoch.now() > before, "a pass looks again");
        stay.send(()).unwrap();
        thread.join().unwrap();
    }

    #[test]
    fn a_resource_dropped_during_a_submission_waits_for_the_next() {
        let epoch = Arc::new(ExportEpoch::default());
        let (first, first_dropped) = exported(&epoch);
        drop(first);
        let (inside, inside_dropped) = exported(&epoch);
        epoch.counted(|| drop(inside));
        assert!(ended(&first_dropped));
        assert!(
            !ended(&inside_dropped),
            "ended by the submission it was dropped in"
        );
        epoch.counted(|| ());
        assert!(ended(&inside_dropped));
    }

    #[test]
    fn a_threads_exit_ends_its_holds_and_names_it_until_then() {
        let epoch = Arc::new(ExportEpoch::default());
        let (sender, receiver) = std::sync::mpsc::channel();
        let (stay, wait) = std::sync::mpsc::channel::<()>();
        let inner = epoch.clone();
        let thread = std::thread::Builder::new()
            .name("exporter".into())
            .spawn(move || {
                let (life, dropped) = exported(&inner);
                drop(life);
                sender.send(dropped).unwrap();
                wait.recv().unwrap();
            })
            .unwrap();
        let dropped = receiver.recv().unwrap();
        assert!(!ended(&dropped));
        let waits = dropped.get().unwrap().waits_for().unwrap().to_string();
        assert!(waits.contains("'exporter'"), "{waits}");
        let before = epoch.now();
        stay.send(()).unwrap();
        thread.join().unwrap();
        assert!(ended(&dropped), "the thread exited");
        assert!(epoch.now() > before, "a pass looks again");
    }

    #[test]
    fn a_threads_table_is_bounded_and_prunes_dead_clients_first() {
        // Dead clients make room without ending anything.
        for _ in 0..2 * MAX_CLIENTS_PER_THREAD {
            let epoch = Arc::new(ExportEpoch::default());
            drop(exported(&epoch).0);
        }
        let kept = Arc::new(ExportEpoch::default());
        let (life_kept, dropped) = exported(&kept);
        drop(life_kept);
        let live: Vec<_> = (0..MAX_CLIENTS_PER_THREAD - 1)
            .map(|_| Arc::new(ExportEpoch::default()))
            .collect();
        for epoch in &live {
            drop(exported(epoch).0);
        }
        assert!(!ended(&dropped), "pruning dead clients let a live one go");
        // One more live client: the oldest count is let go.
        let last = Arc::new(ExportEpoch::default());
        drop(exported(&last).0);
        assert!(ended(&dropped), "past the bound the oldest is let go");
        let size = COUNTS.with(|counts| counts.borrow().entries.len());
        assert!(size <= MAX_CLIENTS_PER_THREAD, "{size}");
    }
}
