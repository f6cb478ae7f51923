//! Dispatching a kernel over handles, inside error scopes.

use super::{Server, wgpu_error};
use crate::client::{ClientError, Handle, Kernel};
use crate::storage::wgpu_storage::error::capture;

impl Server {
    /// Dispatches `kernel` with `workgroups`, binding the i-th handle as the storage
    /// buffer `@group(0) @binding(i)` at its offset; submits at once so later writes to
    /// the same bytes land after it.
    pub(crate) fn launch(
        &mut self,
        kernel: &Kernel,
        workgroups: [u32; 3],
        handles: &[&Handle],
    ) -> Result<(), ClientError> {
        self.check_launch(kernel, workgroups, handles.len())?;
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
