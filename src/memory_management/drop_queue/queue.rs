//! What stays alive until the device has passed a fence.
//!
//! An item pushed here (a host buffer an upload copies from, a page a launch still reads)
//! moves through two batches, **staged** and **pending**, and one fence guards the pending
//! batch. [`PendingDropQueue::flush`] runs these steps, in this order:
//!
//! 1. **Idle check.** If nothing is staged and nothing is pending, return at once: no fence
//!    is made, because a fence is a point recorded on the queue timeline and an idle queue
//!    (or an open capture) must not get one.
//! 2. **Wait on the previous fence.** If the previous flush left a fence, wait on it
//!    ([`Fence::sync`]). If the device passed it, or the device is lost (nothing runs any
//!    more), the pending items are dropped. If the wait failed for any other reason, the
//!    items' use is unknown: they are leaked with [`std::mem::forget`] and counted in
//!    [`leaked`](PendingDropQueue::leaked), never freed under a running device.
//! 3. **Safety net.** If pending items remain with no fence (only after a fence factory
//!    panicked in a previous flush), make a fence now and wait on it. That fence was made
//!    after every push, so it covers the staged batch too: both batches are released
//!    (dropped or leaked, as in step 2), the counters are reset, steps 4 to 6 have
//!    nothing left to do, and the factory is still called at most once per flush.
//! 4. **Stage to pending.** The staged batch becomes the pending batch.
//! 5. **Reset** the policy's counters ([`FlushingPolicy`]): they count the staged batch,
//!    which is now empty. This comes before step 6 so that a panicking fence factory
//!    leaves them true.
//! 6. **New fence.** If the pending batch is not empty, make a fence for it; the *next*
//!    flush waits on it in step 2.
//!
//! So an item is freed on the flush *after* the one that moved it to pending: it is held
//! at most two flush cycles, and the hot path waits only on a fence that is one cycle old
//! (usually already passed). [`PendingDropQueue::drain`] runs two flushes, after which
//! everything pushed before it is released.

use super::policy::{FlushingPolicy, StagedCount};
use std::fmt;

/// A point on the device's queue timeline: every piece of work submitted before the fence
/// was made runs before it.
///
/// The server implements it on its own submission marker; tests implement it on a fake.
pub trait Fence {
    /// Blocks until the device has passed this fence.
    ///
    /// # Errors
    ///
    /// - [`FenceError::DeviceLost`] when the device was lost or poisoned: nothing will run
    ///   any more, so what the fence guarded may be freed.
    /// - [`FenceError::Failed`] for any other failure: whether the device still reads what
    ///   the fence guarded is unknown.
    fn wait(self) -> Result<(), FenceError>;

    /// Waits on the fence and says whether the memory it guards may be freed: `true` when
    /// [`wait`](Self::wait) succeeded or reported [`FenceError::DeviceLost`], `false`
    /// (logged with `tracing::error!`) for any other failure.
    ///
    /// # Panics
    ///
    /// Never, unless [`wait`](Self::wait) panics.
    fn sync(self) -> bool
    where
        Self: Sized,
    {
        match self.wait() {
            Ok(()) => true,
            Err(FenceError::DeviceLost { message }) => {
                tracing::debug!(%message, "fence on a lost device counts as passed");
                true
            }
            Err(error) => {
                tracing::error!(%error, "fence wait failed: the memory it guards is kept, not freed");
                false
            }
        }
    }
}

/// Why [`Fence::wait`] could not confirm that the device passed the fence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// The device was lost or poisoned: no work will run any more, so the memory the
    /// fence guarded may be freed. Retrying cannot help; the device must be recreated.
    #[error("the device was lost before the fence was reached: {message}")]
    DeviceLost {
        /// What the device reported.
        message: String,
    },
    /// Any other failure (a timeout, a failed poll): whether the device still reads the
    /// guarded memory is unknown, so it must be kept. Retrying the wait on a later fence
    /// can help.
    #[error("waiting on the fence failed: {message}")]
    Failed {
        /// What the device reported.
        message: String,
    },
}

/// Items a device may still read, held until a fence made after their last use has been
/// passed: each [`flush`](Self::flush) releases the batch the previous flush fenced, so
/// an item is freed on the flush after the one that moved it to pending.
///
/// Items are type-erased (`Box<dyn Send>`); the queue only ever drops or leaks them. Sizes
/// are what the caller says at [`push`](Self::push), in bytes, and only feed the
/// [`FlushingPolicy`].
///
/// Dropping the queue drops whatever it holds without waiting on any fence: call
/// [`drain`](Self::drain) first when that matters.
pub struct PendingDropQueue<F: Fence> {
    /// The fence made for `pending` by the last flush. Invariant: `Some` whenever
    /// `pending` is non-empty, except after a fence factory panicked (step 3's case).
    fence: Option<F>,
    /// The batch moved out of `staged` by the last flush, guarded by `fence`.
    pending: Vec<Box<dyn Send>>,
    /// Items pushed since the last flush; no fence covers them yet.
    staged: Vec<Box<dyn Send>>,
    /// Items and bytes in `staged`, against the policy.
    count: StagedCount,
    /// Bytes of `pending`, as pushed.
    pending_bytes: u64,
    /// Items leaked because a fence wait failed (saturating).
    leaked: u64,
}

impl<F: Fence> PendingDropQueue<F> {
    /// An empty queue that advises flushing according to `policy`.
    ///
    /// # Panics
    ///
    /// Never.
    pub fn new(policy: FlushingPolicy) -> Self {
        Self {
            fence: None,
            pending: Vec::new(),
            staged: Vec::new(),
            count: StagedCount::new(policy),
            pending_bytes: 0,
            leaked: 0,
        }
    }

