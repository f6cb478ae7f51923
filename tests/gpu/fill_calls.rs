//! A `create_with` / `write_with` fill closure runs under the client's lock, so it must
//! not call the client. A call from inside one panics with a message naming the rule
//! (never a hang), and the client works afterwards: the panic leaves nothing held.

use crate::device::{fresh, pattern};
use crate::watchdog::within;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;
use wgpu_memory::Client;

/// Long enough for a create and a read on lavapipe many times over; a call that
/// deadlocks never answers.
const LIMIT: Duration = Duration::from_secs(60);

/// A client call made from inside a fill closure.
type Call = fn(&Client, &wgpu_memory::Handle);

const CALLS: [(&str, Call); 3] = [
    ("create", |client, _| drop(client.create(&[1, 2, 3, 4]))),
    ("memory_report", |client, _| drop(client.memory_report())),
    ("read_blocking", |client, handle| {
        drop(client.read_blocking(handle))
    }),
];

/// The panic's message, as text.
fn message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(text) => *text,
        Err(panic) => panic
            .downcast::<&str>()
            .map(|text| text.to_string())
            .unwrap_or_default(),
    }
}

/// Runs `fill_with` (a `create_with` or `write_with` whose closure makes `call` on a
/// clone of the client) under the watchdog; checks the panic names the rule, then that
/// the client still creates, writes and reads.
fn refused(name: &str, fill_with: fn(&Client, &wgpu_memory::Handle, Call), call: Call) {
    let Some(client) = fresh() else { return };
    let what = format!("{name} calling the client");
    within(&what, LIMIT, move || {
        let kept = client.create(&pattern(64, 1)).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| fill_with(&client, &kept, call)));
        let text = message(outcome.expect_err("a client call inside a fill closure panics"));
        assert!(
            text.contains("create_with") && text.contains("must not call the client"),
            "{text}"
        );
        // Nothing stays held: the client goes on, and earlier bytes are intact.
        let after = client.create(&pattern(64, 2)).unwrap();
        client.write(&kept, 0, &pattern(8, 3)).unwrap();
        let mut expected = pattern(64, 1);
        expected[..8].copy_from_slice(&pattern(8, 3));
        assert_eq!(client.read_blocking(&kept).unwrap(), expected);
        assert_eq!(client.read_blocking(&after).unwrap(), pattern(64, 2));
    });
}

#[test]
fn a_client_call_inside_create_with_panics_naming_the_rule() {
    for (name, call) in CALLS {
        refused(
            &format!("create_with / {name}"),
            |client, handle, call| {
                let inner = client.clone();
                let handle = handle.clone();
                let _ = client.create_with(4, move |mut view| {
                    call(&inner, &handle);
                    view.copy_from_slice(&[0; 4]);
                });
            },
            call,
        );
    }
}

#[test]
fn a_client_call_inside_write_with_panics_naming_the_rule() {
    for (name, call) in CALLS {
        refused(
            &format!("write_with / {name}"),
            |client, handle, call| {
                let inner = client.clone();
                let target = handle.clone();
                let _ = client.write_with(handle, 8, 4, move |mut view| {
                    call(&inner, &target);
                    view.copy_from_slice(&[0; 4]);
                });
            },
            call,
        );
    }
}

/// A fill closure may call another client: only its own client's lock is held.
#[test]
fn a_fill_closure_may_call_another_client() {
    let (Some(client), Some(other)) = (fresh(), fresh()) else {
        return;
    };
    within("a fill calling another client", LIMIT, move || {
        let mut made = None;
        let handle = client
            .create_with(4, |mut view| {
                made = Some(other.create(&[5, 6, 7, 8]).unwrap());
                view.copy_from_slice(&[1, 2, 3, 4]);
            })
            .unwrap();
        assert_eq!(client.read_blocking(&handle).unwrap(), [1, 2, 3, 4]);
        assert_eq!(other.read_blocking(&made.unwrap()).unwrap(), [5, 6, 7, 8]);
    });
}
