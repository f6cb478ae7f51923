//! The background poller: completes `map_async` callbacks without the caller polling.
//!
//! 1. Whoever requests a map after a submission registers it with [`Poller::expect`],
//!    naming the submission. The returned [`Expectation`] travels into the map callback
//!    and is dropped when the callback runs, so the poller counts exactly the maps whose
//!    callback has not run yet. A reader that waits registers its waker beside it
//!    ([`Poller::park`]).
//! 2. While any map is expected the thread waits for the oldest one's submission with an
//!    untimed `device.poll(Wait)`: it sleeps in the driver until the
//!    device answers, then wgpu runs the callbacks. No timed waits: a timed wait raced
//!    with cleanup inside wgpu-core 30.0.2 (fixed upstream in gfx-rs/wgpu PR #9958, not
//!    released in 30.x), and an untimed one never takes that path.
//! 3. With nothing expected the thread sleeps on a condition variable: an idle client, or
//!    a read nobody awaits once its map completed, costs no CPU.
//! 4. Work that must not run inside a wgpu callback (unmapping a read nobody awaits any
//!    more) is handed over with [`Deferrer::defer`] and runs on the thread after its
//!    poll.
//! 5. A panic inside wgpu, a deferred job or a waker is caught and logged; the thread
//!    goes on after a short pause. If the thread ever ends, [`Poller::alive`] turns
//!    false, every parked reader is woken, and readers poll for themselves.
//! 6. A change (a new map expected, a job, a stop) made while the thread polls is seen
//!    when the poll returns: the thread then goes round again without pausing.
//! 7. A reader whose read failed while the thread polls may wait for that poll to
//!    return ([`Poller::wake_after_poll`]): the poll whose maintenance finds a destroyed
//!    device's queue empty destroys the device's buffers, staging pages already mapped
//!    included, and only after it runs the map callbacks does wgpu run the device-lost
//!    callback, so the loss is recorded once that poll returned.
//!
//! On the web (wasm32) there is no thread: the browser polls the device, and a map
//! callback runs from its event loop, which runs while the awaited read is pending; the
//! callback wakes the read. [`Poller::alive`] is false there, jobs run in the callback
//! (no lock of ours is held while the event loop runs), and parked readers are still
//! woken by [`Poller::wake_all`] on a lost device.
//!
//! The thread takes none of the client's locks, so polling never blocks threads that
//! submit. wgpu runs application callbacks on this thread too (inside its poll); one that
//! calls the client does not deadlock: a read awaited there polls the device itself
//! instead of waiting for this thread ([`reads_poll_inline`]), as does a read awaited by
//! a thread holding the client's submit turn (inside the client's own `queue.submit`,
//! where this thread may be waiting for that turn), and a client dropped there stops
//! the thread without joining it.
//!
//! While the thread waits, wgpu-core 30 holds the device's snatch lock for reading, so
//! `Buffer::destroy`, `Texture::destroy`, `Device::destroy` and surface `present()` on
//! any thread wait until the oldest pending read's submission is done. That wait is
//! bounded by the GPU work queued before that read, and the thread only waits while a
//! read is pending (the wait cannot be interrupted without a timed poll, see step 2).

use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;
use std::thread::JoinHandle;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Duration;

