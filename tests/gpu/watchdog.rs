//! Turns a hang into a test failure: the work runs on a thread of its own and the test
//! waits for it with a time limit.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `work` on a new thread and returns what it returns. A panic in `work` is passed
/// on; no answer within `limit` fails the test with a message naming `what` (the thread
/// is left behind: a hung thread cannot be stopped).
pub fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("watched: {what}"))
        .spawn(move || {
            let _ = sender.send(catch_unwind(AssertUnwindSafe(work)));
        })
        .expect("spawning the watched thread");
    let answer = receiver.recv_timeout(limit);
    if answer.is_ok() {
        // The work is done and its thread is exiting: joined, so what a thread's exit
        // does (its thread-locals' destructors end the export holds it left) is done
        // when this returns.
        let _ = thread.join();
    }
    match answer {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => resume_unwind(panic),
        Err(_) => panic!("hang: {what} did not finish within {limit:?}"),
    }
}
