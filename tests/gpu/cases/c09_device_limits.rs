//! C09: requests at and over the device's limits.

use crate::device::fresh;
use wgpu_memory::ClientError;
use wgpu_memory::memory_management::ReserveError;

#[test]
fn c09_device_limits() {
    let Some(client) = fresh() else { return };
    let limits = client.device().limits();
    let max_buffer = limits.max_buffer_size;
    let max_binding = limits.max_storage_buffer_binding_size.min(max_buffer);

    // Over max_buffer_size: BufferTooBig naming the request and the limit.
    let error = client.empty(max_buffer + 1).unwrap_err();
    match &error {
        ClientError::Reserve(ReserveError::BufferTooBig { requested, limit }) => {
            assert_eq!(*requested, max_buffer + 1);
            assert!(*limit <= max_buffer);
        }
        other => panic!("expected BufferTooBig, got {other}"),
    }
    let message = error.to_string();
    assert!(message.contains(&(max_buffer + 1).to_string()), "{message}");

    // Over the binding limit: a typed error naming it (the pools only make bindable pages).
    if max_binding < max_buffer {
        let error = client.empty(max_binding + 1024).unwrap_err();
        assert!(
            error.to_string().contains(&max_binding.to_string()),
            "{error}"
        );
    }

    // Just under the binding limit (capped to keep the test light): Ok and bindable.
    let size = (max_binding - 1024).min(64 << 20);
    let big = client.empty(size).unwrap();
    let resource = client.resource(&big).unwrap();
    assert!(resource.offset + resource.binding_size() <= resource.buffer.size());

    assert!(
        client.uncaptured_errors().is_empty(),
        "{:?}",
        client.uncaptured_errors()
    );
}

/// Sizes no page can hold, up to `u64::MAX`, given to every call that creates or writes:
/// a typed error naming the size, never an overflow (`create_with` of 2^63 + 1 bytes
/// overflowed the upload staging bound's page size before the reservation saw it).
#[test]
fn c09_sizes_near_u64_max_are_refused_with_a_typed_error() {
    let Some(client) = fresh() else { return };
    let small = client.create(&[7; 16]).unwrap();
    for size in [u64::MAX, u64::MAX - 1, (1 << 63) + 1, 1 << 63] {
        match client.create_with(size, |_| {}) {
            Err(ClientError::Reserve(ReserveError::BufferTooBig { requested, .. })) => {
                assert_eq!(requested, size)
            }
            other => panic!("create_with({size}): expected BufferTooBig, got {other:?}"),
        }
        assert!(
            matches!(client.empty(size), Err(ClientError::Reserve(ReserveError::BufferTooBig { requested, .. })) if requested == size),
            "empty({size})"
        );
        assert!(
            client.write_with(&small, 0, size, |_| {}).is_err(),
            "write_with({size})"
        );
    }
    // The client carries on.
    assert_eq!(client.read_blocking(&small).unwrap().to_vec(), vec![7; 16]);
}
