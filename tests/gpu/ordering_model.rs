//! The ordering model (issue 11, Tests 1): random programs of create / create_with /
//! write / write_with / launch / read / read_many / drop / cleanup / flush / sync on one
//! `Client`, checked against a host model of every live buffer's bytes.
//!
//! It guards the order that batching must keep (issue 11, Build 1 and 2): writes,
//! launches, reads and the reuse of freed slices happen in program order even when many
//! of them share one submission, pooled upload staging is never overwritten before the
//! device has read it, and unaligned writes (edge words merged on the GPU) land exactly
//! on their bytes. Each case runs under a random submit policy (tiny limits submit between
//! any two ops) or the default one. Reads are checked when awaited at once, awaited later
//! (the bytes are those at the time of `read`) and dropped unawaited.
//!
//! Cases: `WGPU_MEMORY_MODEL_CASES` (default 500).

use crate::device::{fresh, pattern};
use crate::kernels::{AFFINE, AFFINE_IN_PLACE, COPY, groups_for, map_words};
use crate::reports::{auxiliary_slices, main_slices};
use crate::watchdog::within;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use wgpu_memory::SubmitPolicy;
use wgpu_memory::client::ReadBytes;
use wgpu_memory::{Client, ClientError, Handle, Kernel};

const DEFAULT_CASES: u32 = 500;

/// How reads are consumed.
#[derive(Debug, Clone, Copy)]
enum ReadMode {
    /// Awaited at once.
    Now,
    /// Awaited at the end of the case, after the ops that follow it.
    Later,
    /// Dropped unawaited.
    Abandon,
}

#[derive(Debug, Clone, Copy)]
enum KernelKind {
    Affine,
    Copy,
}

/// One step of a program. Targets pick among the live buffers modulo their count; offsets
/// and lengths are fractions of the target, so every op is valid whatever came before.
#[derive(Debug, Clone)]
enum Op {
    Create {
        size: usize,
        seed: u64,
        with: bool,
    },
    Write {
        target: usize,
        offset: usize,
        len: usize,
        seed: u64,
        with: bool,
    },
    /// On buffers whose size is a multiple of 4 (and not 0); `x == y` runs in place.
    Launch {
        kind: KernelKind,
        x: usize,
        y: usize,
    },
    Read {
        target: usize,
        mode: ReadMode,
    },
    ReadMany {
        targets: Vec<usize>,
    },
    Drop {
        target: usize,
    },
    Cleanup,
    Flush,
    Sync,
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        4 => 1..=64usize,
        4 => (1..=64usize).prop_map(|words| words * 4),
        1 => 257..=4100usize,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let index = || 0..8192usize;
    prop_oneof![
        3 => (size(), any::<u64>(), any::<bool>())
            .prop_map(|(size, seed, with)| Op::Create { size, seed, with }),
        4 => (index(), index(), index(), any::<u64>(), any::<bool>()).prop_map(
            |(target, offset, len, seed, with)| Op::Write { target, offset, len, seed, with }
        ),
        3 => (prop_oneof![Just(KernelKind::Affine), Just(KernelKind::Copy)], index(), index())
            .prop_map(|(kind, x, y)| Op::Launch { kind, x, y }),
        3 => (
            index(),
            prop_oneof![
                3 => Just(ReadMode::Now),
                2 => Just(ReadMode::Later),
                1 => Just(ReadMode::Abandon)
            ]
        )
            .prop_map(|(target, mode)| Op::Read { target, mode }),
        1 => prop::collection::vec(index(), 1..4).prop_map(|targets| Op::ReadMany { targets }),
        2 => index().prop_map(|target| Op::Drop { target }),
        1 => Just(Op::Cleanup),
        1 => Just(Op::Flush),
        1 => Just(Op::Sync),
    ]
}

/// The submit policy of a case: tiny limits make submissions happen between any two
/// ops; `None` keeps the client's default.
fn policy() -> impl Strategy<Value = Option<SubmitPolicy>> {
    prop_oneof![
        1 => Just(None),
        2 => (1..=4u32, prop_oneof![Just(4u64), 4..=2048u64, Just(64 << 20)]).prop_map(
            |(max_dispatches, max_bytes)| Some(SubmitPolicy { max_dispatches, max_bytes })
        ),
    ]
}

/// A case: a submit policy and a program.
fn case() -> impl Strategy<Value = (Option<SubmitPolicy>, Vec<Op>)> {
    (policy(), prop::collection::vec(op(), 1..24))
}

type PendingRead = Pin<Box<dyn Future<Output = Result<ReadBytes, ClientError>> + Send>>;

