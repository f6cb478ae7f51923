//! Pages the application destroyed (`destroy()` on a `HandleResource`'s buffer).
//!
//! The client never destroys a page of its own (it only drops them), so a main-memory
//! page wgpu calls destroyed was destroyed by the application, on a healthy device. Every
//! batch that touches it fails at submit, so the client:
//!
//! 1. learns that from wgpu's typed error (`DestroyedResource`, at a bind group's
//!    creation or at a batch's submit, see
//!    [`destroyed_resource`](crate::storage::wgpu_storage::error::destroyed_resource));
//! 2. finds which pages are destroyed by making, for each page the failed work used (or
//!    every main page, for a whole batch), a bind group of the page's first word inside
//!    error scopes: wgpu refuses it with the same typed error for a destroyed buffer,
//!    and nothing is submitted (a page count's worth of bind groups, on this failure
//!    path only);
//! 3. remembers those pages ([`DestroyedPages`], at most one entry per page held): a
//!    handle whose slice lies in one fails every later operation with
//!    [`ClientError::PageDestroyed`] naming it, before anything is recorded, so no later
//!    batch fails for it;
//! 4. keeps new allocations out of them: a reservation that lands in one is held
//!    (quarantined) and the reservation made again;
//! 5. lets the page go once only quarantined slices are left in it: the next cleanup
//!    drops the quarantine and gives the page back.

use super::error::ClientError;
use crate::memory_management::{ManagedMemoryHandle, page_id};
use crate::storage::wgpu_storage::error::{capture, destroyed_resource};
use cubecl_runtime::memory_management::ManagedMemoryId;

/// Bound on the destroyed pages one reservation meets before it lands outside all of
/// them. A miss quarantines all of its page's free room, so the next try lands in that
/// page again only in room a sweep freed meanwhile (slices whose last binding went
/// after their handle): finite, and bounded by [`MAX_QUARANTINE_TRIES`]. Past either
/// bound the reservation fails with [`ClientError::Memory`] rather than hand out a
/// slice of a destroyed page.
pub(crate) const MAX_QUARANTINED_PAGES: usize = 64;

/// Bound on the reservations one allocation makes before one lands outside every
/// destroyed page (see [`MAX_QUARANTINED_PAGES`]); only a broken invariant reaches it.
pub(crate) const MAX_QUARANTINE_TRIES: usize = 1 << 16;

/// The destroyed pages of a memory, and the slices held to keep allocations out of them.
#[derive(Default)]
pub(crate) struct DestroyedPages {
    /// (storage id number, buffer) of each destroyed page still held.
    pages: Vec<(u64, wgpu::Buffer)>,
    /// Reservations that landed in a destroyed page, by page.
    quarantine: Vec<(u64, ManagedMemoryHandle)>,
    /// The probe's bind group layout, made at the first probe.
    probe: Option<wgpu::BindGroupLayout>,
}

impl DestroyedPages {
    /// The ids of the destroyed pages: compaction neither moves slices out of them (the
    /// copy would read a destroyed buffer) nor into them.
    pub(crate) fn page_ids(&self) -> Vec<u64> {
        self.pages.iter().map(|(id, _)| *id).collect()
    }

    /// Whether nothing is destroyed (the fast path of every operation).
    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The allocation ids of the quarantine's slices: the client's own, never the
    /// application's, so an error's list of a page's allocations leaves them out.
    pub(crate) fn quarantined_ids(&self) -> std::collections::HashSet<u64> {
        self.quarantine
            .iter()
            .map(|(_, handle)| handle.descriptor().id.value as u64)
            .collect()
    }

    /// Whether `buffer` is a destroyed page.
    pub(crate) fn contains(&self, buffer: &wgpu::Buffer) -> bool {
        self.pages.iter().any(|(_, page)| page == buffer)
    }

    /// Remembers a destroyed page.
    pub(crate) fn insert(&mut self, id: u64, buffer: wgpu::Buffer) {
        if !self.contains(&buffer) {
            self.pages.push((id, buffer));
        }
    }

