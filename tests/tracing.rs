//! `tracing` events carry their fields: a capturing subscriber, installed for the whole
//! process (some events come from the poller thread), records every event of the crate
//! while one client reserves, uploads, launches, reads, cleans up, installs and runs out
//! of memory.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use wgpu_memory::Kernel;

#[path = "gpu/device.rs"]
#[allow(dead_code)]
mod device;

/// One captured event: its message and its other fields, as text.
#[derive(Debug, Clone)]
struct Captured {
    message: String,
    fields: BTreeMap<String, String>,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Capture(Arc<Mutex<Vec<Captured>>>);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if !event.metadata().target().starts_with("wgpu_memory") {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        self.0.lock().push(Captured {
            message,
            fields: fields.0,
        });
    }
}

const FILL: &str = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1) fn main() { out[0] = 7u; }";

/// The events with `message`, each a map of its fields.
fn named(events: &[Captured], message: &str) -> Vec<BTreeMap<String, String>> {
    events
        .iter()
        .filter(|event| event.message == message)
        .map(|event| event.fields.clone())
        .collect()
}

#[test]
fn every_memory_operation_emits_an_event_with_its_fields() {
    let captured = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture(captured.clone()));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let Some(client) = device::fresh() else {
        return;
    };

    let out = client.create(&[0u8; 12_345]).unwrap();
    client
        .launch(&Kernel::new("fill", FILL, "main"), [1, 1, 1], &[&out])
        .unwrap();
    assert_eq!(
        &client.read_blocking(&out).unwrap()[..4],
        &7u32.to_le_bytes()
    );
    drop(out);
    client.cleanup();
    let capped = wgpu_memory::memory_management::parse_memory_config(
        "[memory]\npools = [{ type = \"sliced\", page_size = \"64 KiB\", max_slice_size = \"64 KiB\", max_pool_size = \"64 KiB\" }]\n",
    )
    .unwrap()
    .pools
    .unwrap();
    client.install_memory_pools(&capped).unwrap();
    let held = client.empty(60_000).unwrap();
    client.empty(60_000).expect_err("the capped pool is full");
    drop(held);

    let events = captured.lock().clone();
    let reserve = named(&events, "reserve");
    assert!(
        reserve
            .iter()
            .any(|f| f.get("size").map(String::as_str) == Some("12345")
                && f.get("outcome").map(String::as_str) == Some("reserved")
                && f.get("pool").is_some()
                && f.get("memory").map(String::as_str) == Some("main")),
        "{reserve:?}"
    );
    let made = named(&events, "page made");
    assert!(
        made.iter()
            .any(|f| f.get("memory").map(String::as_str) == Some("main")
                && f.get("bytes")
                    .is_some_and(|b| b.parse::<u64>().unwrap() >= 12_345)),
        "{made:?}"
    );
    assert!(
        named(&events, "page given back").iter().any(|f| f
            .get("bytes")
            .is_some_and(|b| b.parse::<u64>().unwrap() > 0)),
        "pages given back at cleanup"
    );
    let cleanup = named(&events, "cleanup");
    assert!(
        cleanup.iter().any(|f| f
            .get("bytes_released")
            .is_some_and(|b| b.parse::<u64>().unwrap() > 0)),
        "{cleanup:?}"
    );
    assert!(!named(&events, "install").is_empty());
    let oom = named(&events, "out of memory");
    assert!(
        oom.iter()
            .any(|f| f.get("size").map(String::as_str) == Some("60000")
                && f.contains_key("outcome")
                && f.contains_key("largest_free_slice")),
        "{oom:?}"
    );
    let upload = named(&events, "upload");
    assert!(
        upload
            .iter()
            .any(|f| f.get("bytes").map(String::as_str) == Some("12345")),
        "{upload:?}"
    );
    let readback = named(&events, "readback");
    assert!(
        readback
            .iter()
            .any(|f| f.contains_key("waited_us") && f.get("bytes").is_some()),
        "{readback:?}"
    );
    let launch = named(&events, "launch");
    assert!(
        launch
            .iter()
            .any(|f| f.get("kernel").map(String::as_str) == Some("fill")),
        "{launch:?}"
    );
}