/// A live buffer and the bytes it must hold.
struct Live {
    handle: Handle,
    bytes: Vec<u8>,
}

struct Kernels {
    affine: Kernel,
    affine_in_place: Kernel,
    copy: Kernel,
}

fn failed(context: impl std::fmt::Display, error: ClientError) -> TestCaseError {
    TestCaseError::fail(format!("{context}: {error}"))
}

fn compare(what: &str, read: &[u8], expected: &[u8]) -> Result<(), TestCaseError> {
    if read == expected {
        return Ok(());
    }
    let first = read.iter().zip(expected).position(|(a, b)| a != b);
    Err(TestCaseError::fail(format!(
        "{what}: {} bytes read, {} expected; first difference at byte {first:?} \
         (read {:?}, expected {:?})",
        read.len(),
        expected.len(),
        first.map(|at| &read[at..read.len().min(at + 8)]),
        first.map(|at| &expected[at..expected.len().min(at + 8)]),
    )))
}

/// Runs one program and checks every read against the model.
fn run_program(
    client: &Client,
    kernels: &Kernels,
    default_policy: SubmitPolicy,
    policy: Option<SubmitPolicy>,
    program: &[Op],
) -> Result<(), TestCaseError> {
    client.set_submit_policy(policy.unwrap_or(default_policy));
    let mut live: Vec<Live> = Vec::new();
    let mut later: Vec<(usize, PendingRead, Vec<u8>)> = Vec::new();
    for (step, op) in program.iter().enumerate() {
        match *op {
            Op::Create { size, seed, with } => {
                let bytes = pattern(size, seed);
                let handle = if with {
                    let source = bytes.clone();
                    client
                        .create_with(size as u64, |mut range| {
                            assert_eq!(range.len(), source.len(), "create_with's range");
                            range.copy_from_slice(&source);
                        })
                        .map_err(|e| failed(format_args!("step {step}: create_with"), e))?
                } else {
                    client
                        .create(&bytes)
                        .map_err(|e| failed(format_args!("step {step}: create"), e))?
                };
                prop_assert_eq!(handle.size(), size as u64);
                live.push(Live { handle, bytes });
            }
            Op::Write {
                target,
                offset,
                len,
                seed,
                with,
            } => {
                if live.is_empty() {
                    continue;
                }
                let index = target % live.len();
                let buffer = &mut live[index];
                let size = buffer.bytes.len();
                let offset = offset % (size + 1);
                let len = len % (size - offset + 1);
                let data = pattern(len, seed);
                let result = if with {
                    let source = data.clone();
                    client.write_with(&buffer.handle, offset as u64, len as u64, |mut range| {
                        assert_eq!(range.len(), source.len(), "write_with's range");
                        range.copy_from_slice(&source);
                    })
                } else {
                    client.write(&buffer.handle, offset as u64, &data)
                };
                result.map_err(|e| {
                    failed(
                        format_args!("step {step}: write of {len} bytes at {offset} of {size}"),
                        e,
                    )
                })?;
                buffer.bytes[offset..offset + len].copy_from_slice(&data);
            }
            Op::Launch { kind, x, y } => {
                let words: Vec<usize> = (0..live.len())
                    .filter(|&i| !live[i].bytes.is_empty() && live[i].bytes.len().is_multiple_of(4))
                    .collect();
                if words.is_empty() {
                    continue;
                }
                let (x, y) = (words[x % words.len()], words[y % words.len()]);
                let groups = groups_for(live[x].bytes.len().max(live[y].bytes.len()) as u64);
                let result = if x == y {
                    let kernel = match kind {
                        KernelKind::Affine => &kernels.affine_in_place,
                        // A copy onto itself changes nothing; run it as the in-place
                        // affine kernel so that the op still does work.
                        KernelKind::Copy => &kernels.affine_in_place,
                    };
                    client.launch(kernel, groups, &[&live[x].handle])
                } else {
                    let kernel = match kind {
                        KernelKind::Affine => &kernels.affine,
                        KernelKind::Copy => &kernels.copy,
                    };
                    client.launch(kernel, groups, &[&live[x].handle, &live[y].handle])
                };
                result.map_err(|e| failed(format_args!("step {step}: launch {kind:?}"), e))?;
                let source = live[x].bytes.clone();
                let affine = x == y || matches!(kind, KernelKind::Affine);
                map_words(&source, &mut live[y].bytes, |word| {
                    if affine {
                        word.wrapping_mul(3).wrapping_add(1)
                    } else {
                        word
                    }
                });
            }
            Op::Read { target, mode } => {
                if live.is_empty() {
                    continue;
                }
                let buffer = &live[target % live.len()];
                let future = client.read(&buffer.handle);
                match mode {
                    ReadMode::Now => {
                        let read = pollster::block_on(future)
                            .map_err(|e| failed(format_args!("step {step}: read"), e))?;
                        compare(&format!("step {step}: read"), &read, &buffer.bytes)?;
                    }
                    ReadMode::Later => later.push((step, Box::pin(future), buffer.bytes.clone())),
                    ReadMode::Abandon => drop(future),
                }
            }
            Op::ReadMany { ref targets } => {
                if live.is_empty() {
                    continue;
                }
                let picked: Vec<&Live> = targets.iter().map(|t| &live[t % live.len()]).collect();
                let handles: Vec<&Handle> = picked.iter().map(|buffer| &buffer.handle).collect();
                let reads = client
                    .read_many_blocking(&handles)
                    .map_err(|e| failed(format_args!("step {step}: read_many"), e))?;
                prop_assert_eq!(reads.len(), picked.len());
                for (i, (read, buffer)) in reads.iter().zip(&picked).enumerate() {
                    compare(
                        &format!("step {step}: read_many part {i}"),
                        read,
                        &buffer.bytes,
                    )?;
                }
            }
            Op::Drop { target } => {
                if !live.is_empty() {
                    let index = target % live.len();
                    live.swap_remove(index);
                }
            }
            Op::Cleanup => {
                client.cleanup();
            }
            Op::Flush => client
                .flush()
                .map_err(|e| failed(format_args!("step {step}: flush"), e))?,
            Op::Sync => client
                .sync()
                .map_err(|e| failed(format_args!("step {step}: sync"), e))?,
        }
    }
    for (step, future, expected) in later {
        let read = pollster::block_on(future)
            .map_err(|e| failed(format_args!("read started at step {step}"), e))?;
        compare(
            &format!("read started at step {step}, awaited at the end"),
            &read,
            &expected,
        )?;
    }
    // Every live buffer, in one batch.
    let handles: Vec<&Handle> = live.iter().map(|buffer| &buffer.handle).collect();
    let reads = client
        .read_many_blocking(&handles)
        .map_err(|e| failed("final read_many", e))?;
    for (i, (read, buffer)) in reads.iter().zip(&live).enumerate() {
        compare(
            &format!("final read of live buffer {i}"),
            read,
            &buffer.bytes,
        )?;
    }
    let uncaptured = client.uncaptured_errors();
    prop_assert!(
        uncaptured.is_empty(),
        "uncaptured wgpu errors: {uncaptured:?}"
    );
    Ok(())
}

