//! The order in which batch segments reach wgpu, across batches ([`SegmentQueue`]).
//!
//! A batch is submitted one segment per `queue.submit` (see `batch`), and wgpu runs the
//! callbacks whose work is done at the end of every `queue.submit`, on the submitting
//! thread, which holds the submit turn. Such a callback may call the client: its read,
//! write or launch resolves locations after the whole batch (a compaction segment later
//! in the batch has already moved the slices in the server's tables), so the
//! submission it makes must reach wgpu after the rest of the batch. Every batch
//! therefore queues its segments here, in order, and every submission of the client
//! first submits what is queued: a submission made inside a segment's submit submits
//! the batch's remaining segments before its own work.
//!
//! The queue lives in the submit turn and only its holder touches it. It holds the
//! segments of the batches being submitted on the turn holder's stack (one per callback
//! nesting, each bounded by [`MAX_BATCH_COMMANDS`](super::MAX_BATCH_COMMANDS)), and is
//! empty whenever no submission is in progress.

use super::Late;
use crate::storage::wgpu_storage::error::{LateErrors, capture_late, destroyed_resource};
use cubecl_runtime::memory_management::{ManagedMemoryBinding, WeakMemoryBinding};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

/// A sealed part of a batch: one encoder, and the outputs it writes.
pub(crate) struct Segment {
    pub(super) encoder: wgpu::CommandEncoder,
    pub(super) outputs: Vec<(WeakMemoryBinding, Range<u64>)>,
    /// Only a compaction's copies: claimed by nothing but its own failure.
    pub(super) moves: bool,
}

/// A batch wgpu refused: its message, and the outputs to claim.
pub(crate) struct BatchFailure {
    pub(crate) message: String,
    /// wgpu's typed error says a resource the batch used was destroyed.
    pub(crate) destroyed: bool,
    pub(crate) outputs: Vec<(ManagedMemoryBinding, Range<u64>)>,
}

/// Segments waiting for their `queue.submit`, oldest first, each with the outcome of
/// the batch it belongs to.
pub(crate) struct SegmentQueue {
    waiting: Mutex<VecDeque<(Segment, Arc<Mutex<Outcome>>)>>,
    /// Where a segment the browser refuses after its submit returned is kept, with its
    /// outputs (the web only; see `faults::late`).
    late: LateErrors<Late>,
}

/// What the segments of one batch did, whoever submitted them.
#[derive(Default)]
pub(crate) struct Outcome {
    /// The failure of the batch's first failed segment, with every output claimed.
    pub(crate) failure: Option<BatchFailure>,
    /// The submission of the batch's last segment.
    pub(crate) last: Option<wgpu::SubmissionIndex>,
}

impl SegmentQueue {
    /// An empty queue whose segments' late errors (the web) go to `late`.
    pub(crate) fn new(late: LateErrors<Late>) -> Self {
        Self {
            waiting: Mutex::default(),
            late,
        }
    }

    /// Queues `segments` behind the segments already queued, and submits until the
    /// queue is empty; returns what this batch's segments did.
    pub(crate) fn submit(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        segments: Vec<Segment>,
    ) -> Outcome {
        let outcome = Arc::new(Mutex::new(Outcome::default()));
        self.waiting.lock().extend(
            segments
                .into_iter()
                .map(|segment| (segment, outcome.clone())),
        );
        self.drain(device, queue);
        // Every segment of this batch was submitted, by this drain or by one made
        // inside it.
        std::mem::take(&mut *outcome.lock())
    }

    /// Submits every queued segment, oldest first, each inside its own error scopes.
    /// No lock of ours is held inside `queue.submit`.
    pub(crate) fn drain(&self, device: &wgpu::Device, queue: &wgpu::Queue) {
        loop {
            let Some((segment, outcome)) = self.waiting.lock().pop_front() else {
                return;
            };
            let Segment {
                encoder,
                outputs,
                moves,
            } = segment;
            // On the web the refusal comes later: the segment's outputs go with it, to be
            // claimed then (nothing below uses them there).
            let mut outputs = outputs;
            let late = || Late::Submit(std::mem::take(&mut outputs));
            let (index, error) = capture_late(device, &self.late, late, || {
                queue.submit([encoder.finish()])
            });
            let mut outcome = outcome.lock();
            outcome.last = Some(index);
            // A failed segment of work also claims the later segments of work of its
            // batch (they may have read what it left unwritten); moves only their own.
            let claimed = error.is_some() || (outcome.failure.is_some() && !moves);
            if let Some(error) = error
                && outcome.failure.is_none()
            {
                outcome.failure = Some(BatchFailure {
                    destroyed: destroyed_resource(&error),
                    message: error.to_string(),
                    outputs: Vec::new(),
                });
            }
            if claimed && let Some(failure) = outcome.failure.as_mut() {
                let alive = outputs
                    .into_iter()
                    .filter_map(|(weak, range)| Some((weak.upgrade()?, range)));
                failure.outputs.extend(alive);
            }
        }
    }
}