    /// Whether the page `page` (a storage id number) is destroyed.
    pub(crate) fn holds(&self, page: u64) -> bool {
        self.pages.iter().any(|(id, _)| *id == page)
    }

    /// Holds `handle`, whose slice lies in the destroyed page `page` (a storage id
    /// number); a page not destroyed holds nothing.
    pub(crate) fn quarantine(&mut self, page: u64, handle: ManagedMemoryHandle) {
        if self.holds(page) {
            self.quarantine.push((page, handle));
        }
    }

    /// Lets go of the quarantine of every page in which, by `live`, only quarantined
    /// slices are left (`live(page)` counts the page's live slices), and forgets pages
    /// the memory no longer holds (`held(page)`).
    pub(crate) fn settle(&mut self, live: impl Fn(u64) -> usize, held: impl Fn(u64) -> bool) {
        let quarantined = |quarantine: &[(u64, ManagedMemoryHandle)], page: u64| {
            quarantine.iter().filter(|(id, _)| *id == page).count()
        };
        let idle: Vec<u64> = self
            .pages
            .iter()
            .map(|(id, _)| *id)
            .filter(|&id| live(id) <= quarantined(&self.quarantine, id))
            .collect();
        self.quarantine.retain(|(id, _)| !idle.contains(id));
        self.pages.retain(|(id, _)| held(*id));
    }
}

/// Whether wgpu reports `page` (a main page: STORAGE usage) destroyed: a bind group of
/// its first word is made inside error scopes, which wgpu refuses, typed, for a
/// destroyed buffer. Nothing is submitted and no callback runs, so this may run under
/// the client's lock.
fn is_destroyed(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    page: &wgpu::Buffer,
) -> bool {
    let (_, error) = capture(device, || {
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("wgpu-memory destroyed-page probe"),
            layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: page,
                    offset: 0,
                    size: wgpu::BufferSize::new(wgpu::COPY_BUFFER_ALIGNMENT),
                }),
            }],
        })
    });
    error.as_ref().is_some_and(destroyed_resource)
}

/// The layout [`is_destroyed`] binds a page with: one storage buffer.
fn probe_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("wgpu-memory destroyed-page probe"),
        entries: &[wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }],
    })
}

/// The error of `operation` on a handle in a destroyed page that held `handles`.
pub(crate) fn page_destroyed(operation: &str, handles: Vec<ManagedMemoryId>) -> ClientError {
    ClientError::PageDestroyed {
        operation: operation.to_string(),
        handles,
    }
}

impl DestroyedPages {
    /// Probes the pages of `main` named by `ids` and remembers those the application
    /// destroyed (see [`is_destroyed`]: no submit, no callback, safe under the client's
    /// lock). For the compaction's planning: a page the application held the buffer of
    /// is suspect until probed.
    pub(crate) fn probe_ids(
        &mut self,
        device: &wgpu::Device,
        main: &mut crate::memory_management::MemoryManagement<crate::storage::WgpuStorage>,
        ids: &[u64],
    ) {
        for (id, buffer) in self.probe(device, main, |id, _| ids.contains(&id)) {
            tracing::error!(
                page = id,
                "the application destroyed a page of the main memory"
            );
            self.insert(id, buffer);
        }
    }

    /// The pages of `main` that `candidate` names and wgpu reports destroyed.
    fn probe(
        &mut self,
        device: &wgpu::Device,
        main: &mut crate::memory_management::MemoryManagement<crate::storage::WgpuStorage>,
        candidate: impl Fn(u64, &wgpu::Buffer) -> bool,
    ) -> Vec<(u64, wgpu::Buffer)> {
        let layout = self
            .probe
            .get_or_insert_with(|| probe_layout(device))
            .clone();
        main.storage()
            .pages()
            .map(|(id, buffer)| (page_id(id), buffer))
            .filter(|(id, buffer)| candidate(*id, buffer))
            .filter(|(_, buffer)| is_destroyed(device, &layout, buffer))
            .map(|(id, buffer)| (id, buffer.clone()))
            .collect()
    }
}

