//! A wgpu submission as a [`Fence`] of the drop queue.

use crate::memory_management::drop_queue::{Fence, FenceError};

/// A point on a queue's timeline: the work submitted up to `submission`. Waiting polls the
/// device until that submission is done.
#[derive(Debug)]
pub(crate) struct WgpuFence {
    device: wgpu::Device,
    submission: wgpu::SubmissionIndex,
}

impl WgpuFence {
    pub(crate) fn new(device: wgpu::Device, submission: wgpu::SubmissionIndex) -> Self {
        Self { device, submission }
    }
}

impl Fence for WgpuFence {
    /// A lost device finishes every submission at once (wgpu's poll returns), so it
    /// counts as passed.
    ///
    /// # Errors
    /// [`FenceError::Failed`] when polling fails (a timeout or a submission index wgpu
    /// does not know): the memory must be kept.
    fn wait(self) -> Result<(), FenceError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(self.submission),
                timeout: None,
            })
            .map(|_| ())
            .map_err(|error| FenceError::Failed {
                message: error.to_string(),
            })
    }
}
