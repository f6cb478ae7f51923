//! The budget over every memory a client creates: [`Client::set_budget`],
//! [`Client::budget`].

use super::Client;
use crate::report::BudgetUse;
use crate::server::ClientError;

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
    /// [`PoolConfigError::BadSize`](crate::memory_management::PoolConfigError::BadSize)
    /// for 0 bytes;
    /// [`PoolConfigError::BudgetBelowHeld`](crate::memory_management::PoolConfigError::BudgetBelowHeld)
    /// when the memories hold more than `budget` even after every free page was given
    /// back (the budget in force stays). Either way nothing changes.
    pub fn set_budget(&self, budget: Option<u64>) -> Result<(), ClientError> {
        // Submitted work and finished maps hand staging pages back first, so a cleanup
        // can give them back to the driver.
        let _ = self.flush();
        self.notice_loss();
        let result = self.shared.server.lock().set_budget(budget);
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
        }
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
