//! [`Budget`]: one cap on the bytes of every page a client's memories create.
//!
//! The main memory, the readback staging and the upload staging of a client each have a
//! [`WgpuStorage`](super::WgpuStorage); all three hold one shared `Budget`. Each storage
//! asks it for a page's bytes *before* it calls `create_buffer`, so no buffer is ever
//! created past the cap.
//!
//! A page given back that no unfinished work uses (its last use is in a batch the device
//! is known to be done with, see [`fences`](super::fences)) is destroyed at once, on the
//! reclaimer's thread when there is one (a storage waits for that thread before it
//! creates a page), and its bytes are credited right after, without waiting for the
//! device (`Budget::free_page`). Any other page given back is not free yet: wgpu keeps a
//! dropped buffer alive (and its device memory allocated) while recorded or submitted
//! work uses it. So such a page's bytes stay charged until the device is done with every
//! piece of work that could use it, in three steps:
//!
//! 1. the storage *retires* the bytes when it drops the buffer (`Budget::retire`): they
//!    join the open bucket and stay in `held`;
//! 2. the server closes the bucket when it takes the pending work out for submission
//!    ([`Budget::close_retiring`]): every piece of work that could use a page of the
//!    bucket is in that batch or in an earlier one;
//! 3. the client registers the closed bucket ([`Retiring`]) with
//!    `queue.on_submitted_work_done` right after the batch's submit; wgpu runs (or drops)
//!    that callback once the device is done with every submission so far, and dropping
//!    the bucket credits its bytes.
//!
//! A client's budget ([`Budget::with_reclaimer`]) also holds the given-back buffers
//! themselves in the bucket, and dropping the bucket hands them to its
//! reclaimer thread (`reclaimer.rs`), which drops them (wgpu frees their device
//! memory then, since nothing uses them) and only then credits their bytes: the driver's
//! free runs off the thread that waited for the device, and the budget never lends bytes
//! the device still holds. The open bucket holds at most the pages given back since the
//! last batch was taken.
//!
//! A reservation the budget refuses while bytes are retiring is retried by the client
//! after it flushed and waited for the device.
//!
//! On the web (wasm32) the reclaimer has no thread: a bucket's pages are destroyed and
//! credited inside the work-done callback itself, which the browser runs from its event
//! loop once the GPU is done, and a page no unfinished work uses is destroyed and
//! credited where it is given back. Nothing waits there; the client cannot wait for the
//! browser either, so a reservation refused while bytes are retiring says how many, and
//! the caller awaits the device (`Client::sync_async`) and retries.

use super::fences::Fences;
use super::reclaimer::Reclaimer;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The cap on the bytes of every page held, in bytes, and what is held against it.
///
/// `held` counts the real size of every buffer a storage holding this budget made and
/// the device may still hold: a page given back but not yet flushed still counts (its
/// buffer still exists), and so does a page dropped while work that may use it is not
/// known to be done ([`retiring`](Self::retiring), see the module doc). Without a limit
/// nothing is refused, and `held` is still counted.
///
/// Pages are reserved under the client's server lock, and the limit is changed under it,
/// so a check and the reservation that follows it are never interleaved with a change of
/// the limit; the counters themselves are atomics so reports can read them without it.
#[derive(Debug)]
pub struct Budget {
    /// The cap, in bytes; `u64::MAX` is no cap.
    limit: AtomicU64,
    held: AtomicU64,
    /// The most `held` has ever been, in bytes.
    peak: AtomicU64,
    /// Pages refused so far (a clock: a caller compares it before and after a reservation
    /// to know whether the budget refused it).
    refusals: AtomicU64,
    /// Bytes of the last page refused (what a refusal's error names as the page needed).
    last_refused: AtomicU64,
    /// Bytes of dropped pages not yet in a closed bucket (step 1 of the module doc).
    open_retiring: AtomicU64,
    /// Bytes of dropped pages still charged: the open bucket, every closed one whose
    /// work is not known done, and `freeing`. Part of `held`.
    retiring: AtomicU64,
    /// Bytes of pages no unfinished work uses, on their way out on the reclaimer's
    /// thread ([`Budget::free_page`]). Part of `retiring`.
    freeing: AtomicU64,
    /// Buffers of the open bucket, when a reclaimer frees them (see the module doc).
    open_pages: Mutex<Vec<wgpu::Buffer>>,
    reclaimer: Option<Reclaimer>,
    /// Which batches the device is done with, for the storages sharing this budget.
    fences: Arc<Fences>,
}

