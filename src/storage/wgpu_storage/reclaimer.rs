//! [`Reclaimer`]: a thread of ours that drops given-back pages once the device is done
//! with them, so the driver's free of their device memory runs off the caller's thread.
//!
//! Freeing device memory is slow on some drivers: on the H200 a page over the device
//! memory block size is a driver allocation of its own, and returning sixteen 32 MiB
//! pages costs about 9.5 ms (`benches/compaction` prints it). Dropped the usual way, a
//! page that work still uses is freed inside the `device.poll` that learns the work is
//! done: in `sync()`, on the application's thread. Pages handed to the reclaimer are held
//! by the budget's bucket until the device is done with every submission that could use
//! them (see [`budget`](super::budget)), then dropped here, where wgpu frees them at once
//! since nothing uses them any more; only then are their bytes credited to the budget, so
//! the budget never lends bytes the device still holds.
//!
//! Pages given back that no unfinished work uses (see [`fences`](super::fences)) come
//! here at once, without a bucket, and are destroyed rather than dropped: wgpu frees
//! them then even while a cache of ours still holds a clone. A storage about to create a
//! page waits for this thread first, so the device does not hold them beside it.
//!
//! The queue holds at most one entry per closed bucket (one per submission that gave
//! pages back) and is drained as fast as the driver frees; a job that panics is logged
//! and the thread goes on. Should the thread not start, or
//! stop, the pages are dropped on the calling thread as before.
//!
//! On the web (wasm32) there are no threads and nothing may block: the reclaimer runs
//! each job where it is sent, at once, and has nothing to wait for. Its jobs come from
//! wgpu's work-done callbacks, which the browser runs from its event loop (never inside
//! a call of ours), and from given-back pages no unfinished work uses. Every page is
//! destroyed there, not only dropped: a dropped WebGPU buffer keeps its memory until the
//! JavaScript garbage collector runs, which knows nothing of GPU memory.

#[cfg(not(target_arch = "wasm32"))]
use parking_lot::{Condvar, Mutex};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::mpsc;
use std::time::Duration;

/// The longest anything waits for the reclaimer thread to free given-back pages the
/// device is done with (a storage about to create a page, a budget retry,
/// `Client::device_memory`, `Client::cleanup`): 10 s. Freeing takes well under a
/// millisecond per page on the drivers we measured; past this the waiter goes on, with
/// those bytes still charged, and logs a warning. On the web nothing waits: pages are
/// freed where they are given back, or in the callback that learns the device is done.
pub const RECLAIM_WAIT: Duration = Duration::from_secs(10);

/// Pages whose work is done, to drop (destroyed first when `destroy`), and what to do
/// once they are gone.
struct Job {
    pages: Vec<wgpu::Buffer>,
    destroy: bool,
    credit: Box<dyn FnOnce() + Send>,
}

/// Jobs sent and not yet finished, shared with the thread.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Default)]
struct Outstanding {
    jobs: Mutex<u64>,
    done: Condvar,
}

#[cfg(not(target_arch = "wasm32"))]
impl Outstanding {
    fn finish_one(&self) {
        let mut jobs = self.jobs.lock();
        *jobs = jobs.saturating_sub(1);
        if *jobs == 0 {
            self.done.notify_all();
        }
    }
}

/// A thread that drops given-back pages off the caller's thread (see the module doc).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) struct Reclaimer {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    outstanding: Arc<Outstanding>,
}

#[cfg(not(target_arch = "wasm32"))]
impl std::fmt::Debug for Reclaimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reclaimer")
            .field("outstanding", &*self.outstanding.jobs.lock())
            .finish()
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Reclaimer {
    /// Starts the thread; `None` (pages are then dropped where they are given back) when
    /// the system refuses a thread.
    pub(crate) fn spawn() -> Option<Self> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let outstanding = Arc::<Outstanding>::default();
        let seen = outstanding.clone();
        let started = std::thread::Builder::new()
            .name("wgpu-memory reclaimer".into())
            .spawn(move || run(receiver, &seen));
        match started {
            Ok(_) => Some(Self {
                sender: Mutex::new(Some(sender)),
                outstanding,
            }),
            Err(error) => {
                tracing::warn!(%error, "no reclaimer thread: pages are freed where given back");
                None
            }
        }
    }

    /// Drops `pages` on the thread (destroys them first when `destroy`: only pages no
    /// work, recorded or submitted, uses any more), then runs `credit`; all of it runs
    /// here, at once, when the thread is gone.
    pub(crate) fn send(
        &self,
        pages: Vec<wgpu::Buffer>,
        destroy: bool,
        credit: Box<dyn FnOnce() + Send>,
    ) {
        let job = Job {
            pages,
            destroy,
            credit,
        };
        let sender = self.sender.lock();
        let Some(sender) = sender.as_ref() else {
            return finish_here(job);
        };
        *self.outstanding.jobs.lock() += 1;
        if let Err(mpsc::SendError(job)) = sender.send(job) {
            self.outstanding.finish_one();
            tracing::error!("the reclaimer thread stopped: pages are freed where given back");
            finish_here(job);
        }
    }

    /// Waits until every job sent so far is finished, at most `timeout`; whether they
    /// all were.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let mut jobs = self.outstanding.jobs.lock();
        let deadline = std::time::Instant::now() + timeout;
        while *jobs > 0 {
            if self
                .outstanding
                .done
                .wait_until(&mut jobs, deadline)
                .timed_out()
            {
                return *jobs == 0;
            }
        }
        true
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Drop for Reclaimer {
    fn drop(&mut self) {
        // Ends the thread once it has finished the jobs already sent.
        self.sender.lock().take();
    }
}