impl crate::server::Server {
    /// After wgpu refused work with a destroyed resource: finds the destroyed pages
    /// among `candidates` (every main page when `None`), remembers them, and returns the
    /// allocations they hold (empty when none of ours is destroyed).
    pub(crate) fn find_destroyed(
        &mut self,
        candidates: Option<&[wgpu::Buffer]>,
    ) -> Vec<ManagedMemoryId> {
        let pages = self
            .destroyed
            .probe(&self.device, &mut self.main, |_, buffer| {
                candidates.is_none_or(|list| list.contains(buffer))
            });
        self.pages_destroyed(pages)
    }

    /// Remembers the destroyed `pages`; returns the allocations they hold.
    fn pages_destroyed(&mut self, pages: Vec<(u64, wgpu::Buffer)>) -> Vec<ManagedMemoryId> {
        let ids: Vec<u64> = pages.iter().map(|(id, _)| *id).collect();
        for (id, buffer) in pages {
            tracing::error!(
                page = id,
                "the application destroyed a page of the main memory"
            );
            self.destroyed.insert(id, buffer);
        }
        self.allocations_in(&ids)
    }

    /// The live allocations in the pages `ids` (O(pages + slots): failure paths only).
    fn allocations_in(&self, ids: &[u64]) -> Vec<ManagedMemoryId> {
        let held = self.destroyed.quarantined_ids();
        self.main
            .page_map()
            .into_iter()
            .flat_map(|pool| pool.pages)
            .filter(|page| ids.contains(&page.id))
            .flat_map(|page| page.slices)
            .filter(|slice| !held.contains(&slice.id))
            .map(|slice| ManagedMemoryId {
                value: slice.id as usize,
            })
            .collect()
    }

    /// Fails with [`ClientError::PageDestroyed`] when `buffer`, a handle's page, is
    /// destroyed.
    pub(crate) fn check_destroyed(
        &self,
        buffer: &wgpu::Buffer,
        operation: &str,
    ) -> Result<(), ClientError> {
        if self.destroyed.is_empty() || !self.destroyed.contains(buffer) {
            return Ok(());
        }
        let page: Vec<u64> = self
            .destroyed
            .pages
            .iter()
            .filter(|(_, page)| page == buffer)
            .map(|(id, _)| *id)
            .collect();
        Err(page_destroyed(operation, self.allocations_in(&page)))
    }

    /// The destroyed page the fresh reservation `handle` landed in, if it did: it is
    /// quarantined there with the rest of the page's free room (see the module doc, step
    /// 4), so the next reservation lands elsewhere.
    pub(crate) fn quarantined(&mut self, handle: &ManagedMemoryHandle) -> Option<u64> {
        if self.destroyed.is_empty() {
            return None;
        }
        let storage = self.main.get_storage(&handle.clone().binding()).ok()?;
        let page = page_id(&storage.id);
        if !self.destroyed.holds(page) {
            return None;
        }
        self.destroyed.quarantine(page, handle.clone());
        // One slice per free range, not one per miss: a 4-byte create that met a
        // destroyed 64 MiB page made 2^20 reservations, one alignment unit each.
        for filler in self.main.fill_page(storage.id) {
            self.destroyed.quarantine(page, filler);
        }
        Some(page)
    }

    /// Before a cleanup: lets destroyed pages with only quarantined slices go.
    pub(crate) fn settle_destroyed(&mut self) {
        if self.destroyed.is_empty() {
            return;
        }
        let map = self.main.page_map();
        let pages: Vec<(u64, usize)> = map
            .iter()
            .flat_map(|pool| &pool.pages)
            .map(|page| (page.id, page.slices.len()))
            .collect();
        let live = |id: u64| {
            pages
                .iter()
                .find(|(page, _)| *page == id)
                .map_or(0, |(_, n)| *n)
        };
        self.destroyed.settle(live, |_| true);
        // The quarantine let go, the cleanup that follows gives those pages back; a page
        // the memory no longer holds is forgotten at the next settle.
        let held: Vec<u64> = self
            .main
            .storage()
            .pages()
            .map(|(id, _)| page_id(id))
            .collect();
        self.destroyed
            .settle(|_| usize::MAX, |id| held.contains(&id));
    }
}
