//! Compaction never loses a byte (issue 22): writes that compact for their own staging,
//! writes refused half way, batch failures beside moves, the export window, pages the
//! application destroyed, export holds that never end, and the bound on what a batch
//! carries.

use super::{Client, ClientError, Handle};
use crate::memory_management::parse_memory_config;
use crate::server::MAX_BATCH_COMMANDS;

fn client() -> Option<Client> {
    match Client::open_default() {
        Ok(client) => Some(client),
        Err(error) if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") => {
            panic!("CI=true and no GPU adapter: {error}")
        }
        Err(_) => None,
    }
}

/// A live handle and the bytes it should read.
type Kept = (Handle, Vec<u8>);

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// One sliced pool of `page`-byte pages (slices up to a page).
fn sliced(client: &Client, page: u64) {
    let toml = format!(
        "[memory]\npools = [ {{ type = \"sliced\", page_size = {page}, max_slice_size = {page} }} ]\n"
    );
    let pools = parse_memory_config(&toml).unwrap().pools.unwrap();
    client.install_memory_pools(&pools).unwrap();
}

fn pattern(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed * 131 + 7) % 251) as u8)
        .collect()
}

fn create(client: &Client, len: u64, seed: u64) -> (Handle, Vec<u8>) {
    let bytes = pattern(len, seed);
    (client.create(&bytes).unwrap(), bytes)
}

/// Where `handle`'s slice is now (the server's own lookup: nothing is pinned or held).
fn place(client: &Client, handle: &Handle) -> (wgpu::Buffer, u64) {
    let resource = client.shared.server.lock().resource(handle).unwrap();
    (resource.buffer, resource.offset)
}

fn assert_reads(client: &Client, kept: &[(Handle, Vec<u8>)]) {
    for (handle, bytes) in kept {
        let read = client.read_blocking(handle).unwrap();
        assert!(
            read[..] == bytes[..],
            "allocation {} lost its bytes",
            handle.memory().descriptor().id.value
        );
    }
}

/// Two 1 MiB pages of four 256 KiB slices: page A keeps only `target`, page B keeps
/// three slices and one hole. Compaction empties A by moving `target` into B's hole.
fn sparse_target(client: &Client) -> (Kept, Vec<Kept>) {
    sliced(client, MIB);
    let mut all: Vec<_> = (0..8).map(|i| create(client, 256 * KIB, i + 1)).collect();
    let kept_b: Vec<_> = [5, 6, 7].iter().map(|&i| all[i].clone()).collect();
    let target = all.swap_remove(0);
    drop(all);
    client.sync().unwrap();
    // Not `cleanup()`: it would compact already.
    client.shared.server.lock().release_dropped();
    (target, kept_b)
}

/// Item 1: under a budget equal to what is held, a write's staging is refused; making
/// room compacts the main memory and moves the target. The write must land where the
/// target is now (before: it was recorded into the page the target left, and `write`
/// returned `Ok` with the handle reading its old bytes).
#[test]
fn a_write_that_compacts_for_its_staging_lands_where_the_target_now_is() {
    let Some(client) = client() else { return };
    let ((target, old), kept) = sparse_target(&client);
    // Give back the idle staging pages without compacting, so the write's staging must
    // make room.
    let max = client.max_move_bytes();
    client.set_max_move_bytes(0);
    client.cleanup();
    client.set_max_move_bytes(max);
    let before = place(&client, &target);
    let held = client.budget().held;
    client.set_budget(Some(held)).unwrap();
    let new = pattern(64 * KIB, 99);
    match client.write(&target, 0, &new) {
        Ok(()) => {
            let mut expected = old.clone();
            expected[..new.len()].copy_from_slice(&new);
            assert_ne!(place(&client, &target), before, "the target moved");
            client.set_budget(None).unwrap();
            assert_reads(&client, &[(target, expected)]);
        }
        Err(error) => {
            assert!(matches!(error, ClientError::OutOfMemory { .. }), "{error}");
            client.set_budget(None).unwrap();
            assert_reads(&client, &[(target, old)]);
        }
    }
    assert_reads(&client, &kept);
}

/// Item 2: a whole-handle write with an unaligned end needs, after its staging, a small
/// slice and staging for the edge merge; the budget refuses those. The write returns
/// `OutOfMemory` and every byte is as it was (before: the aligned copy stayed queued and
/// changed all but the last word).
#[test]
fn a_write_refused_by_the_budget_changes_no_byte() {
    let Some(client) = client() else { return };
    const LEN: u64 = 524_287;
    let (handle, old) = create(&client, LEN, 3);
    client.sync().unwrap();
    client.cleanup();
    // Room for the write's own staging page (512 KiB), nothing for the merge's slice.
    let held = client.budget().held;
    client.set_budget(Some(held + 512 * KIB)).unwrap();
    let result = client.write(&handle, 0, &pattern(LEN, 4));
    assert!(
        matches!(result, Err(ClientError::OutOfMemory { .. })),
        "{result:?}"
    );
    client.set_budget(None).unwrap();
    assert_reads(&client, &[(handle, old)]);
}

