//! The background poller: completes `map_async` callbacks without the caller polling.
//!
//! 1. Whoever requests a map after a submission registers it with [`Poller::expect`],
//!    naming the submission. The returned [`Expectation`] travels into the map callback
//!    and is dropped when the callback runs, so the poller counts exactly the maps whose
//!    callback has not run yet.
//! 2. While any map is expected the thread waits for the oldest one's submission with an
//!    untimed `device.poll(Wait)`: it sleeps in the driver until the
//!    device answers, then wgpu runs the callbacks. No timed waits: a timed wait raced
//!    with cleanup inside wgpu-core 30.0.2 (fixed upstream in gfx-rs/wgpu PR #9958, not
//!    released in 30.x), and an untimed one never takes that path.
//! 3. With nothing expected the thread sleeps on a condition variable: an idle client, or
//!    a read nobody awaits once its map completed, costs no CPU.
//! 4. Work that must not run inside a wgpu callback (unmapping a read nobody awaits any
//!    more) is handed over with [`Poller::defer`] and runs on the thread after its poll.
//! 5. A panic inside wgpu is caught and logged; the thread goes on after a short pause. If
//!    the thread ever ends, [`Poller::alive`] turns false and readers poll for themselves.
//!
//! The thread takes none of the client's locks, so polling never blocks threads that
//! submit, and a callback that calls the client does not deadlock.

use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::Duration;

thread_local! {
    /// On the poller thread while it polls: the readers to wake once the poll returned.
    static WAKE_AFTER_POLL: RefCell<Option<Vec<Waker>>> = const { RefCell::new(None) };
}

/// Wakes a reader whose map completed. On the poller thread the wake waits until the
/// poll returns: wgpu runs every callback of that poll first, the device-lost callback
/// included (after the map callbacks), so the reader sees a loss the same poll found.
pub(crate) fn wake(waker: Waker) {
    let waker = WAKE_AFTER_POLL.with(|later| match later.borrow_mut().as_mut() {
        Some(list) => {
            list.push(waker);
            None
        }
        None => Some(waker),
    });
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// A job run on the poller thread (outside every wgpu callback and every lock of ours).
pub(crate) type Deferred = Box<dyn FnOnce() + Send>;

/// Bound on the pause after a poll that made no progress or failed: long enough not to
/// spin, short enough that a late callback is seen quickly.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

#[derive(Default)]
struct State {
    /// Maps requested whose callback has not run, by ticket (oldest first), with the
    /// submission each waits behind. One entry per read in flight.
    expected: BTreeMap<u64, wgpu::SubmissionIndex>,
    next_ticket: u64,
    /// Jobs for the thread; at most one per abandoned read in flight.
    deferred: Vec<Deferred>,
    stop: bool,
}

struct Shared {
    device: wgpu::Device,
    state: Mutex<State>,
    wake: Condvar,
    alive: AtomicBool,
}

/// The poller thread of one client.
pub(crate) struct Poller {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// One map whose callback has not run yet; dropping it (in the callback) tells the
/// poller.
pub(crate) struct Expectation {
    shared: Arc<Shared>,
    ticket: u64,
}

impl Poller {
    pub(crate) fn new(device: wgpu::Device) -> Self {
        let shared = Arc::new(Shared {
            device,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            alive: AtomicBool::new(true),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wgpu-memory poller".to_string())
            .spawn(move || {
                let _alive = AliveFlag(&thread_shared);
                run(&thread_shared)
            })
            .ok();
        if thread.is_none() {
            shared.alive.store(false, Ordering::Release);
            tracing::warn!("could not start the poller thread: reads will poll while awaited");
        }
        Self { shared, thread }
    }

    /// Whether the thread runs; when it does not, awaited reads poll the device
    /// themselves.
    pub(crate) fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::Acquire)
    }

    /// Registers a map requested after `submission`: the thread polls until the returned
    /// expectation is dropped.
    pub(crate) fn expect(&self, submission: wgpu::SubmissionIndex) -> Expectation {
        let mut state = self.shared.state.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.expected.insert(ticket, submission);
        drop(state);
        self.shared.wake.notify_one();
        Expectation {
            shared: self.shared.clone(),
            ticket,
        }
    }

    /// A handle that can defer jobs from inside a callback without keeping the poller
    /// alive.
    pub(crate) fn deferrer(&self) -> Deferrer {
        Deferrer {
            shared: Arc::downgrade(&self.shared),
        }
    }
}

/// Defers jobs to a poller from a map callback (see [`Poller::defer`]).
#[derive(Clone)]
pub(crate) struct Deferrer {
    shared: std::sync::Weak<Shared>,
}

impl Deferrer {
    /// Runs `job` on the poller thread, or here when the poller is gone.
    pub(crate) fn defer(&self, job: Deferred) {
        match self.shared.upgrade() {
            Some(shared) => defer_on(&shared, job),
            None => job(),
        }
    }
}

fn defer_on(shared: &Shared, job: Deferred) {
    if !shared.alive.load(Ordering::Acquire) {
        job();
        return;
    }
    shared.state.lock().deferred.push(job);
    shared.wake.notify_one();
}

impl Drop for Expectation {
    fn drop(&mut self) {
        self.shared.state.lock().expected.remove(&self.ticket);
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Jobs left behind (the thread stopped first) still run.
        let jobs = std::mem::take(&mut self.shared.state.lock().deferred);
        jobs.into_iter().for_each(|job| job());
    }
}

/// Marks the poller dead when its thread ends, however it ends.
struct AliveFlag<'a>(&'a Shared);

impl Drop for AliveFlag<'_> {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
        if std::thread::panicking() {
            tracing::error!("the poller thread panicked: reads now poll for themselves");
        }
    }
}