fn cases() -> u32 {
    match std::env::var("WGPU_MEMORY_MODEL_CASES") {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("WGPU_MEMORY_MODEL_CASES={value:?} is not a count")),
        Err(_) => DEFAULT_CASES,
    }
}

#[test]
fn random_programs_match_the_host_model() {
    let Some(client) = fresh() else { return };
    let cases = cases();
    within("the ordering model", Duration::from_secs(600), move || {
        let kernels = Kernels {
            affine: Kernel::new("affine", AFFINE, "main"),
            affine_in_place: Kernel::new("affine in place", AFFINE_IN_PLACE, "main"),
            copy: Kernel::new("copy", COPY, "main"),
        };
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 1024,
            ..Config::default()
        });
        let started = Instant::now();
        let default_policy = client.submit_policy();
        let outcome = runner.run(&case(), |(policy, program)| {
            run_program(&client, &kernels, default_policy, policy, &program)
        });
        eprintln!("ordering model: {cases} cases in {:?}", started.elapsed());
        match outcome {
            Ok(()) => {}
            Err(TestError::Fail(reason, (policy, program))) => {
                panic!("{reason}\nsubmit policy: {policy:?}\nminimal program: {program:#?}")
            }
            Err(TestError::Abort(reason)) => panic!("aborted: {reason}"),
        }
        // Every handle of every case was dropped: nothing may stay allocated.
        let mut report = client.memory_report();
        for _ in 0..50 {
            client.sync().unwrap();
            client.cleanup();
            report = client.memory_report();
            if main_slices(&report) == 0
                && auxiliary_slices(&report, "staging") == Some(0)
                && crate::reports::upload_slices(&report) == 0
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(main_slices(&report), 0, "main slices left: {report:?}");
        assert_eq!(
            auxiliary_slices(&report, "staging"),
            Some(0),
            "readback staging slices left"
        );
        assert_eq!(
            crate::reports::upload_slices(&report),
            0,
            "upload slices left"
        );
    });
}
