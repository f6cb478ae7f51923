//! Tests on the real adapter (lavapipe in CI), one module per capability.
//!
//! When wgpu finds no adapter the tests skip, except with `CI=true`, where they fail.

mod abandoned_reads;
mod app_errors;
mod batch_failure;
mod budget;
mod budget_reads;
mod callbacks;
mod cases;
#[path = "../../examples/matmul/chain.rs"]
#[allow(dead_code)]
mod chain;
mod child;
mod cleanup_report;
mod compaction;
mod compaction_model;
mod device;
mod device_loss;
mod device_memory;
mod failures;
mod fill_calls;
mod given_back;
mod history;
#[path = "../../examples/matmul/job.rs"]
#[allow(dead_code)]
mod job;
mod kernels;
mod launch;
mod layout;
mod matmul;
mod messages;
mod misuse;
mod ordering_model;
mod own_config;
mod own_device;
#[path = "../../examples/own_device.rs"]
#[allow(dead_code)]
mod own_device_example;
mod panicking_callback;
mod parameters;
#[path = "../../examples/matmul/peaks.rs"]
mod peaks;
mod pipelines;
mod poller;
mod quiet;
mod release;
mod reports;
mod roundtrip;
mod snapshot;
mod soak;
mod staging;
mod staging_bound;
mod steady_loop;
mod storage;
mod sync_async;
mod threads;
mod threads_model;
mod watchdog;
mod web_limits;