/// A closed bucket of retired page bytes: credited back to the budget when dropped (by
/// the `on_submitted_work_done` callback it was moved into, whether wgpu runs that
/// callback or drops it uncalled on a lost device).
#[derive(Debug)]
#[must_use = "dropping the bucket credits its bytes at once"]
pub struct Retiring {
    budget: Arc<Budget>,
    bytes: u64,
    /// The buffers, for the budget's reclaimer to drop (empty without one).
    pages: Vec<wgpu::Buffer>,
}

impl Retiring {
    /// Bytes of the pages in the bucket.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Retiring {
    fn drop(&mut self) {
        let pages = std::mem::take(&mut self.pages);
        let (budget, bytes) = (self.budget.clone(), self.bytes);
        let credit = move || budget.credit(bytes);
        match &self.budget.reclaimer {
            Some(reclaimer) if !pages.is_empty() => reclaimer.send(pages, false, Box::new(credit)),
            _ => {
                drop(pages);
                credit();
            }
        }
    }
}

/// Subtracts `bytes` from `counter`, never below 0.
fn sub(counter: &AtomicU64, bytes: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
        Some(held.saturating_sub(bytes))
    });
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            limit: AtomicU64::new(u64::MAX),
            held: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            last_refused: AtomicU64::new(0),
            open_retiring: AtomicU64::new(0),
            retiring: AtomicU64::new(0),
            freeing: AtomicU64::new(0),
            open_pages: Mutex::new(Vec::new()),
            reclaimer: None,
            fences: Arc::default(),
        }
    }
}

impl Budget {
    /// A budget without a cap whose given-back buffers are freed on a thread of its own
    /// once the device is done with them (see the module doc); a budget like
    /// [`Default`]'s, freeing them where they are given back, when no thread starts. On
    /// the web, buffers are held in the bucket the same way and destroyed in the
    /// callback that learns the device is done with them.
    pub fn with_reclaimer() -> Self {
        Self {
            reclaimer: Reclaimer::spawn(),
            ..Self::default()
        }
    }

    /// Waits until the reclaimer has freed every bucket the device was done with, at
    /// most `timeout`; whether it did (always `true` without a reclaimer). Call it with no
    /// lock held that wgpu's callbacks may take.
    pub fn wait_reclaimed(&self, timeout: Duration) -> bool {
        self.reclaimer
            .as_ref()
            .is_none_or(|reclaimer| reclaimer.wait_idle(timeout))
    }

    /// Which batches of recorded work the device is done with (see
    /// [`fences`](super::fences)): shared by the storages holding this budget.
    pub fn fences(&self) -> &Arc<Fences> {
        &self.fences
    }

    /// Credits the bytes of a bucket whose buffers are gone.
    fn credit(&self, bytes: u64) {
        self.release(bytes);
        sub(&self.retiring, bytes);
    }

    /// The cap, in bytes, or `None` for no cap.
    pub fn limit(&self) -> Option<u64> {
        match self.limit.load(Ordering::Relaxed) {
            u64::MAX => None,
            limit => Some(limit),
        }
    }

