//! Tests of the config layers: defaults, file, environment, flags, and the error messages.

use std::collections::HashMap;
use std::io::Write;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

fn with_file(file: &tempfile::NamedTempFile) -> FlagOverrides {
    FlagOverrides {
        config: Some(file.path().to_path_buf()),
        ..FlagOverrides::default()
    }
}

#[test]
fn documented_defaults_are_the_real_defaults() {
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&[])).unwrap();
    assert_eq!(s.model, "models/gemini-3.8-live");
    assert_eq!(s.voice, "Puck");
    assert_eq!(s.api_version, ApiVersion::V1);
    assert!(s.input_transcription && s.output_transcription);
    assert_eq!(s.tools_enabled, BUILTIN_TOOLS);
    assert!(!s.google_search, "Search costs money: off until asked for");
    assert_eq!(s.tool_limits.timeout, Duration::from_secs(10));
    assert_eq!(s.tool_limits.max_response_bytes, 16 * 1024);
    assert_eq!(
        s.target,
        Route::OfflineMock,
        "no key and no endpoint means the demo model"
    );
    assert!(s.api_key.is_none());
    assert!(s.resumption && s.context_compression);
    assert_eq!(s.reconnect_attempts, 6);
}

#[test]
fn session_lifetime_settings_can_be_turned_off() {
    let file = config_file(
        "[session]\nresumption = false\ncontext_compression = false\nreconnect_attempts = 0\n",
    );
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert!(!s.resumption && !s.context_compression);
    assert_eq!(s.reconnect_attempts, 0);

    let file = config_file("[session]\nreconnect_attempts = 1000\n");
    let error = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(error.key, "session.reconnect_attempts");
}

#[test]
fn the_bridge_transport_is_layered_file_env_flag_and_a_bad_one_is_named() {
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&[])).unwrap();
    assert_eq!(s.bridge_transport, BridgeTransport::WebSocket);

    let file = config_file("[session]\nbridge_transport = \"webrtc\"\n");
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert_eq!(s.bridge_transport, BridgeTransport::WebRtc);
    let env = env_of(&[("LIVETALK_BRIDGE_TRANSPORT", "WebSocket")]);
    let s = Settings::resolve(&with_file(&file), &env).unwrap();
    assert_eq!(
        s.bridge_transport,
        BridgeTransport::WebSocket,
        "env beats file"
    );
    let flags = FlagOverrides {
        bridge: Some("ws://127.0.0.1:3001".into()),
        bridge_transport: Some("webrtc".into()),
        ..with_file(&empty)
    };
    let s = Settings::resolve(&flags, &env).unwrap();
    assert_eq!(
        s.bridge_transport,
        BridgeTransport::WebRtc,
        "flag beats env"
    );

    let file = config_file("[session]\nbridge_transport = \"udp\"\n");
    let error = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(error.key, "session.bridge_transport");
    assert!(error.to_string().contains("websocket, webrtc"), "{error}");
    let env = env_of(&[("LIVETALK_BRIDGE_TRANSPORT", "quic")]);
    let error = Settings::resolve(&with_file(&empty), &env).unwrap_err();
    assert!(
        error.to_string().contains("LIVETALK_BRIDGE_TRANSPORT"),
        "{error}"
    );
    let flags = FlagOverrides {
        bridge_transport: Some("rtc".into()),
        ..with_file(&empty)
    };
    let error = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
    assert!(error.to_string().contains("--bridge-transport"), "{error}");
}

#[test]
fn the_output_wav_cap_comes_from_the_file_or_the_flag_in_mib() {
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&[])).unwrap();
    assert_eq!(s.audio.output_wav_max_bytes, 512 << 20);
    assert_eq!(
        s.audio.output_wav_max_bytes,
        AudioOptions::default().output_wav_max_bytes
    );

    let file = config_file(
        "[audio]
output_wav_max_mb = 64
",
    );
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert_eq!(s.audio.output_wav_max_bytes, 64 << 20);
    let flags = FlagOverrides {
        output_wav_max_mb: Some(2),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[])).unwrap();
    assert_eq!(s.audio.output_wav_max_bytes, 2 << 20, "the flag wins");

    for bad in ["0", "4096"] {
        let file = config_file(&format!("[audio]\noutput_wav_max_mb = {bad}\n"));
        let error = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
        assert_eq!(error.key, "audio.output_wav_max_mb");
        assert!(error.problem.contains("use 1 to 4095"), "{}", error.problem);
    }
}

