//! The background poller: completes `map_async` callbacks without the caller polling.
//!
//! 1. A read takes a [`PollGuard`] once its map is requested; while any guard lives the
//!    poller thread polls the device (waiting up to 50 ms at a time), which runs the map
//!    callbacks, which wake the readers' futures.
//! 2. With no guard alive the thread sleeps on a condition variable: an idle client costs
//!    nothing.
//! 3. A read dropped before its map completed hands its staging slice to the poller
//!    ([`Poller::abandon`]), which holds it in a [`PendingDropQueue`] behind a fence that
//!    passes once the map completed; the flush after that unmaps the buffer and drops the
//!    staging handle, so the slice goes back to its pool and is never copied into while
//!    its map is pending or mapped.
//! 4. Dropping the poller stops and joins the thread.
//!
//! The thread never takes the client's lock, so polling never blocks threads that submit.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::readback::{AbandonedRead, MapFence, MapSlot, PendingMap};
use crate::memory_management::drop_queue::PendingDropQueue;

/// How long one poll waits for submissions before the thread looks at its state again.
const POLL_SLICE: Duration = Duration::from_millis(50);

#[derive(Default)]
struct State {
    active: usize,
    stop: bool,
}

struct Shared {
    device: wgpu::Device,
    state: Mutex<State>,
    wake: Condvar,
    abandoned: Mutex<Abandoned>,
}

/// Abandoned reads and the map slots of those staged since the last flush.
struct Abandoned {
    queue: PendingDropQueue<MapFence>,
    staged: Vec<MapSlot>,
}

impl Abandoned {
    fn is_idle(&self) -> bool {
        self.queue.staged_len() == 0 && self.queue.pending_len() == 0
    }

    /// Releases the batch whose maps completed and fences the one staged since.
    fn flush(&mut self, device: &wgpu::Device) {
        let maps = std::mem::take(&mut self.staged);
        let device = device.clone();
        self.queue.flush(move || MapFence { device, maps });
    }
}

/// The poller thread of one client.
pub(crate) struct Poller {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps the poller polling while alive.
pub(crate) struct PollGuard {
    shared: Arc<Shared>,
}

impl Poller {
    pub(crate) fn new(device: wgpu::Device) -> Self {
        let shared = Arc::new(Shared {
            device,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            abandoned: Mutex::new(Abandoned {
                queue: PendingDropQueue::default(),
                staged: Vec::new(),
            }),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("wgpu-memory poller".to_string())
            .spawn(move || run(&thread_shared))
            .ok();
        if thread.is_none() {
            tracing::warn!("could not start the poller thread: reads will poll while awaited");
        }
        Self { shared, thread }
    }

    /// Whether the thread runs (else awaited reads poll the device themselves).
    pub(crate) fn running(&self) -> bool {
        self.thread.is_some()
    }

    /// Polls until the returned guard is dropped.
    pub(crate) fn start(&self) -> PollGuard {
        self.shared.state.lock().active += 1;
        self.shared.wake.notify_one();
        PollGuard {
            shared: self.shared.clone(),
        }
    }

    /// Takes over a read whose future was dropped before its map completed; the thread
    /// keeps polling until every abandoned map completed.
    pub(crate) fn abandon(&self, map: PendingMap) {
        // Under the state lock, so the thread cannot miss the wake-up between its check
        // and its wait.
        let _state = self.shared.state.lock();
        let read = AbandonedRead::new(map);
        let mut abandoned = self.shared.abandoned.lock();
        abandoned.staged.push(read.map_state());
        let bytes = read.size();
        abandoned.queue.push(read, bytes);
        self.shared.wake.notify_one();
    }
}

impl Drop for PollGuard {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.active = state.active.saturating_sub(1);
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        let device = self.shared.device.clone();
        let mut abandoned = self.shared.abandoned.lock();
        let maps = std::mem::take(&mut abandoned.staged);
        let mut maps = Some(maps);
        abandoned.queue.drain(|| MapFence {
            device: device.clone(),
            maps: maps.take().unwrap_or_default(),
        });
        drop(abandoned);
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    loop {
        {
            let mut state = shared.state.lock();
            while state.active == 0 && !state.stop && shared.abandoned.lock().is_idle() {
                shared.wake.wait(&mut state);
            }
            if state.stop {
                return;
            }
        }
        let _ = shared.device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(POLL_SLICE),
        });
        release_abandoned(shared);
    }
}

/// Releases the abandoned reads whose fence passed, and fences the newer ones.
fn release_abandoned(shared: &Shared) {
    let mut abandoned = shared.abandoned.lock();
    if !abandoned.is_idle() {
        abandoned.flush(&shared.device);
    }
}
