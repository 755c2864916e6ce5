//! `perpsim serve` settings resolved from flags, env, the TOML file and the defaults.

use super::*;

/// D1: no flags runs the market maker and the random walk; the file and the flags set
/// the walk and the quotes per instrument, flags last.
#[test]
fn the_living_market_defaults_on_and_is_set_per_instrument() {
    let sim = ServeArgs::default().resolve().unwrap().simulation;
    assert_eq!(
        (sim.price_feed, sim.market_maker),
        (PriceFeed::RandomWalk, true)
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(
        &path,
        "market_maker = \"off\"\n[instruments.\"ETH-USDC-PERP\"]\nvolatility = \"0.9\"\nsize = \"2\"\n",
    )
    .unwrap();
    let sim = ServeArgs {
        config: Some(path),
        price_feed: Some("fixed".into()),
        volatility: vec!["0.5".into(), "SOL-USDC-PERP=1.5".into()],
        maker_levels: vec!["4".into()],
        ..Default::default()
    }
    .resolve()
    .unwrap()
    .simulation;
    assert_eq!(
        (sim.price_feed, sim.market_maker),
        (PriceFeed::Fixed, false)
    );
    let by = |s: &str| sim.instrument(s).unwrap().clone();
    assert_eq!(by("ETH-USDC-PERP").volatility, Decimal::new(5, 1));
    assert_eq!(by("ETH-USDC-PERP").size, Decimal::from(2));
    assert_eq!(by("SOL-USDC-PERP").volatility, Decimal::new(15, 1));
    assert_eq!(by("BTC-USDC-PERP").levels, 4);
}

#[test]
fn flags_override_the_file_which_overrides_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:9000\"\nseed = 5\nclock = \"manual\"\n",
    )
    .unwrap();
    let args = ServeArgs {
        config: Some(path.clone()),
        seed: Some(6),
        ..Default::default()
    };
    let cfg = args.resolve().unwrap();
    assert_eq!(cfg.listen.port(), 9000);
    assert_eq!(cfg.seed, Some(6));
    assert_eq!(cfg.clock, Some(ClockMode::Manual));
    assert_eq!(cfg.data_dir, PathBuf::from("./data"));
    assert_eq!(cfg.transfer_delay_secs, 1);
    assert_eq!(cfg.connections, ConnectionLimits::default());
    assert_eq!(cfg.max_nonces_per_key, DEFAULT_MAX_NONCES_PER_KEY);
}

