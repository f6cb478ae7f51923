//! Pages the application destroyed (`destroy()` on a `HandleResource`'s buffer).
//!
//! The client never destroys a page of its own (it only drops them), so a main-memory
//! page wgpu calls destroyed was destroyed by the application, on a healthy device. Every
//! batch that touches it fails at submit, so the client:
//!
//! 1. learns that from the batch's typed error (`DestroyedResource`, see
//!    [`destroyed_resource`](crate::storage::wgpu_storage::error::destroyed_resource));
//! 2. finds which pages are destroyed by submitting, for each main page, an empty clear
//!    of it on its own (wgpu reports a destroyed buffer there, typed, and the clear moves
//!    no byte): a page count's worth of tiny submits, on this failure path only;
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

/// Reservations tried per allocation before one lands outside every destroyed page.
/// Each miss quarantines a piece of a destroyed page's free room, so misses end.
pub(crate) const MAX_QUARANTINE_TRIES: usize = 64;

/// The destroyed pages of a memory, and the slices held to keep allocations out of them.
#[derive(Default)]
pub(crate) struct DestroyedPages {
    /// (storage id number, buffer) of each destroyed page still held.
    pages: Vec<(u64, wgpu::Buffer)>,
    /// Reservations that landed in a destroyed page, by page.
    quarantine: Vec<(u64, ManagedMemoryHandle)>,
}

impl DestroyedPages {
    /// Whether nothing is destroyed (the fast path of every operation).
    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
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

    /// Holds `handle`, whose slice landed in the destroyed page `buffer`.
    pub(crate) fn quarantine(&mut self, buffer: &wgpu::Buffer, handle: ManagedMemoryHandle) {
        if let Some((id, _)) = self.pages.iter().find(|(_, page)| page == buffer) {
            self.quarantine.push((*id, handle));
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

/// The pages of `pages` that wgpu reports destroyed: each gets an empty clear submitted
/// on its own, inside error scopes. Runs without the client's lock (a submit may run
/// application callbacks) and in the submit turn.
pub(crate) fn find_destroyed(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    pages: Vec<(u64, wgpu::Buffer)>,
) -> Vec<(u64, wgpu::Buffer)> {
    pages
        .into_iter()
        .filter(|(_, buffer)| {
            let ((), error) = capture(device, || {
                let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("wgpu-memory destroyed-page probe"),
                });
                encoder.clear_buffer(buffer, 0, Some(0));
                queue.submit([encoder.finish()]);
            });
            error.as_ref().is_some_and(destroyed_resource)
        })
        .collect()
}

/// The error of `operation` on a handle in a destroyed page that held `handles`.
pub(crate) fn page_destroyed(operation: &str, handles: Vec<ManagedMemoryId>) -> ClientError {
    ClientError::PageDestroyed {
        operation: operation.to_string(),
        handles,
    }
}

impl super::Server {
    /// Every main-memory page, for [`find_destroyed`].
    pub(crate) fn main_pages(&mut self) -> Vec<(u64, wgpu::Buffer)> {
        self.main
            .storage()
            .pages()
            .map(|(id, buffer)| (page_id(id), buffer.clone()))
            .collect()
    }

    /// Remembers the destroyed `pages`; returns the allocations they hold.
    pub(crate) fn pages_destroyed(&mut self, pages: Vec<(u64, wgpu::Buffer)>) -> Vec<ManagedMemoryId> {
        let ids: Vec<u64> = pages.iter().map(|(id, _)| *id).collect();
        for (id, buffer) in pages {
            tracing::error!(page = id, "the application destroyed a page of the main memory");
            self.destroyed.insert(id, buffer);
        }
        self.allocations_in(&ids)
    }

    /// The live allocations in the pages `ids` (O(pages + slots): failure paths only).
    fn allocations_in(&self, ids: &[u64]) -> Vec<ManagedMemoryId> {
        self.main
            .page_map()
            .into_iter()
            .flat_map(|pool| pool.pages)
            .filter(|page| ids.contains(&page.id))
            .flat_map(|page| page.slices)
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

    /// Whether the fresh reservation `handle` landed in a destroyed page; if so it is
    /// quarantined there (see the module doc, step 4).
    pub(crate) fn quarantined(&mut self, handle: &ManagedMemoryHandle) -> bool {
        if self.destroyed.is_empty() {
            return false;
        }
        let binding = handle.clone().binding();
        let Ok(resource) = self.main.get_resource(&binding, None, None) else {
            return false;
        };
        if !self.destroyed.contains(&resource.buffer) {
            return false;
        }
        self.destroyed.quarantine(&resource.buffer, handle.clone());
        true
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
        let held: Vec<u64> = self.main.storage().pages().map(|(id, _)| page_id(id)).collect();
        self.destroyed.settle(|_| usize::MAX, |id| held.contains(&id));
    }
}
