//! Whether the device was lost: what the client's device-lost callback recorded.
//!
//! The loss is known from wgpu's device-lost callback only (the client installs it, see
//! `client::hooks`), never from an error's text: wgpu reports a lost device to that
//! callback and to no error scope.

use parking_lot::Mutex;
use std::sync::Arc;

/// Whether the device was lost, and wgpu's message. Cheap to clone; clones share the
/// state.
#[derive(Clone, Default)]
pub(crate) struct DeviceLoss {
    inner: Arc<Mutex<Option<String>>>,
}

impl DeviceLoss {
    /// Records the loss (the first message is kept).
    pub(crate) fn record(&self, message: String) {
        let mut held = self.inner.lock();
        if held.is_none() {
            *held = Some(message);
        }
    }

    /// Whether the device was lost (no copy of the message: the launch path asks this
    /// on every dispatch).
    pub(crate) fn is_lost(&self) -> bool {
        self.inner.lock().is_some()
    }

    /// wgpu's message when the device was lost.
    pub(crate) fn message(&self) -> Option<String> {
        self.inner.lock().clone()
    }
}
