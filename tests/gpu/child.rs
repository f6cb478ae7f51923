//! Running one test of this binary alone in a child process, with environment variables
//! of its own: for what a test cannot do in the shared process (set the process's
//! environment, see what C libraries print on its stderr).

use std::process::{Command, Output};

/// The variable that tells a test it is the child [`run_alone`] started.
pub const CHILD: &str = "WGPU_MEMORY_TEST_CHILD";

/// Whether this process is the child [`run_alone`] started.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs the test named `test` (its path in this binary, `module::name`) alone in a child
/// process of this test binary, with `vars` set besides [`CHILD`]; the child inherits
/// the rest of this process's environment (what `cargo test` set included).
pub fn run_alone(test: &str, vars: &[(&str, &std::ffi::OsStr)]) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new(exe);
    command
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1");
    for (name, value) in vars {
        command.env(name, value);
    }
    command.output().expect("the test binary runs")
}
