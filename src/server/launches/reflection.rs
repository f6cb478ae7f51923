//! What a kernel's WGSL says about its bindings, read with naga (the WGSL front end and
//! validator wgpu itself uses, at the version wgpu 30 depends on).
//!
//! Four facts come from here, each about the launched entry point alone: WGSL asks a
//! binding number to be unique only among the globals one entry point uses, so a module
//! may declare different globals at one binding for different entry points, and only
//! the globals the entry point (or a function it calls) touches are in the layout wgpu
//! derives for its pipeline.
//!
//! - **Whether the kernel compiles at all.** A source naga does not parse or validate, or
//!   one without the launched compute entry point, is refused with naga's message before
//!   wgpu sees it: on the web wgpu hands the source to the browser, whose verdict comes
//!   back only after the launch returned, so the check runs here, on every target.
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
//! - **Which bindings the entry point uses at all**, in every group and of every kind. A
//!   launch binds only `@group(0)`, one handle per binding; a pipeline that needs
//!   another group, or a binding past the handles given, is refused by wgpu only when
//!   the batch is submitted (or when the bind group is made), so the launch refuses it
//!   first, with an error that says what to do.

use naga::valid::{Capabilities, GlobalUse, ModuleInfo, ValidationFlags, Validator};

/// What one entry point does with its bindings. Each list is ascending binding numbers
/// of `@group(0)` storage bindings, counting only the globals the entry point uses
/// (itself or through a function it calls): a module may declare different globals at
/// one binding number for different entry points.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BindingUse {
    /// Bindings declared read-only storage (`var<storage, read>` or `var<storage>`).
    pub(crate) read_only: Vec<u32>,
    /// Bindings the entry point, or a function it calls, stores to (atomics included).
    /// `None` when the source could not be analysed: every binding counts as written.
    pub(crate) written: Option<Vec<u32>>,
    /// The highest `@group(0)` binding number the entry point uses, of any kind (a
    /// launch must give a handle for it); `None` when it uses none or the source could
    /// not be analysed.
    pub(crate) last_binding: Option<u32>,
    /// The lowest (group, binding) outside `@group(0)` the entry point uses, of any
    /// kind: a launch cannot bind it.
    pub(crate) other_group: Option<(u32, u32)>,
    /// naga's message when the source does not parse, does not validate, or has no
    /// compute entry point of the launched name: the launch is refused with it before
    /// the source reaches wgpu (on the web, before it reaches the browser, whose own
    /// verdict would come back only after the launch returned). naga here is the one
    /// wgpu uses, with every capability allowed, so it never refuses what wgpu accepts.
    pub(crate) refused: Option<String>,
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

/// What `entry_point` of `source` does with its bindings, and whether naga refuses the
/// kernel (`refused`, see [`BindingUse::refused`]); `label` names the source in naga's
/// message, as wgpu names it. A source that does not parse gives no read-only binding
/// and every binding as written; one that parses but does not validate, or lacks the
/// entry point, gives every binding as written and as read-only only the binding numbers
/// at which every declared global is read-only. A launch refuses all three before it
/// looks at any of that.
pub(crate) fn binding_use(source: &str, entry_point: &str, label: &str) -> BindingUse {
    let module = match naga::front::wgsl::parse_str(source) {
        Ok(module) => module,
        Err(error) => {
            return BindingUse {
                refused: Some(error.emit_to_string_with_path(source, label)),
                ..BindingUse::default()
            };
        }
    };
    // wgpu validates shaders with every flag; every capability here, so that this is
    // never stricter than wgpu on the device's features (naga's WGSL front end, as
    // `parse_str` runs it, also allows every capability).
    let info = Validator::new(ValidationFlags::all(), Capabilities::all()).validate(&module);
    let index = module
        .entry_points
        .iter()
        .position(|entry| entry.name == entry_point && entry.stage == naga::ShaderStage::Compute);
    let refused = match (info, index) {
        (Ok(info), Some(index)) => return entry_point_use(&module, &info, index),
        (Err(error), _) => error.emit_to_string_with_path(source, label),
        (Ok(_), None) => format!("the module has no compute entry point named `{entry_point}`"),
    };
    BindingUse {
        read_only: read_only_everywhere(&module),
        refused: Some(refused),
        ..BindingUse::default()
    }
}

/// What entry point `index` of the validated `module` does with the globals it uses.
fn entry_point_use(module: &naga::Module, info: &ModuleInfo, index: usize) -> BindingUse {
    // The entry point's uses include those of every function it calls (naga merges a
    // callee's uses into its caller's); a global it never touches has none, and is not
    // in the layout wgpu derives for its pipeline. An atomic operation counts as a read
    // and a write.
    let uses = info.get_entry_point(index);
    let mut usage = BindingUse::default();
    let mut written = Vec::new();
    for (handle, variable) in module.global_variables.iter() {
        let Some(binding) = variable.binding.as_ref() else {
            continue;
        };
        let used = uses[handle];
        if used.is_empty() {
            continue;
        }
        if binding.group != 0 {
            let here = (binding.group, binding.binding);
            usage.other_group = Some(usage.other_group.map_or(here, |seen| seen.min(here)));
            continue;
        }
        usage.last_binding = usage.last_binding.max(Some(binding.binding));
        let naga::AddressSpace::Storage { access } = variable.space else {
            continue;
        };
        if !access.contains(naga::StorageAccess::STORE) {
            usage.read_only.push(binding.binding);
        }
        if used.intersects(GlobalUse::WRITE | GlobalUse::ATOMIC) {
            written.push(binding.binding);
        }
    }
    usage.read_only.sort_unstable();
    written.sort_unstable();
    usage.written = Some(written);
    usage
}

/// The `@group(0)` storage binding numbers at which every global `module` declares is
/// read-only, ascending: without knowing which global an entry point uses, a binding
/// counts as read-only only when it is so whichever one it uses (so it is never left
/// out of what a failure claims because another entry point declares it read-only).
fn read_only_everywhere(module: &naga::Module) -> Vec<u32> {
    let storage = |variable: &naga::GlobalVariable| {
        let binding = variable.binding.as_ref()?;
        let naga::AddressSpace::Storage { access } = variable.space else {
            return None;
        };
        (binding.group == 0).then_some((
            binding.binding,
            !access.contains(naga::StorageAccess::STORE),
        ))
    };
    let declared: Vec<(u32, bool)> = module
        .global_variables
        .iter()
        .filter_map(|(_, variable)| storage(variable))
        .collect();
    let mut bindings: Vec<u32> = declared
        .iter()
        .filter(|&&(number, _)| {
            declared
                .iter()
                .all(|&(other, read_only)| other != number || read_only)
        })
        .map(|&(number, _)| number)
        .collect();
    bindings.sort_unstable();
    bindings.dedup();
    bindings
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
