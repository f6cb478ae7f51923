//! Waiting for the device: [`Client::sync`] (blocking, native only) and
//! [`Client::sync_async`] (a future, every target).

use super::{Client, ClientError};
use crate::server::WorkDone;
use std::future::Future;

impl Client {
    /// Submits the recorded work and waits until everything submitted is done (an
    /// untimed wait on the device's answer; a lost device answers at once). Counts as
    /// the calling thread's submission for the exported slices it dropped (see
    /// [`resource`](Self::resource)).
    ///
    /// Native only: it blocks the calling thread, which the web cannot do. On the web
    /// (and anywhere a thread must not block) await [`sync_async`](Self::sync_async).
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is lost; [`ClientError::Wgpu`] when
    /// wgpu refuses the recorded batch or the wait fails.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn sync(&self) -> Result<(), ClientError> {
        self.shared.export_epoch.counted(|| self.flush())?;
        let device = &self.shared.device;
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            device.poll(wgpu::PollType::wait_indefinitely())
        }));
        if let Some(message) = self.shared.lost.message() {
            return Err(crate::server::lost_error("sync", message));
        }
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(crate::server::wgpu_error("sync", error)),
            Err(_) => Err(crate::server::wgpu_error(
                "sync",
                "device poll panicked inside wgpu",
            )),
        }
    }

    /// [`sync`](Self::sync) as a future, on every target: submits the recorded work now,
    /// when called (counted, as `sync` counts it, as the calling thread's submission for
    /// the exported slices it dropped, see [`resource`](Self::resource)), and resolves
    /// once the device has finished everything submitted so far, learnt from
    /// `queue.on_submitted_work_done` without blocking any thread (on native backends
    /// the client's poller thread polls the device meanwhile, as for a read).
    ///
    /// On the web, where wgpu learns of a refused operation only after it returned, the
    /// future also waits for the browser's verdict on every operation made before the
    /// call, and resolves to the first error among them, as native would have returned
    /// it from that operation (a page the browser refused is
    /// [`ClientError::OutOfMemory`]).
    ///
    /// # Errors
    /// [`ClientError::DeviceLost`] once the device is lost, before or during the wait;
    /// [`ClientError::Wgpu`] when wgpu refuses the recorded batch (on the web, any error
    /// the browser reported as above).
    pub fn sync_async(&self) -> impl Future<Output = Result<(), ClientError>> + Send + 'static {
        let done = self.shared.export_epoch.counted(|| self.work_done());
        #[cfg(target_arch = "wasm32")]
        let marks = self.shared.late.mark();
        let client = self.clone();
        async move {
            let done = done?;
            done.await;
            #[cfg(target_arch = "wasm32")]
            client.settle_late(marks).await?;
            match client.shared.lost.message() {
                Some(message) => Err(crate::server::lost_error("sync", message)),
                None => Ok(()),
            }
        }
    }

    /// Submits the recorded work (an empty submission when none is recorded, so there
    /// is one to follow) and returns the future of the device finishing it and
    /// everything submitted before. The submit turn is held throughout, so the callback
    /// follows the submission of this client's that came last.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub(super) fn work_done(&self) -> Result<WorkDone, ClientError> {
        let _turn = self.turn();
        let submission = match self.submit()? {
            Some(submission) => submission,
            None => self.shared.queue.submit([]),
        };
        Ok(WorkDone::new(
            &self.shared.queue,
            &self.shared.device,
            submission,
            self.shared.poller.clone(),
            self.shared.lost.clone(),
        ))
    }
}