#[test]
fn connection_limits_come_from_flags_and_file_and_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(
        &path,
        "idle_timeout = 7\nmax_connections = 9\nmax_connections_per_address = 3\n",
    )
    .unwrap();
    let cfg = ServeArgs {
        config: Some(path.clone()),
        header_read_timeout: Some(2),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(
        cfg.connections,
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(7),
            max_connections: 9,
            max_per_address: 3,
        }
    );
    let defaults = ServeArgs::default().resolve().unwrap();
    assert_eq!(
        (
            defaults.connections.max_per_address,
            defaults.limits.max_open_orders,
            defaults.limits.max_customers
        ),
        (1_024, 1_000, 100_000),
        "the documented defaults (D4)"
    );
    let err = ServeArgs {
        max_open_orders: Some(0),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("--max-open-orders"), "{err}");
    let err = ServeArgs {
        admin_token: Some(" ".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(
        err.contains("admin token") && err.contains("empty"),
        "{err}"
    );
    let err = ServeArgs {
        max_connections: Some(0),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("--max-connections"), "{err}");
}

#[test]
fn the_snapshot_interval_defaults_to_an_hour_and_is_bounded() {
    assert_eq!(
        ServeArgs::default()
            .resolve()
            .unwrap()
            .snapshot_interval_secs,
        3_600
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(&path, "snapshot_interval = 60\n").unwrap();
    let cfg = ServeArgs {
        config: Some(path),
        ..Default::default()
    };
    assert_eq!(cfg.resolve().unwrap().snapshot_interval_secs, 60);
    for bad in [0, 366 * 86_400 + 1, u64::MAX] {
        let err = ServeArgs {
            snapshot_interval: Some(bad),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(
            err.contains("--snapshot-interval must be 1 to 31622400 seconds"),
            "{err}"
        );
    }
}

#[test]
fn unknown_keys_and_bad_market_settings_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "lissen = \"x\"\n").unwrap();
    let err = ServeArgs {
        config: Some(path),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("lissen"), "{err}");
    let err = ServeArgs {
        market_maker: Some("sometimes".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("--market-maker must be on or off"), "{err}");
    let err = ServeArgs {
        volatility: vec!["DOGE-USDC-PERP=0.5".into()],
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("DOGE-USDC-PERP"), "{err}");
    let err = ServeArgs {
        start: Some("2026-01-01T00:00:00Z".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.contains("--clock manual"));
}

/// Issue 28 item 2: every `serve` flag reads `PERPSIM_<FLAG>` (shown in --help) into the
/// same field, so the same validation refuses the same text from either.
#[test]
fn every_serve_flag_has_its_environment_variable_in_help() {
    use clap::CommandFactory;
    let mut cli = crate::cli::Cli::command();
    let serve = cli.find_subcommand_mut("serve").unwrap();
    let help = serve.render_long_help().to_string();
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" {
            continue;
        }
        let want = format!("PERPSIM_{}", long.to_ascii_uppercase().replace('-', "_"));
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert_eq!(env.as_deref(), Some(want.as_str()), "--{long}");
        assert!(
            help.contains(&format!("[env: {want}")),
            "--{long} in --help"
        );
    }
}

#[test]
fn the_history_window_defaults_to_65536_rows_and_must_be_a_bounded_power_of_two() {
    let resolved = |rows: Option<u64>| {
        ServeArgs {
            history_window: rows,
            ..Default::default()
        }
        .resolve()
    };
    assert_eq!(resolved(None).unwrap().history_window_bits, 16);
    assert_eq!(resolved(Some(256)).unwrap().history_window_bits, 8);
    assert_eq!(resolved(Some(1 << 24)).unwrap().history_window_bits, 24);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(&path, "history_window = 4096\n").unwrap();
    let from_file = ServeArgs {
        config: Some(path),
        ..Default::default()
    };
    assert_eq!(from_file.resolve().unwrap().history_window_bits, 12);
    for bad in [0, 1, 128, 1_000, 65_535, 1 << 25, u64::MAX] {
        let err = resolved(Some(bad)).unwrap_err();
        assert!(
            err.contains("--history-window must be a power of two from 256 to 16777216 rows"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_projection_batch_defaults_to_8192_rows_and_is_bounded() {
    let resolved = |rows: Option<u64>| {
        ServeArgs {
            projection_batch: rows,
            ..Default::default()
        }
        .resolve()
    };
    assert_eq!(resolved(None).unwrap().projection_batch, 8_192);
    assert_eq!(resolved(Some(0)).unwrap().projection_batch, 0);
    assert_eq!(resolved(Some(1 << 20)).unwrap().projection_batch, 1 << 20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(&path, "projection_batch = 100\n").unwrap();
    let from_file = ServeArgs {
        config: Some(path),
        ..Default::default()
    };
    assert_eq!(from_file.resolve().unwrap().projection_batch, 100);
    for bad in [(1 << 20) + 1, u64::MAX] {
        let err = resolved(Some(bad)).unwrap_err();
        assert!(
            err.contains("--projection-batch must be 0 to 1048576 rows"),
            "{bad}: {err}"
        );
    }
}

/// Issue 39 item 1: `--market-data` from a flag or the file, its speed 1 to 100 000 (1 unless
/// set); with it a new data dir's price feed is fixed unless one is given.
#[test]
fn market_data_fixes_the_price_feed_unless_given_and_its_speed_is_bounded() {
    let resolved = |path: Option<&str>, speed: Option<u32>, feed: Option<&str>| {
        ServeArgs {
            market_data: path.map(PathBuf::from),
            market_data_speed: speed,
            price_feed: feed.map(str::to_owned),
            ..Default::default()
        }
        .resolve()
    };
    let cfg = resolved(Some("m.yaml"), None, None).unwrap();
    let data = cfg.market_data.unwrap();
    assert_eq!((data.path, data.speed), (PathBuf::from("m.yaml"), 1));
    assert_eq!(cfg.simulation.price_feed, PriceFeed::Fixed);
    assert!(
        !cfg.market_given,
        "a data dir's own feed is kept, and checked at start"
    );
    let cfg = resolved(Some("m.yaml"), Some(100_000), Some("random-walk")).unwrap();
    assert_eq!(cfg.market_data.unwrap().speed, 100_000);
    assert_eq!(cfg.simulation.price_feed, PriceFeed::RandomWalk);
    assert_eq!(resolved(None, None, None).unwrap().market_data, None);
    for speed in [0, 100_001] {
        let err = resolved(Some("m.yaml"), Some(speed), None).unwrap_err();
        assert!(
            err.contains("--market-data-speed must be 1 to 100000"),
            "{err}"
        );
    }
    let err = resolved(None, Some(2), None).unwrap_err();
    assert!(
        err.contains("--market-data-speed needs --market-data"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perpsim.toml");
    std::fs::write(&path, "market_data = \"f.yaml\"\nmarket_data_speed = 60\n").unwrap();
    let from_file = ServeArgs {
        config: Some(path),
        ..Default::default()
    };
    let data = from_file.resolve().unwrap().market_data.unwrap();
    assert_eq!((data.path, data.speed), (PathBuf::from("f.yaml"), 60));
}

/// Issue 39 item 3: `--order-latency` and `--market-data-latency` in the scenario's
/// distributions, each delay within a minute; anything else refused saying what is taken.
#[test]
fn order_latency_takes_the_scenario_distributions_and_refuses_the_rest() {
    use perpsim_core::latency::LatencyModel;
    let resolved = |text: &str| {
        ServeArgs {
            order_latency: Some(text.into()),
            ..Default::default()
        }
        .resolve()
        .map(|c| c.latencies.order_entry.unwrap())
    };
    assert_eq!(resolved("constant:40ms"), Ok(LatencyModel::Constant(40)));
    assert_eq!(
        resolved("normal:50ms,10ms"),
        Ok(LatencyModel::Normal {
            mean: 50.0,
            stddev: 10.0
        })
    );
    assert_eq!(
        resolved("log-normal:1s,0.5"),
        Ok(LatencyModel::LogNormal {
            median: 1000.0,
            sigma: 0.5
        })
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("observed.csv");
    std::fs::write(&file, "latency_ms\n12\n30\n").unwrap();
    let spec = format!("empirical:{}", file.display());
    assert_eq!(resolved(&spec), Ok(LatencyModel::Empirical(vec![12, 30])));
    for bad in [
        "40ms",
        "constant:2m",
        "uniform:1ms",
        "normal:50ms",
        "log-normal:1s,9",
    ] {
        let err = resolved(bad).unwrap_err();
        assert!(err.starts_with("--order-latency"), "{bad}: {err}");
    }
    std::fs::write(&file, "latency_ms\n-1\n").unwrap();
    let err = resolved(&spec).unwrap_err();
    assert!(err.contains("observed.csv:2:1"), "located: {err}");
    assert_eq!(
        ServeArgs::default().resolve().unwrap().latencies,
        Latencies::default()
    );
    let both = ServeArgs {
        order_latency: Some("constant:5ms".into()),
        market_data_latency: Some("constant:7ms".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap()
    .latencies;
    assert_eq!(both.market_data, Some(LatencyModel::Constant(7)));
    let err = ServeArgs {
        market_data_latency: Some("constant".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(err.starts_with("--market-data-latency: expected"), "{err}");
}
