//! Configuring a client: from the process's configuration file ([`Client::open_default`],
//! [`Client::with_config_file`]) or from a [`MemoryConfig`] the application holds
//! ([`Client::with_config`], [`Client::apply_config`]).
//!
//! [`Client::new`] applies no configuration; when a configuration file is present it says
//! so, once per process on stderr and each time with a `tracing` warning, so a budget or
//! history written in the file is never ignored without a word.

use super::config::{config_path, load_submit_policy};
use super::{Client, ClientError};
use crate::memory_management::{MemoryConfig, MemoryConfiguration, PoolLayout, load_memory_config};
use crate::storage::wgpu_storage::limits::storage_memory_properties;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

impl Client {
    /// Opens the default adapter (a discrete GPU when there is one, then any other,
    /// software adapters such as lavapipe included) of the Vulkan, Metal or DX12 backend
    /// (or the backends named in `WGPU_BACKEND`) with its own limits and
    /// [`Client::memory_hints`] (4 MiB device memory blocks), and makes a client over it
    /// configured by the process's configuration file, as
    /// [`with_config_file`](Self::with_config_file) does (the file named by
    /// `WGPU_MEMORY_CONFIG`, else `wgpu-memory.toml` in the working directory; without
    /// one, the default adaptive layout and no budget or history).
    ///
    /// # Errors
    /// [`ClientError::Config`] when the config cannot be read or is invalid (a
    /// `memory.budget` of 0 bytes or one that is not a size included);
    /// [`ClientError::NoAdapter`] when wgpu finds no adapter;
    /// [`ClientError::RequestDevice`] when the adapter refuses a device.
    ///
    /// Native only: it blocks the calling thread until the adapter and device answer,
    /// which the web cannot do; await [`open_default_async`](Self::open_default_async)
    /// there.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_default() -> Result<Self, ClientError> {
        pollster::block_on(Self::open_default_async())
    }

    /// [`open_default`](Self::open_default) as a future, on every target: the way to
    /// open a client on the web, where it opens the browser's WebGPU adapter (the web has
    /// no configuration file or environment, so the defaults apply there).
    ///
    /// # Errors
    /// As [`open_default`](Self::open_default).
    pub async fn open_default_async() -> Result<Self, ClientError> {
        // The file first: a bad config fails before any device is opened.
        let config = load_memory_config()?.unwrap_or_default();
        let policy = load_submit_policy()?;
        // Vulkan, Metal and DX12 (lavapipe is Vulkan); `WGPU_BACKEND` overrides.
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
        let instance = wgpu::Instance::new(descriptor);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|error| ClientError::NoAdapter(error.to_string()))?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgpu-memory"),
                required_limits: adapter.limits(),
                // Blocks our pages fit, so a page given back returns device memory.
                memory_hints: Self::memory_hints(),
                ..Default::default()
            })
            .await
            .map_err(|error| ClientError::RequestDevice(error.to_string()))?;
        let client = Self::configured(device, queue, Some(adapter.get_info()), &config)?;
        client.set_submit_policy(policy);
        Ok(client)
    }

    /// A client over an application's own device and queue, configured by the process's
    /// configuration file as [`open_default`](Self::open_default) configures its own:
    /// the file named by `WGPU_MEMORY_CONFIG` when it is set and not empty, else
    /// `wgpu-memory.toml` in the working directory when it exists. Its `[memory]` table
    /// is applied as [`with_config`](Self::with_config) applies one, and its `[submit]`
    /// table sets the [`submit_policy`](Self::submit_policy). Without a file this is
    /// [`new`](Self::new) (without its warning).
    ///
    /// # Errors
    /// [`ClientError::Config`] when the file cannot be read, is not valid (any
    /// [`PoolConfigError`](crate::memory_management::PoolConfigError) of
    /// [`load_memory_config`] or [`load_submit_policy`]), or names pools the device
    /// cannot hold; nothing is installed on the device then.
    pub fn with_config_file(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self, ClientError> {
        let config = load_memory_config()?.unwrap_or_default();
        let policy = load_submit_policy()?;
        let client = Self::configured(device, queue, None, &config)?;
        client.set_submit_policy(policy);
        Ok(client)
    }

    /// A client over an application's own device and queue, configured by `config` (a
    /// `[memory]` table, as [`parse_memory_config`](crate::memory_management::parse_memory_config)
    /// or [`load_memory_config_from`](crate::memory_management::load_memory_config_from)
    /// read it): its `pools` lay out the main memory from the start (the default adaptive
    /// layout when absent), and `budget`, `history`, `oom_snapshot` and `records` are set
    /// as [`apply_config`](Self::apply_config) sets them. Installs the device's callbacks
    /// as [`new`](Self::new) does.
    ///
    /// # Errors
    /// [`ClientError::Config`] when `pools` is invalid for this device (checked against
    /// its limits before anything is installed on the device).
    pub fn with_config(
        device: wgpu::Device,
        queue: wgpu::Queue,
        config: &MemoryConfig,
    ) -> Result<Self, ClientError> {
        Self::configured(device, queue, None, config)
    }

    /// Applies `config` to this client: each key present replaces the setting, each key
    /// absent leaves it as it is. In this order:
    ///
    /// 1. `pools`: installed as [`install_memory_pools`](Self::install_memory_pools)
    ///    installs them (the main memory must hold no live handle);
    /// 2. `budget`: [`set_budget`](Self::set_budget);
    /// 3. `history`: [`record_history`](Self::record_history) and
    ///    [`record_backtraces`](Self::record_backtraces);
    /// 4. `oom_snapshot`: [`set_oom_snapshot`](Self::set_oom_snapshot);
    /// 5. `records`: [`set_records_file`](Self::set_records_file).
    ///
    /// # Errors
    /// As [`install_memory_pools`](Self::install_memory_pools) for `pools`
    /// ([`ClientError::Config`] when they are invalid for this device,
    /// [`ClientError::Install`] while live handles remain), then as
    /// [`set_budget`](Self::set_budget) for `budget` ([`ClientError::Config`] naming the
    /// field `budget` when it is below the smallest page the main memory's pools make, or
    /// when the memories hold more than it even after a cleanup). On an
    /// error the steps before it stay applied and the later ones are not made; retrying
    /// after the cause is gone applies the rest.
    pub fn apply_config(&self, config: &MemoryConfig) -> Result<(), ClientError> {
        if let Some(pools) = &config.pools {
            self.install_memory_pools(pools)?;
        }
        self.apply_settings(config)
    }

    /// A client laid out by `config.pools`, with the rest of `config` applied.
    fn configured(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: Option<wgpu::AdapterInfo>,
        config: &MemoryConfig,
    ) -> Result<Self, ClientError> {
        let layout = match &config.pools {
            Some(pools) => pools.resolve(&storage_memory_properties(&device.limits()))?,
            None => PoolLayout::Preset(MemoryConfiguration::default()),
        };
        let client = Self::build(device, queue, info, layout);
        client.apply_settings(config)?;
        Ok(client)
    }

    /// Steps 2 to 5 of [`apply_config`](Self::apply_config).
    fn apply_settings(&self, config: &MemoryConfig) -> Result<(), ClientError> {
        if let Some(budget) = config.budget {
            self.set_budget(Some(budget.bytes()))?;
        }
        if let Some(history) = config.history {
            self.record_history(history.events);
            self.record_backtraces(history.backtraces);
        }
        if let Some(path) = &config.oom_snapshot {
            self.set_oom_snapshot(Some(path.clone()));
        }
        if let Some(path) = &config.records {
            self.set_records_file(Some(path.clone()));
        }
        Ok(())
    }
}

