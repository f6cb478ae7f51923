//! What a kernel's WGSL says about its bindings, read with naga (the WGSL front end and
//! validator wgpu itself uses, at the version wgpu 30 depends on).
//!
//! Two facts come from here:
//!
//! - **Which bindings the entry point writes.** naga's validator records, for each
//!   function, the globals it loads from and stores to (a `Store` through any pointer
//!   into the global: an element, a field, a `let` pointer to either; an atomic; and
//!   everything a called function does, which the caller inherits). That set, not the
//!   access mode a binding is declared with, is what a failure of the launch claims: a
//!   binding declared `read_write` but only read is never claimed. A storage pointer
//!   cannot be passed to a function in naga 30 (WGSL's `unrestricted_pointer_parameters`
//!   is not implemented), so no store reaches a binding through an argument unseen.
//! - **Which bindings are declared `var<storage, read>`.** wgpu refuses a dispatch that
//!   uses one buffer both as read-only storage and as writable storage (a buffer's
//!   `STORAGE_READ_WRITE` use is exclusive, so it cannot be merged with
//!   `STORAGE_READ_ONLY` in one usage scope), and it finds that only when the batch's
//!   encoder is finished: the whole batch would fail. Slices of one page are one buffer,
//!   so two handles of a launch can share a page. Knowing the read-only bindings lets
//!   the launch refuse that case alone, when it is recorded.

use naga::valid::{Capabilities, GlobalUse, ValidationFlags, Validator};

/// What one entry point does with its `@group(0)` storage bindings. Each list is
/// ascending binding numbers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BindingUse {
    /// Bindings declared read-only storage (`var<storage, read>` or `var<storage>`).
    pub(crate) read_only: Vec<u32>,
    /// Bindings the entry point, or a function it calls, stores to (atomics included).
    /// `None` when the source could not be analysed: every binding counts as written.
    pub(crate) written: Option<Vec<u32>>,
}

impl BindingUse {
    /// Whether binding `index` may be written: named in `written` (every binding when
    /// the source could not be analysed), and never a read-only one.
    pub(crate) fn may_write(&self, index: u32) -> bool {
        self.read_only.binary_search(&index).is_err()
            && self
                .written
                .as_ref()
                .is_none_or(|written| written.binary_search(&index).is_ok())
    }
}

/// What `entry_point` of `source` does with its `@group(0)` storage bindings. A source
/// that does not parse gives no read-only binding and every binding as written; one
/// that parses but does not validate, or lacks the entry point, gives its read-only
/// bindings and every other binding as written (wgpu reports either when the pipeline is
/// compiled).
pub(crate) fn binding_use(source: &str, entry_point: &str) -> BindingUse {
    let Ok(module) = naga::front::wgsl::parse_str(source) else {
        return BindingUse::default();
    };
    let read_only = read_only_bindings(&module);
    let written = written_bindings(&module, entry_point);
    BindingUse { read_only, written }
}

/// The `@group(0)` storage bindings `module` declares read-only, ascending.
fn read_only_bindings(module: &naga::Module) -> Vec<u32> {
    let mut bindings: Vec<u32> = module
        .global_variables
        .iter()
        .filter_map(|(_, variable)| {
            let binding = variable.binding.as_ref()?;
            let naga::AddressSpace::Storage { access } = variable.space else {
                return None;
            };
            let read_only = !access.contains(naga::StorageAccess::STORE);
            (binding.group == 0 && read_only).then_some(binding.binding)
        })
        .collect();
    bindings.sort_unstable();
    bindings
}

/// The `@group(0)` storage bindings `entry_point` stores to, ascending; `None` when the
/// module does not validate or has no such compute entry point.
fn written_bindings(module: &naga::Module, entry_point: &str) -> Option<Vec<u32>> {
    // wgpu validates shaders with every flag; every capability here, so that this is
    // never stricter than wgpu on the device's features.
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(module)
        .ok()?;
    let index = module
        .entry_points
        .iter()
        .position(|entry| entry.name == entry_point && entry.stage == naga::ShaderStage::Compute)?;
    // The entry point's uses include those of every function it calls (naga merges a
    // callee's uses into its caller's); an atomic operation counts as a read and a write.
    let uses = info.get_entry_point(index);
    let mut bindings: Vec<u32> = module
        .global_variables
        .iter()
        .filter_map(|(handle, variable)| {
            let binding = variable.binding.as_ref()?;
            let naga::AddressSpace::Storage { .. } = variable.space else {
                return None;
            };
            let stores = uses[handle].intersects(GlobalUse::WRITE | GlobalUse::ATOMIC);
            (binding.group == 0 && stores).then_some(binding.binding)
        })
        .collect();
    bindings.sort_unstable();
    Some(bindings)
}

/// The first pair (read-only binding, writable binding) of a launch that lie in one
/// buffer, when `read_only` names the read-only bindings of its kernel and `buffer`
/// gives each binding's buffer (taken from the binding, so the caller builds no list).
pub(crate) fn aliased_read_only<T, B: PartialEq>(
    read_only: &[u32],
    bindings: &[T],
    buffer: impl Fn(&T) -> &B,
) -> Option<(u32, u32)> {
    read_only.iter().find_map(|&reader| {
        let shared = buffer(bindings.get(reader as usize)?);
        bindings
            .iter()
            .enumerate()
            .find(|&(other, candidate)| {
                other as u32 != reader
                    && buffer(candidate) == shared
                    && read_only.binary_search(&(other as u32)).is_err()
            })
            .map(|(writer, _)| (reader, writer as u32))
    })
}

#[cfg(test)]
mod tests;