#[test]
fn layers_apply_in_order_defaults_file_env_flags() {
    let file = config_file("model = \"from-file\"\nvoice = \"kore\"\n[tools]\ntimeout_secs = 3\n");
    let env = env_of(&[("LIVETALK_MODEL", "models/from-env")]);
    let s = Settings::resolve(&with_file(&file), &env).unwrap();
    assert_eq!(s.model, "models/from-env", "env beats file");
    assert_eq!(
        s.voice, "Kore",
        "file beats defaults, voice names are canonicalised"
    );
    assert_eq!(s.tool_limits.timeout, Duration::from_secs(3));

    let flags = FlagOverrides {
        model: Some("gemini-flag".into()),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env).unwrap();
    assert_eq!(
        s.model, "models/gemini-flag",
        "flags beat env; bare ids get models/"
    );
}

#[test]
fn key_selects_google_and_endpoint_selects_custom() {
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&[("GOOGLE_API_KEY", "k1")])).unwrap();
    assert!(matches!(&s.target, Route::Google(e) if e.url().contains(".v1.")));
    let s = Settings::resolve(
        &with_file(&empty),
        &env_of(&[("GOOGLE_API_KEY", "k1"), ("GEMINI_API_KEY", "k2")]),
    )
    .unwrap();
    assert_eq!(s.api_key.unwrap().expose(), "k2", "GEMINI_API_KEY wins");

    let flags = FlagOverrides {
        endpoint: Some("ws://127.0.0.1:9000".into()),
        api_version: Some(ApiVersion::V1beta),
        ..with_file(&empty)
    };
    let s = Settings::resolve(&flags, &env_of(&[])).unwrap();
    assert!(
        matches!(&s.target, Route::Custom(e) if e.url() == "ws://127.0.0.1:9000/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent")
    );

    let flags = FlagOverrides {
        offline: true,
        ..with_file(&empty)
    };
    let s = Settings::resolve(&flags, &env_of(&[("GEMINI_API_KEY", "k")])).unwrap();
    assert_eq!(s.target, Route::OfflineMock);
}