fn run(shared: &Shared) {
    let mut backoff = Duration::ZERO;
    loop {
        let (jobs, oldest) = {
            let mut state = shared.state.lock();
            while state.expected.is_empty() && state.deferred.is_empty() && !state.stop {
                shared.wake.wait(&mut state);
            }
            if state.stop {
                return;
            }
            if !backoff.is_zero() {
                // No progress last time: pause without spinning; a new expectation or
                // job ends the pause early.
                shared.wake.wait_for(&mut state, backoff);
            }
            // The oldest map first: each reader is woken as soon as its own submission
            // is done, not behind later work.
            let oldest = state.expected.values().next().cloned();
            (std::mem::take(&mut state.deferred), oldest)
        };
        jobs.into_iter().for_each(|job| job());
        let Some(oldest) = oldest else {
            backoff = Duration::ZERO;
            continue;
        };
        let before = shared.state.lock().expected.len();
        WAKE_AFTER_POLL.with(|later| *later.borrow_mut() = Some(Vec::new()));
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            shared.device.poll(wgpu::PollType::Wait {
                submission_index: Some(oldest),
                timeout: None,
            })
        }));
        let wakers = WAKE_AFTER_POLL.with(|later| later.borrow_mut().take());
        wakers.into_iter().flatten().for_each(Waker::wake);
        let progressed = shared.state.lock().expected.len() < before;
        backoff = match polled {
            Ok(Ok(_)) if progressed => Duration::ZERO,
            Ok(Ok(_)) => next_backoff(backoff),
            Ok(Err(error)) => {
                tracing::warn!(%error, "device poll failed; retrying after a pause");
                next_backoff(backoff)
            }
            Err(_) => {
                tracing::error!("device poll panicked inside wgpu; retrying after a pause");
                next_backoff(backoff)
            }
        };
    }
}

fn next_backoff(backoff: Duration) -> Duration {
    (backoff * 2)
        .max(Duration::from_micros(500))
        .min(MAX_BACKOFF)
}
