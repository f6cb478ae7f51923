//! The server's mutex, and the rule that a fill closure must not call its client.
//!
//! [`create_with`](super::Client::create_with) and [`write_with`](super::Client::write_with)
//! run the application's closure while this thread holds the server's mutex (the
//! closure writes straight into mapped staging that the server owns). A client call from
//! inside it would take the mutex again and wait for itself forever. Instead, the closure
//! runs marked as a fill of this client on this thread, and taking the mutex while so
//! marked panics with a message naming the rule. Every client entry point takes the
//! mutex, so none of them can hang this way; a call that needs no lock (`device()`, an
//! atomic counter) still works. Another client's mutex is not held, so a fill may call
//! another client.
//!
//! The panic unwinds out of the application's closure and the outer `create_with` /
//! `write_with` as any panic in a fill closure does: the mutex is released on the way
//! out, nothing was recorded for the write, and the client goes on.

use crate::server::Server;
use parking_lot::{Mutex, MutexGuard};
use std::cell::{Cell, RefCell};
use wgpu::WriteOnly;

/// What the panic says.
const RULE: &str = "a create_with / write_with fill closure called its client: the closure runs under the client's lock, so it must not call the client (only write the bytes; make other calls before or after)";

thread_local! {
    /// The server mutexes (by address) this thread holds while an application's fill
    /// closure runs, innermost last. Bounded by the nesting of fills: each level is a
    /// fill of a different client, since a fill cannot reach its own client again.
    static FILLING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The server state behind one mutex, taken by every client entry point.
pub(super) struct ServerLock {
    mutex: Mutex<Server>,
}

impl ServerLock {
    pub(super) fn new(server: Server) -> Self {
        Self {
            mutex: Mutex::new(server),
        }
    }

    /// The server, waiting for the mutex.
    ///
    /// # Panics
    /// When this thread holds the mutex for a fill closure that is running now (the
    /// closure called its own client): waiting would never end.
    pub(super) fn lock(&self) -> MutexGuard<'_, Server> {
        let key = self.key();
        if FILLING.with(|filling| filling.borrow().contains(&key)) {
            panic!("{RULE}");
        }
        self.mutex.lock()
    }

    /// Runs the application's `fill` closure (taken from `fill`, once: an attempt
    /// retried after a budget refusal finds it still there) on `view`, with this mutex
    /// held by the caller, marked as such on this thread until it returns or unwinds.
    pub(super) fn fill<F: FnOnce(WriteOnly<'_, [u8]>)>(
        &self,
        fill: &Cell<Option<F>>,
        view: WriteOnly<'_, [u8]>,
    ) {
        if let Some(fill) = fill.take() {
            let _mark = FillMark::enter(self.key());
            fill(view);
        }
    }

    /// The mutex's address: one per client (clones share it).
    fn key(&self) -> usize {
        std::ptr::from_ref(&self.mutex) as usize
    }
}

/// This thread runs a fill closure under the mutex `key` while this lives.
struct FillMark {
    key: usize,
}

impl FillMark {
    fn enter(key: usize) -> Self {
        FILLING.with(|filling| filling.borrow_mut().push(key));
        Self { key }
    }
}

impl Drop for FillMark {
    fn drop(&mut self) {
        FILLING.with(|filling| {
            let mut filling = filling.borrow_mut();
            if let Some(at) = filling.iter().rposition(|&key| key == self.key) {
                filling.remove(at);
            }
        });
    }
}