#[test]
fn bad_config_names_file_key_and_problem() {
    let file = config_file("model = \"m\"\n[tools]\ntimeout_secs = \"soon\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(err.origin, file.path().display().to_string());
    assert_eq!(err.key, "tools.timeout_secs");
    assert!(err.problem.contains("line 3"), "{err}");
    assert!(err.to_string().starts_with("bad config in "));

    let file = config_file("modle = \"x\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert!(err.problem.contains("unknown field `modle`"), "{err}");

    let file = config_file("[tools]\nenabled = [\"launch_rockets\"]\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(err.key, "tools.enabled");
    assert!(err.problem.contains("launch_rockets") && err.problem.contains("get_device_status"));

    let file = config_file("[tools.approval]\nlaunch_rockets = \"always\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(err.key, "tools.approval.launch_rockets");
    assert!(err.problem.contains("get_device_status"), "{err}");

    let file = config_file("[tools.approval]\nset_device_status = \"sometimes\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert!(err.problem.contains("sometimes"), "{err}");

    let file = config_file("voice = \"Robot\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(err.key, "voice");

    let file = config_file("model = [\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert_eq!(err.key, "(syntax)");

    let empty = config_file("");
    let err = Settings::resolve(
        &with_file(&empty),
        &env_of(&[("LIVETALK_ENDPOINT", "http://x")]),
    )
    .unwrap_err();
    assert_eq!(err.origin, "environment variable LIVETALK_ENDPOINT");
    assert_eq!(err.key, "endpoint");

    let missing = FlagOverrides {
        config: Some("/nonexistent/livetalk.toml".into()),
        ..FlagOverrides::default()
    };
    let err = Settings::resolve(&missing, &env_of(&[])).unwrap_err();
    assert_eq!(err.origin, "/nonexistent/livetalk.toml");
}

#[test]
fn api_key_in_config_file_is_used_but_env_wins() {
    let file = config_file("api_key = \"file-key\"\n");
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert_eq!(s.api_key.as_ref().unwrap().expose(), "file-key");
    assert!(matches!(s.target, Route::Google(_)));
    assert!(
        !format!("{s:?}").contains("file-key"),
        "Debug output must not show the key"
    );
    let s =
        Settings::resolve(&with_file(&file), &env_of(&[("GEMINI_API_KEY", "env-key")])).unwrap();
    assert_eq!(s.api_key.unwrap().expose(), "env-key");
}

#[test]
fn bridge_flag_wins_over_a_configured_endpoint_and_must_be_a_websocket_url() {
    let file = config_file("endpoint = \"ws://127.0.0.1:9000\"\n");
    let flags = FlagOverrides {
        bridge: Some("ws://10.0.0.5:3001/?token=abc".into()),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[("GEMINI_API_KEY", "k")])).unwrap();
    assert_eq!(
        s.target,
        Route::Bridge("ws://10.0.0.5:3001/?token=abc".into())
    );
    assert!(!s.is_offline(), "the bridge decides what it talks to");

    let flags = FlagOverrides {
        bridge: Some("http://10.0.0.5:3001".into()),
        ..with_file(&file)
    };
    let error = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
    assert_eq!(
        (error.origin.as_str(), error.key.as_str()),
        ("flag --bridge", "bridge")
    );
    assert!(error.problem.contains("ws://"), "{error}");
}

#[test]
fn a_model_name_without_an_id_is_refused() {
    let file = config_file("");
    for model in ["models/", "x/"] {
        let flags = FlagOverrides {
            model: Some(model.into()),
            ..with_file(&file)
        };
        let err = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
        assert_eq!(err.key, "model");
        assert!(err.problem.contains("no model id"), "{err}");
    }
}

#[test]
fn a_turn_timeout_of_zero_means_no_limit_and_a_negative_one_is_refused() {
    let file = config_file("");
    let flags = FlagOverrides {
        turn_timeout_secs: Some(0.0),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[])).unwrap();
    assert!(s.turn_timeout.is_zero());
    let flags = FlagOverrides {
        turn_timeout_secs: Some(-1.0),
        ..with_file(&file)
    };
    let err = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
    assert!(err.problem.contains("0 (no limit)"), "{err}");
    let file = config_file("[session]\nturn_timeout_secs = 0\n");
    assert!(
        Settings::resolve(&with_file(&file), &env_of(&[]))
            .unwrap()
            .turn_timeout
            .is_zero()
    );
}

#[test]
fn the_connect_deadline_keeps_its_old_name() {
    for key in ["connect_timeout_secs", "setup_timeout_secs"] {
        let file = config_file(&format!("[session]\n{key} = 2.5\n"));
        let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
        assert_eq!(s.connect_timeout, Duration::from_millis(2500), "{key}");
    }
}

#[test]
fn mcp_servers_from_the_file_and_the_flag() {
    let file = config_file(
        r#"
[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { GREETING = "hi" }
cwd = "/tmp"
disabled_tools = ["gzip-file-as-resource"]
startup_timeout_sec = 20
tool_timeout_sec = 30
approval = "always"
[mcp_servers.everything.tools.echo]
approval = "never"

[mcp_servers.notes]
url = "http://127.0.0.1:8000/mcp"
bearer_token_env_var = "NOTES_TOKEN"
enabled = false
enabled_tools = ["search"]
"#,
    );
    let flags = FlagOverrides {
        mcp: vec![
            "local=python3 'my server.py' --flag \"two words\"".to_owned(),
            "notes=./notes-stdio".to_owned(),
        ],
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[])).unwrap();
    let names: Vec<&str> = s.mcp_servers.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["everything", "local", "notes"]);

    let everything = &s.mcp_servers[0];
    assert_eq!(
        everything.transport,
        mcp::Transport::Stdio {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-everything".into()
            ],
            env: [("GREETING".to_owned(), "hi".to_owned())].into(),
            cwd: Some(PathBuf::from("/tmp")),
        }
    );
    assert!(everything.enabled);
    assert_eq!(everything.disabled_tools, ["gzip-file-as-resource"]);
    assert_eq!(everything.startup_timeout, Duration::from_secs(20));
    assert_eq!(everything.tool_timeout, Some(Duration::from_secs(30)));
    assert_eq!(everything.approval, Some(Approval::Always));
    assert_eq!(
        everything.tool_approvals.get("echo"),
        Some(&Approval::Never)
    );

    let local = &s.mcp_servers[1];
    let mcp::Transport::Stdio { command, args, .. } = &local.transport else {
        panic!("a stdio server: {local:?}");
    };
    assert_eq!(command, "python3");
    assert_eq!(args, &["my server.py", "--flag", "two words"]);
    assert_eq!(local.startup_timeout, mcp::DEFAULT_STARTUP_TIMEOUT);

    // The flag replaces the file's server of the same name.
    let notes = &s.mcp_servers[2];
    assert!(
        matches!(&notes.transport, mcp::Transport::Stdio { command, .. } if command == "./notes-stdio")
    );
    assert!(notes.enabled);
}

#[test]
fn bad_mcp_servers_are_named() {
    for (text, key, problem) in [
        ("[mcp_servers.x]\n", "mcp_servers.x", "give `command`"),
        (
            "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://h/mcp\"\n",
            "mcp_servers.x",
            "not both",
        ),
        (
            "[mcp_servers.x]\nurl = \"ftp://h\"\n",
            "mcp_servers.x.url",
            "http://",
        ),
        (
            "[mcp_servers.x]\ncommand = \"a\"\nbearer_token_env_var = \"T\"\n",
            "mcp_servers.x.bearer_token_env_var",
            "url",
        ),
        (
            "[mcp_servers.\"bad name\"]\ncommand = \"a\"\n",
            "mcp_servers.bad name",
            "server name",
        ),
        (
            "[mcp_servers.x]\ncommand = \"a\"\ntool_timeout_sec = 0\n",
            "mcp_servers.x.tool_timeout_sec",
            "seconds",
        ),
        (
            "[mcp_servers.x]\ncommand = \"a\"\napproval = \"sometimes\"\n",
            "mcp_servers.x.approval",
            "unknown variant",
        ),
    ] {
        let file = config_file(text);
        let error = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
        assert_eq!(error.key, key, "{text}: {error}");
        assert!(error.problem.contains(problem), "{text}: {error}");
    }
    for flag in ["no-equals", "x=", "x=\"unclosed", "bad name=cmd"] {
        let flags = FlagOverrides {
            mcp: vec![flag.to_owned()],
            ..FlagOverrides::default()
        };
        let error = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
        assert_eq!(error.origin, "flag --mcp", "{flag}: {error}");
    }
}

#[test]
fn vertex_takes_project_and_location_from_flags_file_or_environment() {
    let file = config_file("vertex = true\nproject = \"file-proj\"\n");
    let flags = FlagOverrides {
        location: Some("europe-west4".into()),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[("GOOGLE_CLOUD_PROJECT", "env-proj")])).unwrap();
    let vertex = s.vertex.clone().unwrap();
    assert_eq!(vertex.project, "env-proj", "the environment beats the file");
    assert_eq!(vertex.location, "europe-west4");
    assert!(matches!(&s.target, Route::Google(e) if e.is_vertex()
        && e.url() == "wss://europe-west4-aiplatform.googleapis.com/ws/google.cloud.aiplatform.v1.LlmBidiService/BidiGenerateContent"));
    assert_eq!(
        vertex.model_name(&s.model),
        "projects/env-proj/locations/europe-west4/publishers/google/models/gemini-3.8-live"
    );
    for (given, expected) in [
        (
            "publishers/acme/models/m",
            "projects/env-proj/locations/europe-west4/publishers/acme/models/m",
        ),
        (
            "projects/p/locations/l/publishers/google/models/m",
            "projects/p/locations/l/publishers/google/models/m",
        ),
    ] {
        assert_eq!(vertex.model_name(given), expected);
    }

    // --endpoint keeps Vertex's path; --offline leaves Vertex out.
    let empty = config_file("");
    let flags = FlagOverrides {
        vertex: true,
        project: Some("p".into()),
        location: Some("global".into()),
        endpoint: Some("ws://127.0.0.1:9000".into()),
        ..with_file(&empty)
    };
    let s = Settings::resolve(
        &flags,
        &env_of(&[("GEMINI_API_KEY", "fake-key-vertex-config")]),
    )
    .unwrap();
    assert!(matches!(&s.target, Route::Custom(e) if e.is_vertex()
        && e.url() == "ws://127.0.0.1:9000/ws/google.cloud.aiplatform.v1.LlmBidiService/BidiGenerateContent"));
    let offline = FlagOverrides {
        offline: true,
        endpoint: None,
        ..flags.clone()
    };
    let s = Settings::resolve(&offline, &env_of(&[])).unwrap();
    assert!(s.vertex.is_none() && s.target == Route::OfflineMock);
}

#[test]
fn vertex_without_a_project_or_with_a_bad_location_says_where_to_give_it() {
    let empty = config_file("");
    let flags = FlagOverrides {
        vertex: true,
        location: Some("us-central1".into()),
        ..with_file(&empty)
    };
    let error = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
    assert_eq!(error.key, "project");
    assert!(
        error.problem.contains("--project") && error.problem.contains("GOOGLE_CLOUD_PROJECT"),
        "{error}"
    );
    let error = Settings::resolve(
        &FlagOverrides {
            project: Some("p".into()),
            location: Some("us-central1/../x".into()),
            ..flags
        },
        &env_of(&[]),
    )
    .unwrap_err();
    assert_eq!(
        (error.key.as_str(), error.origin.as_str()),
        ("location", "flag --location")
    );
}

#[test]
fn built_in_approvals_come_from_the_tools_approval_table() {
    let defaults = Settings::resolve(&FlagOverrides::default(), &env_of(&[])).unwrap();
    assert!(
        defaults.tools_approval.is_empty(),
        "built-ins never ask by default"
    );
    assert_eq!(
        defaults.approve, None,
        "not given: read-only applies, and says so"
    );

    let file = config_file(
        "[tools.approval]\nset_device_status = \"always\"\nget_current_time = \"never\"\n",
    );
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert_eq!(
        s.tools_approval.get("set_device_status"),
        Some(&crate::tools::Approval::Always)
    );
    assert_eq!(
        s.tools_approval.get("get_current_time"),
        Some(&crate::tools::Approval::Never)
    );
}

#[test]
fn prices_come_from_the_table_and_the_pricing_tables_over_it() {
    let key = [("GEMINI_API_KEY", "k")];
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&key)).unwrap();
    assert_eq!(s.prices(), crate::pricing::published("gemini-3.8-live"));
    let offline = Settings::resolve(&with_file(&empty), &env_of(&[])).unwrap();
    assert_eq!(
        offline.prices(),
        None,
        "the offline demo model costs nothing"
    );

    let file = config_file(
        "[pricing.\"gemini-3.8-live\"]\naudio_out = 20.0\n[pricing.\"models/my-tuned-live\"]\ntext_in = 1\n",
    );
    let s = Settings::resolve(&with_file(&file), &env_of(&key)).unwrap();
    let prices = s.prices().unwrap();
    assert_eq!(prices.audio_out, 20.0);
    assert_eq!(
        prices.audio_in, 3.0,
        "what is not given keeps the published price"
    );
    assert_eq!(
        s.pricing.prices("models/my-tuned-live").map(|p| p.text_in),
        Some(1.0)
    );

    let flags = FlagOverrides {
        model: Some("my-tuned-live".into()),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&key)).unwrap();
    let prices = s.prices().unwrap();
    assert_eq!((prices.text_in, prices.audio_out), (1.0, 0.0));

    // Only Google bills at the published prices: `livetalk mock`, a bridge and the demo
    // model are not priced unless the config prices their model.
    for (flags, route) in [
        (
            FlagOverrides {
                endpoint: Some("ws://127.0.0.1:9000".into()),
                ..with_file(&empty)
            },
            "livetalk mock",
        ),
        (
            FlagOverrides {
                bridge: Some("ws://127.0.0.1:3001".into()),
                ..with_file(&empty)
            },
            "a bridge",
        ),
    ] {
        let s = Settings::resolve(&flags, &env_of(&key)).unwrap();
        assert_eq!(s.prices(), None, "{route}");
        let priced = Settings::resolve(
            &FlagOverrides {
                config: with_file(&file).config,
                ..flags
            },
            &env_of(&key),
        )
        .unwrap();
        let prices = priced.prices().unwrap();
        assert_eq!(
            (prices.audio_out, prices.audio_in),
            (20.0, 0.0),
            "{route}: the config's price, nothing published"
        );
    }
    // The embedded demo model bills nobody, whatever its model id is priced at.
    let demo = FlagOverrides {
        offline: true,
        ..with_file(&file)
    };
    let s = Settings::resolve(&demo, &env_of(&key)).unwrap();
    assert_eq!(s.prices(), None, "the demo model");
    let google = FlagOverrides {
        endpoint: Some("wss://generativelanguage.googleapis.com".into()),
        ..with_file(&empty)
    };
    let s = Settings::resolve(&google, &env_of(&key)).unwrap();
    assert_eq!(s.prices(), crate::pricing::published("gemini-3.8-live"));
}

