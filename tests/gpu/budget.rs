//! One budget over every memory (issue 17, item 4): never crossed, refused with a typed
//! out-of-memory error that names it, its bad values refused as configuration errors,
//! and shown in the memory summary.

use crate::device::{fresh, pattern};
use wgpu_memory::ClientError;
use wgpu_memory::memory_management::{PoolConfigError, format_bytes, parse_memory_config};
use wgpu_memory::report::MemorySummary;

const KIB: usize = 1 << 10;
const MIB: u64 = 1 << 20;

/// Bytes of every page of every memory in the report.
fn reserved(client: &wgpu_memory::Client) -> u64 {
    let report = client.memory_report();
    report
        .streams
        .iter()
        .map(|stream| {
            stream.pools.usage().bytes_reserved
                + stream
                    .auxiliary
                    .iter()
                    .map(|memory| memory.pools.usage().bytes_reserved)
                    .sum::<u64>()
        })
        .sum()
}

/// A tiny deterministic generator (no timing, the same run every time).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn the_budget_is_never_crossed() {
    let Some(client) = fresh() else { return };
    const BUDGET: u64 = 12 * MIB;
    client.set_budget(Some(BUDGET)).unwrap();
    let mut live = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut refused, mut served) = (0, 0);
    for step in 0..300 {
        let size = (next(&mut state) % (3 << 20)) as usize + 1;
        match next(&mut state) % 5 {
            0 | 1 => match client.create(&pattern(size, step)) {
                Ok(handle) => {
                    served += 1;
                    live.push((handle, size, step));
                }
                Err(ClientError::OutOfMemory { detail, .. }) => {
                    refused += 1;
                    assert!(
                        detail.budget.is_some(),
                        "step {step}: refused by the budget"
                    );
                }
                Err(other) => panic!("step {step}: {other}"),
            },
            2 if !live.is_empty() => {
                let at = (next(&mut state) as usize) % live.len();
                let (handle, size, seed) = &live[at];
                match client.read_blocking(handle) {
                    Ok(read) => assert!(*read == *pattern(*size, *seed), "step {step}"),
                    Err(ClientError::OutOfMemory { detail, .. }) => {
                        assert!(detail.budget.is_some(), "step {step}");
                        refused += 1;
                    }
                    Err(other) => panic!("step {step}: {other}"),
                }
            }
            _ if !live.is_empty() => {
                let at = (next(&mut state) as usize) % live.len();
                live.swap_remove(at);
            }
            _ => {}
        }
        let held = client.budget();
        assert!(held.held <= BUDGET, "step {step}: {held:?}");
        assert!(reserved(&client) <= BUDGET, "step {step}");
    }
    let budget = client.budget();
    eprintln!("budget: {served} creates served, {refused} refused, {budget:?}");
    assert!(budget.peak_held <= BUDGET, "{budget:?}");
    assert!(
        served > 20 && refused > 0,
        "{served} served, {refused} refused"
    );
    assert!(client.uncaptured_errors().is_empty());
}

#[test]
fn a_reservation_over_the_budget_fails_naming_the_budget() {
    let Some(client) = fresh() else { return };
    client.set_budget(Some(4 * MIB)).unwrap();
    let kept = client.empty(3 * MIB).unwrap();
    let error = client.empty(2 * MIB).expect_err("3 + 2 MiB > 4 MiB");
    let ClientError::OutOfMemory { detail, .. } = &error else {
        panic!("expected OutOfMemory, got {error}");
    };
    let budget = detail.budget.as_ref().expect("the budget refused it");
    assert_eq!((budget.budget, budget.memory.as_str()), (4 * MIB, "main"));
    let memories: Vec<&str> = budget
        .held
        .iter()
        .map(|held| held.memory.as_str())
        .collect();
    assert_eq!(memories, ["main", "staging", "upload"]);
    assert!(budget.held_total() <= 4 * MIB);
    let text = error.to_string();
    assert!(
        text.starts_with("over the memory budget")
            && text.contains("4.00 MiB")
            && text.contains("largest free slice"),
        "{text}"
    );
    // A write that would need upload staging past the budget fails the same way.
    let error = client
        .create(&pattern(900 * KIB, 1))
        .expect_err("no room left for the handle and its staging");
    assert!(
        matches!(&error, ClientError::OutOfMemory { detail, .. } if detail.budget.is_some()),
        "{error}"
    );
    drop(kept);
    // Once the held bytes go, the same reservation fits: the free page is given back.
    let handle = client.empty(2 * MIB).unwrap();
    assert!(client.budget().held <= 4 * MIB);
    drop(handle);
}

