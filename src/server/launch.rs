//! Dispatching a kernel over handles, inside error scopes.

use super::{Server, wgpu_error};
use crate::client::{ClientError, Handle, Kernel};
use crate::memory_management::{Claim, FailureId, ManagedMemoryId, Skipped};
use crate::storage::wgpu_storage::error::capture;

impl Server {
    /// Dispatches `kernel` with `workgroups`, binding the i-th handle as the storage
    /// buffer `@group(0) @binding(i)` at its offset; submits at once so later writes to
    /// the same bytes land after it.
    ///
    /// A write scope surrounds it: the outputs (the handles the kernel writes) are
    /// claimed by a provisional failure, released when wgpu accepts the launch, and left
    /// claimed by the real wgpu error when it does not. A launch whose inputs carry a
    /// claim is not dispatched: its outputs take the same failure and a [`Skipped`]
    /// record is added.
    pub(crate) fn launch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        self.check_launch(kernel, workgroups, handles.len())?;
        let outputs: Vec<&Handle> = (0..handles.len())
            .filter(|&i| kernel.writes_binding(i))
            .map(|i| handles[i])
            .collect();
        let inputs: Vec<&Handle> = (0..handles.len())
            .filter(|&i| kernel.reads_binding(i))
            .map(|i| handles[i])
            .collect();
        if let Some((failure, needed)) = self.claimed_input(&inputs) {
            self.skip(kernel, failure, needed, &outputs);
            return Ok(());
        }
        let provisional = self
            .main
            .error_graph_mut()
            .insert(format!("launch of `{}` did not complete", kernel.label));
        for output in &outputs {
            self.main
                .taint(&output.binding(), 0..output.size, provisional);
        }
        let result = self.dispatch(kernel, workgroups, handles);
        match &result {
            Ok(()) => {
                for output in &outputs {
                    self.main.written(&output.binding(), 0..output.size);
                }
            }
            Err(error) => self
                .main
                .error_graph_mut()
                .replace(provisional, error.to_string()),
        }
        self.main.error_graph_mut().prune(provisional);
        result
    }

    /// The first failure claiming bytes of an input, with the input's id.
    fn claimed_input(&self, handles: &[&Handle]) -> Option<(FailureId, ManagedMemoryId)> {
        handles.iter().find_map(
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

    /// Encodes and submits the dispatch inside error scopes.
    fn dispatch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        if let Some(message) = self.lost.lock().clone() {
            return Err(ClientError::Wgpu {
                operation: format!("launch of {}", kernel.label),
                message: format!("the device was lost: {message}"),
            });
        }
        let resources = handles
            .iter()
            .map(|handle| self.resource(handle))
            .collect::<Result<Vec<_>, _>>()?;
        let pipeline = self.pipeline(kernel)?.clone();
        let device = &self.device;
        let ((), error) = capture(device, || {
            let entries: Vec<wgpu::BindGroupEntry> = resources
                .iter()
                .enumerate()
                .map(|(i, resource)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(resource.as_binding()),
                })
                .collect();
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&kernel.label),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(&kernel.label),
            });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&kernel.label),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
            }
            self.queue.submit([encoder.finish()]);
        });
        match error {
            Some(error) => Err(wgpu_error(format!("launch of {}", kernel.label), error)),
            None => Ok(()),
        }
    }

    fn check_launch(
        &self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        bindings: usize,
    ) -> Result<(), ClientError> {
        let limits = self.device.limits();
        let limit = limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&count| count > limit) {
            return Err(ClientError::TooManyWorkgroups {
                kernel: kernel.label.to_string(),
                requested: workgroups,
                limit,
            });
        }
        let binding_limit = limits.max_storage_buffers_per_shader_stage;
        if bindings > binding_limit as usize {
            return Err(ClientError::TooManyBindings {
                kernel: kernel.label.to_string(),
                given: bindings,
                limit: binding_limit,
            });
        }
        Ok(())
    }

    /// The kernel's pipeline, compiled on first use inside error scopes.
    fn pipeline(&mut self, kernel: &Kernel) -> Result<&wgpu::ComputePipeline, ClientError> {
        if !self.pipelines.contains_key(&kernel.id) {
            let device = &self.device;
            let (pipeline, error) = capture(device, || {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&kernel.label),
                    source: wgpu::ShaderSource::Wgsl(kernel.source.as_ref().into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&kernel.label),
                    layout: None,
                    module: &module,
                    entry_point: Some(&kernel.entry_point),
                    compilation_options: Default::default(),
                    cache: None,
                })
            });
            if let Some(error) = error {
                return Err(wgpu_error(format!("compiling {}", kernel.label), error));
            }
            self.pipelines.insert(kernel.id, pipeline);
        }
        Ok(&self.pipelines[&kernel.id])
    }
}