#[test]
fn bad_prices_are_named_by_their_key() {
    for (text, key, says) in [
        (
            "[pricing.\"gemini-3.8-live\"]\naudio_in = -1\n",
            "pricing.\"gemini-3.8-live\".audio_in",
            "-1 is not a price",
        ),
        (
            "[pricing.\"gemini-3.8-live\"]\ntext_out = nan\n",
            "pricing.\"gemini-3.8-live\".text_out",
            "NaN is not a price",
        ),
        (
            "[pricing.\"gemini-3.8-live\"]\ntext_out = 1e9\n",
            "pricing.\"gemini-3.8-live\".text_out",
            "from 0 to 1000",
        ),
        (
            "[pricing.\"models/\"]\ntext_in = 1\n",
            "pricing.\"models/\"",
            "names no model",
        ),
    ] {
        let file = config_file(text);
        let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
        assert_eq!(err.key, key, "{text}");
        assert!(err.problem.contains(says), "{err}");
    }
    let file = config_file("[pricing.\"gemini-3.8-live\"]\nimage_in = 1\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert!(err.problem.contains("unknown field `image_in`"), "{err}");
    let file = config_file("[pricing.\"gemini-3.8-live\"]\naudio_in = \"cheap\"\n");
    let err = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap_err();
    assert!(err.to_string().contains("audio_in"), "{err}");
}

/// A key variable set but blank (a CI secret a fork does not have) is refused wherever the
/// route would use a key, with one sentence naming it; never with `--offline`, a bridge or
/// Vertex AI, which use no key, and never where a key variable is unset.
#[test]
fn a_key_variable_set_but_blank_is_refused_where_a_key_would_be_used() {
    let empty = config_file("");
    let refused = |flags: &FlagOverrides, env: &[(&str, &str)]| {
        Settings::resolve(flags, &env_of(env))
            .unwrap()
            .key_usable()
            .err()
            .map(|e| e.to_string())
    };
    let plain = with_file(&empty);
    let endpoint = FlagOverrides {
        endpoint: Some("ws://127.0.0.1:9000".into()),
        ..with_file(&empty)
    };
    for flags in [&plain, &endpoint] {
        for blank in ["", "  "] {
            let error = refused(flags, &[("GEMINI_API_KEY", blank)]).expect("refused");
            assert!(
                error.starts_with("GEMINI_API_KEY is set but empty"),
                "{error}"
            );
            assert!(error.contains("--offline"), "{error}");
        }
        // The first variable set is the one read: a blank GEMINI_API_KEY is not excused by
        // a GOOGLE_API_KEY, and a blank GOOGLE_API_KEY is refused when it is the one.
        assert!(refused(flags, &[("GEMINI_API_KEY", ""), ("GOOGLE_API_KEY", "k")]).is_some());
        let error = refused(flags, &[("GOOGLE_API_KEY", "")]).expect("refused");
        assert!(
            error.starts_with("GOOGLE_API_KEY is set but empty"),
            "{error}"
        );
        assert_eq!(refused(flags, &[]), None);
        assert_eq!(refused(flags, &[("GEMINI_API_KEY", "k")]), None);
    }
    let offline = FlagOverrides {
        offline: true,
        ..with_file(&empty)
    };
    let bridge = FlagOverrides {
        bridge: Some("ws://127.0.0.1:9000".into()),
        ..with_file(&empty)
    };
    let vertex = FlagOverrides {
        vertex: true,
        project: Some("p".into()),
        location: Some("us-central1".into()),
        ..with_file(&empty)
    };
    for flags in [&offline, &bridge, &vertex] {
        assert_eq!(refused(flags, &[("GEMINI_API_KEY", "")]), None, "{flags:?}");
    }
}

/// Each route is named by its kind and where it goes, for `livetalk check`'s reports.
#[test]
fn routes_are_named_by_kind_and_host() {
    let empty = config_file("");
    let named = |flags: FlagOverrides, env: &[(&str, &str)]| {
        Settings::resolve(&flags, &env_of(env))
            .unwrap()
            .route_name()
    };
    assert_eq!(
        named(with_file(&empty), &[]),
        (
            RouteKind::Demo,
            "the embedded offline demo model".to_owned()
        )
    );
    assert_eq!(
        named(with_file(&empty), &[("GEMINI_API_KEY", "k")]),
        (
            RouteKind::Google,
            "Google's Gemini API at generativelanguage.googleapis.com".to_owned()
        )
    );
    let endpoint = FlagOverrides {
        endpoint: Some("ws://127.0.0.1:9000".into()),
        ..with_file(&empty)
    };
    assert_eq!(
        named(endpoint, &[]),
        (RouteKind::Endpoint, "the endpoint 127.0.0.1".to_owned())
    );
    let vertex = FlagOverrides {
        vertex: true,
        project: Some("p".into()),
        location: Some("us-central1".into()),
        ..with_file(&empty)
    };
    let (kind, text) = named(vertex, &[]);
    assert_eq!(kind, RouteKind::Vertex);
    assert!(text.contains("project p, location us-central1"), "{text}");
}

#[test]
fn google_search_comes_from_the_tools_table_or_the_flag() {
    let on = config_file("[tools]\ngoogle_search = true\n");
    assert!(
        Settings::resolve(&with_file(&on), &env_of(&[]))
            .unwrap()
            .google_search
    );
    let off = config_file("[tools]\ngoogle_search = false\n");
    let flag = FlagOverrides {
        search: true,
        ..with_file(&off)
    };
    assert!(
        Settings::resolve(&flag, &env_of(&[]))
            .unwrap()
            .google_search,
        "the flag turns it on for this run"
    );
    let bad = config_file("[tools]\ngoogle_search = \"yes\"\n");
    let error = Settings::resolve(&with_file(&bad), &env_of(&[])).unwrap_err();
    assert!(
        error.to_string().contains("google_search"),
        "the key is named: {error}"
    );
}

#[test]
fn graphics_come_from_the_terminal_table_and_the_flag_and_a_bad_value_is_one_clear_error() {
    use super::Graphics;
    let empty = config_file("");
    let s = Settings::resolve(&with_file(&empty), &env_of(&[])).unwrap();
    assert_eq!(s.graphics, Graphics::Auto, "the default asks the terminal");
    let file = config_file("[terminal]\ngraphics = \"sixel\"\n");
    let s = Settings::resolve(&with_file(&file), &env_of(&[])).unwrap();
    assert_eq!(s.graphics, Graphics::Sixel);
    let flags = FlagOverrides {
        graphics: Some("Kitty".into()),
        ..with_file(&file)
    };
    let s = Settings::resolve(&flags, &env_of(&[])).unwrap();
    assert_eq!(s.graphics, Graphics::Kitty, "the flag wins, in any casing");
    let bad = config_file("[terminal]\ngraphics = \"png\"\n");
    let e = Settings::resolve(&with_file(&bad), &env_of(&[])).unwrap_err();
    assert_eq!(e.key, "terminal.graphics");
    assert_eq!(
        e.problem,
        "\"png\" is not one of auto, kitty, sixel, iterm2, halfblocks, off"
    );
    let flags = FlagOverrides {
        graphics: Some("blocks".into()),
        ..with_file(&empty)
    };
    let e = Settings::resolve(&flags, &env_of(&[])).unwrap_err();
    assert_eq!(e.origin, "flag --graphics");
}
