//! A budget refusal is typed `OutOfMemory` naming the budget whatever happens between
//! the refused reservation and its error: another thread's reservation (which starts
//! with no refusal of its own), a wgpu callback's reservation on this thread while the
//! client waits for the device, or a budget changed meanwhile (the soak found `Reserve`
//! errors, and `OutOfMemory` naming no budget, when threads raced).

use super::budget::AFTER_REFUSAL;
use super::{Client, ClientError, Handle};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn client() -> Option<Client> {
    match Client::open_default() {
        Ok(client) => Some(client),
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(_) => None,
    }
}

/// A client holding one 1 KiB handle, under a budget of exactly what it holds (its
/// staging given back): the next page of any memory is refused.
fn at_budget() -> Option<(Client, Handle)> {
    let client = client()?;
    let kept = client.create(&[7; KIB as usize]).unwrap();
    client.sync().unwrap();
    client.cleanup();
    client.set_budget(Some(client.budget().held)).unwrap();
    Some((client, kept))
}

/// Runs `between` on another thread, once, where the next refused call of this thread
/// waits for the device before its error.
fn between(between: impl FnOnce() + Send + 'static) {
    let hook = move || std::thread::spawn(between).join().unwrap();
    AFTER_REFUSAL.with(|slot| *slot.borrow_mut() = Some(Box::new(hook)));
}

/// Runs `inside` on this thread, as a wgpu callback inside that wait would.
fn inside_the_wait(inside: impl FnOnce() + 'static) {
    AFTER_REFUSAL.with(|slot| *slot.borrow_mut() = Some(Box::new(inside)));
}

fn assert_budget_refusal<T: std::fmt::Debug>(what: &str, result: Result<T, ClientError>) {
    match result {
        Err(ClientError::OutOfMemory { detail, .. }) if detail.budget.is_some() => {}
        other => panic!("{what}: expected OutOfMemory naming the budget, got {other:?}"),
    }
}

#[test]
fn a_reservation_between_a_refusal_and_its_error_leaves_it_typed() {
    let Some((client, kept)) = at_budget() else {
        return;
    };
    // Another thread's 4-byte slice fits the page the kept handle holds: no refusal of
    // its own.
    let other = client.clone();
    between(move || drop(other.empty(4).unwrap()));
    assert_budget_refusal("create", client.create(&vec![1; 2 * MIB as usize]));
    let other = client.clone();
    between(move || drop(other.empty(4).unwrap()));
    assert_budget_refusal("write", client.write(&kept, 1, &[2; 300]));
    let other = client.clone();
    between(move || drop(other.empty(4).unwrap()));
    assert_budget_refusal("read", client.read_blocking(&kept));
    client.set_budget(None).unwrap();
    assert!(client.read_blocking(&kept).unwrap()[..] == [7; KIB as usize][..]);
}

#[test]
fn a_budget_cleared_between_a_refusal_and_its_error_leaves_it_typed() {
    let Some((client, kept)) = at_budget() else {
        return;
    };
    let other = client.clone();
    between(move || other.set_budget(None).unwrap());
    assert_budget_refusal("write", client.write(&kept, 0, &[2; 300]));
    assert!(client.read_blocking(&kept).unwrap()[..] == [7; KIB as usize][..]);
}

#[test]
fn a_callback_reserving_inside_the_wait_leaves_the_refusal_typed() {
    let Some((client, kept)) = at_budget() else {
        return;
    };
    let other = client.clone();
    inside_the_wait(move || drop(other.empty(4).unwrap()));
    assert_budget_refusal("create", client.create(&vec![1; 2 * MIB as usize]));
    let other = client.clone();
    inside_the_wait(move || drop(other.empty(4).unwrap()));
    assert_budget_refusal("read", client.read_blocking(&kept));
    client.set_budget(None).unwrap();
    assert!(client.read_blocking(&kept).unwrap()[..] == [7; KIB as usize][..]);
}
