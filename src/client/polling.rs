//! Polling the device outside every lock of ours, and the waits that bound upload
//! staging in flight.

use super::{Client, ClientError, MAX_IN_FLIGHT, STAGING_FLOOR};
use std::sync::atomic::Ordering;

impl Client {
    /// Before an upload of `size` bytes: notices a lost device, and waits for the device
    /// while upload staging in flight, with the write's own bytes, would be over its
    /// bound ([`staging_bound`]), so a stream of writes holds a bounded amount of
    /// staging: the write's page counts before it is made, not after (the main job's
    /// chain made a 512 KiB page past the bound while 1 MiB was in flight). A write with
    /// nothing in flight never waits, whatever its size. Every wait is on the device's
    /// answer, and there are at most 64 of them. Never waits on the web, where no write
    /// takes upload staging.
    pub(super) fn before_upload(&self, size: u64) {
        self.notice_loss();
        // The web cannot wait, and its writes take no upload staging of ours (they are
        // handed to the queue: `server::uploads::queued`).
        if cfg!(target_arch = "wasm32") {
            return;
        }
        for _ in 0..64 {
            let in_flight = self.shared.uploads_in_flight.load(Ordering::Relaxed);
            if self.shared.lost.message().is_some() || in_flight == 0 {
                return;
            }
            // What staging would hold with this write's bytes: waiting is only worth it
            // while that is over the bound, and it is decided before the page is made.
            let in_flight = in_flight.saturating_add(size);
            // Under the floor the working set is not looked at, and the bound starts
            // afresh for the next crossing.
            if in_flight <= STAGING_FLOOR {
                self.shared
                    .staging_bound
                    .store(STAGING_FLOOR, Ordering::Relaxed);
                return;
            }
            if in_flight <= self.shared.staging_bound.load(Ordering::Relaxed) {
                return;
            }
            // Past the bound last computed: compute it again (a walk of the main
            // memory's slices), and wait only when staging is past that too.
            let in_use = self.shared.server.lock().main.memory_usage().bytes_in_use;
            let bound = staging_bound(in_use, size);
            self.shared.staging_bound.store(bound, Ordering::Relaxed);
            if in_flight <= bound {
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

/// The upload staging in flight a write of `size` bytes may find before it waits for the
/// device, in bytes, when the main memory has `in_use` bytes in use: half the working set
/// (`in_use + size`), at least [`STAGING_FLOOR`] and at most [`MAX_IN_FLIGHT`]. Staging
/// holds a second copy of the bytes on their way, so this keeps it to at most half again
/// the working set (issue 23: the main job's chain had every weight in flight at once,
/// 4.5 MiB of staging for 2.2 MiB in use).
pub(crate) fn staging_bound(in_use: u64, size: u64) -> u64 {
    (in_use.saturating_add(size) / 2).clamp(STAGING_FLOOR, MAX_IN_FLIGHT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half the working set, between the floor and the cap.
    #[test]
    fn staging_in_flight_is_bounded_by_half_the_working_set() {
        assert_eq!(staging_bound(0, 4096), STAGING_FLOOR);
        assert_eq!(staging_bound(6 << 20, 2 << 20), 4 << 20);
        assert_eq!(staging_bound(4 << 30, 0), MAX_IN_FLIGHT);
        assert_eq!(staging_bound(u64::MAX, u64::MAX), MAX_IN_FLIGHT);
    }
}