/// Whether this process has printed the stderr line of [`warn_if_config_unapplied`].
static SAID_ON_STDERR: AtomicBool = AtomicBool::new(false);

/// Warns, naming the file, when the process has a configuration file that `constructor`
/// (a constructor that applies none) leaves unapplied: a `tracing` warning each time,
/// and one line on stderr the first time in the process (without a `tracing`
/// subscriber the warning alone is invisible, and the file's budget and history would
/// silently not apply).
pub(super) fn warn_if_config_unapplied(constructor: &str) {
    if let Some(path) = config_path() {
        warn_unapplied(&path, constructor);
        let _ = say_unapplied_once(
            &path,
            constructor,
            &mut std::io::stderr().lock(),
            &SAID_ON_STDERR,
        );
    }
}

/// The warning of [`warn_if_config_unapplied`] for the file at `path`.
fn warn_unapplied(path: &Path, constructor: &str) {
    tracing::warn!(
        path = %path.display(),
        constructor,
        "{}",
        unapplied_text(path, constructor)
    );
}

/// Writes [`unapplied_text`] as one line to `out` unless `said` says it was written
/// already (then sets it); returns whether it wrote.
fn say_unapplied_once(
    path: &Path,
    constructor: &str,
    out: &mut dyn Write,
    said: &AtomicBool,
) -> bool {
    if said.swap(true, Ordering::Relaxed) {
        return false;
    }
    writeln!(
        out,
        "wgpu-memory: {} (said once per process)",
        unapplied_text(path, constructor)
    )
    .is_ok()
}

/// What the warning says: the file, that `constructor` applies none of it, and how to
/// apply it.
fn unapplied_text(path: &Path, constructor: &str) -> String {
    format!(
        "the configuration file {} is present but {constructor} applies none of it (no \
         pools, budget, history or submit policy from it): make the client with \
         Client::with_config_file(device, queue) to apply it, or Client::with_config / \
         Client::apply_config with a MemoryConfig",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;
    use tracing_subscriber::layer::SubscriberExt;

    /// Collects the messages of warnings.
    struct Warnings(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            struct Text(String);
            impl tracing::field::Visit for Text {
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
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

    /// A config file beside a `Client::new` was ignored without a word; the warning
    /// names the file and the way to apply it.
    #[test]
    fn an_unapplied_config_file_is_named_in_a_warning() {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Warnings(warnings.clone()));
        tracing::subscriber::with_default(subscriber, || {
            warn_unapplied(Path::new("/some/dir/wgpu-memory.toml"), "Client::new");
        });
        let warnings = warnings.lock();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        for part in [
            "/some/dir/wgpu-memory.toml",
            "Client::new applies none",
            "Client::with_config_file",
        ] {
            assert!(warnings[0].contains(part), "{warnings:?} lacks {part:?}");
        }
    }

    /// The stderr line is written once per flag (once per process for the real one),
    /// on one line, naming the file and the call that applies it.
    #[test]
    fn the_stderr_line_is_written_once() {
        let said = AtomicBool::new(false);
        let mut out = Vec::new();
        let path = Path::new("/some/dir/wgpu-memory.toml");
        assert!(say_unapplied_once(path, "Client::new", &mut out, &said));
        assert!(!say_unapplied_once(
            path,
            "Client::with_layout",
            &mut out,
            &said
        ));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        for part in [
            "/some/dir/wgpu-memory.toml",
            "Client::new applies none",
            "Client::with_config_file",
        ] {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
    }
}
