//! The device's two process-wide callbacks, shared by every client on that device.
//!
//! wgpu keeps one uncaptured-error handler and one device-lost callback per device, and
//! setting either replaces the previous one (`Device::on_uncaptured_error`,
//! `Device::set_device_lost_callback`; wgpu 30 has no way to read the previous one
//! back). So:
//!
//! 1. Each client installs both when it is made, as [`DeviceHooks`], replacing what was
//!    set before: a second client made on the same device takes them over from the
//!    first, which then hears no uncaptured error and learns of a loss only from wgpu's
//!    typed errors. Sharing them would need to tell devices apart, and wgpu 30 compares
//!    devices by an id that two devices of different `wgpu::Instance`s can share; so use
//!    clones of one client per device (they are cheap and share everything).
//! 2. The installed closures hold the hooks weakly, and the hooks hold the client
//!    weakly: neither keeps a client alive, so a client is freed when the application
//!    drops its last clone.
//! 3. On a loss, each client records it and wakes its parked readers at once (no lock
//!    of ours is taken: wgpu may run this callback inline inside a call the client makes
//!    under its lock). The application's listeners then run on a thread of their own,
//!    holding no lock, so a listener may call the client; each gets the client as an
//!    argument, so it need not capture one (a captured `Client` would keep itself
//!    alive). On the web there are no threads: the listeners run inside the callback
//!    itself, which the browser runs from its event loop when the device's `lost`
//!    promise settles, never inside a call of ours, so no lock of ours is held there
//!    either.
//! 4. An application that sets its own handler or callback on the device afterwards
//!    replaces ours: errors then reach it instead of the client, and the client notices a
//!    loss only where wgpu returns typed errors. Register through
//!    [`Client::on_uncaptured_error`] and [`Client::on_device_lost`] instead.
//! 5. Every operation of the client catches its own wgpu errors in error scopes, so an
//!    error that reaches the uncaptured-error handler is the application's (its own
//!    pipelines, bind groups, submissions). The client keeps its text, then hands it to
//!    the handlers the application registered; with none registered (or with no client
//!    left on the device), it panics with wgpu's message on the thread that made the
//!    error, as wgpu's default handler does, so a mistake never reads back as silent
//!    zeros. wgpu calls the handler after releasing its own error-sink lock, inside the
//!    application's wgpu call (`create_bind_group`, `submit`, ...), and the client calls
//!    the handlers and panics holding no lock of its own (its locks are `parking_lot`'s,
//!    which a panic never poisons).

use super::{Client, Shared};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

/// An application's device-lost callback: the client, the reason and wgpu's message.
pub type DeviceLostCallback = Arc<dyn Fn(&Client, wgpu::DeviceLostReason, &str) + Send + Sync>;

/// An application's uncaptured-error handler, called with each wgpu error no error
/// scope caught.
pub type UncapturedErrorCallback = Arc<dyn Fn(&Client, &wgpu::Error) + Send + Sync>;

/// Bound on the callbacks one client keeps of each kind (device-lost listeners,
/// uncaptured-error handlers); registering more fails with
/// [`ClientError::TooManyCallbacks`](super::ClientError::TooManyCallbacks).
pub const MAX_CALLBACKS: usize = 64;

/// A device's two wgpu callbacks, and the client they reach.
pub(crate) struct DeviceHooks {
    device: wgpu::Device,
    /// The client the callbacks reach (one entry; a list so that the dispatch below
    /// does not care).
    clients: Mutex<Vec<Weak<Shared>>>,
}

impl DeviceHooks {
    /// New hooks for `device`, installed on it (see the module doc, step 1).
    pub(crate) fn install_on(device: &wgpu::Device) -> Arc<Self> {
        let hooks = Arc::new(Self {
            device: device.clone(),
            clients: Mutex::new(Vec::new()),
        });
        hooks.install();
        hooks
    }

    /// Adds a client to those the callbacks reach.
    pub(crate) fn join(&self, shared: &Arc<Shared>) {
        let mut clients = self.clients.lock();
        clients.retain(|client| client.strong_count() > 0);
        clients.push(Arc::downgrade(shared));
    }