/// Item 3: a batch whose own work fails also carries a compaction; the moved slices'
/// bytes were whole, so they are not claimed (before: every moved slice read
/// `Unwritten`).
#[test]
fn a_failed_batch_does_not_claim_the_slices_it_moved() {
    let Some(client) = client() else { return };
    let ((target, old), kept) = sparse_target(&client);
    client.flush().unwrap();
    let before = place(&client, &target);
    {
        let mut server = client.shared.server.lock();
        server.release_dropped();
        let max = server.max_move_bytes();
        assert!(server.compact(max).moves > 0, "the target moves");
    }
    // Work that fails, in the same batch as the moves (a segment after them).
    let spare = client.create(&[0; 64]).unwrap();
    client
        .shared
        .server
        .lock()
        .record_overlapping_copy(&spare)
        .unwrap();
    assert!(matches!(client.flush(), Err(ClientError::Wgpu { .. })));
    assert_ne!(place(&client, &target), before);
    let mut all = kept;
    all.push((target, old));
    assert_reads(&client, &all);
}

/// Item 4: a compaction recorded inside `resource()`'s flush (here from the hook that
/// runs right after the flush's submit) cannot move the slice being exported: it is
/// pinned before the flush, so the place handed out is where its bytes are.
#[test]
fn a_compaction_inside_the_exports_flush_does_not_move_the_exported_slice() {
    let Some(client) = client() else { return };
    let ((target, old), _kept) = sparse_target(&client);
    client.write(&target, 0, &old[..4]).unwrap();
    let before = place(&client, &target);
    let inner = client.clone();
    *client.shared.after_submit.lock() = Some(Box::new(move || {
        let mut server = inner.shared.server.lock();
        let max = server.max_move_bytes();
        server.compact(max);
    }));
    let resource = client.resource(&target).unwrap();
    assert_eq!((resource.buffer.clone(), resource.offset), before);
    assert_eq!(place(&client, &target), before, "the slice did not move");
    drop(resource);
    assert_reads(&client, &[(target, old)]);
}

/// Page A keeps three slices, one of them (`doomed`, returned first) exported and its
/// buffer destroyed by the application, the resource dropped; page B keeps one healthy
/// slice. Returns (doomed, healthy, A's two others).
fn destroyed_page(client: &Client) -> (Handle, Kept, Vec<Kept>) {
    sliced(client, MIB);
    let all: Vec<_> = (0..8).map(|i| create(client, 256 * KIB, i + 1)).collect();
    let doomed = all[0].0.clone();
    let healthy = all[4].clone();
    let others = vec![all[1].clone(), all[2].clone()];
    drop(all);
    client.sync().unwrap();
    let resource = client.resource(&doomed).unwrap();
    resource.buffer.destroy();
    drop(resource);
    (doomed, healthy, others)
}

/// Item 5: the application destroyed the page of a resource it held, then dropped the
/// resource; the client has not noticed. A compaction must not move a healthy slice into
/// that page (before: the batch failed, and the healthy handle read `Unwritten` and was
/// named in `PageDestroyed`).
#[test]
fn a_compaction_never_moves_a_healthy_slice_into_a_destroyed_page() {
    let Some(client) = client() else { return };
    let (doomed, healthy, others) = destroyed_page(&client);
    let _ = client.compact();
    assert_reads(&client, std::slice::from_ref(&healthy));
    // Once the hold has ended (an application submission), the page must still take no
    // moved slice.
    drop(doomed);
    client.queue().submit([]);
    let _ = client.compact();
    assert_reads(&client, &[healthy]);
    drop(others);
}

