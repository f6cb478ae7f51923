//! Dispatching a kernel over handles into the pending batch.

use super::caches::{BindGroupKey, CachedPipeline, PipelineKey};
use super::kernel::Kernel;
use super::reflection::{BindingUse, aliased_read_only};
use crate::memory_management::{Claim, FailureId, ManagedMemoryId, Skipped};
use crate::server::faults::error::ClientError;
use crate::server::memory::handle::Handle;
use crate::server::{Late, Server, wgpu_error};
use crate::storage::wgpu_storage::error::{capture_late, destroyed_resource};

/// A dispatch whose pipeline and bind group are made, ready to record.
pub(crate) struct PreparedDispatch {
    pipeline: CachedPipeline,
    bind_group: wgpu::BindGroup,
}

impl Server {
    /// Records a dispatch of `kernel` over `workgroups` in the pending batch, binding the
    /// i-th handle as the storage buffer `@group(0) @binding(i)` at its offset.
    ///
    /// Every check a launch can fail runs first, in this order: the device, the limits
    /// and the handles' owner ([`check_launch`](Self::check_launch)); the pipeline
    /// (compiled inside error scopes: the source and the entry point); the bindings the
    /// entry point uses (none outside `@group(0)`, none past the handles given); each
    /// handle's slice; a read-only binding sharing a page with a writable one; the bind
    /// group, which wgpu checks against the pipeline. A launch that returns an error ran
    /// nothing and claims nothing, every byte is intact, since nothing reaches the batch
    /// or the failure tracking before all of them pass.
    ///
    /// Failure tracking, after the checks: a launch whose inputs carry a claim is not
    /// dispatched; its outputs take the same failure and a [`Skipped`] record is added.
    /// Otherwise the outputs count as written; should the batch fail as a whole, its
    /// failure claims them (see `server::batch`). Outputs are the bindings the launched
    /// entry point stores to ([`Kernel::writes`] overrides), never one its global
    /// declares `var<storage, read>`.
    pub(crate) fn launch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        self.check_launch(kernel, workgroups, handles)?;
        let prepared = self.prepare_dispatch(kernel, handles)?;
        let usage = prepared.pipeline.usage.clone();
        let inputs = handles
            .iter()
            .enumerate()
            .filter(|&(i, _)| kernel.reads_binding(i))
            .map(|(_, handle)| *handle);
        if let Some((failure, needed)) = self.claimed_input(inputs) {
            // The prepared dispatch is dropped unrecorded (its pipeline and bind group
            // stay cached for the next launch).
            let outputs: Vec<&Handle> = outputs_of(kernel, &usage, handles).collect();
            self.skip(kernel, failure, needed, &outputs);
            return Ok(());
        }
        self.record_dispatch(prepared, workgroups);
        for output in outputs_of(kernel, &usage, handles) {
            let binding = output.binding();
            self.main.written(&binding, 0..output.size);
            self.pending.output(&binding, 0..output.size);
        }
        self.pending.count_dispatch();
        tracing::debug!(kernel = %kernel.label, ?workgroups, bindings = handles.len(), "launch");
        Ok(())
    }

    /// The first failure claiming bytes of an input, with the input's id.
    fn claimed_input<'h>(
        &self,
        mut handles: impl Iterator<Item = &'h Handle>,
    ) -> Option<(FailureId, ManagedMemoryId)> {
        handles.find_map(
            |handle| match self.main.claim(&handle.binding(), 0..handle.size) {
                Some(Claim::Failed(failure, id)) => Some((failure, id)),
                _ => None,
            },
        )
    }

    /// Records a launch the failure stopped; its outputs carry the same failure.
    fn skip(
        &mut self,
        kernel: &Kernel,
        failure: FailureId,
        needed: ManagedMemoryId,
        outputs: &[&Handle],
    ) {
        tracing::warn!(kernel = %kernel.label, %failure, "launch skipped: an input carries a failure");
        for output in outputs {
            self.main.taint(&output.binding(), 0..output.size, failure);
        }
        let produced = outputs.iter().map(|output| output.binding().id()).collect();
        self.main.error_graph_mut().skipped(
            failure,
            Skipped {
                kernel: kernel.label.to_string(),
                needed,
                produced,
            },
        );
    }

    /// Everything a dispatch needs that can fail: the pipeline, the bindings its entry
    /// point uses checked against `handles`, and the bind group of `handles` where they
    /// are now. Records nothing; no reservation may come between this and
    /// [`record_dispatch`](Self::record_dispatch) (it could move a slice the bind group
    /// names).
    pub(crate) fn prepare_dispatch(
        &mut self,
        kernel: &Kernel,
        handles: &[&Handle],
    ) -> Result<PreparedDispatch, ClientError> {
        let pipeline = self.pipeline(kernel)?;
        check_bindings(kernel, &pipeline.usage, handles.len())?;
        // The key's list is the one a cache hit gave back (see `bind_group`): a launch
        // over cached slices allocates nothing here.
        let mut bindings = std::mem::take(&mut self.binding_scratch);
        bindings.clear();
        for handle in handles {
            let resource = self.resource(handle)?;
            let size = resource.binding_size();
            bindings.push((resource.buffer, resource.offset, size));
        }
        let aliased = aliased_read_only(&pipeline.usage.read_only, &bindings, |(buffer, _, _)| {
            buffer
        });
        if let Some((read_only, writable)) = aliased {
            return Err(ClientError::ReadOnlyAliasesWritable {
                kernel: kernel.label.to_string(),
                read_only,
                writable,
            });
        }
        let key = BindGroupKey {
            pipeline: pipeline.slot,
            bindings,
        };
        let bind_group = self.bind_group(kernel, &pipeline, key)?;
        Ok(PreparedDispatch {
            pipeline,
            bind_group,
        })
    }

    /// Records a prepared dispatch over `workgroups` into the open compute pass.
    pub(crate) fn record_dispatch(&mut self, prepared: PreparedDispatch, workgroups: [u32; 3]) {
        let PreparedDispatch {
            pipeline,
            bind_group,
        } = prepared;
        let pass = self.pending.pass(&self.device);
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
    }

    /// The bind group for `key`, from the cache or made now.
    fn bind_group(
        &mut self,
        kernel: &Kernel,
        pipeline: &CachedPipeline,
        key: BindGroupKey,
    ) -> Result<wgpu::BindGroup, ClientError> {
        self.forget_given_back_pages();
        if let Some(bind_group) = self.bind_groups.get(&key) {
            // The list goes back emptied: a page it named must not stay alive here.
            let mut spare = key.bindings;
            spare.clear();
            self.binding_scratch = spare;
            return Ok(bind_group);
        }
        let device = &self.device;
        let late = || Late::Operation(format!("launch of {}", kernel.label));
        let (bind_group, error) = capture_late(device, &self.late.work, late, || {
            let entries: Vec<wgpu::BindGroupEntry> = key
                .bindings
                .iter()
                .enumerate()
                .map(|(i, (buffer, offset, size))| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset: *offset,
                        size: wgpu::BufferSize::new(*size),
                    }),
                })
                .collect();
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&kernel.label),
                layout: &pipeline.layout,
                entries: &entries,
            })
        });
        if let Some(error) = error {
            let operation = format!("launch of {}", kernel.label);
            if destroyed_resource(&error) {
                let pages: Vec<wgpu::Buffer> = key
                    .bindings
                    .iter()
                    .map(|(buffer, _, _)| buffer.clone())
                    .collect();
                let handles = self.find_destroyed(Some(&pages));
                if !handles.is_empty() {
                    return Err(crate::server::faults::destroyed::page_destroyed(
                        &operation, handles,
                    ));
                }
            }
            return Err(wgpu_error(operation, error));
        }
        self.bind_groups.insert(key, bind_group.clone());
        Ok(bind_group)
    }

    /// The checks a launch passes before anything is looked up: the device is not lost,
    /// the workgroup counts and the binding count are within the device's limits, every
    /// handle is this client's. The operation's name is formatted only for an error.
    fn check_launch(
        &self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        let operation = || format!("launch of {}", kernel.label);
        if self.lost.is_lost() {
            self.check_lost(&operation())?;
        }
        let limit = self.limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&count| count > limit) {
            return Err(ClientError::TooManyWorkgroups {
                kernel: kernel.label.to_string(),
                requested: workgroups,
                limit,
            });
        }
        let binding_limit = self.limits.max_storage_buffers_per_shader_stage;
        if handles.len() > binding_limit as usize {
            return Err(ClientError::TooManyBindings {
                kernel: kernel.label.to_string(),
                given: handles.len(),
                limit: binding_limit,
            });
        }
        match handles.iter().find(|handle| !self.owns(handle)) {
            Some(foreign) => self.check_owner(foreign, &operation()),
            None => Ok(()),
        }
    }

    /// The kernel's pipeline: from the cache (keyed by source and entry point), or
    /// compiled now inside error scopes, with what its entry point does with its
    /// bindings.
    fn pipeline(&mut self, kernel: &Kernel) -> Result<CachedPipeline, ClientError> {
        let key = pipeline_key(kernel);
        if let Some(pipeline) = self.pipelines.get(&key) {
            return Ok(pipeline);
        }
        // naga first: a kernel that does not compile is refused here, before the device
        // (on the web, the browser, which answers only later) is handed the source.
        let usage = kernel.binding_use();
        if let Some(message) = &usage.refused {
            return Err(wgpu_error(format!("compiling {}", kernel.label), message));
        }
        let device = &self.device;
        let late = || Late::Operation(format!("compiling {}", kernel.label));
        let (pipeline, error) = capture_late(device, &self.late.work, late, || {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&kernel.label),
                source: wgpu::ShaderSource::Wgsl(kernel.source.as_ref().into()),
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&kernel.label),
                layout: None,
                module: &module,
                entry_point: Some(&kernel.entry_point),
                compilation_options: Default::default(),
                cache: None,
            });
            let layout = pipeline.get_bind_group_layout(0);
            (pipeline, layout)
        });
        if let Some(error) = error {
            return Err(wgpu_error(format!("compiling {}", kernel.label), error));
        }
        self.next_pipeline_slot += 1;
        let cached = CachedPipeline {
            pipeline: pipeline.0,
            layout: pipeline.1,
            slot: self.next_pipeline_slot,
            usage,
        };
        self.pipelines.insert(key, cached.clone());
        Ok(cached)
    }

    /// Pipelines held in the cache.
    pub(crate) fn cached_pipelines(&self) -> usize {
        self.pipelines.len()
    }
}

