//! Polling the device outside every lock of ours, and the waits that bound upload
//! staging in flight.

use super::{Client, ClientError, MAX_IN_FLIGHT};
use std::sync::atomic::Ordering;

impl Client {
    /// Before an upload: notices a lost device, and waits for the device while upload
    /// staging in flight is over [`MAX_IN_FLIGHT`] bytes, so a stream of writes holds a
    /// bounded amount of staging. Every wait is on the device's answer, and there are at
    /// most 64 of them.
    pub(super) fn before_upload(&self) {
        self.notice_loss();
        for _ in 0..64 {
            if self.shared.uploads_in_flight.load(Ordering::Relaxed) <= MAX_IN_FLIGHT
                || self.shared.lost.message().is_some()
            {
                return;
            }
            let _ = self.flush();
            self.poll(wgpu::PollType::wait_indefinitely());
        }
    }

    /// `error`, or the lost-device error when wgpu's error came from a lost device (the
    /// device-lost callback runs in the poll this makes).
    pub(super) fn lost_or(&self, error: ClientError) -> ClientError {
        self.notice_loss();
        match (&error, self.shared.lost.message()) {
            (ClientError::DeviceLost { .. }, _) | (_, None) => error,
            (_, Some(message)) => crate::server::lost_error(format!("{error}"), message),
        }
    }

    /// Runs wgpu's device maintenance without waiting: completes callbacks, and lets the
    /// device-lost callback run when the device was destroyed. Holds no lock of ours.
    pub(super) fn notice_loss(&self) {
        self.poll(wgpu::PollType::Poll);
    }

    /// Polls the device holding no lock of ours; a panic inside wgpu is caught and
    /// logged.
    pub(super) fn poll(&self, poll: wgpu::PollType) -> bool {
        let device = &self.shared.device;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.poll(poll))) {
            Ok(Ok(_)) => true,
            Ok(Err(error)) => {
                tracing::debug!(%error, "device poll failed");
                false
            }
            Err(_) => {
                tracing::error!("device poll panicked inside wgpu");
                false
            }
        }
    }
}
