//! [`ClientQueue`]: the device's queue as the client lends it to the application.

use super::Client;

/// The client's queue, lent to the application by [`Client::queue`]: every method of
/// `wgpu::Queue` through `Deref`, and the two that touch the client's slices ordered
/// with the client's own work.
///
/// - [`submit`](Self::submit) first submits the work the client recorded, then the
///   application's command buffers, and counts the submission: a slice exported by
///   [`Client::resource`] stays reserved after its last drop until such a submission
///   (from any thread), a [`Client::sync`] or a [`Client::cleanup`]
///   (see the README, "What the client asks of the application").
/// - [`write_buffer`](Self::write_buffer) first submits the work the client recorded,
///   so the write runs after every launch and write made before it, even through a
///   `ClientQueue` kept from earlier (wgpu runs a `write_buffer` before the next
///   submission, so without this it would run before the client's pending work).
///
/// Submitting through the `wgpu::Queue` itself (`&*queue`, or the application's own
/// clone) bypasses both.
pub struct ClientQueue<'a> {
    pub(crate) client: &'a Client,
}

impl std::ops::Deref for ClientQueue<'_> {
    type Target = wgpu::Queue;

    fn deref(&self) -> &wgpu::Queue {
        &self.client.shared.queue
    }
}

impl ClientQueue<'_> {
    /// Submits the client's recorded work, then `command_buffers`, in the client's submit
    /// turn; returns the application's submission. A failed submit of the client's work
    /// is kept as its outputs' claims (see [`Client::flush`]).
    pub fn submit<I: IntoIterator<Item = wgpu::CommandBuffer>>(
        &self,
        command_buffers: I,
    ) -> wgpu::SubmissionIndex {
        let shared = &self.client.shared;
        let _turn = self.client.turn();
        let _ = self.client.flush();
        let submission = shared.queue.submit(command_buffers);
        shared.export_epoch.advance();
        submission
    }

    /// Writes `data` at byte `offset` of `buffer` (`wgpu::Queue::write_buffer`), after
    /// submitting the client's recorded work, in the client's submit turn.
    pub fn write_buffer(&self, buffer: &wgpu::Buffer, offset: wgpu::BufferAddress, data: &[u8]) {
        let _turn = self.client.turn();
        let _ = self.client.flush();
        self.client.shared.queue.write_buffer(buffer, offset, data);
    }
}
