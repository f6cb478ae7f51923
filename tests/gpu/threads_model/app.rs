//! The application's own work in the threads model: copies between two of a thread's
//! handles in its own encoder, passes bound through `resource()`, and
//! `Client::queue().write_buffer` on exported slices, with the resources mostly dropped
//! before the submit.

use super::support::{add_one, id_of};
use super::{MAX_OWNED, Owned, Worker};
use crate::device::pattern;
use std::time::Duration;
use wgpu_memory::HandleResource;
use wgpu_memory::memory_management::ManagedMemoryId;

impl Worker {
    /// A resource of the owned handle `at`: one held across steps when there is one
    /// (the application keeps it past the submit), else a new one (`true`: to drop).
    fn resource_of(&mut self, at: usize) -> Option<(HandleResource, bool)> {
        let id = id_of(&self.owned[at].handle);
        if let Some(held) = self.held.iter().find(|held| id_of(&held.handle) == id) {
            return Some((held.resource.clone(), false));
        }
        match self.client.resource(&self.owned[at].handle) {
            Ok(resource) => Some((resource, true)),
            Err(error) => {
                self.error("resource", error);
                None
            }
        }
    }

    /// The bytes the model holds for the allocation `id`, live or dropped since.
    fn bytes_of(&self, id: ManagedMemoryId) -> Option<&Vec<u8>> {
        self.owned
            .iter()
            .find(|owned| id_of(&owned.handle) == id)
            .map(|owned| &owned.bytes)
            .or_else(|| {
                self.dropped
                    .iter()
                    .find(|(dropped, _)| *dropped == id)
                    .map(|(_, bytes)| bytes)
            })
    }

    /// The owned handle of allocation `id`, if still owned.
    fn owned_mut(&mut self, id: ManagedMemoryId) -> Option<&mut Owned> {
        self.owned
            .iter_mut()
            .find(|owned| id_of(&owned.handle) == id)
    }

    /// Other work while the application's own work waits for its submit: the thread's
    /// other operations, drops of the handles the work uses included, or a sleep (the
    /// compacting thread runs meanwhile).
    fn meanwhile(&mut self, uses: &[ManagedMemoryId]) {
        match self.rng.below(4) {
            0 => std::thread::sleep(Duration::from_micros(self.rng.below(4000))),
            1 => {
                for _ in 0..1 + self.rng.below(3) {
                    if self.owned.len() < 3 {
                        break;
                    }
                    match self.rng.below(5) {
                        0 if self.owned.len() < MAX_OWNED => self.create(),
                        0 | 1 => self.drop_one(),
                        2 => self.write(),
                        3 => self.launch(),
                        _ => self.check_one(),
                    }
                }
            }
            2 => {
                // The copy's own handles dropped before the submit.
                let at = self
                    .owned
                    .iter()
                    .position(|owned| uses.contains(&id_of(&owned.handle)));
                if let Some(at) = at {
                    self.tally.copies_over_dropped_handles += 1;
                    self.drop_at(at);
                }
                std::thread::sleep(Duration::from_micros(self.rng.below(2000)));
            }
            _ => std::thread::yield_now(),
        }
    }

    /// The application copies a range of one live handle into another in its own
    /// encoder, lets the resources go (mostly), then submits through `Client::queue()`.
    pub(super) fn app_copy(&mut self) {
        let (a, b) = (self.pick(), self.pick());
        let (len_a, len_b) = (
            self.owned[a].bytes.len() as u64 / 4 * 4,
            self.owned[b].bytes.len() as u64 / 4 * 4,
        );
        if a == b || len_a == 0 || len_b == 0 {
            return;
        }
        let from = self.rng.below(len_a / 4) * 4;
        let to = self.rng.below(len_b / 4) * 4;
        let len = 4 * (1 + self.rng.below((len_a - from).min(len_b - to) / 4));
        let (source, target) = (id_of(&self.owned[a].handle), id_of(&self.owned[b].handle));
        let Some((ra, drop_a)) = self.resource_of(a) else {
            return;
        };
        let Some((rb, drop_b)) = self.resource_of(b) else {
            return;
        };
        let device = self.client.device();
        let mut encoder = device.create_command_encoder(&Default::default());
        if ra.buffer == rb.buffer {
            // wgpu refuses a copy within one buffer: through a scratch buffer.
            let scratch = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("the application's scratch"),
                size: len,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(&ra.buffer, ra.offset + from, &scratch, 0, len);
            encoder.copy_buffer_to_buffer(&scratch, 0, &rb.buffer, rb.offset + to, len);
        } else {
            encoder.copy_buffer_to_buffer(
                &ra.buffer,
                ra.offset + from,
                &rb.buffer,
                rb.offset + to,
                len,
            );
        }
        let kept = if self.rng.below(4) == 0 {
            // The documented pattern: the resources live until the submit.
            Some((ra, rb))
        } else {
            drop((ra, rb));
            if drop_a || drop_b {
                self.tally.copies_dropped_first += 1;
            }
            None
        };
        self.meanwhile(&[source, target]);
        self.client.queue().submit([encoder.finish()]);
        drop(kept);
        self.tally.app_copies += 1;
        // The copy ran after all the client's work recorded before the submit: it took
        // the source's bytes as the model has them now.
        let data = self.bytes_of(source).expect("the source is modelled")
            [from as usize..(from + len) as usize]
            .to_vec();
        if let Some(owned) = self.owned_mut(target) {
            owned.bytes[to as usize..(to + len) as usize].copy_from_slice(&data);
            owned.note("app copy");
        }
        self.dropped.clear();
    }

    /// The application's own pass over `resource()` of a live handle, the resource
    /// dropped at the end of the statement that binds it, then submitted.
    pub(super) fn app_pass(&mut self) {
        let at = self.pick();
        let encoder = match self.client.resource(&self.owned[at].handle) {
            Ok(resource) => self.app.record(&self.client, &resource),
            Err(error) => return self.error("resource", error),
        };
        let target = id_of(&self.owned[at].handle);
        self.meanwhile(&[target]);
        self.client.queue().submit([encoder.finish()]);
        self.tally.app_passes += 1;
        if let Some(owned) = self.owned_mut(target) {
            // `AppAddOne` dispatches over the resource's size.
            let len = owned.bytes.len() as u64;
            add_one(&mut owned.bytes, len);
            owned.note("app pass");
        }
        self.dropped.clear();
    }

    /// `Client::queue().write_buffer` on an exported slice, the resource kept or
    /// dropped before the write.
    pub(super) fn app_write(&mut self) {
        let at = self.pick();
        let len = self.owned[at].bytes.len() as u64 / 4 * 4;
        if len == 0 {
            return;
        }
        let from = self.rng.below(len / 4) * 4;
        let count = 4 * (1 + self.rng.below((len - from) / 4));
        let data = pattern(count as usize, self.rng.below(1 << 20));
        let Some((resource, _)) = self.resource_of(at) else {
            return;
        };
        let (buffer, offset) = (resource.buffer.clone(), resource.offset);
        if self.rng.below(2) == 0 {
            drop(resource);
            self.client
                .queue()
                .write_buffer(&buffer, offset + from, &data);
        } else {
            self.client
                .queue()
                .write_buffer(&buffer, offset + from, &data);
            drop(resource);
        }
        self.tally.app_writes += 1;
        self.owned[at].bytes[from as usize..(from + count) as usize].copy_from_slice(&data);
        self.owned[at].note("app write");
    }
}
