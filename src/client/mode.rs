//! Allocation-mode windows on a client: a guard that closes its window when dropped.

use super::Client;
use crate::memory_management::MemoryAllocationMode;

/// An open allocation-mode window of a [`Client`]'s main memory; dropping it closes the
/// window (see [`Client::mode_window`]).
///
/// Windows nest as a stack per client: drop guards in the reverse order they were made.
/// Threads share one stack, so open windows around single-threaded phases (a model
/// load), not around work that other threads interleave with.
#[must_use = "the window closes when the guard is dropped"]
#[derive(Debug)]
pub struct ModeWindow<'a> {
    client: &'a Client,
}

impl Client {
    /// Opens a window in which reservations use `mode` (`Persistent`: the persistent
    /// pool, reused by exact size, for weights and caches; `Dedicated`: a device
    /// allocation of its own, given back as soon as it is freed). `Auto` opens nothing.
    /// The window closes when the guard is dropped.
    pub fn mode_window(&self, mode: MemoryAllocationMode) -> Option<ModeWindow<'_>> {
        if matches!(mode, MemoryAllocationMode::Auto) {
            return None;
        }
        self.shared.server.lock().main.mode(mode);
        Some(ModeWindow { client: self })
    }

    /// Runs `work` inside a `mode` window (closed afterwards, even if `work` panics).
    pub fn with_mode<R>(&self, mode: MemoryAllocationMode, work: impl FnOnce() -> R) -> R {
        let _window = self.mode_window(mode);
        work()
    }
}

impl Drop for ModeWindow<'_> {
    fn drop(&mut self) {
        self.client
            .shared
            .server
            .lock()
            .main
            .mode(MemoryAllocationMode::Auto);
    }
}