/// A budget of 256 KiB refused a 65 KiB reservation with "256 KiB left", which reads as
/// a contradiction: the reservation needed a page of 1 MiB, and the error names it.
#[test]
fn a_budget_refusal_names_the_page_it_needed() {
    let Some(client) = fresh() else { return };
    client.set_budget(Some(256 * KIB as u64)).unwrap();
    let error = client
        .empty(65 * KIB as u64)
        .expect_err("a 65 KiB reservation takes a page larger than 256 KiB here");
    let ClientError::OutOfMemory { detail, .. } = &error else {
        panic!("expected OutOfMemory, got {error}");
    };
    let budget = detail.budget.as_ref().expect("the budget refused it");
    assert!(
        budget.page > budget.budget.saturating_sub(budget.held_total()),
        "the page named ({} bytes) must be what did not fit: {error}",
        budget.page
    );
    let named = format!("needs a new page of {}", format_bytes(budget.page));
    assert!(error.to_string().contains(&named), "{error}");
}

#[test]
fn over_the_budget_free_pages_are_given_back_first() {
    let Some(client) = fresh() else { return };
    const BUDGET: u64 = 8 * MIB;
    client.set_budget(Some(BUDGET)).unwrap();
    // Idle pages in every memory: main pages of dropped handles, the upload staging of
    // the create, the readback staging of the read.
    let handle = client.create(&pattern(2 << 20, 2)).unwrap();
    drop(client.read_blocking(&handle).unwrap());
    drop(handle);
    client.sync().unwrap();
    let before = client.budget().held;
    assert!(before >= 3 * MIB, "{before} bytes held by idle pages");
    // Its 5 MiB page fits only once the idle pages are given back.
    let big = client.empty(5 * MIB).unwrap();
    assert!(client.budget().held <= BUDGET);
    drop(big);
}

#[test]
fn bad_budgets_are_configuration_errors_naming_the_field() {
    let Some(client) = fresh() else { return };
    match client.set_budget(Some(0)) {
        Err(ClientError::Config(PoolConfigError::BadSize { field, .. })) => {
            assert_eq!(field, "budget")
        }
        other => panic!("expected BadSize, got {other:?}"),
    }
    let kept = client.empty(3 * MIB).unwrap();
    match client.set_budget(Some(MIB)) {
        Err(ClientError::Config(PoolConfigError::BudgetBelowHeld {
            field,
            budget,
            held,
            held_by,
        })) => {
            assert_eq!((field, budget), ("budget", MIB));
            assert!(held >= 3 * MIB, "{held}");
            assert_eq!(held_by.iter().map(|(_, bytes)| bytes).sum::<u64>(), held);
        }
        other => panic!("expected BudgetBelowHeld, got {other:?}"),
    }
    assert_eq!(
        client.budget().budget,
        None,
        "a refused budget changes nothing"
    );
    drop(kept);
    // With the handle gone, the free page goes back and the budget is accepted.
    client.set_budget(Some(MIB)).unwrap();
    assert_eq!(client.budget().budget, Some(MIB));
    client.set_budget(None).unwrap();
    assert_eq!(client.budget().budget, None);
}

/// `set_budget(Some(1024))` was accepted, and the first reservation then failed with
/// "16 B ... the budget of 1.00 KiB would be crossed", never naming the page it needed:
/// a budget below the smallest page the main memory makes is refused, naming the page.
#[test]
fn a_budget_below_the_smallest_page_is_refused_naming_the_page() {
    let Some(client) = fresh() else { return };
    let page_size = match client.set_budget(Some(1024)) {
        Err(ClientError::Config(
            error @ PoolConfigError::BudgetBelowSmallestPage {
                field: "budget",
                budget: 1024,
                page_size,
            },
        )) => {
            assert!(page_size > 1024, "{page_size}");
            let text = error.to_string();
            for part in ["1024 bytes", &format!("{page_size} bytes"), "smallest page"] {
                assert!(text.contains(part), "{text:?} lacks {part:?}");
            }
            page_size
        }
        other => panic!("expected BudgetBelowSmallestPage, got {other:?}"),
    };
    assert_eq!(
        client.budget().budget,
        None,
        "a refused budget changes nothing"
    );
    // One byte less is refused too; the page itself is a budget a reservation fits.
    assert!(client.set_budget(Some(page_size - 1)).is_err());
    client.set_budget(Some(page_size)).unwrap();
    let handle = client.empty(16).unwrap();
    drop(handle);
    client.set_budget(None).unwrap();
}

