//! [`Fences`]: which batches of recorded work the device is known to be done with, so a
//! page given back that no unfinished work uses is freed at the device at once.
//!
//! The owner of the storages (the server) records work into one pending batch at a time
//! and takes it out for submission in order. Each batch has a serial:
//! [`recording`](Fences::recording) is the serial of the batch being recorded now,
//! [`close`](Fences::close) ends it when the batch is taken out (work recorded later
//! has a later serial), and the [`BatchFence`] it returns is completed by the callback
//! wgpu runs once the device is done with that batch's submission and every earlier one
//! (`queue.on_submitted_work_done`). So [`done`](Fences::done) is the highest serial
//! whose work, and all work before it, is finished.
//!
//! A storage stamps a page with the serial being recorded whenever it hands the page's
//! buffer out for recording (a resource, a buffer lookup, a copy it queues), and with
//! [`LENT`] once the page's buffer is lent to the application, whose own submissions
//! the client never sees complete. A page whose stamp is at most `done` is used by no
//! work in flight, recorded or submitted: wgpu frees it the moment it is destroyed,
//! whatever still holds a clone of its buffer. Any other page given back is held by the
//! budget until the device is done with the work that may use it (see
//! [`budget`](super::budget)).
//!
//! A batch wgpu never runs (a lost device drops the callback uncalled) leaves `done`
//! where it was: its pages are then never freed at once, only the usual way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stamp of a page lent to the application: never known done.
pub const LENT: u64 = u64::MAX;

/// The serial of the batch being recorded, and the highest one known done.
#[derive(Debug)]
pub struct Fences {
    recording: AtomicU64,
    done: AtomicU64,
}

impl Default for Fences {
    fn default() -> Self {
        Self {
            recording: AtomicU64::new(1),
            done: AtomicU64::new(0),
        }
    }
}

/// A batch taken out for submission: [`finished`](Self::finished) once the device is
/// done with it (from the work-done callback registered behind its submit).
#[derive(Debug)]
pub struct BatchFence {
    fences: Arc<Fences>,
    serial: u64,
}

impl BatchFence {
    /// Records that the device is done with this batch and every batch before it.
    pub fn finished(self) {
        self.fences.done.fetch_max(self.serial, Ordering::AcqRel);
    }

    /// The batch's serial.
    pub fn serial(&self) -> u64 {
        self.serial
    }
}

impl Fences {
    /// The serial of the batch being recorded now (pages handed out for recording are
    /// stamped with it).
    pub fn recording(&self) -> u64 {
        self.recording.load(Ordering::Acquire)
    }

    /// The highest serial whose batch, and every batch before it, the device is known
    /// to be done with (0 before the first).
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Whether work stamped `last_use` (see the module doc) is known finished: nothing
    /// recorded or submitted that is still unfinished uses the page.
    pub fn finished(&self, last_use: u64) -> bool {
        last_use <= self.done()
    }

    /// Ends the batch being recorded: call it when the batch is taken out for
    /// submission, and complete the returned fence once the device is done with it.
    pub fn close(self: &Arc<Self>) -> BatchFence {
        BatchFence {
            fences: self.clone(),
            serial: self.recording.fetch_add(1, Ordering::AcqRel),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_finished_once_its_batch_and_those_before_are_done() {
        let fences = Arc::new(Fences::default());
        assert!(fences.finished(0), "a page never handed out");
        let first = fences.recording();
        assert!(!fences.finished(first), "still being recorded");
        let one = fences.close();
        let second = fences.recording();
        assert_eq!((one.serial(), second), (first, first + 1));
        let two = fences.close();
        assert!(!fences.finished(first), "submitted, not done");
        two.finished();
        assert!(fences.finished(first) && fences.finished(second));
        one.finished();
        assert_eq!(fences.done(), second, "never goes back");
        assert!(!fences.finished(fences.recording()));
        assert!(!fences.finished(LENT));
    }
}
