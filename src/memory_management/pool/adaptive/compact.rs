//! The adaptive pool's compaction: band by band, across every page of the band.

use super::super::evacuate::plan::{self, Plan};
use super::super::evacuate::{self, Census, Goal, Pinned, Relocated};
use super::super::pages::{MAX_PAGES, SlicedPages};
use super::super::slices::Sweep;
use super::AdaptivePool;
use crate::memory_management::MoveLimits;
use crate::storage::{ComputeStorage, CopyStorage};
use cubecl_runtime::server::IoError;

impl AdaptivePool {
    /// Empties pages toward `goal`, band by band (a slice never leaves its band). The
    /// candidates are the band's pages, whatever their size, sparsest first; their
    /// slices go into any page of the band that takes moves, and with [`Goal::Pack`]
    /// into fresh pages of the band (its floor size, see `fresh_page_for`) where those
    /// give back more than they take. With [`Goal::RoomFor`] only the pages of the size's
    /// band large enough to hold it are candidates (the reservation is served in the
    /// page emptied), and no fresh page is made.
    pub(crate) fn compact<S: CopyStorage>(
        &mut self,
        storage: &mut S,
        limits: MoveLimits,
        goal: Goal,
        pinned: Pinned<'_>,
    ) -> Vec<Relocated> {
        self.sweep(storage, Sweep::All);
        let tiers = &self.tiers;
        let page_size = |tier: u32, page: u32| {
            tiers[tier as usize]
                .as_ref()
                .map_or(0, |tier| tier.pages.size_of(page))
        };
        let census = evacuate::census(&self.slices, pinned, page_size);
        let only_band = match goal {
            Goal::RoomFor(size) => Some(self.band_of(self.effective(size))),
            Goal::Pack => None,
        };
        let mut moved: Vec<Relocated> = Vec::new();
        for band in 0..self.bands.len() {
            let Some(current) = self.current_tier(band) else {
                continue;
            };
            if only_band.is_some_and(|only| only != band) {
                continue;
            }
            let spent: u64 = moved.iter().map(|m| m.from.size()).sum();
            let left = MoveLimits {
                max_bytes: limits.max_bytes.saturating_sub(spent),
                max_moves: limits.max_moves.saturating_sub(moved.len()),
            };
            let mut plan = self.plan_band(&census, band, current, goal, left);
            let fresh = self.fresh_pages(storage, band, current, &mut plan);
            let mut pages: Vec<Option<&mut SlicedPages>> = self
                .tiers
                .iter_mut()
                .map(|tier| tier.as_mut().map(|tier| &mut tier.pages))
                .collect();
            let planned = evacuate::take_destinations(&mut pages, plan, &fresh);
            let tiers = &mut self.tiers;
            moved.extend(evacuate::commit(
                &mut self.slices,
                storage,
                planned,
                |tier, block| {
                    if let Some(tier) = tiers[tier as usize].as_mut() {
                        tier.pages.free(block);
                    }
                },
            ));
        }
        moved
    }

    /// The plan of one band's pass (see [`compact`](Self::compact)).
    fn plan_band(
        &self,
        census: &Census,
        band: usize,
        current: usize,
        goal: Goal,
        limits: MoveLimits,
    ) -> Plan {
        let in_band = |tier: u32| {
            self.tiers[tier as usize]
                .as_ref()
                .is_some_and(|tier| tier.band == band)
        };
        let candidates = census
            .candidates
            .iter()
            .filter(|page| match goal {
                Goal::Pack => in_band(page.tier),
                Goal::RoomFor(size) => {
                    page.tier as usize == current && page.page_size >= self.effective(size)
                }
            })
            .collect();
        let tiers = self
            .tiers
            .iter()
            .enumerate()
            .filter_map(|(index, tier)| {
                let tier = tier.as_ref().filter(|tier| tier.band == band)?;
                Some((index as u32, &tier.pages))
            })
            .collect();
        let fresh_page = match goal {
            Goal::Pack => self.tiers[current]
                .as_ref()
                .map(|tier| tier.pages.page_size()),
            Goal::RoomFor(_) => None,
        };
        let takes_moves = |tier, page| census.takes_moves(tier, page);
        plan::plan(plan::Request {
            takes_moves: &takes_moves,
            candidates,
            tiers,
            fresh_page,
            limits,
            max_pages: goal.max_pages(),
        })
    }

    /// Reserves the fresh pages `plan` needs in tier `current` of `band`, and returns
    /// them (tier, page) in order. Free pages of the band of the fresh size serve first;
    /// if they are too few, every free page of the band goes back before any page is
    /// added, as when the band grows. A page the storage refuses (the device, a
    /// budget) ends the plan's fresh pages there: the pages they would have emptied stay.
    fn fresh_pages<S: ComputeStorage>(
        &mut self,
        storage: &mut S,
        band: usize,
        current: usize,
        plan: &mut Plan,
    ) -> Vec<(u32, u32)> {
        let wanted = plan.fresh_pages();
        let Some(tier) = self.tiers[current].as_ref().filter(|_| wanted > 0) else {
            return Vec::new();
        };
        // The plan counted fresh pages of the fresh size: a free page of another size
        // would hold other bytes than the plan paid for (a larger one could make a pass
        // raise the bytes of the pages holding slices, and passes would not come to
        // rest), so only free pages of exactly that size serve.
        let fresh_size = tier.pages.page_size();
        let free: Vec<u32> = tier
            .pages
            .free_pages()
            .into_iter()
            .filter(|&page| tier.pages.size_of(page) == fresh_size)
            .collect();
        if free.len() >= wanted {
            return free
                .into_iter()
                .take(wanted)
                .map(|page| (current as u32, page))
                .collect();
        }
        if self.release_where(storage, |tier| tier.band == band) > 0 {
            storage.flush();
        }
        let mut fresh = Vec::with_capacity(wanted);
        for k in 0..wanted {
            let Some(tier) = self.tiers[current].as_mut() else {
                unreachable!("a current tier is live");
            };
            let added = if tier.pages.count() < MAX_PAGES {
                tier.pages.add_page(storage)
            } else {
                Err(IoError::BufferTooBig {
                    size: tier.pages.page_size(),
                    backtrace: Default::default(),
                })
            };
            match added {
                Ok(page) => fresh.push((current as u32, page)),
                Err(error) => {
                    tracing::debug!(%error, "compaction: no fresh page; planning without it");
                    plan.without_fresh_from(k);
                    break;
                }
            }
        }
        self.pages_peak = self.pages_peak.max(self.page_count());
        fresh
    }
}
