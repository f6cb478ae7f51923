//! [`Budget`]: one cap on the bytes of every page a client's memories create.
//!
//! The main memory, the readback staging and the upload staging of a client each have a
//! [`WgpuStorage`](super::WgpuStorage); all three hold one shared `Budget`. Each storage
//! asks it for a page's bytes *before* it calls `create_buffer`, and gives them back when
//! the page's buffer is dropped at a flush, so no buffer is ever created past the cap.

use std::sync::atomic::{AtomicU64, Ordering};

/// The cap on the bytes of every page held, in bytes, and what is held against it.
///
/// `held` counts the real size of every buffer a storage holding this budget made and
/// has not dropped yet (a page given back but not yet flushed still counts: its buffer
/// still exists). Without a limit nothing is refused, and `held` is still counted.
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
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            limit: AtomicU64::new(u64::MAX),
            held: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }
}

impl Budget {
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
                self.refusals.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Gives back `bytes` of a buffer that was dropped (or never made).
    pub(crate) fn release(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(bytes))
            });
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

    #[test]
    fn without_a_cap_nothing_is_refused() {
        let budget = Budget::default();
        assert!(budget.try_hold(u64::MAX / 2));
        assert_eq!((budget.limit(), budget.left()), (None, None));
    }
}
