//! Pending work: one open command encoder that launches, upload copies and read copies
//! join in program order, and the submission of it as one batch.
//!
//! wgpu validates what is encoded into a command encoder when the encoder is finished,
//! so an encoder fails or succeeds whole. What wgpu reports for one operation at
//! encoding time (a bind group, a pipeline, our own limit checks) stays that operation's
//! error; an error reported when an encoder is finished or submitted claims the bytes of
//! every output it wrote (the launches' outputs and the writes' ranges), because none of
//! them is known to have run. The batch keeps only weak references to those outputs, so
//! a handle dropped before the submit is freed as usual.
//!
//! A compaction's copies are a **segment** of their own: the work recorded before them
//! is sealed into one encoder, the copies go into a second, and later work opens a
//! third. The segments are submitted one by one, in order, each inside its own error
//! scopes (behind the segments of batches already in submission: `segments`), so a
//! failure of the application's work never claims a slice whose only part
//! in the batch was to move: its bytes were whole where it left, and the copy that ran
//! put them where it is now. A failed segment of work also claims the outputs of the
//! segments of work after it (they may have read what it left unwritten); a segment of
//! moves is claimed only by its own failure.

pub(crate) use super::segments::BatchFailure;
use super::segments::{Outcome, Segment, SegmentQueue};
use super::upload_page::UploadPage;
use crate::storage::wgpu_storage::budget::Retiring;
use crate::storage::wgpu_storage::error::capture;
use crate::storage::wgpu_storage::fences::BatchFence;
use cubecl_runtime::memory_management::{ManagedMemoryBinding, WeakMemoryBinding};
use std::ops::Range;

/// When pending work is submitted without a read, flush or sync asking for it.
///
/// Read from the `[submit]` table of `wgpu-memory.toml` (`max_dispatches`, `max_bytes`),
/// or set with `Client::set_submit_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitPolicy {
    /// Launches recorded since the last submit that make the next one due. Default 256:
    /// enough to hide wgpu's per-submit cost (tens of µs), small enough that the GPU
    /// starts early on long launch streams. 0 submits after every launch.
    pub max_dispatches: u32,
    /// Bytes copied (uploads and reads) since the last submit that make the next one
    /// due, in bytes. Default 64 MiB: it also bounds the upload staging held by a batch.
    pub max_bytes: u64,
}

fn default_dispatches() -> u32 {
    256
}

fn default_bytes() -> u64 {
    64 << 20
}

impl Default for SubmitPolicy {
    fn default() -> Self {
        Self {
            max_dispatches: default_dispatches(),
            max_bytes: default_bytes(),
        }
    }
}

/// Commands (copies and dispatches, the client's own edge merges included) an open
/// batch holds at most: the next operation after that many submits it, whatever the
/// [`SubmitPolicy`] says. Bounds the batch's encoder, its output list and the bind
/// groups it keeps alive, for streams of tiny or unaligned writes that count few bytes.
pub const MAX_BATCH_COMMANDS: u32 = 4096;

/// The work recorded since the last submit.
#[derive(Default)]
pub(crate) struct PendingWork {
    /// Segments sealed before the open encoder, oldest first (at most two per
    /// compaction recorded in the batch).
    sealed: Vec<Segment>,
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Bytes the batch writes: claimed by the batch's failure if it fails. Bounded by
    /// the submit policy (one entry per launch output or write).
    outputs: Vec<(WeakMemoryBinding, Range<u64>)>,
    /// Upload staging pages the batch copies from: unmapped before the submit, mapped
    /// again after it.
    uploads: Vec<UploadPage>,
    dispatches: u32,
    bytes: u64,
    /// Copies and dispatches recorded, at most [`MAX_BATCH_COMMANDS`] before a submit.
    commands: u32,
    /// Compactions recorded so far, over the client's life (never reset): an operation
    /// compares it before and after resolving locations (`Server::check_unmoved`).
    moves_recorded: u64,
    /// Whether a write was handed to the queue (`queue.write_buffer`) since the last
    /// take: the batch then submits even without commands, so the writes go to the
    /// device, and carries a fence that the device finishes behind them.
    queued_writes: bool,
}

/// A batch taken out of the pending work, ready to submit (without the client's lock).
pub(crate) struct Batch {
    segments: Vec<Segment>,
    uploads: Vec<UploadPage>,
    /// The bytes of pages given back up to this batch: credited to the budget once the
    /// device is done with it (see `storage::wgpu_storage::budget`).
    pub(crate) retiring: Option<Retiring>,
    /// The batch's serial, finished once the device is done with it (see
    /// `storage::wgpu_storage::fences`); `None` for a batch without work.
    pub(crate) fence: Option<BatchFence>,
    /// Whether writes were handed to the queue since the batch before (it submits even
    /// without commands).
    queued_writes: bool,
}

