//! [`WorkDone`]: a future that resolves once the device has finished every submission
//! made before it, without blocking.
//!
//! It registers a `queue.on_submitted_work_done` callback, which wgpu runs (or, on a
//! lost device, drops uncalled: either completes the future) once the device is done
//! with every submission so far. On native backends the callback runs inside a device
//! poll, so the future also registers the submission with the client's [`Poller`],
//! whose thread polls until the callback has run, exactly as for a read's map; awaited
//! where the poller cannot help (on the poller thread, holding the submit turn, or with
//! the thread gone) it polls the device itself. On the web the browser settles the
//! callback's promise from its event loop, which runs while the future is pending.

use super::poller::{Expectation, Poller};
use crate::server::DeviceLoss;
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct DoneState {
    done: bool,
    waker: Option<Waker>,
}

/// Held by the work-done callback: completes the future when the callback runs or is
/// dropped uncalled (a lost device), and lets the poller stop polling for it.
struct Signal {
    state: Arc<Mutex<DoneState>>,
    expectation: Option<Expectation>,
}

impl Drop for Signal {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.state.lock();
            state.done = true;
            state.waker.take()
        };
        drop(self.expectation.take());
        // Woken after the state's lock is let go.
        if let Some(waker) = waker {
            super::poller::wake(waker);
        }
    }
}

/// Resolves once the device has finished every submission made before it was made, or
/// once the device is lost (the caller looks at the loss). Dropping it early leaves
/// only the callback behind, which completes nothing.
pub(crate) struct WorkDone {
    state: Arc<Mutex<DoneState>>,
    poller: Arc<Poller>,
    lost: DeviceLoss,
    /// The poller's ticket for the callback (to park the waiter's waker on).
    ticket: u64,
    #[cfg(not(target_arch = "wasm32"))]
    device: wgpu::Device,
}

impl WorkDone {
    /// Waits for every submission made on `queue` so far; `submission` is the latest
    /// (made by the caller, holding the submit turn, so that the callback follows it).
    pub(crate) fn new(
        queue: &wgpu::Queue,
        device: &wgpu::Device,
        submission: wgpu::SubmissionIndex,
        poller: Arc<Poller>,
        lost: DeviceLoss,
    ) -> Self {
        let state = Arc::<Mutex<DoneState>>::default();
        let expectation = poller.expect(submission.clone());
        let ticket = expectation.ticket();
        let signal = Signal {
            state: state.clone(),
            expectation: Some(expectation),
        };
        // wgpu may run it at once, when nothing submitted is left unfinished.
        queue.on_submitted_work_done(move || drop(signal));
        #[cfg(target_arch = "wasm32")]
        let _ = device;
        Self {
            state,
            poller,
            lost,
            ticket,
            #[cfg(not(target_arch = "wasm32"))]
            device: device.clone(),
        }
    }
}

impl Future for WorkDone {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        loop {
            {
                let mut state = self.state.lock();
                if state.done {
                    return Poll::Ready(());
                }
                state.waker = Some(context.waker().clone());
            }
            // A lost device may never run the callback: the loss ends the wait.
            if self.lost.is_lost() {
                return Poll::Ready(());
            }
            // The web: the browser runs the callback from its event loop once this
            // returns; parked too, so a lost device wakes the waiter.
            #[cfg(target_arch = "wasm32")]
            {
                self.poller.park(self.ticket, context.waker());
                return Poll::Pending;
            }
            // Native: the poller thread polls until the callback ran; where waiting for
            // it may wait for ourselves (see `poller::reads_poll_inline`) or it is gone,
            // poll here until everything submitted is done, the callback's submission
            // included (untimed; a lost device answers at once).
            #[cfg(not(target_arch = "wasm32"))]
            {
                let inline = super::poller::reads_poll_inline();
                if self.poller.alive() && !inline && self.poller.park(self.ticket, context.waker())
                {
                    return Poll::Pending;
                }
                if !self.poller.alive() || inline {
                    let poll = wgpu::PollType::wait_indefinitely();
                    let device = &self.device;
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        device.poll(poll)
                    }));
                }
            }
        }
    }
}
