//! The model's thread whose working set keeps rising, and the count of reservations that
//! gave back another pool's empty pages before making a page past the high-water mark.

use crate::device::pattern;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wgpu_memory::Client;

/// Rounds in which the grower holds more small handles than the round before.
const GROWING_ROUNDS: u64 = 40;

/// Until `until`, every 100 ms: fills the small-slice pool with more 1 KiB handles than
/// the round before (a new high-water mark for the memory), drops them all, then makes
/// one handle of 16 KiB, a whole page of the large pool: the page past the mark that
/// takes back the small pool's empty pages. Checks the bytes of the first small handle
/// and of the large one; returns the handles checked and what was wrong.
pub fn grower(client: Client, until: Instant) -> (u64, Vec<String>) {
    let (mut checked, mut wrong) = (0, Vec::new());
    let mut round = 0;
    while Instant::now() < until {
        round += 1;
        let count = 16 + 64 * round.min(GROWING_ROUNDS);
        let small: Result<Vec<_>, _> = (0..count)
            .map(|i| client.create(&pattern(1024, round * 100_000 + i)))
            .collect();
        let large_bytes = pattern(16 << 10, round);
        let checks = small.and_then(|small| {
            let first = client.read_blocking(&small[0])?;
            drop(small);
            let large = client.create(&large_bytes)?;
            Ok((first, client.read_blocking(&large)?))
        });
        match checks {
            Ok((first, large)) => {
                checked += 2;
                if *first != *pattern(1024, round * 100_000) || *large != *large_bytes {
                    wrong.push(format!("grower round {round}: a handle read other bytes"));
                }
            }
            Err(error) => wrong.push(format!("grower round {round}: {error}")),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (checked, wrong)
}

/// Counts the memory's event for empty pages given back before a page past its
/// high-water mark, on the thread it is installed on.
pub struct Traded(pub Arc<AtomicU64>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Traded {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 |= format!("{value:?}").contains("past the high-water mark");
                }
            }
        }
        let mut message = Message(false);
        event.record(&mut message);
        if message.0 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs `work` with a [`Traded`] counter adding to `traded` as this thread's subscriber.
pub fn counting<T>(traded: Arc<AtomicU64>, work: impl FnOnce() -> T) -> T {
    let subscriber = tracing_subscriber::layer::SubscriberExt::with(
        tracing_subscriber::registry(),
        Traded(traded),
    );
    tracing::subscriber::with_default(subscriber, work)
}
