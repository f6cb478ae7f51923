//! `cargo test` is quiet on lavapipe (issue 24, item 13): Mesa's device-select layer
//! asks libwayland for a display when a Vulkan instance is made, and libwayland prints
//! "XDG_RUNTIME_DIR is invalid or not set" on stderr when the variable is unset, once or
//! twice per device opened (about 700 lines per `cargo test`). The repository's
//! `.cargo/config.toml` sets it for every process cargo runs, unless the environment
//! already has it.

use crate::child::{is_child, run_alone};
use crate::device::fresh;

/// Opening a client prints nothing on stderr: checked in a child process, since the C
/// library writes to the process's stderr, which the test harness does not capture.
#[test]
fn opening_a_client_prints_nothing_on_stderr() {
    if is_child() {
        let client = fresh().expect("an adapter");
        let handle = client.create(&[1, 2, 3, 4]).unwrap();
        assert_eq!(client.read_blocking(&handle).unwrap(), [1, 2, 3, 4]);
        return;
    }
    if fresh().is_none() {
        return;
    }
    let output = run_alone("quiet::opening_a_client_prints_nothing_on_stderr", &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("XDG_RUNTIME_DIR"),
        "the child printed:\n{stderr}"
    );
}
