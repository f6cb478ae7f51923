//! The shared harness: a client on the default adapter, or a clear skip/fail.

use std::sync::OnceLock;
use wgpu_memory::Client;

fn open() -> Option<Client> {
    match Client::open_default() {
        Ok(client) => Some(client),
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(error) => {
            eprintln!("skipping a GPU test: {error}");
            None
        }
    }
}

/// A client shared by the tests of this binary (clients are Send + Sync).
pub fn shared() -> Option<Client> {
    static CLIENT: OnceLock<Option<Client>> = OnceLock::new();
    CLIENT.get_or_init(open).clone()
}

/// A client of its own, for tests that check reports or the error handler.
pub fn fresh() -> Option<Client> {
    open()
}

/// Deterministic bytes for a buffer: a pattern that differs per `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(131))
                .wrapping_add(7)
                % 251) as u8
        })
        .collect()
}
