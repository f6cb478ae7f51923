//! Tests on the real adapter (lavapipe in CI), one module per capability.
//!
//! When wgpu finds no adapter the tests skip, except with `CI=true`, where they fail.

mod cases;
mod device;
mod failures;
mod launch;
mod layout;
mod matmul;
mod roundtrip;
mod storage;
mod threads;
