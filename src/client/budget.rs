//! The budget over every memory a client creates: [`Client::set_budget`],
//! [`Client::budget`].

use super::Client;
use crate::memory_management::PoolConfigError;
use crate::report::{BudgetDetail, BudgetUse};
use crate::server::{ClientError, Server};
use std::sync::atomic::Ordering;

pub use crate::storage::wgpu_storage::RECLAIM_WAIT;

#[cfg(test)]
thread_local! {
    /// Tests: run once on this thread where [`Client::retry_over_budget`] is about to
    /// wait after a refusal, with no lock of ours held: where wgpu runs callbacks on this
    /// thread, and other threads reserve or change the budget, between a refusal and
    /// its error.
    pub(super) static AFTER_REFUSAL: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

impl Client {
    /// Caps the bytes of every page the client creates, in the main memory and in the
    /// readback and upload staging together, at `budget` bytes (`None`: no cap, the
    /// default). Also set by `[memory] budget = "8 GiB"` (or a byte count).
    ///
    /// Every page is taken from the budget before its `create_buffer` is issued, so no
    /// buffer is ever created past it. A reservation that would cross it first gives
    /// back the free pages of every memory (and compacts), and only then fails with
    /// [`ClientError::OutOfMemory`], whose `detail.budget` names the budget, what each
    /// memory holds and the largest free slice.
    ///
    /// # Errors
    /// [`ClientError::Config`] naming the field `budget`:
    /// [`PoolConfigError::BadSize`]
    /// for 0 bytes;
    /// [`PoolConfigError::BudgetBelowSmallestPage`] for a budget below the smallest page
    /// the main memory's pools make (it names the page: with the default layout the
    /// small pool's first page, 128 KiB), since every reservation would need a page it
    /// refuses;
    /// [`PoolConfigError::BudgetBelowHeld`]
    /// when the memories hold more than `budget` even after every free page was given
    /// back (the budget in force stays). Either way nothing changes.
    pub fn set_budget(&self, budget: Option<u64>) -> Result<(), ClientError> {
        // Submitted work and finished maps hand staging pages back first, so a cleanup
        // can give them back to the driver.
        let _ = self.flush();
        self.notice_loss();
        let result = self.shared.server.lock().set_budget(budget);
        // Pages the cleanup gave back stay charged until the device is done with them and
        // the reclaimer thread has freed them; on a refusal wait for both (whether or not
        // bytes were retiring when asked: the reclaimer may still hold some), then retry.
        if matches!(result, Err(PoolConfigError::BudgetBelowHeld { .. })) {
            self.wait_retired();
            self.wait_reclaimed();
            return Ok(self.shared.server.lock().set_budget(budget)?);
        }
        Ok(result?)
    }

    /// The budget, and the bytes held against it now and at their peak.
    pub fn budget(&self) -> BudgetUse {
        let server = self.shared.server.lock();
        let budget = server.budget();
        BudgetUse {
            budget: budget.limit(),
            held: budget.held(),
            peak_held: budget.peak_held(),
            retiring: budget.retiring(),
        }
    }

    /// Runs `attempt`; when the budget refused it while bytes it could use are on their
    /// way back (pages given back that the device may still use, upload staging in
    /// flight, free pages), waits for the device, gives back every free page, and runs
    /// it once more (if `can_retry` still says so: a fill closure not used up yet). The
    /// waits happen outside every lock of ours, and each ends when the device answers
    /// (a lost device answers at once). On the web it does not wait (nothing may block
    /// there): it submits, gives back every free page (those no unfinished work uses are
    /// freed at once) and retries when that freed something; pages the browser has not
    /// reported done stay charged, and the refusal names them
    /// ([`BudgetDetail::awaiting_device`]).
    ///
    /// Returns the result with the budget's refusal it met, if any (for
    /// [`explain_budget`](Self::explain_budget)). The refusal is taken right after the
    /// attempt that met it: wgpu runs callbacks inside the waits, on this thread, and
    /// their reservations have refusals (or none) of their own.
    pub(super) fn retry_over_budget<T>(
        &self,
        mut attempt: impl FnMut() -> Result<T, ClientError>,
        can_retry: impl Fn() -> bool,
    ) -> (Result<T, ClientError>, Option<BudgetDetail>) {
        // None left from a call that never asked for its own.
        let _ = Server::take_budget_refusal();
        let result = attempt();
        let refusal = Server::take_budget_refusal();
        let refused = refusal.is_some()
            && matches!(&result, Err(ClientError::Reserve(error)) if error.is_out_of_room());
        if !refused || !can_retry() {
            return (result, refusal);
        }
        #[cfg(test)]
        if let Some(hook) = AFTER_REFUSAL.with(|hook| hook.borrow_mut().take()) {
            hook();
        }
        let held = self.shared.server.lock().budget().held();
        self.wait_retired();
        self.give_back_and_wait();
        if self.shared.server.lock().budget().held() >= held {
            tracing::debug!(held, "over the budget: nothing came back to retry with");
            return (result, refusal);
        }
        tracing::debug!(
            held,
            "over the budget: retrying after the device gave bytes back"
        );
        let result = attempt();
        (result, Server::take_budget_refusal())
    }

    /// Submits what is recorded and waits for the device when bytes are on their way
    /// back to the budget (retired pages, upload staging in flight), so their callbacks
    /// credit them. Returns whether it waited. Holds no lock of ours while waiting.
    ///
    /// On the web it only submits: nothing may block there, and the callbacks that
    /// credit the bytes run once the application yields to the browser.
    fn wait_retired(&self) -> bool {
        let (pending, waits) = {
            let server = self.shared.server.lock();
            let pending = server.budget().retiring() > 0
                || self.shared.uploads_in_flight.load(Ordering::Relaxed) > 0;
            (pending, server.waits_for_device())
        };
        if pending {
            let _ = self.flush();
            if waits {
                self.poll(wgpu::PollType::wait_indefinitely());
                self.wait_reclaimed();
            }
        }
        pending && waits
    }

    /// Waits (at most [`RECLAIM_WAIT`]) until the reclaimer thread has freed the pages
    /// the device is done with, so their bytes are credited; holds no lock of ours.
    pub(super) fn wait_reclaimed(&self) {
        let budget = self.shared.server.lock().shared_budget();
        if !budget.wait_reclaimed(RECLAIM_WAIT) {
            tracing::warn!(
                waited = ?RECLAIM_WAIT,
                "given-back pages are still being freed; going on without their bytes"
            );
        }
    }

    /// Gives back every free page of every memory (the slices of dropped handles
    /// included), then lets the device finish with them so the budget is credited.
    pub(super) fn give_back_and_wait(&self) {
        self.shared.server.lock().cleanup();
        self.wait_retired();
    }

    /// For an upload of `bytes` refused by the budget: gives back what the refused
    /// operation took (its handle's page, staging that came back meanwhile) and says, in
    /// the error, that the upload needs `bytes` of upload staging too.
    pub(super) fn refused_upload<T>(
        &self,
        result: Result<T, ClientError>,
        bytes: u64,
    ) -> Result<T, ClientError> {
        let mut error = match result {
            Err(error @ ClientError::OutOfMemory { .. }) => error,
            other => return other,
        };
        // Writes handed to the queue (the web) take no upload staging of ours.
        let staged = !self.shared.server.lock().queues_writes();
        if let ClientError::OutOfMemory { detail, .. } = &mut error
            && let Some(budget) = &mut detail.budget
        {
            budget.upload_staging = if staged { bytes } else { 0 };
            self.give_back_and_wait();
        }
        Err(error)
    }

    /// `result`, or, when the budget refused the reservation that failed (in any
    /// memory; `refusal`, from [`retry_over_budget`](Self::retry_over_budget)),
    /// [`ClientError::OutOfMemory`] with the budget's detail. Takes the server's lock:
    /// call it without holding it.
    pub(super) fn explain_budget<T>(
        &self,
        result: Result<T, ClientError>,
        refusal: Option<BudgetDetail>,
    ) -> Result<T, ClientError> {
        let refused = refusal.is_some()
            && matches!(&result, Err(ClientError::Reserve(error)) if error.is_out_of_room());
        if refused {
            self.explain_oom(result, refusal)
        } else {
            result
        }
    }
}

/// Whether a fill closure kept in `cell` is still unused (an attempt that failed before
/// filling can be retried with it).
pub(super) fn fill_left<F>(cell: &std::cell::Cell<Option<F>>) -> bool {
    let fill = cell.take();
    let left = fill.is_some();
    cell.set(fill);
    left
}