#[test]
fn the_summary_shows_the_budget_and_what_is_left() {
    let Some(client) = fresh() else { return };
    client.set_budget(Some(64 * MIB)).unwrap();
    let handle = client.empty(MIB).unwrap();
    let budget = client.budget();
    let text = MemorySummary::new(&client.memory_report())
        .with_budget(budget)
        .to_string();
    let line = text.lines().nth(1).unwrap_or_default();
    assert!(line.starts_with("budget: 64.00 MiB, "), "{text}");
    assert_eq!(budget.left(), Some(64 * MIB - budget.held));
    assert!(line.contains(" left"), "{line}");
    drop(handle);
}

/// A refused `create` leaves nothing behind (issue 24 item 4): the upload staging in
/// flight finishes and the refused create's main page goes back before the error, so the
/// next small create fits without a `sync` or `cleanup`, and the message is the budget's
/// (no "the device said"), with one largest free slice and the staging the create needed.
#[test]
fn a_refused_create_leaves_the_client_usable() {
    let Some(client) = fresh() else { return };
    const BUDGET: u64 = 8 * MIB;
    client.set_budget(Some(BUDGET)).unwrap();
    // A 4 MiB main page and 4 MiB of upload staging, in flight: the whole budget.
    const SIZE: usize = 7 << 19;
    let first = client.create(&pattern(SIZE, 1)).unwrap();
    let held_before = client.budget().held;
    let error = client
        .create(&pattern(SIZE, 2))
        .expect_err("a second 3.5 MiB handle and its staging do not fit in 8 MiB");
    let ClientError::OutOfMemory { detail, .. } = &error else {
        panic!("expected OutOfMemory, got {error}");
    };
    assert!(detail.budget.is_some(), "{error}");
    let text = error.to_string();
    let chain = {
        let mut chain = text.clone();
        let mut source = std::error::Error::source(&error);
        while let Some(error) = source {
            chain.push_str(&format!("\ncaused by: {error}"));
            source = error.source();
        }
        chain
    };
    assert!(
        !chain.contains("the device said") && !chain.contains("out of device memory"),
        "a budget refusal is no device refusal: {chain}"
    );
    assert!(
        text.contains("also needs 3.50 MiB of upload staging"),
        "the message says what a create needs: {text}"
    );
    // The figure (number and unit) after each "largest free slice".
    let slices: Vec<String> = text
        .match_indices("largest free slice ")
        .map(|(at, found)| {
            let figure: Vec<&str> = text[at + found.len()..]
                .split_whitespace()
                .take(2)
                .collect();
            figure.join(" ").trim_end_matches([',', ';']).to_string()
        })
        .collect();
    assert!(
        slices.windows(2).all(|pair| pair[0] == pair[1]) || slices.len() < 2,
        "one figure for the largest free slice: {slices:?} in {text}"
    );
    let after = client.budget().held;
    assert!(
        after <= held_before,
        "the refused create kept {} bytes: {after} held, {held_before} before it",
        after.saturating_sub(held_before)
    );
    // No sync, no cleanup: a small create fits at once, and the first handle still reads.
    let small = client.create(&pattern(512, 3)).unwrap();
    assert!(*client.read_blocking(&small).unwrap() == *pattern(512, 3));
    assert!(*client.read_blocking(&first).unwrap() == *pattern(SIZE, 1));
    assert!(client.budget().peak_held <= BUDGET);
}

/// An exclusive pool's cap above the device's largest page is clamped to it (on lavapipe
/// 2 GiB to 128 MiB) while the summary printed "up to 2.00 GiB": it shows the value in
/// force and the one asked.
#[test]
fn the_summary_shows_a_cap_clamped_to_the_largest_page() {
    let Some(client) = fresh() else { return };
    let largest = client.largest_page();
    let asked = 2 * largest;
    let text =
        format!("[memory]\npools = [{{ type = \"exclusive\", max_alloc_size = {asked} }}]\n");
    let pools = parse_memory_config(&text).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
    let handle = client.empty(4096).unwrap();
    let summary = client.memory_summary();
    let clamped = format!("up to {}", format_bytes(largest));
    let asked_text = format!("{} asked", format_bytes(asked));
    for part in [
        clamped.as_str(),
        asked_text.as_str(),
        "the device's largest page",
    ] {
        assert!(summary.contains(part), "{summary}\nlacks {part:?}");
    }
    assert!(
        !summary.contains(&format!("(up to {})", format_bytes(asked))),
        "{summary}"
    );
    drop(handle);
}