impl PendingWork {
    /// The open encoder, with no compute pass open on it (copies go here).
    pub(crate) fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        self.commands += 1;
        self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgpu-memory batch"),
            })
        })
    }

    /// The open compute pass (launches go here), opened on the encoder when needed.
    pub(crate) fn pass(&mut self, device: &wgpu::Device) -> &mut wgpu::ComputePass<'static> {
        self.commands += 1;
        if self.pass.is_none() {
            let pass = self
                .encoder(device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("wgpu-memory launches"),
                    timestamp_writes: None,
                })
                .forget_lifetime();
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("opened above")
    }

    /// Notes bytes the batch writes.
    pub(crate) fn output(&mut self, binding: &ManagedMemoryBinding, range: Range<u64>) {
        self.outputs.push((binding.downgrade(), range));
    }

    /// Records a compaction's copies as a segment of their own (see the module docs):
    /// `record` encodes them, `moved` are the moved slices (outputs of the segment) and
    /// `copies` the number of copies, each counted as a command.
    pub(crate) fn record_moves(
        &mut self,
        device: &wgpu::Device,
        copies: usize,
        record: impl FnOnce(&mut wgpu::CommandEncoder),
        moved: Vec<(WeakMemoryBinding, Range<u64>)>,
    ) {
        self.seal(false);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wgpu-memory compaction"),
        });
        record(&mut encoder);
        self.sealed.push(Segment {
            encoder,
            outputs: moved,
            moves: true,
        });
        self.moves_recorded += 1;
        self.commands = self
            .commands
            .saturating_add(u32::try_from(copies).unwrap_or(u32::MAX));
    }

    /// Seals the open encoder, with the outputs noted so far, into a segment.
    fn seal(&mut self, moves: bool) {
        self.pass = None;
        if let Some(encoder) = self.encoder.take() {
            self.sealed.push(Segment {
                encoder,
                outputs: std::mem::take(&mut self.outputs),
                moves,
            });
        }
    }

    /// Compactions recorded so far (see the field).
    pub(crate) fn moves_recorded(&self) -> u64 {
        self.moves_recorded
    }

    /// Counts `count` more commands (copies) recorded by one operation.
    pub(crate) fn count_commands(&mut self, count: usize) {
        self.commands = self
            .commands
            .saturating_add(u32::try_from(count).unwrap_or(u32::MAX));
    }

    /// Notes an upload staging page the batch copies from (once per page).
    pub(crate) fn upload(&mut self, page: UploadPage) {
        self.uploads.push(page);
    }

    pub(crate) fn count_dispatch(&mut self) {
        self.dispatches += 1;
    }

    pub(crate) fn count_bytes(&mut self, bytes: u64) {
        self.bytes += bytes;
    }

    /// Whether the policy makes a submit due.
    pub(crate) fn due(&self, policy: &SubmitPolicy) -> bool {
        self.dispatches > policy.max_dispatches
            || self.bytes >= policy.max_bytes
            || self.commands >= MAX_BATCH_COMMANDS
    }

    /// Commands recorded since the last submit (tests check the bound).
    #[cfg(test)]
    pub(crate) fn commands(&self) -> u32 {
        self.commands
    }

    /// Whether anything is recorded, or handed to the queue, since the last take.
    pub(crate) fn is_empty(&self) -> bool {
        !self.records_commands() && self.uploads.is_empty() && !self.queued_writes
    }

    /// Whether commands are recorded (copies, dispatches, compaction segments): work a
    /// write handed to the queue must not jump ahead of where it uses the same page.
    pub(crate) fn records_commands(&self) -> bool {
        self.encoder.is_some() || !self.sealed.is_empty()
    }

    /// Notes a write handed to the queue (see the field).
    pub(crate) fn queued_write(&mut self) {
        self.queued_writes = true;
    }

    /// Takes everything recorded as one batch; the pending work starts empty.
    pub(crate) fn take(&mut self) -> Batch {
        self.seal(false);
        let batch = Batch {
            segments: std::mem::take(&mut self.sealed),
            uploads: std::mem::take(&mut self.uploads),
            retiring: None,
            fence: None,
            queued_writes: std::mem::take(&mut self.queued_writes),
        };
        self.dispatches = 0;
        self.bytes = 0;
        self.commands = 0;
        batch
    }
}

impl Batch {
    /// Whether the batch carries no work (only retired page bytes, if anything).
    pub(crate) fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.uploads.is_empty() && !self.queued_writes
    }

    /// Finishes and submits the batch's segments in order, each inside its own error
    /// scopes, behind the segments `order` holds already (see `segments`); upload pages
    /// are unmapped first (a submission may not use a mapped buffer) and mapped again
    /// behind the last.
    ///
    /// # Errors
    /// [`BatchFailure`] when wgpu reports an error for a segment: the outputs to claim
    /// (see the module docs), still alive, are returned. The other segments ran.
    pub(crate) fn submit(
        self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        order: &SegmentQueue,
    ) -> Result<wgpu::SubmissionIndex, BatchFailure> {
        let Batch {
            segments,
            uploads,
            retiring,
            fence,
            queued_writes: _,
        } = self;
        // Credited, and the fence finished, once the device is done with this submission
        // and every earlier one: no work that could use a page of the bucket, or a page
        // stamped with this batch, is left then.
        let done = (retiring.is_some() || fence.is_some()).then_some(move || {
            if let Some(fence) = fence {
                fence.finished();
            }
            drop(retiring);
        });
        // Unmapped in scopes of their own: an unmap wgpu refuses is no error of the
        // recorded work, so it must not fail the batch and claim outputs that ran.
        let ((), unmap_error) = capture(device, || {
            for page in &uploads {
                page.unmap();
            }
        });
        if let Some(error) = unmap_error {
            tracing::debug!(%error, "wgpu refused to unmap an upload staging page");
        }
        // Should an application callback panic inside the submit, dropping `uploads`
        // while unwinding maps each page again (`UploadPage`'s guard).
        let Outcome { failure, last } = order.submit(device, queue, segments);
        // A batch of upload pages alone still submits once: their maps follow it; so does
        // one of writes handed to the queue alone, which wgpu runs at the next submit.
        let submission = match last {
            Some(index) => index,
            None => queue.submit(std::iter::empty()),
        };
        if let Some(done) = done {
            queue.on_submitted_work_done(done);
        }
        for page in uploads {
            page.remap();
        }
        match failure {
            None => Ok(submission),
            Some(failure) => Err(failure),
        }
    }
}