    fn install(self: &Arc<Self>) {
        let hooks = Arc::downgrade(self);
        self.device
            .on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
                match hooks.upgrade() {
                    Some(hooks) => hooks.uncaptured(&error),
                    // No client is left to hear it: as wgpu's default would (step 5).
                    None => unheard(&error),
                }
            }));
        let hooks = Arc::downgrade(self);
        self.device
            .set_device_lost_callback(move |reason, message| {
                if let Some(hooks) = hooks.upgrade() {
                    hooks.device_lost(reason, message);
                }
            });
    }

    /// The live clients, as clients (taken out of the lock before any is called).
    fn clients(&self) -> Vec<Client> {
        self.clients
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .map(|shared| Client { shared })
            .collect()
    }

    /// An error no scope caught: each client keeps its text and calls its handlers; with
    /// no handler anywhere, the error panics on this thread (step 5). Every lock is let
    /// go before a handler runs or the panic starts.
    fn uncaptured(&self, error: &wgpu::Error) {
        tracing::error!(%error, "uncaptured wgpu error");
        let mut heard = false;
        for client in self.clients() {
            client.shared.uncaptured.lock().push(error.to_string());
            let handlers = client.shared.error_handlers.lock().clone();
            heard |= !handlers.is_empty();
            for handler in handlers {
                handler(&client, error);
            }
        }
        if !heard {
            unheard(error);
        }
    }

    /// What wgpu's device-lost callback does: each client records the loss and wakes its
    /// readers here; the listeners run on a thread of their own (here, on the web; step
    /// 3).
    pub(crate) fn device_lost(&self, reason: wgpu::DeviceLostReason, message: String) {
        tracing::error!(?reason, %message, "wgpu device lost");
        let clients = self.clients();
        for client in &clients {
            client.shared.lost.record(format!("{reason:?}: {message}"));
            client.shared.poller.wake_all();
        }
        let listen = move || {
            for client in &clients {
                let listeners = client.shared.listeners.lock().clone();
                for listener in listeners {
                    listener(client, reason, &message);
                }
            }
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let spawned = std::thread::Builder::new()
                .name("wgpu-memory device lost".to_string())
                .spawn(listen);
            if let Err(error) = spawned {
                tracing::error!(%error, "could not start the device-lost listeners' thread");
            }
        }
        // The web: from the browser's event loop, holding no lock of ours (step 3).
        #[cfg(target_arch = "wasm32")]
        listen();
    }
}

impl Client {
    /// Adds an application callback for the loss of the device, called with this client
    /// after the client recorded the loss (so every later operation already fails with
    /// [`ClientError::DeviceLost`](super::ClientError::DeviceLost)), on a thread of its
    /// own that holds no lock of the client's (on the web, which has no threads, from the
    /// browser's event loop, also holding none): it may call the client. Use the client
    /// it is given rather than capturing one (a captured clone keeps the client alive
    /// for as long as the device holds the callback).
    ///
    /// wgpu keeps one device-lost callback per device and the client holds it (see the
    /// module doc): do not replace it with `Device::set_device_lost_callback`.
    ///
    /// # Errors
    /// [`ClientError::TooManyCallbacks`](super::ClientError::TooManyCallbacks) past
    /// [`MAX_CALLBACKS`] callbacks.
    pub fn on_device_lost(
        &self,
        callback: impl Fn(&Client, wgpu::DeviceLostReason, &str) + Send + Sync + 'static,
    ) -> Result<(), super::ClientError> {
        push_bounded(&self.shared.listeners, Arc::new(callback), "device-lost")
    }

    /// Adds an application handler for wgpu errors that no error scope caught (the
    /// application's own; the client catches its own), called with this client on the
    /// thread that made the error, after the client kept its text (see
    /// [`uncaptured_errors`](Self::uncaptured_errors)).
    ///
    /// Until the application registers one, such an error panics on the thread that
    /// made it with wgpu's message (`wgpu error: ...`), as wgpu's default handler does;
    /// once one is registered, the handlers hear every such error instead and nothing
    /// panics. A handler may itself panic (the client holds no lock meanwhile). wgpu
    /// keeps one handler per device and the client holds it (see the module doc): do not
    /// replace it with `Device::on_uncaptured_error`.
    ///
    /// # Errors
    /// [`ClientError::TooManyCallbacks`](super::ClientError::TooManyCallbacks) past
    /// [`MAX_CALLBACKS`] handlers.
    pub fn on_uncaptured_error(
        &self,
        handler: impl Fn(&Client, &wgpu::Error) + Send + Sync + 'static,
    ) -> Result<(), super::ClientError> {
        push_bounded(
            &self.shared.error_handlers,
            Arc::new(handler),
            "uncaptured-error",
        )
    }

    /// The wgpu errors that reached the device's uncaptured-error handler since the client
    /// was made (none of the client's own should: each operation catches its own). Each
    /// was also handed to the application's handlers, or, with none registered, panicked
    /// on the thread that made it (see [`on_uncaptured_error`](Self::on_uncaptured_error)).
    ///
    /// At most the newest [`MAX_UNCAPTURED_ERRORS`](super::MAX_UNCAPTURED_ERRORS) (256)
    /// are kept.
    pub fn uncaptured_errors(&self) -> Vec<String> {
        self.shared.uncaptured.lock().to_vec()
    }
}

/// What wgpu's default uncaptured-error handler does with an error nobody handles:
/// panics with its message (the same words, so the application sees what wgpu would
/// have shown it).
#[track_caller]
fn unheard(error: &wgpu::Error) -> ! {
    panic!("wgpu error: {error}\n");
}

/// Appends `callback` unless `MAX_CALLBACKS` are held.
fn push_bounded<T>(
    list: &Mutex<Vec<T>>,
    callback: T,
    kind: &'static str,
) -> Result<(), super::ClientError> {
    let mut list = list.lock();
    if list.len() >= MAX_CALLBACKS {
        return Err(super::ClientError::TooManyCallbacks {
            kind,
            limit: MAX_CALLBACKS,
        });
    }
    list.push(callback);
    Ok(())
}
