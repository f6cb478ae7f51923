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

/// Whether wgpu refused `error` because a resource it used was destroyed (wgpu-core's
/// typed `DestroyedResource` variants of a submission or of an encoder's commands, which
/// wgpu reports at submit). Read from the error's types, never from its text.
///
/// wgpu never reports a lost device through an error scope (its device-lost errors go
/// to the device-lost callback only), so this is the one typed fault a submission of
/// ours can meet that is not a bug of ours.
pub fn destroyed_resource(error: &wgpu::Error) -> bool {
    use wgpu::wgc::command::CommandEncoderError;
    use wgpu::wgc::device::queue::QueueSubmitError;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(submit) = current.downcast_ref::<QueueSubmitError>() {
            return match submit {
                QueueSubmitError::DestroyedResource(_) => true,
                QueueSubmitError::CommandEncoder(encoder) => encoder_destroyed(encoder),
                _ => false,
            };
        }
        if let Some(encoder) = current.downcast_ref::<CommandEncoderError>() {
            return encoder_destroyed(encoder);
        }
        if current.is::<wgpu::wgc::resource::DestroyedResourceError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// The destroyed-resource variants of an encoder's error (wgpu-core 30's list, less the
/// render-pass and query ones our encoders never record).
fn encoder_destroyed(error: &wgpu::wgc::command::CommandEncoderError) -> bool {
    use std::error::Error;
    use wgpu::wgc::command::{ClearError, CommandEncoderError, ComputePassErrorInner};
    match error {
        CommandEncoderError::DestroyedResource(_)
        | CommandEncoderError::Clear(ClearError::DestroyedResource(_)) => true,
        // The pass error's inner variant is private; its source is that variant.
        CommandEncoderError::ComputePass(pass) => matches!(
            pass.source()
                .and_then(|inner| inner.downcast_ref::<ComputePassErrorInner>()),
            Some(ComputePassErrorInner::DestroyedResource(_))
        ),
        _ => false,
    }
}