/// Item 5, once the export's hold has ended: page A (three slices, one exported and
/// destroyed by the application) and page B (one healthy slice). The application drops
/// the resource and the handle, submits, and makes a reservation (050e8eb let the hold
/// go only at the first reservation after the submission). A
/// compaction empties B, the sparser page, only if A takes its slice: A is destroyed,
/// so it must take nothing, and the healthy handle keeps its bytes and is named in no
/// `PageDestroyed`. Before (050e8eb), nothing knew of the destruction once the hold had
/// ended: the healthy slice was copied into A, the batch failed at submit, `compact`
/// returned `PageDestroyed` naming the healthy handle, and reading it returned
/// `Unwritten`.
#[test]
fn a_healthy_slice_never_moves_into_a_destroyed_page_once_its_export_ended() {
    let Some(client) = client() else { return };
    let (doomed, healthy, others) = destroyed_page(&client);
    let page_a = place(&client, &doomed).0;
    assert_ne!(place(&client, &healthy.0).0, page_a, "two pages");
    drop(doomed);
    client.queue().submit([]);
    // Before, only this reservation let the export's hold go.
    let _spare = client.empty(4 * KIB).unwrap();
    let compacted = client.compact();
    let read = client.read_blocking(&healthy.0);
    assert!(
        matches!(&read, Ok(bytes) if bytes[..] == healthy.1[..]),
        "the healthy slice lost its bytes: {:?}",
        read.err()
    );
    let id = healthy.0.memory().descriptor().id;
    if let Err(ClientError::PageDestroyed { handles, .. }) = &compacted {
        assert!(!handles.contains(&id), "the healthy handle was claimed");
    }
    assert_ne!(place(&client, &healthy.0).0, page_a, "it moved into A");
    // A's own slices are the destroyed page's.
    for (handle, _) in &others {
        assert!(matches!(
            client.read_blocking(handle),
            Err(ClientError::PageDestroyed { .. })
        ));
    }
}