thread_local! {
    /// On the poller thread while it polls: the readers to wake once the poll returned.
    static WAKE_AFTER_POLL: RefCell<Option<Vec<Waker>>> = const { RefCell::new(None) };
    /// Set on a poller thread for its whole life.
    static ON_POLLER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a client's poller thread, where wgpu runs callbacks
/// (the application's included) inside the poller's poll: a read awaited there must
/// poll the device itself, since the only thread that would is the one waiting.
pub(crate) fn on_poller_thread() -> bool {
    ON_POLLER.with(std::cell::Cell::get)
}

thread_local! {
    /// How many client submit turns the calling thread holds.
    static TURNS_HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether a read awaited on the calling thread must poll the device itself rather than
/// wait for the poller thread: on the poller thread, and on a thread that holds a
/// client's submit turn (wgpu runs callbacks inside `queue.submit`; the poller thread may
/// be running another callback that waits for that turn).
pub(crate) fn reads_poll_inline() -> bool {
    on_poller_thread() || TURNS_HELD.with(|held| held.get() > 0)
}

/// Marks the calling thread as holding a submit turn while alive (see
/// [`reads_poll_inline`]).
pub(crate) struct TurnHeld(());

impl TurnHeld {
    pub(crate) fn enter() -> Self {
        TURNS_HELD.with(|held| held.set(held.get() + 1));
        Self(())
    }
}

impl Drop for TurnHeld {
    fn drop(&mut self) {
        TURNS_HELD.with(|held| held.set(held.get().saturating_sub(1)));
    }
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

#[cfg(not(target_arch = "wasm32"))]
/// The poller thread's name.
pub(crate) const THREAD_NAME: &str = "wgpu-memory poller";

/// The poller thread's name (tests tell it from other threads by it).
#[cfg(test)]
pub(crate) fn poller_thread_name() -> &'static str {
    THREAD_NAME
}

#[cfg(not(target_arch = "wasm32"))]
/// Bound on the pause after a poll that made no progress or failed: long enough not to
/// spin, short enough that a late callback is seen quickly.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

#[derive(Default)]
struct State {
    /// Maps requested whose callback has not run, by ticket (oldest first), with the
    /// submission each waits behind and the waker of a reader waiting on it. One entry
    /// per read in flight.
    expected: BTreeMap<u64, (wgpu::SubmissionIndex, Option<Waker>)>,
    next_ticket: u64,
    /// Jobs for the thread; at most one per abandoned read in flight.
    deferred: Vec<Deferred>,
    stop: bool,
    /// Bumped by every change the thread must see (expectation, job, stop); compared
    /// across a poll, so a notify sent while the thread polled is not lost.
    changes: u64,
    /// Whether the thread is inside `device.poll`.
    polling: bool,
    /// A test stands in for a poll in progress ([`Poller::as_if_polling`]): the thread's
    /// own polls returning meanwhile do not end it (without this, a real poll returning
    /// on a loaded machine cleared `polling` in the middle of the test's). Always false
    /// outside tests.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    standing_in: bool,
    /// Readers to wake when the poll in progress returns, by their map's ticket: at most
    /// one per read in flight ([`Poller::wake_after_poll`]).
    after_poll: BTreeMap<u64, Waker>,
}

struct Shared {
    /// Polled by the thread (there is none on the web).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
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
        // The web has one thread and the browser polls the device itself: map callbacks
        // run from its event loop while awaited reads are pending, so no thread is
        // started there.
        #[cfg(target_arch = "wasm32")]
        let thread = None;
        #[cfg(not(target_arch = "wasm32"))]
        let thread = {
            let thread_shared = shared.clone();
            std::thread::Builder::new()
                .name(THREAD_NAME.to_string())
                .spawn(move || {
                    ON_POLLER.with(|on| on.set(true));
                    let _alive = AliveFlag(&thread_shared);
                    run(&thread_shared)
                })
                .ok()
        };
        if thread.is_none() {
            shared.alive.store(false, Ordering::Release);
            #[cfg(not(target_arch = "wasm32"))]
            tracing::warn!("could not start the poller thread: reads will poll while awaited");
        }
        Self { shared, thread }
    }

    /// Whether the thread runs; when it does not, awaited reads poll the device
    /// themselves.
    pub(crate) fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// Registers a map requested after `submission`: the thread polls until the returned
    /// expectation is dropped.
    pub(crate) fn expect(&self, submission: wgpu::SubmissionIndex) -> Expectation {
        let mut state = self.shared.state.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.expected.insert(ticket, (submission, None));
        state.changes += 1;
        drop(state);
        self.shared.wake.notify_one();
        Expectation {
            shared: self.shared.clone(),
            ticket,
        }
    }

    /// Parks `waker` beside the expected map `ticket`: it is woken if the thread ends or
    /// [`wake_all`](Self::wake_all) is called before the map completes. Returns false
    /// when the map already completed (nothing is parked). The latest waker replaces an
    /// earlier one, so at most one is held per read in flight.
    pub(crate) fn park(&self, ticket: u64, waker: &Waker) -> bool {
        let mut state = self.shared.state.lock();
        match state.expected.get_mut(&ticket) {
            Some((_, parked)) => {
                *parked = Some(waker.clone());
                true
            }
            None => false,
        }
    }

    /// Readers parked now (tests wait for a reader to park).
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        let state = self.shared.state.lock();
        state
            .expected
            .values()
            .filter(|(_, waker)| waker.is_some())
            .count()
    }

    /// Wakes `waker` once the poll the thread is in now returned (with the callbacks
    /// that poll ran, the device-lost callback included), for the read of map `ticket`
    /// (a later call for the same ticket replaces the waker). Returns false when the
    /// thread is not polling or is gone: nothing is then parked.
    pub(crate) fn wake_after_poll(&self, ticket: u64, waker: &Waker) -> bool {
        let mut state = self.shared.state.lock();
        if !state.polling || !self.alive() {
            return false;
        }
        state.after_poll.insert(ticket, waker.clone());
        true
    }

    /// Whether the reader of map `ticket` still waits for the poll it waited for (see
    /// [`wake_after_poll`](Self::wake_after_poll)); if so `waker` replaces its waker.
    pub(crate) fn still_after_poll(&self, ticket: u64, waker: &Waker) -> bool {
        match self.shared.state.lock().after_poll.get_mut(&ticket) {
            Some(parked) => {
                parked.clone_from(waker);
                true
            }
            None => false,
        }
    }

    /// Runs `work` as if the thread were inside a poll (see
    /// [`wake_after_poll`](Self::wake_after_poll)), for tests that complete a map or
    /// record a loss there; the readers parked meanwhile are woken afterwards.
    #[cfg(test)]
    pub(crate) fn as_if_polling<R>(&self, work: impl FnOnce() -> R) -> R {
        {
            let mut state = self.shared.state.lock();
            state.polling = true;
            state.standing_in = true;
        }
        let result = work();
        self.shared.state.lock().standing_in = false;
        poll_returned(&self.shared);
        result
    }

    /// Wakes every parked reader (the device was lost: they look at the loss).
    pub(crate) fn wake_all(&self) {
        wake_parked(&self.shared);
    }

    /// A handle that can defer jobs from inside a callback without keeping the poller
    /// alive.
    pub(crate) fn deferrer(&self) -> Deferrer {
        Deferrer {
            shared: Arc::downgrade(&self.shared),
        }
    }
}