/// The web's reclaimer: no thread, every job runs where it is sent (see the module doc).
#[cfg(target_arch = "wasm32")]
#[derive(Debug)]
pub(crate) struct Reclaimer;

#[cfg(target_arch = "wasm32")]
impl Reclaimer {
    /// The inline reclaimer (the web has no threads); always there.
    pub(crate) fn spawn() -> Option<Self> {
        Some(Self)
    }

    /// Destroys and drops `pages` at once, then runs `credit`.
    pub(crate) fn send(
        &self,
        pages: Vec<wgpu::Buffer>,
        destroy: bool,
        credit: Box<dyn FnOnce() + Send>,
    ) {
        finish_here(Job {
            pages,
            destroy,
            credit,
        });
    }

    /// Every job ran where it was sent: nothing to wait for, never waits.
    pub(crate) fn wait_idle(&self, _timeout: Duration) -> bool {
        true
    }
}

fn finish_here(job: Job) {
    free(job.pages, job.destroy);
    (job.credit)();
}

/// Drops `pages`, destroying each first when `destroy` (always on the web, where a
/// dropped buffer waits for the garbage collector).
fn free(pages: Vec<wgpu::Buffer>, destroy: bool) {
    if destroy || cfg!(target_arch = "wasm32") {
        for page in &pages {
            page.destroy();
        }
    }
    drop(pages);
}

/// The thread: drops each job's pages, then credits them, until every sender is gone.
#[cfg(not(target_arch = "wasm32"))]
fn run(receiver: mpsc::Receiver<Job>, outstanding: &Outstanding) {
    while let Ok(Job {
        pages,
        destroy,
        credit,
    }) = receiver.recv()
    {
        let count = pages.len();
        // Credited even when wgpu panics freeing them: the bytes are not ours to hold.
        let dropped =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| free(pages, destroy)));
        let credited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(credit));
        if dropped.is_err() || credited.is_err() {
            tracing::error!(
                count,
                "a panic while freeing given-back pages; the thread goes on"
            );
        }
        outstanding.finish_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn credits_run_on_the_thread_and_wait_idle_sees_them_done() {
        let reclaimer = Reclaimer::spawn().expect("a thread");
        let credited = Arc::new(AtomicU64::new(0));
        for bytes in [10, 20, 30] {
            let credited = credited.clone();
            reclaimer.send(
                Vec::new(),
                false,
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    credited.fetch_add(bytes, Ordering::Relaxed);
                }),
            );
        }
        assert!(reclaimer.wait_idle(Duration::from_secs(10)));
        assert_eq!(credited.load(Ordering::Relaxed), 60);
    }

    #[test]
    fn wait_idle_ends_at_its_timeout_when_a_job_is_slow() {
        let reclaimer = Reclaimer::spawn().expect("a thread");
        reclaimer.send(
            Vec::new(),
            false,
            Box::new(|| std::thread::sleep(Duration::from_millis(300))),
        );
        assert!(!reclaimer.wait_idle(Duration::from_millis(10)));
        assert!(reclaimer.wait_idle(Duration::from_secs(10)));
    }

    #[test]
    fn a_panicking_job_is_finished_and_the_thread_goes_on() {
        let reclaimer = Reclaimer::spawn().expect("a thread");
        let credited = Arc::new(AtomicU64::new(0));
        reclaimer.send(
            Vec::new(),
            false,
            Box::new(|| panic!("a credit that panics")),
        );
        assert!(reclaimer.wait_idle(Duration::from_secs(10)));
        let second = credited.clone();
        reclaimer.send(
            Vec::new(),
            false,
            Box::new(move || {
                second.fetch_add(1, Ordering::Relaxed);
            }),
        );
        assert!(reclaimer.wait_idle(Duration::from_secs(10)));
        assert_eq!(credited.load(Ordering::Relaxed), 1);
    }
}
