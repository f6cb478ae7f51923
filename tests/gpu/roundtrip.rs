//! create / read round trips and many live allocations.

use crate::device::{pattern, shared};

/// C06 and C08 sizes: every length, aligned or not, comes back exactly.
#[test]
fn create_read_round_trips_every_size() {
    let Some(client) = shared() else { return };
    for (seed, size) in [0usize, 1, 3, 4, 5, 7, 33, 4097, (1 << 20) + 3]
        .into_iter()
        .enumerate()
    {
        let data = pattern(size, seed as u64);
        let handle = client.create(&data).unwrap();
        assert_eq!(handle.size(), size as u64);
        let back = client.read_blocking(&handle).unwrap();
        assert_eq!(back.len(), size, "size {size}");
        assert_eq!(back, data, "size {size}");
    }
}

/// An async read returns what the blocking one does.
#[test]
fn async_read_returns_the_bytes() {
    let Some(client) = shared() else { return };
    let data = pattern(1000, 99);
    let handle = client.create(&data).unwrap();
    assert_eq!(pollster::block_on(client.read(&handle)).unwrap(), data);
}

/// 500 live allocations of random sizes, each with its own pattern, all intact; no two
/// live slices overlap in the same buffer.
#[test]
fn five_hundred_live_allocations_stay_intact_and_disjoint() {
    let Some(client) = shared() else { return };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let handles: Vec<_> = (0..500)
        .map(|i| {
            let size = (next() % 20_000) as usize;
            let data = pattern(size, 1000 + i);
            (client.create(&data).unwrap(), data)
        })
        .collect();
    let mut by_buffer: Vec<(wgpu::Buffer, Vec<(u64, u64)>)> = Vec::new();
    for (handle, _) in &handles {
        let resource = client.resource(handle).unwrap();
        let range = (resource.offset, resource.binding_size());
        match by_buffer
            .iter_mut()
            .find(|(buffer, _)| *buffer == resource.buffer)
        {
            Some((_, ranges)) => ranges.push(range),
            None => by_buffer.push((resource.buffer.clone(), vec![range])),
        }
    }
    for (_, ranges) in &mut by_buffer {
        ranges.sort();
        for pair in ranges.windows(2) {
            assert!(
                pair[0].0 + pair[0].1 <= pair[1].0,
                "overlapping slices {pair:?}"
            );
        }
    }
    for (handle, data) in &handles {
        assert_eq!(&client.read_blocking(handle).unwrap(), data);
    }
}

/// Writes at any offset and length change exactly those bytes (C05: the widening to
/// 4-byte words never touches a neighbour's bytes or the handle's own other bytes).
#[test]
fn unaligned_writes_change_only_their_bytes() {
    let Some(client) = shared() else { return };
    let mut expected = pattern(37, 5);
    let handle = client.create(&expected).unwrap();
    let neighbour_data = vec![0xBB; 64];
    let neighbour = client.create(&neighbour_data).unwrap();
    for (offset, len) in [(1usize, 2usize), (3, 5), (5, 31), (36, 1), (0, 37), (2, 0)] {
        let data = pattern(len, (offset * 100 + len) as u64);
        client.write(&handle, offset as u64, &data).unwrap();
        expected[offset..offset + len].copy_from_slice(&data);
        assert_eq!(
            client.read_blocking(&handle).unwrap(),
            expected,
            "write at {offset}+{len}"
        );
    }
    assert_eq!(client.read_blocking(&neighbour).unwrap(), neighbour_data);
}

/// A write past the handle is refused with the numbers, not clipped.
#[test]
fn out_of_bounds_write_is_an_error() {
    let Some(client) = shared() else { return };
    let handle = client.empty(8).unwrap();
    let error = client.write(&handle, 6, &[1, 2, 3]).unwrap_err();
    assert!(
        matches!(
            error,
            wgpu_memory::ClientError::OutOfBounds {
                offset: 6,
                len: 3,
                size: 8,
                ..
            }
        ),
        "{error}"
    );
}

/// The application's own submission after `Client::queue` runs after the client's
/// recorded writes (the client submits them first).
#[test]
fn the_applications_own_copy_sees_the_clients_recorded_write() {
    let Some(client) = crate::device::fresh() else {
        return;
    };
    let source = client.create(&[5; 256]).unwrap();
    // Over 64 KiB: a page of another pool (a copy within one buffer is refused by wgpu).
    let target = client.create(&[0; 128 << 10]).unwrap();
    let from = client.resource(&source).unwrap();
    let to = client.resource(&target).unwrap();
    client.write(&source, 0, &[6; 256]).unwrap();
    let mut encoder = client
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    encoder.copy_buffer_to_buffer(&from.buffer, from.offset, &to.buffer, to.offset, 256);
    client.queue().submit([encoder.finish()]);
    assert_eq!(client.read_blocking(&target).unwrap()[..256], [6; 256]);
    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

/// A zero-size read derefs to an empty slice at an aligned address, so casting it to a
/// slice of `f32` (or any type up to 16-byte alignment) works, alone or among others.
#[test]
fn a_zero_size_read_casts_to_any_slice() {
    let Some(client) = shared() else { return };
    let zero = client.empty(0).unwrap();
    let read = client.read_blocking(&zero).unwrap();
    assert!(read.is_empty());
    assert_eq!(read.as_ptr() as usize % 16, 0, "{:p}", read.as_ptr());
    assert!(bytemuck::cast_slice::<u8, f32>(&read).is_empty());
    let four = client.create(&1.5f32.to_le_bytes()).unwrap();
    let both = client.read_many_blocking(&[&zero, &four]).unwrap();
    assert!(bytemuck::cast_slice::<u8, f32>(&both[0]).is_empty());
    assert_eq!(bytemuck::cast_slice::<u8, f32>(&both[1]), &[1.5]);
}
