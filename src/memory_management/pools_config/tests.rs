//! Unit tests of the pools config: file selection and exclusive-memory-only rules.

use super::read::*;
use super::*;

fn props() -> MemoryDeviceProperties {
    MemoryDeviceProperties::new(128 << 20, 32)
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "wgpu-memory-pools-config-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The `pools` value of a `[memory]` table written in TOML.
fn pools_from_toml(text: &str) -> MemoryPoolsConfig {
    parse_memory_config(text)
        .expect("valid TOML")
        .pools
        .expect("a pools value")
}

// The exclusive-memory-only rules cannot be reached through `resolve` on this build
// (the flag is a cubecl-runtime cfg), so they are pinned through the flag here, from
// TOML input as a user writes it.
#[test]
fn adaptive_preset_is_unavailable_on_exclusive_only_builds() {
    let config = pools_from_toml("[memory]\npools = \"adaptive\"\n");
    let error = config
        .resolve_for_build(&props(), true)
        .expect_err("adaptive refused");
    assert_eq!(
        error,
        PoolConfigError::PresetUnavailable { preset: "adaptive" }
    );
    assert!(error.to_string().contains("\"adaptive\""), "{error}");
    let exclusive = pools_from_toml("[memory]\npools = \"exclusive-pages\"\n");
    assert!(matches!(
        exclusive.resolve_for_build(&props(), true),
        Ok(PoolLayout::Preset(MemoryConfiguration::ExclusivePages))
    ));
}

#[test]
fn sliced_entries_are_unavailable_on_exclusive_only_builds() {
    let config = pools_from_toml(
        "[[memory.pools]]\ntype = \"exclusive\"\nmax_alloc_size = 1024\n\
         [[memory.pools]]\ntype = \"sliced\"\npage_size = \"4 KiB\"\n",
    );
    let error = config
        .resolve_for_build(&props(), true)
        .expect_err("sliced refused");
    assert_eq!(error, PoolConfigError::SlicedPoolsUnavailable { entry: 1 });
    let message = error.to_string();
    assert!(message.contains("entry 1"), "{message}");
    assert!(message.contains("exclusive"), "{message}");
}

#[test]
fn env_path_that_is_missing_is_an_io_error() {
    let missing = scratch_dir("env-missing").join("absent.toml");
    let error = load_from_sources(Some(missing.clone().into_os_string()), Path::new("x"))
        .expect_err("missing file named by the variable");
    match error {
        PoolConfigError::Io { path, message } => {
            assert_eq!(path, missing);
            assert!(!message.is_empty());
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

/// Issue 12, item 7: an empty `WGPU_MEMORY_CONFIG` tried to open the file "" and
/// failed with an Io error; it counts as unset (the default file, absent here, decides).
#[test]
fn empty_env_path_counts_as_unset() {
    let absent = scratch_dir("env-empty").join(DEFAULT_CONFIG_FILE);
    assert_eq!(load_from_sources(Some(OsString::new()), &absent), Ok(None));
}

#[test]
fn absent_default_file_gives_none_and_present_one_is_read() {
    let dir = scratch_dir("default");
    let default_file = dir.join(DEFAULT_CONFIG_FILE);
    let _ = std::fs::remove_file(&default_file);
    assert_eq!(load_from_sources(None, &default_file), Ok(None));

    std::fs::write(&default_file, "[memory]\npools = \"exclusive-pages\"\n")
        .expect("write default file");
    assert_eq!(
        load_from_sources(None, &default_file),
        Ok(Some(MemoryConfig {
            pools: Some(MemoryPoolsConfig::Preset(MemoryPoolsPreset::ExclusivePages)),
            history: None,
            oom_snapshot: None,
            records: None,
            budget: None,
        }))
    );
    // The variable wins over the default file.
    let other = dir.join("other.toml");
    std::fs::write(&other, "[memory]\n").expect("write other file");
    assert_eq!(
        load_from_sources(Some(other.into_os_string()), &default_file),
        Ok(Some(MemoryConfig {
            pools: None,
            history: None,
            oom_snapshot: None,
            records: None,
            budget: None,
        }))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn huge_sizes_round_trip_as_strings() {
    let config = MemoryConfig {
        pools: Some(MemoryPoolsConfig::Explicit(vec![
            MemoryPoolConfig::Direct {
                reclaim_at: Some(MemorySize(u64::MAX)),
            },
        ])),
        history: None,
        oom_snapshot: None,
        records: None,
        budget: None,
    };
    let text = toml::to_string(&config).expect("serialize");
    let back: MemoryConfig = toml::from_str(&text).expect("deserialize");
    assert_eq!(back, config);
}

#[test]
fn aligning_past_u64_max_is_a_bad_size() {
    let config = MemoryPoolsConfig::Explicit(vec![MemoryPoolConfig::Exclusive {
        max_alloc_size: MemorySize(u64::MAX),
        dealloc_period: None,
    }]);
    assert!(matches!(
        config.resolve(&props()),
        Err(PoolConfigError::BadSize {
            entry: Some(0),
            field: "max_alloc_size",
            ..
        })
    ));
}

#[test]
fn history_is_a_number_of_events() {
    use super::parse_memory_config;
    let config = parse_memory_config("[memory]\nhistory = 500\n").expect("valid");
    assert_eq!(config.history.map(|h| h.events), Some(500));
    assert_eq!(config.pools, None);
    let both =
        parse_memory_config("[memory]\npools = \"exclusive-pages\"\nhistory = 0\n").expect("valid");
    assert_eq!(both.history.map(|h| h.events), Some(0));
    assert!(both.pools.is_some());
    assert_eq!(
        parse_memory_config("[memory]\n").expect("valid").history,
        None
    );
    for bad in ["history = -1", "history = \"many\"", "history = 1.5"] {
        let error = parse_memory_config(&format!("[memory]\n{bad}\n")).expect_err(bad);
        assert!(
            error.to_string().contains("memory.history"),
            "{bad}: {error}"
        );
    }
    let text = toml::to_string(&config).expect("serialize");
    let back: MemoryConfig = toml::from_str(&text).expect("deserialize");
    assert_eq!(back, config);
}

#[test]
fn oom_snapshot_is_a_path() {
    use super::parse_memory_config;
    let config =
        parse_memory_config("[memory]\noom_snapshot = \"/tmp/oom.json\"\n").expect("valid");
    assert_eq!(config.oom_snapshot, Some(PathBuf::from("/tmp/oom.json")));
    let error = parse_memory_config("[memory]\noom_snapshot = 3\n").expect_err("not a path");
    assert!(error.to_string().contains("memory.oom_snapshot"), "{error}");
    let text = toml::to_string(&config).expect("serialize");
    let back: MemoryConfig = toml::from_str(&text).expect("deserialize");
    assert_eq!(back, config);
}

#[test]
fn history_as_a_table_turns_backtraces_on() {
    use super::parse_memory_config;
    let config = parse_memory_config("[memory]\nhistory = { events = 64, backtraces = true }\n")
        .expect("valid");
    assert_eq!(
        config.history,
        Some(HistoryConfig {
            events: 64,
            backtraces: true
        })
    );
    let plain = parse_memory_config("[memory]\nhistory = { events = 8 }\n").expect("valid");
    assert_eq!(
        plain.history,
        Some(HistoryConfig {
            events: 8,
            backtraces: false
        })
    );
    for (bad, says) in [
        ("history = { backtraces = true }", "needs `events"),
        ("history = { events = 8, backtraces = 1 }", "true or false"),
        ("history = { events = 8, stacks = true }", "no key `stacks`"),
        ("history = { events = -8 }", "0 or more"),
    ] {
        let error = parse_memory_config(&format!("[memory]\n{bad}\n")).expect_err(bad);
        assert!(error.to_string().contains(says), "{bad}: {error}");
    }
    let text = toml::to_string(&config).expect("serialize");
    let back: MemoryConfig = toml::from_str(&text).expect("deserialize");
    assert_eq!(back, config);
}

#[test]
fn records_is_a_path() {
    use super::parse_memory_config;
    let config = parse_memory_config("[memory]\nrecords = \"mem.jsonl\"\n").expect("valid");
    assert_eq!(config.records, Some(std::path::PathBuf::from("mem.jsonl")));
    let error = parse_memory_config("[memory]\nrecords = 3\n").expect_err("not a path");
    assert!(error.to_string().contains("memory.records"), "{error}");
}

/// `[memory] budget`: a size string or a byte count; zero, negative, fractional and
/// non-size values are refused as `BadSize` naming the field.
#[test]
fn budget_is_a_size_and_bad_budgets_name_the_field() {
    let budget = |text: &str| parse_memory_config(&format!("[memory]\nbudget = {text}\n"));
    assert_eq!(
        budget("\"8 GiB\"").unwrap().budget,
        Some(MemorySize(8 << 30))
    );
    assert_eq!(budget("1048576").unwrap().budget, Some(MemorySize(1 << 20)));
    assert_eq!(parse_memory_config("[memory]\n").unwrap().budget, None);
    for (text, reason) in [
        ("0", "0 bytes"),
        ("\"0 MiB\"", "0 bytes"),
        ("-5", "negative"),
        ("\"-1 GiB\"", "negative"),
        ("\"lots\"", ""),
        ("1.5", "whole number"),
        ("true", "not boolean"),
    ] {
        match budget(text) {
            Err(error @ PoolConfigError::BadSize { field, entry, .. }) => {
                assert_eq!((field, entry), ("budget", None), "{text}");
                let message = error.to_string();
                assert!(
                    message.contains("`budget`") && message.contains(reason),
                    "{text}: {message}"
                );
            }
            other => panic!("budget = {text}: expected BadSize, got {other:?}"),
        }
    }
}

#[test]
fn a_budget_below_what_is_held_names_each_memory() {
    let error = PoolConfigError::BudgetBelowHeld {
        field: "budget",
        budget: 1 << 20,
        held: 3 << 20,
        held_by: vec![
            ("main".to_string(), 2 << 20),
            ("staging".to_string(), 0),
            ("upload".to_string(), 1 << 20),
        ],
    };
    let message = error.to_string();
    assert!(
        message.contains("`budget` = 1048576 bytes (1.00 MiB)")
            && message.contains("main 2.00 MiB, staging 0 B, upload 1.00 MiB")
            && message.contains("at least 3145728 bytes"),
        "{message}"
    );
}