    /// Stages `item` until two flushes have passed; `bytes` is the size it counts for
    /// against [`FlushingPolicy::max_bytes`] (the queue never measures the item itself).
    ///
    /// Push an item *after* submitting the work that reads it, so that the next flush's
    /// fence comes after that work.
    ///
    /// # Panics
    ///
    /// Never (the counters saturate).
    pub fn push(&mut self, item: impl Send + 'static, bytes: u64) {
        self.staged.push(Box::new(item));
        self.count.record(bytes);
        debug_assert_eq!(self.count.entries(), self.staged.len() as u64);
    }

    /// Whether the staged items reach the policy's item or byte limit.
    ///
    /// # Panics
    ///
    /// Never.
    pub fn should_flush(&self) -> bool {
        self.count.should_flush()
    }

    /// Runs one flush: releases the pending batch once its fence is passed, moves the
    /// staged batch to pending, and guards it with a fence from `make_fence`.
    ///
    /// 1. Nothing staged or pending: return, making no fence.
    /// 2. Wait on the previous flush's fence; drop the pending batch if the device passed
    ///    it or is lost, else leak it (counted in [`leaked`](Self::leaked)).
    /// 3. Pending items with no fence (after a panicking `make_fence`): make a fence, wait
    ///    on it, and release both batches by its outcome, since it covers every push.
    /// 4. Move the staged batch to pending.
    /// 5. Reset the policy's counters (staged is now empty).
    /// 6. If pending is not empty, make its fence.
    ///
    /// `make_fence` is called at most once, and not at all when the queue is idle.
    ///
    /// # Panics
    ///
    /// Never by itself. A panic in `make_fence` or in an item's `Drop` propagates; after a
    /// panicking `make_fence` the next flush takes the safety net (step 3).
    pub fn flush(&mut self, make_fence: impl FnOnce() -> F) {
        // 1. Idle: no fence.
        if self.staged.is_empty() && self.pending.is_empty() {
            self.count.reset();
            return;
        }

        // 2. Wait on the previous flush's fence and release what it guarded.
        if let Some(fence) = self.fence.take() {
            let done = fence.sync();
            self.release_pending(done);
        }

        // 3. Safety net: pending items with no fence. A fresh fence covers both batches.
        if !self.pending.is_empty() {
            let done = make_fence().sync();
            self.pending.append(&mut self.staged);
            self.count.reset();
            self.release_pending(done);
            return;
        }

        // 4. The staged batch becomes the pending batch (pending is empty here).
        std::mem::swap(&mut self.pending, &mut self.staged);
        self.pending_bytes = self.count.bytes();

        // 5. Reset the counters before the factory runs, so a panic in it leaves them
        //    matching the (now empty) staged batch.
        self.count.reset();

        // 6. Guard the new pending batch with a fence.
        if !self.pending.is_empty() {
            self.fence = Some(make_fence());
        }
    }

    /// Two flushes: afterwards nothing is staged or pending, and every item pushed before
    /// the call has been dropped (or leaked, if a fence wait failed). This is what an
    /// explicit cleanup needs, since deferred frees would otherwise keep memory alive.
    ///
    /// `make_fence` is called at most once: the first flush makes the fence for the staged
    /// batch (or for the safety net, step 3), and the second only waits on it, since
    /// nothing can be pushed in between. It is not called at all on an idle queue.
    ///
    /// # Panics
    ///
    /// Never by itself; see [`flush`](Self::flush).
    pub fn drain(&mut self, mut make_fence: impl FnMut() -> F) {
        self.flush(&mut make_fence);
        self.flush(&mut make_fence);
    }

    /// Bytes held: staged and pending, as pushed.
    pub fn held_bytes(&self) -> u64 {
        self.count.bytes().saturating_add(self.pending_bytes)
    }

    /// Items pushed since the last flush.
    pub fn staged_len(&self) -> usize {
        self.staged.len()
    }

    /// Items moved to pending by the last flush, waiting for its fence.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Bytes pushed since the last flush (saturating at `u64::MAX`), as given to
    /// [`push`](Self::push).
    pub fn staged_bytes(&self) -> u64 {
        self.count.bytes()
    }

    /// Items kept forever because a fence wait failed (saturating at `u64::MAX`).
    pub fn leaked(&self) -> u64 {
        self.leaked
    }

    /// The policy this queue advises flushing by.
    pub fn policy(&self) -> FlushingPolicy {
        self.count.policy()
    }

    /// Empties `pending`: drops every item when the fence was passed (`done`), else leaks
    /// them and counts them in `leaked`.
    fn release_pending(&mut self, done: bool) {
        self.pending_bytes = 0;
        if done {
            self.pending.clear();
            return;
        }
        let items = self.pending.len();
        if items == 0 {
            return;
        }
        for item in self.pending.drain(..) {
            std::mem::forget(item);
        }
        self.leaked = self.leaked.saturating_add(items as u64);
        tracing::warn!(
            items,
            leaked_total = self.leaked,
            "kept (leaked) items whose fence wait failed"
        );
    }
}

impl<F: Fence> Default for PendingDropQueue<F> {
    /// An empty queue with [`FlushingPolicy::default`] (64 items or 64 MiB).
    fn default() -> Self {
        Self::new(FlushingPolicy::default())
    }
}

impl<F: Fence> fmt::Debug for PendingDropQueue<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingDropQueue")
            .field("staged", &self.staged.len())
            .field("staged_bytes", &self.count.bytes())
            .field("pending", &self.pending.len())
            .field("has_fence", &self.fence.is_some())
            .field("leaked", &self.leaked)
            .field("policy", &self.count.policy())
            .finish()
    }
}
