//! A configuration applied to a client on the application's own device (issue 24,
//! item 6: `Client::new(device, queue)` left the budget, history and pools of a config
//! unapplied, and nothing said so).

use crate::device::fresh;
use wgpu_memory::memory_management::{
    InstallMemoryPoolsError, MemoryPoolKind, PoolConfigError, parse_memory_config,
};
use wgpu_memory::{Client, ClientError};

const CONFIG: &str = r#"
[memory]
pools = [{ type = "sliced", page_size = "1 MiB", max_slice_size = "64 KiB" }]
budget = "64 MB"
history = 32
"#;

/// The application's own device and queue, as `examples/own_device.rs` makes them.
fn own_device() -> (wgpu::Device, wgpu::Queue) {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter =
        pollster::block_on(instance.request_adapter(&Default::default())).expect("an adapter");
    pollster::block_on(adapter.request_device(&Default::default())).expect("a device")
}

/// The main memory's pools are the config's one sliced pool of 1 MiB pages.
fn has_the_configs_pools(client: &Client) -> bool {
    let report = client.memory_report();
    let pools = &report.streams[0].pools.dynamic;
    pools.len() == 1
        && matches!(
            pools[0].kind,
            MemoryPoolKind::Sliced {
                page_size: 1048576,
                ..
            }
        )
}

#[test]
fn with_config_lays_out_budgets_and_records_history_on_the_applications_device() {
    if fresh().is_none() {
        return;
    }
    let (device, queue) = own_device();
    let config = parse_memory_config(CONFIG).unwrap();
    let client = Client::with_config(device, queue, &config).unwrap();
    assert!(
        has_the_configs_pools(&client),
        "{:?}",
        client.memory_report()
    );
    assert_eq!(client.budget().budget, Some(64_000_000));
    let handle = client.create(&[1, 2, 3, 4]).unwrap();
    assert_eq!(client.read_blocking(&handle).unwrap(), [1, 2, 3, 4]);
    assert!(!client.history().is_empty(), "history = 32 records events");
}

#[test]
fn with_config_refuses_pools_the_device_cannot_hold() {
    if fresh().is_none() {
        return;
    }
    let (device, queue) = own_device();
    let limit = device.limits().max_buffer_size;
    let text = format!(
        "[memory]\npools = [{{ type = \"sliced\", page_size = {} }}]\n",
        limit * 2
    );
    let config = parse_memory_config(&text).unwrap();
    match Client::with_config(device, queue, &config) {
        Err(ClientError::Config(PoolConfigError::PageOverDeviceLimit { entry: 0, .. })) => {}
        other => panic!("expected PageOverDeviceLimit, got {other:?}"),
    }
}

#[test]
fn apply_config_installs_after_the_handles_are_gone_and_keeps_absent_keys() {
    if fresh().is_none() {
        return;
    }
    let (device, queue) = own_device();
    let client = Client::new(device, queue);
    client.set_budget(Some(1 << 30)).unwrap();
    let config = parse_memory_config(CONFIG).unwrap();
    let live = client.create(&[5; 16]).unwrap();
    // Pools come first: with a live handle the install is refused, and the later keys
    // are not applied.
    match client.apply_config(&config) {
        Err(ClientError::Install(InstallMemoryPoolsError::PoolsInUse { .. })) => {}
        other => panic!("expected PoolsInUse, got {other:?}"),
    }
    assert_eq!(client.budget().budget, Some(1 << 30));
    assert!(client.history().is_empty());
    drop(live);
    client.apply_config(&config).unwrap();
    assert!(has_the_configs_pools(&client));
    assert_eq!(client.budget().budget, Some(64_000_000));
    // A config without a budget leaves the budget in force.
    let history_only = parse_memory_config("[memory]\nhistory = 8\n").unwrap();
    client.apply_config(&history_only).unwrap();
    assert_eq!(client.budget().budget, Some(64_000_000));
    assert!(has_the_configs_pools(&client));
}

/// `Client::new` on a process with a configuration file warns, naming the file: run in
/// a child process whose `WGPU_MEMORY_CONFIG` names one (setting the variable here would
/// change every other test of the process).
#[test]
fn client_new_warns_when_a_config_file_is_present() {
    if crate::child::is_child() {
        let warnings = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::layer::SubscriberExt::with(
            tracing_subscriber::registry(),
            Warnings(warnings.clone()),
        );
        let (device, queue) = own_device();
        let path = std::env::var("WGPU_MEMORY_CONFIG").unwrap();
        let _client = tracing::subscriber::with_default(subscriber, || Client::new(device, queue));
        let warnings = warnings.lock();
        assert!(
            warnings
                .iter()
                .any(|text| text.contains(&path) && text.contains("Client::with_config_file")),
            "{warnings:?}"
        );
        return;
    }
    if fresh().is_none() {
        return;
    }
    let path =
        std::env::temp_dir().join(format!("wgpu-memory-unapplied-{}.toml", std::process::id()));
    std::fs::write(&path, CONFIG).unwrap();
    let output = crate::child::run_alone(
        "own_config::client_new_warns_when_a_config_file_is_present",
        &[("WGPU_MEMORY_CONFIG", path.as_os_str())],
    );
    std::fs::remove_file(&path).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `Client::new` on a process with a configuration file says so on stderr, once per
/// process, naming the file and the call that applies it: without a `tracing` subscriber
/// the warning alone is invisible, and the file's budget and history silently do not
/// apply. Run in a child process (its stderr is the process's own).
#[test]
fn client_new_names_an_unapplied_config_file_on_stderr_once() {
    if crate::child::is_child() {
        let (device, queue) = own_device();
        let _first = Client::new(device, queue);
        let (device, queue) = own_device();
        let _second = Client::new(device, queue);
        return;
    }
    if fresh().is_none() {
        return;
    }
    let path = std::env::temp_dir().join(format!("wgpu-memory-stderr-{}.toml", std::process::id()));
    std::fs::write(&path, CONFIG).unwrap();
    let output = crate::child::run_alone(
        "own_config::client_new_names_an_unapplied_config_file_on_stderr_once",
        &[("WGPU_MEMORY_CONFIG", path.as_os_str())],
    );
    std::fs::remove_file(&path).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed:\n{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains(&*path.to_string_lossy()))
        .collect();
    assert_eq!(lines.len(), 1, "stderr:\n{stderr}");
    for part in ["Client::new", "Client::with_config_file"] {
        assert!(
            lines[0].contains(part),
            "{part:?} missing from {:?}",
            lines[0]
        );
    }
}

/// Collects the text of every warning event.
struct Warnings(std::sync::Arc<parking_lot::Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().push(text.0);
        }
    }
}
