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
/// typed `DestroyedResource` variants of a bind group's creation, of a submission, or of
/// an encoder's commands, which wgpu reports at submit). Read from the error's types,
/// never from its text.
///
/// wgpu never reports a lost device through an error scope (its device-lost errors go
/// to the device-lost callback only), so this is the one typed fault a submission of
/// ours can meet that is not a bug of ours.
pub fn destroyed_resource(error: &wgpu::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if names_destroyed(current) {
            return true;
        }
        source = current.source();
    }
    false
}

/// On the web wgpu hands on the browser's `GPUError`, which has a message and no type
/// beyond its filter, so no level of a chain is known to name a destroyed resource; such a
/// fault is then reported as the device error it is.
#[cfg(target_arch = "wasm32")]
fn names_destroyed(_level: &(dyn std::error::Error + 'static)) -> bool {
    false
}

/// Whether one level of an error chain is a destroyed-resource variant. A
/// `#[error(transparent)]` variant hands its inner error's source on as its own, so the
/// inner error of such a variant is looked at here, and the level below it is the inner
/// error's source.
#[cfg(not(target_arch = "wasm32"))]
fn names_destroyed(level: &(dyn std::error::Error + 'static)) -> bool {
    use wgpu::wgc::binding_model::{BindingError, CreateBindGroupError};
    use wgpu::wgc::command::{ClearError, CommandEncoderError, ComputePassErrorInner};
    use wgpu::wgc::device::queue::QueueSubmitError;
    use wgpu::wgc::resource::DestroyedResourceError;
    let encoder = |error: &CommandEncoderError| {
        matches!(
            error,
            CommandEncoderError::DestroyedResource(_)
                | CommandEncoderError::Clear(ClearError::DestroyedResource(_))
        )
    };
    if let Some(submit) = level.downcast_ref::<QueueSubmitError>() {
        return match submit {
            QueueSubmitError::DestroyedResource(_) => true,
            QueueSubmitError::CommandEncoder(error) => encoder(error),
            _ => false,
        };
    }
    if let Some(error) = level.downcast_ref::<CommandEncoderError>() {
        return encoder(error);
    }
    if let Some(error) = level.downcast_ref::<CreateBindGroupError>() {
        return matches!(
            error,
            CreateBindGroupError::DestroyedResource(_)
                | CreateBindGroupError::BindingError(BindingError::DestroyedResource(_))
        );
    }
    matches!(
        level.downcast_ref::<ComputePassErrorInner>(),
        Some(ComputePassErrorInner::DestroyedResource(_))
    ) || level.is::<DestroyedResourceError>()
}