/// Defers jobs to a poller from a map callback (see [`Deferrer::defer`]).
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
    let mut state = shared.state.lock();
    state.deferred.push(job);
    state.changes += 1;
    drop(state);
    shared.wake.notify_one();
}

/// Wakes every parked reader, those waiting for the poll to return included, outside
/// the state's lock and any panic of theirs caught.
fn wake_parked(shared: &Shared) {
    let wakers: Vec<Waker> = {
        let mut state = shared.state.lock();
        let after_poll = std::mem::take(&mut state.after_poll);
        let parked: Vec<Waker> = state
            .expected
            .values_mut()
            .filter_map(|(_, waker)| waker.take())
            .collect();
        parked.into_iter().chain(after_poll.into_values()).collect()
    };
    wake_caught(wakers);
}

/// The thread's poll returned: wakes the readers waiting for it
/// ([`Poller::wake_after_poll`]).
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
fn poll_returned(shared: &Shared) {
    let waiting = {
        let mut state = shared.state.lock();
        state.polling = state.standing_in;
        std::mem::take(&mut state.after_poll)
    };
    wake_caught(waiting.into_values());
}

/// Wakes `wakers`, each panic caught and logged (a waker is the application's code).
fn wake_caught(wakers: impl IntoIterator<Item = Waker>) {
    for waker in wakers {
        if std::panic::catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err() {
            tracing::error!("a reader's waker panicked on the poller thread");
        }
    }
}

/// Runs `jobs`, each panic caught and logged.
fn run_caught(jobs: Vec<Deferred>) {
    for job in jobs {
        if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("a deferred job panicked on the poller thread");
        }
    }
}

