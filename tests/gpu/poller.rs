//! The poller (issue 11, Tests 2 and 6).
//!
//! - Kernels that run longer than a timed `device.poll` while their pages are cleaned up
//!   tripped an assert inside wgpu-core 30.0.2 on the poller thread; the thread died and
//!   every later read waited forever. Here each read must finish or fail with a typed
//!   error, and a watchdog turns a hang into a failure.
//! - A read future that nobody awaits kept the poller spinning (about 0.65 of a core).
//!   Here the poller threads' CPU time over one second must stay near zero. The
//!   measurement runs in a process of its own (this test binary, started again on one
//!   ignored test), so that other tests' clients do not add their own polling to it.

use crate::device::{fresh, pattern};
use crate::kernels::{busy, groups_for};
use crate::watchdog::within;
use std::time::{Duration, Instant};

/// Steps per word of the busy kernel: about 0.7 s over 4 MiB on lavapipe with 2 cores.
const BUSY_ROUNDS: u32 = 1500;
/// Rounds of the assert scenario; `WGPU_MEMORY_POLLER_ROUNDS` overrides.
const ROUNDS: u64 = 6;
const SIZE: usize = 4 << 20;

#[test]
fn reads_finish_while_long_kernels_run_and_pages_are_cleaned_up() {
    let Some(client) = fresh() else { return };
    let rounds = std::env::var("WGPU_MEMORY_POLLER_ROUNDS").map_or(ROUNDS, |value| {
        value.parse().expect("WGPU_MEMORY_POLLER_ROUNDS: a count")
    });
    let outcomes = within(
        "create, busy launch, drop, cleanup, create, read_blocking",
        Duration::from_secs(30 + 5 * rounds),
        move || {
            let kernel = busy(BUSY_ROUNDS);
            let mut outcomes = Vec::new();
            for round in 0..rounds {
                let started = Instant::now();
                let busy_data = pattern(SIZE, round);
                let busy_handle = client.create(&busy_data).unwrap();
                client
                    .launch(&kernel, groups_for(SIZE as u64), &[&busy_handle])
                    .unwrap();
                // Odd rounds also hold a read of the busy handle across the cleanup, so
                // that the poller waits on the kernel while its page goes away whatever
                // `cleanup` itself waits for.
                let held = (round % 2 == 1).then(|| client.read(&busy_handle));
                drop(busy_handle);
                client.cleanup();
                let data = pattern(SIZE, 1000 + round);
                let handle = client.create(&data).unwrap();
                let outcome = match client.read_blocking(&handle) {
                    Ok(bytes) => {
                        assert!(bytes == data, "round {round}: the read's bytes differ");
                        Ok(())
                    }
                    Err(error) => Err(error.to_string()),
                };
                let held = held.map(|read| match pollster::block_on(read) {
                    Ok(bytes) => {
                        check_busy_words(round, &busy_data, &bytes);
                        Ok(())
                    }
                    Err(error) => Err(error.to_string()),
                });
                eprintln!(
                    "round {round}: read {outcome:?}, held read {held:?}, in {:?}",
                    started.elapsed()
                );
                outcomes.push(outcome);
            }
            (client, outcomes)
        },
    );
    let (client, outcomes) = outcomes;
    assert_eq!(outcomes.len(), rounds as usize);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

/// Checks sampled words of the busy kernel's output against the host.
fn check_busy_words(round: u64, input: &[u8], output: &[u8]) {
    assert_eq!(output.len(), input.len(), "round {round}: held read length");
    for word in (0..input.len() / 4).step_by(65_537) {
        let at = word * 4;
        let mut value = u32::from_le_bytes(input[at..at + 4].try_into().unwrap());
        for _ in 0..BUSY_ROUNDS {
            value = value.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
        let read = u32::from_le_bytes(output[at..at + 4].try_into().unwrap());
        assert_eq!(
            read, value,
            "round {round}: word {word} of the busy kernel's output"
        );
    }
}

/// The name the poller thread is given, as Linux keeps it (15 bytes of it).
#[cfg(target_os = "linux")]
const POLLER_COMM: &str = "wgpu-memory pol";

/// utime + stime in clock ticks, from the text of a `/proc/.../stat` file.
#[cfg(target_os = "linux")]
fn ticks(stat: &str) -> u64 {
    // Fields after the command name (which may hold spaces) in parentheses: state is the
    // first, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// CPU ticks of the poller threads (and how many there are), and of the whole process.
#[cfg(target_os = "linux")]
fn cpu_ticks() -> (u64, usize, u64) {
    let mut poller = (0, 0);
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("stat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        if comm.trim_end() == POLLER_COMM {
            poller = (poller.0 + ticks(&stat), poller.1 + 1);
        }
    }
    let process = ticks(&std::fs::read_to_string("/proc/self/stat").unwrap());
    (poller.0, poller.1, process)
}

/// The measurement itself; run by [`an_unawaited_read_costs_no_poller_cpu`] in a process
/// of its own.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "started by poller::an_unawaited_read_costs_no_poller_cpu in a process of its own"]
fn unawaited_read_cpu_child() {
    let Some(client) = fresh() else { return };
    let data = pattern(4096, 6);
    let handle = client.create(&data).unwrap();
    client.sync().unwrap();
    let read = client.read(&handle);
    // Let the map complete: that work is allowed, what follows is not.
    std::thread::sleep(Duration::from_millis(200));
    let (poller_before, threads, process_before) = cpu_ticks();
    std::thread::sleep(Duration::from_secs(1));
    let (poller_after, _, process_after) = cpu_ticks();
    let poller = poller_after - poller_before;
    let process = process_after - process_before;
    println!(
        "over 1 s with a read future alive and unawaited: {threads} poller thread(s) used \
         {poller} ticks, the process {process} ticks"
    );
    assert!(
        poller < 5,
        "the poller threads used {poller} clock ticks in 1 s with one read future alive and \
         unawaited (the poller spins)"
    );
    assert!(
        process < 20,
        "the process used {process} clock ticks in 1 s with one read future alive and \
         unawaited"
    );
    // The future is still a working read.
    assert!(pollster::block_on(read).unwrap() == data);
}

#[cfg(target_os = "linux")]
#[test]
fn an_unawaited_read_costs_no_poller_cpu() {
    if fresh().is_none() {
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "poller::unawaited_read_cpu_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{text}");
    assert!(
        output.status.success(),
        "the measuring process failed ({}):\n{text}",
        output.status
    );
    assert!(
        text.contains("1 passed"),
        "the measuring process ran no test:\n{text}"
    );
}
