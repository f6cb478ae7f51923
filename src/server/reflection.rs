//! What a kernel's WGSL says about its bindings, read with naga (wgpu's own shader
//! front end, re-exported as `wgpu::naga`).
//!
//! wgpu refuses a dispatch that uses one buffer both as read-only storage and as
//! writable storage, and it finds that only when the batch's encoder is finished: the
//! whole batch would fail. Slices of one page are one buffer, so two handles of a
//! launch can share a page. Knowing which bindings a kernel declares
//! `var<storage, read>` lets the launch refuse that case alone, when it is recorded.

/// The `@group(0)` bindings `source` declares as read-only storage, ascending. Empty
/// when the source does not parse (wgpu reports that when the pipeline is compiled).
pub(crate) fn read_only_bindings(source: &str) -> Vec<u32> {
    let Ok(module) = wgpu::naga::front::wgsl::parse_str(source) else {
        return Vec::new();
    };
    let mut bindings: Vec<u32> = module
        .global_variables
        .iter()
        .filter_map(|(_, variable)| {
            let binding = variable.binding.as_ref()?;
            let wgpu::naga::AddressSpace::Storage { access } = variable.space else {
                return None;
            };
            let read_only = !access.contains(wgpu::naga::StorageAccess::STORE);
            (binding.group == 0 && read_only).then_some(binding.binding)
        })
        .collect();
    bindings.sort_unstable();
    bindings
}

/// The first pair (read-only binding, writable binding) of a launch that lie in one
/// buffer, when `read_only` names the read-only bindings of its kernel.
pub(crate) fn aliased_read_only<B: PartialEq>(
    read_only: &[u32],
    buffers: &[B],
) -> Option<(u32, u32)> {
    read_only.iter().find_map(|&reader| {
        let buffer = buffers.get(reader as usize)?;
        buffers
            .iter()
            .enumerate()
            .find(|&(other, candidate)| {
                other as u32 != reader
                    && candidate == buffer
                    && read_only.binary_search(&(other as u32)).is_err()
            })
            .map(|(writer, _)| (reader, writer as u32))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read> z: array<u32>;
@compute @workgroup_size(1) fn main() { y[0] = x[0] + z[0]; }
";

    #[test]
    fn read_only_storage_bindings_are_found() {
        assert_eq!(read_only_bindings(SOURCE), vec![0, 2]);
        assert!(read_only_bindings("not wgsl").is_empty());
    }

    #[test]
    fn a_read_only_binding_in_a_writable_bindings_buffer_is_found() {
        assert_eq!(aliased_read_only(&[0, 2], &["a", "a", "b"]), Some((0, 1)));
        // Two read-only bindings may share a buffer.
        assert_eq!(aliased_read_only(&[0, 2], &["a", "b", "a"]), None);
        assert_eq!(aliased_read_only(&[], &["a", "a"]), None);
    }
}
