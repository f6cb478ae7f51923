//! The only place a wgpu error becomes an error of ours.
//!
//! `create_buffer`, dispatches and copies never fail synchronously in wgpu: their errors
//! go to the innermost error scope of the calling thread, or, if none matches, to the
//! device's uncaptured-error handler (which panics by default). [`capture`] runs an
//! operation inside out-of-memory, validation and internal scopes so that no error of
//! ours ever reaches that handler.
//!
//! On native backends a popped scope answers at once. On the web (wasm32, WebGPU) it is
//! a promise the browser settles only once its event loop runs, after the operation
//! returned, and nothing may block waiting for it. There [`capture`] never waits: it
//! returns no error, and the scopes' answer, when it comes, is logged, or, through
//! [`capture_late`], kept in a [`LateErrors`] store with what the caller said about the
//! operation, for the client to report at its next await point (a read, `sync_async`)
//! as the error native returns at once.

use cubecl_runtime::server::IoError;

/// Bound on the errors a [`LateErrors`] store keeps until they are taken: past it the
/// oldest is dropped, with a warning.
pub const MAX_LATE_ERRORS: usize = 64;

/// Runs `operation` inside error scopes for every wgpu error filter and returns its
/// result with the first error it raised, if any.
///
/// Scopes are thread-local in wgpu, so work other threads submit meanwhile is not caught
/// here; popping resolves at once on native backends. On the web the error is never
/// known here (see the module doc): it is logged when the browser reports it, and `None`
/// is returned.
pub fn capture<T>(
    device: &wgpu::Device,
    operation: impl FnOnce() -> T,
) -> (T, Option<wgpu::Error>) {
    let (value, scopes) = scoped(device, operation);
    let pops = pop(scopes);
    #[cfg(not(target_arch = "wasm32"))]
    let error = pops.into_iter().find_map(pollster::block_on);
    #[cfg(target_arch = "wasm32")]
    let error = {
        wasm_bindgen_futures::spawn_local(async move {
            if let Some(error) = first_error(pops).await {
                tracing::debug!(%error, "wgpu reported an error of an operation whose error is not used");
            }
        });
        None
    };
    (value, error)
}

/// As [`capture`]; on the web, where the error is known only later, it is kept in `late`
/// with `context()` (what the caller needs to report it as native does) once the browser
/// reports it. `context` runs only on the web, at once.
pub fn capture_late<T, C: Send + 'static>(
    device: &wgpu::Device,
    late: &LateErrors<C>,
    context: impl FnOnce() -> C,
    operation: impl FnOnce() -> T,
) -> (T, Option<wgpu::Error>) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (late, context);
        capture(device, operation)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let serial = late.issue();
        let context = context();
        let (value, scopes) = scoped(device, operation);
        let pops = pop(scopes);
        let late = late.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let error = first_error(pops).await;
            late.resolve(serial, error.map(|error| (context, error)));
        });
        (value, None)
    }
}

/// Runs `operation` inside the three scopes: its value, and the scopes innermost first,
/// the order they must be popped in ([`pop`]).
fn scoped<T>(
    device: &wgpu::Device,
    operation: impl FnOnce() -> T,
) -> (T, [wgpu::ErrorScopeGuard; 3]) {
    let out_of_memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = operation();
    (value, [internal, validation, out_of_memory])
}

/// Pops `scopes` in order: their answers, in that order.
fn pop(scopes: [wgpu::ErrorScopeGuard; 3]) -> [impl Future<Output = Option<wgpu::Error>>; 3] {
    scopes.map(wgpu::ErrorScopeGuard::pop)
}

/// The first error of the popped scopes, in their order, once all have answered.
#[cfg(target_arch = "wasm32")]
async fn first_error(pops: [impl Future<Output = Option<wgpu::Error>>; 3]) -> Option<wgpu::Error> {
    let mut first = None;
    for pop in pops {
        let error = pop.await;
        if first.is_none() {
            first = error;
        }
    }
    first
}