    /// Sets the cap (`None`: no cap). Does not check it against what is held; the client
    /// refuses a cap below that first.
    pub fn set_limit(&self, limit: Option<u64>) {
        self.limit
            .store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Bytes of every buffer held against the budget now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The most bytes ever held at once, in bytes: never above the cap in force when they
    /// were taken.
    pub fn peak_held(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// How many pages the budget has refused so far.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Bytes of the last page the budget refused (0 before any refusal): a reservation
    /// needs a whole page, often larger than what it asked for.
    pub fn last_refused_page(&self) -> u64 {
        self.last_refused.load(Ordering::Relaxed)
    }

    /// Bytes left under the cap (`None` without one).
    pub fn left(&self) -> Option<u64> {
        self.limit().map(|limit| limit.saturating_sub(self.held()))
    }

    /// Takes `bytes` for a new buffer; `false` (and nothing taken, one refusal counted)
    /// when that would cross the cap.
    pub(crate) fn try_hold(&self, bytes: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        let taken = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&after| after <= limit)
            });
        match taken {
            Ok(before) => {
                self.peak.fetch_max(before + bytes, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.last_refused.store(bytes, Ordering::Relaxed);
                self.refusals.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Bytes of given-back pages still charged because the device may still use them,
    /// or because the reclaimer has not freed them yet (part of [`held`](Self::held)): a
    /// flush and a wait for the device credit them.
    pub fn retiring(&self) -> u64 {
        self.retiring.load(Ordering::Relaxed)
    }

    /// Bytes of given-back pages that no unfinished work uses, still being freed on the
    /// reclaimer's thread (part of [`retiring`](Self::retiring)): credited without
    /// waiting for the device, before the next page of any storage sharing this budget
    /// is made.
    pub fn freeing(&self) -> u64 {
        self.freeing.load(Ordering::Relaxed)
    }

    /// Gives back `bytes` of a buffer that was never made (wgpu refused it), or of one
    /// destroyed while no unfinished work used it (its device memory is already free).
    pub(crate) fn release(&self, bytes: u64) {
        sub(&self.held, bytes);
    }

    /// Retires `bytes` of a page whose buffer was just dropped: still held, until the
    /// bucket it joins is closed and its work done (see the module doc).
    pub(crate) fn retire(&self, bytes: u64) {
        self.retiring.fetch_add(bytes, Ordering::Relaxed);
        self.open_retiring.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Retires a given-back page: its buffer joins the open bucket when a reclaimer frees
    /// it, and is dropped here otherwise (wgpu then frees it once its work is done).
    pub(crate) fn retire_page(&self, buffer: wgpu::Buffer) {
        let bytes = buffer.size();
        match self.reclaimer {
            Some(_) => {
                let mut pages = self.open_pages.lock();
                pages.push(buffer);
                self.retire(bytes);
            }
            None => {
                drop(buffer);
                self.retire(bytes);
            }
        }
    }

    /// Frees a given-back page that no work, recorded or submitted, uses any more (see
    /// [`fences`](super::fences)), and then credits its bytes: destroyed and dropped on
    /// the reclaimer's thread when there is one (a storage waits for that thread before
    /// it creates a page), here otherwise. Destroyed, not only dropped, so wgpu frees
    /// its device memory even while a cache still holds a clone of the buffer.
    pub(crate) fn free_page(self: &Arc<Self>, buffer: wgpu::Buffer) {
        let bytes = buffer.size();
        match &self.reclaimer {
            Some(reclaimer) => {
                self.retiring.fetch_add(bytes, Ordering::Relaxed);
                self.freeing.fetch_add(bytes, Ordering::Relaxed);
                let budget = self.clone();
                let credit = move || {
                    budget.credit(bytes);
                    sub(&budget.freeing, bytes);
                };
                reclaimer.send(vec![buffer], true, Box::new(credit));
            }
            None => {
                buffer.destroy();
                drop(buffer);
                self.release(bytes);
            }
        }
    }

    /// Closes the open bucket: the pages retired since the last close, or `None` when
    /// none was. Call it when the pending work is taken for submission, and credit the
    /// bucket (drop it) once the device is done with that submission.
    pub fn close_retiring(self: &Arc<Self>) -> Option<Retiring> {
        // Under the lock `retire_page` takes, so the bytes and the buffers agree.
        let mut open = self.open_pages.lock();
        match self.open_retiring.swap(0, Ordering::Relaxed) {
            0 => None,
            bytes => Some(Retiring {
                budget: self.clone(),
                bytes,
                pages: std::mem::take(&mut *open),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_that_would_cross_the_cap_is_refused_and_counted() {
        let budget = Budget::default();
        budget.set_limit(Some(100));
        assert!(budget.try_hold(60));
        assert!(!budget.try_hold(41), "60 + 41 > 100");
        assert_eq!((budget.held(), budget.refusals()), (60, 1));
        assert!(budget.try_hold(40), "60 + 40 = 100 is under the cap");
        assert_eq!(
            (budget.held(), budget.left(), budget.peak_held()),
            (100, Some(0), 100)
        );
        budget.release(100);
        assert_eq!((budget.held(), budget.peak_held()), (0, 100));
    }

    /// A dropped page stays held until its closed bucket is dropped; pages retired after
    /// the close go to the next bucket.
    #[test]
    fn retired_bytes_stay_held_until_their_bucket_is_credited() {
        let budget = Arc::new(Budget::default());
        budget.set_limit(Some(100));
        assert!(budget.try_hold(80));
        budget.retire(50);
        assert_eq!((budget.held(), budget.retiring()), (80, 50));
        assert!(!budget.try_hold(30), "the retired 50 bytes still count");
        let first = budget.close_retiring().expect("50 bytes retired");
        assert_eq!(first.bytes(), 50);
        budget.retire(20);
        assert!(
            budget
                .close_retiring()
                .is_some_and(|next| next.bytes() == 20)
        );
        assert_eq!((budget.held(), budget.retiring()), (60, 50));
        assert!(budget.close_retiring().is_none(), "nothing retired since");
        drop(first);
        assert_eq!((budget.held(), budget.retiring()), (10, 0));
        assert!(budget.try_hold(90));
    }

    /// With a reclaimer, a given-back page stays held (and its buffer alive in wgpu's
    /// report) while its bucket is open or closed; dropping the bucket frees the buffer on
    /// the reclaimer's thread, and only then are its bytes credited.
    #[test]
    fn a_reclaimed_page_is_credited_once_its_buffer_is_gone() {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let Ok(adapter) = pollster::block_on(instance.request_adapter(&Default::default())) else {
            return;
        };
        let (device, _) = pollster::block_on(adapter.request_device(&Default::default())).unwrap();
        let allocated = || {
            device
                .generate_allocator_report()
                .map(|report| report.total_allocated_bytes)
        };
        let before = allocated();
        let budget = Arc::new(Budget::with_reclaimer());
        assert!(budget.reclaimer.is_some(), "the thread started");
        assert!(budget.try_hold(1 << 20));
        let page = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 1 << 20,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        budget.retire_page(page);
        let bucket = budget.close_retiring().expect("one page retired");
        assert_eq!((bucket.bytes(), bucket.pages.len()), (1 << 20, 1));
        assert!(budget.wait_reclaimed(Duration::from_secs(10)));
        assert_eq!((budget.held(), budget.retiring()), (1 << 20, 1 << 20));
        if let (Some(before), Some(held)) = (before, allocated()) {
            assert!(
                held >= before + (1 << 20),
                "the bucket keeps the buffer alive"
            );
        }
        drop(bucket);
        assert!(budget.wait_reclaimed(Duration::from_secs(10)));
        assert_eq!((budget.held(), budget.retiring()), (0, 0));
        if let (Some(before), Some(after)) = (before, allocated()) {
            assert_eq!(after, before, "the reclaimer dropped the buffer");
        }
    }

    #[test]
    fn without_a_cap_nothing_is_refused() {
        let budget = Budget::default();
        assert!(budget.try_hold(u64::MAX / 2));
        assert_eq!((budget.limit(), budget.left()), (None, None));
    }
}
