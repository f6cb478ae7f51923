//! [`UploadPage`]: an upload staging page on its way through one batch.
//!
//! wgpu runs application callbacks (their `on_submitted_work_done` and `map_async`
//! callbacks) inside our `queue.submit` and `device.poll`, and one of them may panic.
//! Two guards keep upload staging whole across such a panic:
//!
//! - dropping an `UploadPage` that was not mapped again yet maps it again, so a panic
//!   that unwinds through the submit still leaves every free staging slice in a mapped
//!   page (the rule of [`upload`](super::uploads::upload));
//! - the in-flight bytes of a page are given back by a guard the map callback owns, so
//!   they return to zero whether wgpu calls that callback or drops it uncalled (a panic
//!   in an earlier callback of the same poll drops the later ones).

use cubecl_runtime::memory_management::ManagedMemoryHandle;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A staging page a batch copies from: unmapped before the submit, mapped again after,
/// and given back (its handle dropped) when that map completes.
pub(crate) struct UploadPage {
    /// `None` once the page was handed to its map callback.
    held: Option<Held>,
    device: wgpu::Device,
}

/// What the map callback takes over: the page's slice and its in-flight bytes.
struct Held {
    handle: ManagedMemoryHandle,
    buffer: wgpu::Buffer,
    in_flight: InFlight,
}

/// `bytes` counted in a shared in-flight total until this is dropped.
struct InFlight {
    total: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl UploadPage {
    /// A page whose slice `handle` holds, counted in `in_flight` (bytes, already added by
    /// the caller) until it is mapped again.
    pub(crate) fn new(
        device: &wgpu::Device,
        handle: ManagedMemoryHandle,
        buffer: wgpu::Buffer,
        in_flight: Arc<AtomicU64>,
    ) -> Self {
        let bytes = buffer.size();
        Self {
            held: Some(Held {
                handle,
                buffer,
                in_flight: InFlight {
                    total: in_flight,
                    bytes,
                },
            }),
            device: device.clone(),
        }
    }

    /// Unmaps the page before the submission that reads it.
    pub(crate) fn unmap(&self) {
        if let Some(held) = &self.held {
            held.buffer.unmap();
        }
    }

    /// Maps the page again behind the submission; the slice is free once mapped.
    pub(crate) fn remap(mut self) {
        self.remap_now();
    }

    fn remap_now(&mut self) {
        let Some(Held {
            handle,
            buffer,
            in_flight,
        }) = self.held.take()
        else {
            return;
        };
        let ((), error) = crate::storage::wgpu_storage::error::capture(&self.device, || {
            buffer.map_async(wgpu::MapMode::Write, .., move |result| {
                if let Err(error) = result {
                    // Refused only on a lost device, or for a page a panic left mapped
                    // (then it is still mapped): every later write fails on the lost
                    // device before it reserves staging, so the slice can go back.
                    tracing::debug!(%error, "upload staging page not mapped again");
                }
                drop(handle);
                drop(in_flight);
            })
        });
        if let Some(error) = error {
            tracing::debug!(%error, "wgpu refused to map an upload staging page again");
        }
    }
}

impl Drop for UploadPage {
    /// A page its batch did not map again (a panic unwound through the submit) is mapped
    /// again here.
    fn drop(&mut self) {
        self.remap_now();
    }
}
