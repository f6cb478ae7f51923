//! Noticing a lost device, and chaining the application's device-lost callbacks.
//!
//! wgpu keeps one device-lost callback per device (`Device::set_device_lost_callback`
//! replaces the previous one). The client installs [`DeviceLoss::install`]'s callback,
//! which records the loss and then calls every callback the application registered
//! through the client, in order. A submission whose error scope reports a lost device
//! records it too, so the loss is noticed even when the application replaced our
//! callback afterwards.

use parking_lot::Mutex;
use std::sync::Arc;

/// An application's device-lost callback: the reason and wgpu's message.
pub type DeviceLostCallback = Box<dyn Fn(wgpu::DeviceLostReason, &str) + Send + Sync>;

/// Whether the device was lost, and the application's callbacks to call when it is.
/// Cheap to clone; clones share the state.
#[derive(Clone, Default)]
pub(crate) struct DeviceLoss {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    message: Mutex<Option<String>>,
    /// Bounded by what the application registers (one per call of
    /// `Client::on_device_lost`).
    listeners: Mutex<Vec<Arc<DeviceLostCallback>>>,
}

impl DeviceLoss {
    /// Installs the device-lost callback on `device`.
    pub(crate) fn install(&self, device: &wgpu::Device) {
        let loss = self.clone();
        device.set_device_lost_callback(move |reason, message| {
            tracing::error!(?reason, %message, "wgpu device lost");
            loss.record(format!("{reason:?}: {message}"));
            // Called after our lock is released: a listener may call the client.
            let listeners = loss.inner.listeners.lock().clone();
            for listener in listeners {
                listener(reason, &message);
            }
        });
    }

    /// Adds an application callback, called after the client recorded the loss.
    pub(crate) fn listen(&self, callback: DeviceLostCallback) {
        self.inner.listeners.lock().push(Arc::new(callback));
    }

    /// Records the loss (the first message is kept).
    pub(crate) fn record(&self, message: String) {
        let mut held = self.inner.message.lock();
        if held.is_none() {
            *held = Some(message);
        }
    }

    /// wgpu's message when the device was lost.
    pub(crate) fn message(&self) -> Option<String> {
        self.inner.message.lock().clone()
    }
}

/// Whether a wgpu error message says the device is lost or destroyed.
pub(crate) fn says_lost(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("device is lost")
        || message.contains("device lost")
        || message.contains("destroyed")
        || message.contains("is invalid") && message.contains("device")
}
