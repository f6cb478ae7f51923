//! Dispatching a kernel over handles into the pending batch.

use super::caches::{BindGroupKey, CachedPipeline, PipelineKey};
use super::kernel::Kernel;
use super::reflection::{BindingUse, aliased_read_only};
use crate::memory_management::{Claim, FailureId, ManagedMemoryId, Skipped};
use crate::server::faults::error::ClientError;
use crate::server::memory::handle::Handle;
use crate::server::{Server, wgpu_error};
use crate::storage::wgpu_storage::error::{capture, destroyed_resource};
use std::sync::Arc;

/// A dispatch whose pipeline and bind group are made, ready to record.
pub(crate) struct PreparedDispatch {
    pipeline: CachedPipeline,
    bind_group: wgpu::BindGroup,
}

impl Server {
    /// Records a dispatch of `kernel` over `workgroups` in the pending batch, binding the
    /// i-th handle as the storage buffer `@group(0) @binding(i)` at its offset.
    ///
    /// Failure tracking: a launch whose inputs carry a claim is not dispatched; its
    /// outputs take the same failure and a [`Skipped`] record is added. A launch that
    /// returns an error ran nothing and claims nothing, every byte is intact: one the
    /// client refuses itself (a limit, a foreign handle, a read-only binding aliasing a
    /// writable one, a destroyed page) and one wgpu refuses while it is encoded (the
    /// pipeline, the bind group) alike, since nothing reaches the batch before both are
    /// made. Otherwise the outputs count as written; should the batch fail as a whole,
    /// its failure claims them (see `server::batch`). Outputs are the bindings the
    /// source stores to ([`Kernel::writes`] overrides), never one it declares
    /// `var<storage, read>`.
    pub(crate) fn launch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        self.check_launch(kernel, workgroups, handles)?;
        let usage = self.binding_use(kernel);
        let inputs = handles
            .iter()
            .enumerate()
            .filter(|&(i, _)| kernel.reads_binding(i))
            .map(|(_, handle)| *handle);
        if let Some((failure, needed)) = self.claimed_input(inputs) {
            let outputs: Vec<&Handle> = outputs_of(kernel, &usage, handles).collect();
            self.skip(kernel, failure, needed, &outputs);
            return Ok(());
        }
        // Nothing reaches the batch unless the pipeline and the bind group are made: a
        // launch refused here ran nothing and claims nothing.
        self.encode_dispatch(kernel, workgroups, handles)?;
        for output in outputs_of(kernel, &usage, handles) {
            let binding = output.binding();
            self.main.written(&binding, 0..output.size);
            self.pending.output(&binding, 0..output.size);
        }
        self.pending.count_dispatch();
        tracing::debug!(kernel = %kernel.label, ?workgroups, bindings = handles.len(), "launch");
        Ok(())
    }

    /// What `kernel`'s source does with its bindings: the kernel's own answer, else the
    /// cached pipeline's for the same source, else read from the source now.
    fn binding_use(&mut self, kernel: &Kernel) -> Arc<BindingUse> {
        if let Some(usage) = kernel.usage.get() {
            return usage.clone();
        }
        let cached = self
            .pipelines
            .get(&pipeline_key(kernel))
            .map(|pipeline| pipeline.usage);
        kernel.binding_use(cached)
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

    /// Encodes the dispatch into the batch's open compute pass, with the cached pipeline
    /// and bind group (made inside error scopes on a miss). Returns the bindings the
    /// source declares read-only.
    pub(crate) fn encode_dispatch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<std::sync::Arc<[u32]>, ClientError> {
        let prepared = self.prepare_dispatch(kernel, handles)?;
        Ok(self.record_dispatch(prepared, workgroups))
    }

    /// Everything a dispatch needs that can fail: the pipeline and the bind group of
    /// `handles` where they are now. Records nothing; no reservation may come between
    /// this and [`record_dispatch`](Self::record_dispatch) (it could move a slice the
    /// bind group names).
    pub(crate) fn prepare_dispatch(
        &mut self,
        kernel: &Kernel,
        handles: &[&Handle],
    ) -> Result<PreparedDispatch, ClientError> {
        let pipeline = self.pipeline(kernel)?;
        // The key's list is the one a cache hit gave back (see `bind_group`): a launch
        // over cached slices allocates nothing here.
        let mut bindings = std::mem::take(&mut self.binding_scratch);
        bindings.clear();
        for handle in handles {
            let resource = self.resource(handle)?;
            let size = resource.binding_size();
            bindings.push((resource.buffer, resource.offset, size));
        }
        let aliased = aliased_read_only(&pipeline.read_only, &bindings, |(buffer, _, _)| buffer);
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

    /// Records a prepared dispatch over `workgroups` into the open compute pass; returns
    /// the bindings the source declares read-only.
    pub(crate) fn record_dispatch(
        &mut self,
        prepared: PreparedDispatch,
        workgroups: [u32; 3],
    ) -> std::sync::Arc<[u32]> {
        let PreparedDispatch {
            pipeline,
            bind_group,
        } = prepared;
        let pass = self.pending.pass(&self.device);
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
        pipeline.read_only
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
        let (bind_group, error) = capture(device, || {
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
    /// compiled now inside error scopes.
    fn pipeline(&mut self, kernel: &Kernel) -> Result<CachedPipeline, ClientError> {
        let key = PipelineKey {
            fingerprint: kernel.fingerprint,
            source: kernel.source.clone(),
            entry_point: kernel.entry_point.clone(),
        };
        if let Some(pipeline) = self.pipelines.get(&key) {
            return Ok(pipeline);
        }
        let device = &self.device;
        let (pipeline, error) = capture(device, || {
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
        let usage = kernel.binding_use(None);
        let cached = CachedPipeline {
            pipeline: pipeline.0,
            layout: pipeline.1,
            slot: self.next_pipeline_slot,
            read_only: usage.read_only.clone().into(),
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
