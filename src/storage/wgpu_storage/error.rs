//! The only place a wgpu error becomes an error of ours.
//!
//! `create_buffer`, dispatches and copies never fail synchronously in wgpu: their errors
//! go to the innermost error scope of the calling thread, or, if none matches, to the
//! device's uncaptured-error handler (which panics by default). [`capture`] runs an
//! operation inside out-of-memory, validation and internal scopes so that no error of
//! ours ever reaches that handler.

use cubecl_runtime::server::IoError;

/// Runs `operation` inside error scopes for every wgpu error filter and returns its
/// result with the first error it raised, if any.
///
/// Scopes are thread-local in wgpu, so work other threads submit meanwhile is not caught
/// here; popping resolves at once on native backends.
pub fn capture<T>(
    device: &wgpu::Device,
    operation: impl FnOnce() -> T,
) -> (T, Option<wgpu::Error>) {
    let out_of_memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = operation();
    // Popped innermost first, as scopes must be.
    let errors = [internal.pop(), validation.pop(), out_of_memory.pop()];
    let error = errors.into_iter().find_map(pollster::block_on);
    (value, error)
}

/// Maps a wgpu error raised while making a page of `size` bytes:
/// `Error::OutOfMemory` to `IoError::OutOfMemory`; a validation or internal error to
/// `IoError::Unknown` carrying wgpu's message.
pub fn page_error(error: wgpu::Error, size: u64) -> IoError {
    match error {
        wgpu::Error::OutOfMemory { .. } => IoError::OutOfMemory {
            size,
            backtrace: Default::default(),
        },
        other => IoError::Unknown {
            description: format!("wgpu refused a buffer of {size} bytes: {other}"),
            backtrace: Default::default(),
        },
    }
}