impl Expectation {
    /// The ticket that names this map to [`Poller::park`].
    pub(crate) fn ticket(&self) -> u64 {
        self.ticket
    }
}

impl Drop for Expectation {
    fn drop(&mut self) {
        self.shared.state.lock().expected.remove(&self.ticket);
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.stop = true;
        state.changes += 1;
        drop(state);
        self.shared.wake.notify_one();
        // Dropped on the poller thread itself (the last clone let go inside a callback
        // its poll ran): the thread ends when that poll returns; joining would wait for
        // itself.
        if let Some(thread) = self.thread.take()
            && !on_poller_thread()
        {
            let _ = thread.join();
        }
        // Jobs left behind (the thread stopped first) still run.
        let jobs = std::mem::take(&mut self.shared.state.lock().deferred);
        run_caught(jobs);
    }
}

#[cfg(not(target_arch = "wasm32"))]
/// Marks the poller dead when its thread ends, however it ends.
struct AliveFlag<'a>(&'a Shared);

#[cfg(not(target_arch = "wasm32"))]
impl Drop for AliveFlag<'_> {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::SeqCst);
        self.0.state.lock().polling = false;
        if std::thread::panicking() {
            tracing::error!("the poller thread panicked: reads now poll for themselves");
        }
        // Readers parked on this thread poll for themselves from now on.
        wake_parked(self.0);
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn run(shared: &Shared) {
    let mut backoff = Duration::ZERO;
    let mut seen = 0;
    loop {
        let (jobs, oldest) = {
            let mut state = shared.state.lock();
            while state.expected.is_empty() && state.deferred.is_empty() && !state.stop {
                shared.wake.wait(&mut state);
            }
            if state.stop {
                return;
            }
            if pause_before_poll(backoff, seen, state.changes) {
                // No progress last time and nothing new since: pause without spinning;
                // a new expectation or job ends the pause early.
                shared.wake.wait_for(&mut state, backoff);
            }
            seen = state.changes;
            // The oldest map first: each reader is woken as soon as its own submission
            // is done, not behind later work.
            let oldest = state
                .expected
                .values()
                .next()
                .map(|(index, _)| index.clone());
            (std::mem::take(&mut state.deferred), oldest)
        };
        run_caught(jobs);
        let Some(oldest) = oldest else {
            backoff = Duration::ZERO;
            continue;
        };
        let before = {
            let mut state = shared.state.lock();
            state.polling = true;
            state.expected.len()
        };
        WAKE_AFTER_POLL.with(|later| *later.borrow_mut() = Some(Vec::new()));
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            shared.device.poll(wgpu::PollType::Wait {
                submission_index: Some(oldest),
                timeout: None,
            })
        }));
        let wakers = WAKE_AFTER_POLL.with(|later| later.borrow_mut().take());
        wake_caught(wakers.into_iter().flatten());
        poll_returned(shared);
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

#[cfg(not(target_arch = "wasm32"))]
/// Whether the thread pauses before its next poll: only after a poll that made no
/// progress (`backoff` above zero) and when nothing changed since the last look
/// (`seen` against `changes`), so a map expected while the thread polled is polled for
/// at once.
fn pause_before_poll(backoff: Duration, seen: u64, changes: u64) -> bool {
    !backoff.is_zero() && seen == changes
}

#[cfg(not(target_arch = "wasm32"))]
fn next_backoff(backoff: Duration) -> Duration {
    (backoff * 2)
        .max(Duration::from_micros(500))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::pause_before_poll;
    use std::time::Duration;

    #[test]
    fn the_thread_pauses_only_after_no_progress_and_no_change() {
        let pause = Duration::from_millis(1);
        assert!(
            !pause_before_poll(Duration::ZERO, 3, 3),
            "progress: no pause"
        );
        assert!(
            pause_before_poll(pause, 3, 3),
            "no progress, nothing new: pause"
        );
        assert!(
            !pause_before_poll(pause, 3, 4),
            "a map expected during the poll: polled for at once"
        );
    }
}
