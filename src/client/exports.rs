//! [`Client::resource`]: a handle's bytes lent to the application's own bind groups and
//! copies, and the exported slices held for the work recorded on them.

use super::Client;
use crate::server::{ClientError, Handle, HandleResource};

impl Client {
    /// Where `handle`'s bytes are, for the application's own bind groups and copies.
    /// Submits the client's recorded work first, so that the application's own
    /// submissions made after this call see every earlier write and launch.
    ///
    /// The slice does not move (no compaction takes it or its page) while the resource
    /// or a clone of it lives. When its last clone is dropped, the slice stays reserved
    /// and in place until **the thread that dropped it** next submits through
    /// [`queue`](Self::queue)`().submit(..)`, or calls [`sync`](Self::sync),
    /// [`cleanup`](Self::cleanup) or [`install_memory_pools`](Self::install_memory_pools),
    /// or exits; other threads' submissions, syncs, cleanups and compactions do not end
    /// it. So work a thread records on the resource of a live handle (a copy, a pass
    /// whose bind group took `resource(..)?.as_binding()` in one statement, a
    /// `queue().write_buffer`) and then submits through `queue()` lands in that handle's
    /// bytes, and work recorded on a handle dropped meanwhile never lands in another
    /// allocation, whatever other threads do in between, whether or not the resource
    /// was dropped before the submit. At most
    /// [`MAX_HELD_EXPORTS`](super::MAX_HELD_EXPORTS) slices are held so (past it the
    /// oldest is let go, with a warning).
    ///
    /// What this cannot cover, keep the resource alive for: work recorded on one thread
    /// and submitted from another (send the resource with the command buffer, and drop
    /// it after the submit), and work submitted through the `wgpu::Queue` itself rather
    /// than `queue()`. Once such a resource is dropped, the dropping thread's next
    /// submission lets the slice go: it may then move, or be given to a new allocation,
    /// and work submitted later lands at its old place. A thread that drops resources
    /// and then never submits, syncs, cleans up or exits keeps their slices reserved
    /// ([`held_exports`](Self::held_exports) counts them).
    ///
    /// # Errors
    /// [`ClientError::Memory`] for a stale handle; [`ClientError::ForeignHandle`] for a
    /// handle of another client; [`ClientError::DeviceLost`] or [`ClientError::Wgpu`] when
    /// the recorded work cannot be submitted.
    pub fn resource(&self, handle: &Handle) -> Result<HandleResource, ClientError> {
        // Pinned first: no compaction recorded from here on moves the slice, and the
        // flush puts every move recorded before on the queue (a batch another thread
        // took is submitted before this thread gets the submit turn), so the place
        // handed out is where the bytes are once the application's work runs.
        let pin = {
            let server = self.shared.server.lock();
            server.check_owner(handle, "resource")?;
            server.pin(handle)
        };
        self.flush()?;
        self.shared.server.lock().export_resource(handle, pin)
    }

    /// Exported slices held: those whose resource lives, and those whose resource was
    /// dropped, waiting for the dropping thread's next submission through
    /// [`queue`](Self::queue), [`sync`](Self::sync), [`cleanup`](Self::cleanup) or
    /// [`install_memory_pools`](Self::install_memory_pools), or its exit (at most
    /// [`MAX_HELD_EXPORTS`](super::MAX_HELD_EXPORTS); see [`resource`](Self::resource)).
    pub fn held_exports(&self) -> usize {
        self.shared.server.lock().held_exports()
    }
}