/// The pipeline cache's key for `kernel`.
fn pipeline_key(kernel: &Kernel) -> PipelineKey {
    PipelineKey {
        fingerprint: kernel.fingerprint,
        source: kernel.source.clone(),
        entry_point: kernel.entry_point.clone(),
    }
}

/// Refuses a launch whose entry point uses a binding the launch cannot fill: one outside
/// `@group(0)`, or one past the `given` handles. wgpu would find the first only when the
/// batch is submitted, failing all of it.
fn check_bindings(kernel: &Kernel, usage: &BindingUse, given: usize) -> Result<(), ClientError> {
    if let Some((group, binding)) = usage.other_group {
        return Err(ClientError::UnsupportedGroup {
            kernel: kernel.label.to_string(),
            group,
            binding,
        });
    }
    match usage.last_binding {
        Some(binding) if binding as usize >= given => Err(ClientError::MissingBinding {
            kernel: kernel.label.to_string(),
            binding,
            given,
        }),
        _ => Ok(()),
    }
}

/// The handles `kernel` writes (its outputs), in binding order: what a skipped launch
/// claims and what a recorded one marks written.
fn outputs_of<'a>(
    kernel: &'a Kernel,
    usage: &'a BindingUse,
    handles: &'a [&'a Handle],
) -> impl Iterator<Item = &'a Handle> + 'a {
    handles
        .iter()
        .enumerate()
        .filter(move |&(i, _)| kernel.writes_binding(i, usage))
        .map(|(_, handle)| *handle)
}
