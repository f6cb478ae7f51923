//! The budget over every memory a client creates: [`Client::set_budget`],
//! [`Client::budget`].

use super::Client;
use crate::memory_management::PoolConfigError;
use crate::report::BudgetUse;
use crate::server::ClientError;
use std::sync::atomic::Ordering;

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
    /// [`PoolConfigError::BudgetBelowHeld`]
    /// when the memories hold more than `budget` even after every free page was given
    /// back (the budget in force stays). Either way nothing changes.
    pub fn set_budget(&self, budget: Option<u64>) -> Result<(), ClientError> {
        // Submitted work and finished maps hand staging pages back first, so a cleanup
        // can give them back to the driver.
        let _ = self.flush();
        self.notice_loss();
        let result = self.shared.server.lock().set_budget(budget);
        // Pages the cleanup gave back stay charged until the device is done with them.
        if matches!(result, Err(PoolConfigError::BudgetBelowHeld { .. })) && self.wait_retired() {
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
    /// (a lost device answers at once).
    pub(super) fn retry_over_budget<T>(
        &self,
        mut attempt: impl FnMut() -> Result<T, ClientError>,
        can_retry: impl Fn() -> bool,
    ) -> Result<T, ClientError> {
        let result = attempt();
        let refused = matches!(&result, Err(ClientError::Reserve(error)) if error.is_out_of_room())
            && self.shared.server.lock().budget_refused();
        if !refused || !can_retry() {
            return result;
        }
        let held = self.shared.server.lock().budget().held();
        self.wait_retired();
        self.give_back_and_wait();
        if self.shared.server.lock().budget().held() >= held {
            tracing::debug!(held, "over the budget: nothing came back to retry with");
            return result;
        }
        tracing::debug!(
            held,
            "over the budget: retrying after the device gave bytes back"
        );
        attempt()
    }

    /// Submits what is recorded and waits for the device when bytes are on their way
    /// back to the budget (retired pages, upload staging in flight), so their callbacks
    /// credit them. Returns whether it waited. Holds no lock of ours while waiting.
    fn wait_retired(&self) -> bool {
        let pending = self.shared.server.lock().budget().retiring() > 0
            || self.shared.uploads_in_flight.load(Ordering::Relaxed) > 0;
        if pending {
            let _ = self.flush();
            self.poll(wgpu::PollType::wait_indefinitely());
        }
        pending
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
        if let ClientError::OutOfMemory { detail, .. } = &mut error
            && let Some(budget) = &mut detail.budget
        {
            budget.upload_staging = bytes;
            self.give_back_and_wait();
        }
        Err(error)
    }

    /// `result`, or, when the budget refused the reservation that failed (in any
    /// memory), [`ClientError::OutOfMemory`] with the budget's detail. Takes the server's
    /// lock: call it without holding it.
    pub(super) fn explain_budget<T>(
        &self,
        result: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let refused = matches!(&result, Err(ClientError::Reserve(error)) if error.is_out_of_room())
            && self.shared.server.lock().budget_refused();
        if refused {
            self.explain_oom(result)
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