/// Errors the browser reported after the operation returned (the web), each with what
/// its caller said about the operation (`C`), kept until the client takes them; and the
/// operations whose scopes have not answered yet, so an await point can wait for those
/// begun before it. Cheap to clone (clones share one store). On native backends every
/// error is known at once and the store holds nothing (it has no size).
///
/// Bounds: at most [`MAX_LATE_ERRORS`] errors (the oldest goes past it); one entry per
/// operation whose scopes have not answered (each answers once the browser runs its
/// event loop, a lost device included); one waker per future waiting.
pub struct LateErrors<C> {
    #[cfg(target_arch = "wasm32")]
    state: std::sync::Arc<parking_lot::Mutex<LateState<C>>>,
    #[cfg(not(target_arch = "wasm32"))]
    _context: std::marker::PhantomData<fn() -> C>,
}

impl<C> Clone for LateErrors<C> {
    fn clone(&self) -> Self {
        Self {
            #[cfg(target_arch = "wasm32")]
            state: self.state.clone(),
            #[cfg(not(target_arch = "wasm32"))]
            _context: std::marker::PhantomData,
        }
    }
}

impl<C> Default for LateErrors<C> {
    fn default() -> Self {
        Self {
            #[cfg(target_arch = "wasm32")]
            state: std::sync::Arc::new(parking_lot::Mutex::new(LateState {
                next: 0,
                unresolved: std::collections::BTreeSet::new(),
                found: std::collections::VecDeque::new(),
                waiting: Vec::new(),
            })),
            #[cfg(not(target_arch = "wasm32"))]
            _context: std::marker::PhantomData,
        }
    }
}

impl<C> std::fmt::Debug for LateErrors<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateErrors").finish_non_exhaustive()
    }
}

/// A page the browser refused after `create_buffer` returned (the web): what the owner
/// needs to report it as the error native returns at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedPage {
    /// Bytes asked for.
    pub size: u64,
    /// The usages of the storage's pages (which memory it serves).
    pub usage: wgpu::BufferUsages,
}

/// How far a [`LateErrors`] store had got: the operations begun before this point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateMark(u64);

#[cfg(target_arch = "wasm32")]
struct LateState<C> {
    /// Serial of the next operation captured.
    next: u64,
    /// Operations whose scopes have not all answered, by serial.
    unresolved: std::collections::BTreeSet<u64>,
    /// Errors reported, oldest first, with their operation's context.
    found: std::collections::VecDeque<(C, wgpu::Error)>,
    /// Futures waiting for operations to answer.
    waiting: Vec<std::task::Waker>,
}

#[cfg(target_arch = "wasm32")]
impl<C> LateErrors<C> {
    /// The operations captured so far: [`poll_settled`](Self::poll_settled) waits for
    /// those.
    pub fn mark(&self) -> LateMark {
        LateMark(self.state.lock().next)
    }

    /// Ready once every operation captured before `mark` has had its scopes answered;
    /// otherwise the task is woken when one answers.
    pub fn poll_settled(
        &self,
        mark: LateMark,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let mut state = self.state.lock();
        match state.unresolved.first() {
            Some(&oldest) if oldest < mark.0 => {
                if !state
                    .waiting
                    .iter()
                    .any(|waker| waker.will_wake(context.waker()))
                {
                    state.waiting.push(context.waker().clone());
                }
                std::task::Poll::Pending
            }
            _ => std::task::Poll::Ready(()),
        }
    }

    /// Takes every error reported so far, oldest first.
    pub fn take(&self) -> Vec<(C, wgpu::Error)> {
        self.state.lock().found.drain(..).collect()
    }

    /// Registers an operation whose scopes are about to be popped: its serial.
    fn issue(&self) -> u64 {
        let mut state = self.state.lock();
        let serial = state.next;
        state.next += 1;
        state.unresolved.insert(serial);
        serial
    }

    /// The scopes of operation `serial` answered (`found`: its error and context); wakes
    /// the waiting futures, outside the lock.
    fn resolve(&self, serial: u64, found: Option<(C, wgpu::Error)>) {
        let waiting = {
            let mut state = self.state.lock();
            state.unresolved.remove(&serial);
            if let Some(found) = found {
                if state.found.len() >= MAX_LATE_ERRORS
                    && let Some((_, dropped)) = state.found.pop_front()
                {
                    tracing::warn!(error = %dropped, "too many errors not yet reported: the oldest is dropped");
                }
                state.found.push_back(found);
            }
            std::mem::take(&mut state.waiting)
        };
        for waker in waiting {
            waker.wake();
        }
    }
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