/// Items 7 and 8: export holds end at the dropping thread's submission through
/// `queue()`, sync or cleanup, or its exit; once the exporting threads exited, dropping
/// everything and one cleanup leaves nothing live and nothing reserved. A hold that
/// never ends keeps only its own slice in place: its page still takes moved slices.
#[test]
fn export_holds_end_and_never_pin_a_page_for_ever() {
    let Some(client) = client() else { return };
    sliced(&client, MIB);
    let threads: Vec<_> = (0..4)
        .map(|seed| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..16 {
                    let (handle, _) = create(&client, 4 * KIB, seed * 100 + i);
                    let _resource = client.resource(&handle).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(client.held_exports() > 0, "the threads never submitted");
    client.cleanup();
    assert_eq!(client.held_exports(), 0);
    let usage = client.memory_report().streams[0].pools.usage();
    assert_eq!((usage.number_allocs, usage.bytes_reserved), (0, 0));

    // A held slice (resource and handle dropped, never submitted) in page A; page B
    // sparser: its slice moves into A's holes.
    let all: Vec<_> = (0..8).map(|i| create(&client, 256 * KIB, i + 1)).collect();
    let (page_a, _) = place(&client, &all[0].0);
    let moving = all[4].clone();
    let kept = vec![all[1].clone(), moving.clone()];
    drop(client.resource(&all[0].0).unwrap());
    drop(all);
    client.flush().unwrap();
    assert_eq!(client.held_exports(), 1);
    let done = {
        let mut server = client.shared.server.lock();
        server.release_dropped();
        let max = server.max_move_bytes();
        server.compact(max)
    };
    assert!(done.moves > 0, "the held slice's page took a moved slice");
    assert_eq!(place(&client, &moving.0).0, page_a);
    assert_reads(&client, &kept);
}

/// A thread records a copy into a live handle's resource in its own encoder and drops
/// the resource; meanwhile another thread submits through `queue()`, cleans up and
/// compacts (the target sits alone in its page, so a compaction would move it). The
/// copy, submitted after, must land in the target's bytes; once that thread has
/// submitted, the target may move again. (Before: the other thread's submission ended
/// the hold, the compaction moved the target, and the copy landed at its old place.)
#[test]
fn an_app_copy_lands_whatever_another_thread_submits_and_compacts_before_its_submit() {
    let Some(client) = client() else { return };
    let ((target, _), kept) = sparse_target(&client);
    let source = kept[0].clone();
    let before = place(&client, &target);
    let (recorded, recorded_here) = std::sync::mpsc::channel();
    let (go, go_there) = std::sync::mpsc::channel::<()>();
    let (inner, from, to) = (client.clone(), source.0.clone(), target.clone());
    let thread = std::thread::spawn(move || {
        let mut encoder = inner.device().create_command_encoder(&Default::default());
        let (a, b) = (inner.resource(&from).unwrap(), inner.resource(&to).unwrap());
        encoder.copy_buffer_to_buffer(&a.buffer, a.offset, &b.buffer, b.offset, 256 * KIB);
        drop((a, b));
        recorded.send(()).unwrap();
        go_there.recv().unwrap();
        inner.queue().submit([encoder.finish()]);
        recorded.send(()).unwrap();
        go_there.recv().unwrap();
    });
    recorded_here.recv().unwrap();
    client.queue().submit([]);
    client.sync().unwrap();
    client.cleanup();
    client.compact().unwrap();
    assert_eq!(
        place(&client, &target),
        before,
        "the target moved before the copy"
    );
    go.send(()).unwrap();
    recorded_here.recv().unwrap();
    assert_reads(&client, &[(target.clone(), source.1.clone())]);
    // That thread has submitted (it still runs): the hold is over, the target moves.
    assert!(client.compact().unwrap().moves > 0);
    assert_ne!(
        place(&client, &target),
        before,
        "the hold outlived the submit"
    );
    go.send(()).unwrap();
    thread.join().unwrap();
    assert_reads(&client, &[(target, source.1)]);
    assert_reads(&client, &kept);
}

/// Item 7, the protection the holds exist for: until the application submits, a new
/// allocation never takes an exported slice it dropped.
#[test]
fn a_dropped_export_is_not_reused_before_the_applications_submit() {
    let Some(client) = client() else { return };
    sliced(&client, MIB);
    let (handle, _) = create(&client, 4 * KIB, 1);
    let exported = place(&client, &handle);
    drop(client.resource(&handle).unwrap());
    drop(handle);
    let (next, _) = create(&client, 4 * KIB, 2);
    assert_ne!(place(&client, &next), exported, "held until a submission");
    client.queue().submit([]);
    let (after, _) = create(&client, 4 * KIB, 3);
    assert_eq!(
        place(&client, &after),
        exported,
        "free after the submission"
    );
}

/// Item 10: a compaction pass moves at most `MAX_BATCH_COMMANDS` slices, each counted
/// as a command of the batch, which is then due.
#[test]
fn a_compaction_pass_is_bounded_by_the_batch_commands() {
    let Some(client) = client() else { return };
    sliced(&client, 64 * KIB);
    // 256 slices a page, one in four kept: about 3/4 of 8 * 4096 survivors move, more
    // than one pass may carry.
    let count = 32 * MAX_BATCH_COMMANDS as u64;
    let all: Vec<Handle> = (0..count)
        .map(|_| client.empty(256).unwrap())
        .collect::<Vec<_>>();
    // Every page keeps one slice in four: many small moves to make.
    let kept: Vec<Handle> = all.into_iter().step_by(4).collect();
    client.flush().unwrap();
    let mut server = client.shared.server.lock();
    server.release_dropped();
    let done = server.compact(u64::MAX);
    assert_eq!(done.moves, MAX_BATCH_COMMANDS as usize, "the bound binds");
    assert!(server.pending_commands() >= done.moves as u32);
    assert!(server.submit_due());
    drop(server);
    drop(kept);
}

/// A batch of work, then a compaction's copies, is submitted as two segments; wgpu runs
/// callbacks at the end of each `queue.submit`. A callback that reads a moved slice
/// inside the first segment's submit must still see its bytes (the soak found a
/// callback's read returning another slice's bytes: the read was submitted before the
/// segment carrying the move).
#[test]
fn a_callback_inside_a_segments_submit_sees_the_moves_of_the_later_segments() {
    let Some(client) = client() else { return };
    let ((target, old), kept) = sparse_target(&client);
    client.sync().unwrap();
    let before = place(&client, &target);
    // A segment of work, then a segment of moves, in one batch.
    client.write(&kept[0].0, 0, &kept[0].1[..4]).unwrap();
    {
        let mut server = client.shared.server.lock();
        let max = server.max_move_bytes();
        assert!(server.compact(max).moves > 0, "the target moves");
    }
    // Registered on the queue itself (`queue()` would flush): the work it follows is
    // done, so it fires at wgpu's next maintain, inside the first segment's submit.
    let (inner, probe) = (client.clone(), target.clone());
    let (sender, receiver) = std::sync::mpsc::channel();
    let flushing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let during = flushing.clone();
    client.shared.queue.on_submitted_work_done(move || {
        let inside = during.load(std::sync::atomic::Ordering::SeqCst);
        let read = inner.read_blocking(&probe).map(|read| read.to_vec());
        let _ = sender.send((inside, read));
    });
    flushing.store(true, std::sync::atomic::Ordering::SeqCst);
    client.flush().unwrap();
    assert_ne!(place(&client, &target), before, "the target moved");
    let (inside, read) = receiver.recv().expect("the callback ran");
    assert!(inside, "the callback ran inside the batch's submit");
    assert!(
        read.unwrap()[..] == old[..],
        "the callback read other bytes"
    );
    let mut all = kept;
    all.push((target, old));
    assert_reads(&client, &all);
}
