//! [`ClientQueue`]: the device's queue as the client lends it to the application.

use super::Client;

/// The client's queue, lent to the application by [`Client::queue`]: every method of
/// `wgpu::Queue` through `Deref`, and the two that touch the client's slices ordered
/// with the client's own work.
///
/// - [`submit`](Self::submit) first submits the work the client recorded, then the
///   application's command buffers, and counts the submission for the calling thread: a
///   slice exported by [`Client::resource`] stays reserved and in place after its
///   resource's last clone is dropped until the thread that dropped it submits here (or
///   calls [`Client::sync`], [`Client::cleanup`] or [`Client::install_memory_pools`], or
///   exits). Other threads' submissions do not end it, so work a thread records on a
///   live handle's resource and submits here lands in that handle's bytes even when the
///   resource was dropped before the submit (see [`Client::resource`] for what this
///   cannot cover: work recorded on one thread and submitted from another).
/// - [`write_buffer`](Self::write_buffer) first submits the work the client recorded,
///   so the write runs after every launch and write made before it, even through a
///   `ClientQueue` kept from earlier (wgpu runs a `write_buffer` before the next
///   submission, so without this it would run before the client's pending work).
///
/// - [`write_buffer_with`](Self::write_buffer_with) returns a view that, when dropped,
///   first submits the work the client recorded, then schedules the write: it lands
///   after every launch and write made before the view is dropped.
///
/// Submitting through the `wgpu::Queue` itself (`&*queue`, or the application's own
/// clone) bypasses all three.
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
    ///
    /// Once wgpu's submit returned, the exported slices whose resources this thread
    /// dropped before the call are let go (a resource dropped during the call, in a
    /// wgpu callback, waits for the thread's next one).
    pub fn submit<I: IntoIterator<Item = wgpu::CommandBuffer>>(
        &self,
        command_buffers: I,
    ) -> wgpu::SubmissionIndex {
        let shared = &self.client.shared;
        shared.export_epoch.counted(|| {
            let _turn = self.client.turn();
            let _ = self.client.flush();
            shared.queue.submit(command_buffers)
        })
    }

    /// Writes `data` at byte `offset` of `buffer` (`wgpu::Queue::write_buffer`), after
    /// submitting the client's recorded work, in the client's submit turn.
    pub fn write_buffer(&self, buffer: &wgpu::Buffer, offset: wgpu::BufferAddress, data: &[u8]) {
        let _turn = self.client.turn();
        let _ = self.client.flush();
        self.client.shared.queue.write_buffer(buffer, offset, data);
    }

    /// A view of `size` bytes that, when dropped, writes its bytes at byte `offset` of
    /// `buffer` (`wgpu::Queue::write_buffer_with`), ordered after the client's work: the
    /// drop first submits what the client recorded, in the client's submit turn, and
    /// only then hands the write to wgpu (which runs it before the next submission). So
    /// the write lands after every launch and write made before the view is dropped,
    /// even through a `ClientQueue` kept from earlier; `wgpu::Queue::write_buffer_with`
    /// itself would land before the client's unsubmitted work.
    ///
    /// `None` when wgpu refuses the write (as `wgpu::Queue::write_buffer_with`: the
    /// range leaves the buffer, or the buffer lacks `COPY_DST`); wgpu then reports the
    /// error to the device's uncaptured-error handler (see
    /// [`Client::on_uncaptured_error`]).
    #[must_use]
    pub fn write_buffer_with(
        &self,
        buffer: &wgpu::Buffer,
        offset: wgpu::BufferAddress,
        size: wgpu::BufferSize,
    ) -> Option<ClientWriteBufferView<'_>> {
        let view = self
            .client
            .shared
            .queue
            .write_buffer_with(buffer, offset, size)?;
        Some(ClientWriteBufferView {
            client: self.client,
            view: Some(view),
        })
    }
}

/// The view [`ClientQueue::write_buffer_with`] returns: wgpu's
/// [`QueueWriteBufferView`](wgpu::QueueWriteBufferView) through `Deref`/`DerefMut`
/// (`copy_from_slice`, `slice`, `len`), whose drop submits the client's recorded work
/// before it schedules the write.
pub struct ClientWriteBufferView<'a> {
    client: &'a Client,
    /// Taken on drop; always `Some` before.
    view: Option<wgpu::QueueWriteBufferView>,
}

impl std::ops::Deref for ClientWriteBufferView<'_> {
    type Target = wgpu::QueueWriteBufferView;

    fn deref(&self) -> &wgpu::QueueWriteBufferView {
        self.view.as_ref().expect("the view is taken only on drop")
    }
}

impl std::ops::DerefMut for ClientWriteBufferView<'_> {
    fn deref_mut(&mut self) -> &mut wgpu::QueueWriteBufferView {
        self.view.as_mut().expect("the view is taken only on drop")
    }
}

impl std::fmt::Debug for ClientWriteBufferView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ClientWriteBufferView")
            .field(&self.view)
            .finish()
    }
}

impl Drop for ClientWriteBufferView<'_> {
    fn drop(&mut self) {
        // The turn first (as `write_buffer`): no other thread submits between the flush
        // and the write being scheduled. A failed flush is kept as its outputs' claims.
        let _turn = self.client.turn();
        let _ = self.client.flush();
        // Dropping wgpu's view schedules the write.
        drop(self.view.take());
    }
}
