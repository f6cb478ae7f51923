//! Errors the browser reports after the operation returned (the web only).
//!
//! On native backends wgpu answers an error scope at once, so a page the device refuses,
//! a bind group or pipeline wgpu rejects, and a batch it refuses are errors of the call
//! that made them. On the web the answer is a promise the browser settles only while its
//! event loop runs, after that call returned (see
//! [`error`](crate::storage::wgpu_storage::error)). There the operations keep what they
//! need to report their error ([`Late`], [`RefusedPage`]) in the client's
//! [`LateStores`], and the client's next await point (a read, `sync_async`) first waits
//! for the scopes of the operations made before it, then reports what they found as the
//! error native returns ([`Server::take_late`]):
//!
//! - a page the browser refused: [`ClientError::OutOfMemory`] for the main memory (with
//!   the memory's detail of that moment) and [`ClientError::Reserve`] for readback
//!   staging, as native reports a page the device refuses;
//! - a pipeline or bind group rejected: [`ClientError::Wgpu`] naming the operation as
//!   native names it (`compiling k`, `launch of k`);
//! - a segment of a batch refused: its outputs are claimed by the failure, as native
//!   claims a refused batch's, and the error is [`ClientError::Wgpu`] for `submit` (only
//!   that segment's outputs: the later segments ran before the refusal was known).
//!
//! The first error goes to the await point; the others are logged (their claims still
//! stand). Upload staging pages the browser refuses are reported through the batch that
//! copies from them.

use crate::storage::wgpu_storage::error::{LateErrors, RefusedPage};
use cubecl_runtime::memory_management::WeakMemoryBinding;
use std::ops::Range;

/// What an operation whose error the browser reports later needs to report it.
pub(crate) enum Late {
    /// wgpu rejected an operation (a pipeline, a bind group): [`ClientError::Wgpu`] with
    /// this operation's name.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Operation(String),
    /// A segment of a batch: the outputs it writes, to claim should the browser refuse
    /// it.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Submit(Vec<(WeakMemoryBinding, Range<u64>)>),
}

/// The client's stores of errors the browser reports late: pages (from the main and the
/// readback staging storages) and recorded work. Cheap to clone; empty (and of no size)
/// on native backends. Bounded as [`LateErrors`] is.
#[derive(Clone, Default)]
pub(crate) struct LateStores {
    pub(crate) pages: LateErrors<RefusedPage>,
    pub(crate) work: LateErrors<Late>,
}

#[cfg(target_arch = "wasm32")]
pub(crate) use web::LateMarks;

#[cfg(target_arch = "wasm32")]
mod web {
    use super::{Late, LateStores};
    use crate::memory_management::ReserveError;
    use crate::server::faults::error::ClientError;
    use crate::server::{BatchFailure, MAIN_USAGE, Server, wgpu_error};
    use crate::storage::wgpu_storage::error::{
        LateMark, RefusedPage, destroyed_resource, page_error,
    };
    use cubecl_runtime::server::IoError;
    use std::task::{Context, Poll};

    /// How far both stores had got (see [`LateStores::mark`]).
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct LateMarks {
        pages: LateMark,
        work: LateMark,
    }

    /// An error the browser reported late, as native reports it.
    pub(crate) struct LateFault {
        pub(crate) error: ClientError,
        /// A main-memory page the browser refused for want of memory: the client
        /// restates it as [`ClientError::OutOfMemory`] with the memory's detail.
        pub(crate) main_out_of_room: bool,
    }

    impl LateStores {
        /// The operations made so far: an await point waits for their scopes.
        pub(crate) fn mark(&self) -> LateMarks {
            LateMarks {
                pages: self.pages.mark(),
                work: self.work.mark(),
            }
        }

        /// Ready once the scopes of every operation made before `marks` have answered.
        pub(crate) fn poll_settled(&self, marks: LateMarks, context: &mut Context<'_>) -> Poll<()> {
            match (
                self.pages.poll_settled(marks.pages, context),
                self.work.poll_settled(marks.work, context),
            ) {
                (Poll::Ready(()), Poll::Ready(())) => Poll::Ready(()),
                _ => Poll::Pending,
            }
        }
    }

    impl Server {
        /// Every error the browser has reported so far, pages first (a refused page is
        /// what later work on it fails for), each as native reports it; a refused
        /// segment's outputs are claimed here.
        pub(crate) fn take_late(&mut self) -> Vec<LateFault> {
            let pages = self.late.pages.take();
            let work = self.late.work.take();
            let mut faults = Vec::with_capacity(pages.len() + work.len());
            for (page, error) in pages {
                faults.push(self.refused_page(page, error));
            }
            for (late, error) in work {
                let error = match late {
                    Late::Operation(operation) => wgpu_error(operation, error),
                    Late::Submit(outputs) => {
                        let outputs = outputs
                            .into_iter()
                            .filter_map(|(weak, range)| Some((weak.upgrade()?, range)))
                            .collect();
                        self.batch_failed(BatchFailure {
                            destroyed: destroyed_resource(&error),
                            message: error.to_string(),
                            outputs,
                        })
                    }
                };
                faults.push(LateFault {
                    error,
                    main_out_of_room: false,
                });
            }
            faults
        }

        /// A page the browser refused, as the reservation that made it would have
        /// failed on native (see the module doc).
        fn refused_page(&self, page: RefusedPage, error: wgpu::Error) -> LateFault {
            let main = page.usage == MAIN_USAGE;
            let memory = if main { &self.main } else { &self.staging };
            let source = page_error(error, page.size);
            let error = match source {
                source @ IoError::OutOfMemory { .. } => {
                    let usage = memory.memory_usage();
                    ReserveError::OutOfMemory {
                        requested: page.size,
                        bytes_in_use: usage.bytes_in_use,
                        bytes_reserved: usage.bytes_reserved,
                        largest_free_slice: memory.largest_free_slice(),
                        cap: None,
                        bytes_pending_release: 0,
                        source,
                    }
                }
                source => ReserveError::Storage {
                    requested: page.size,
                    source,
                },
            };
            LateFault {
                main_out_of_room: main && error.is_out_of_room(),
                error: ClientError::Reserve(error),
            }
        }
    }
}
