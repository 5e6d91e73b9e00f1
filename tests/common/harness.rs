//! An in-process client for scenario tests: the library's engine and app over a real
//! loopback socket to the embedded mock running a fault scenario.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use livetalk::app::{App, AppInit, ModelTurnStatus, Msg, NoticeLevel, ToolState};
use livetalk::bridge::{BridgeOptions, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES, Upstream};
use livetalk::config::{FlagOverrides, Settings};
use livetalk::driver::Source as _;
use livetalk::engine::{Engine, build_setup};
use livetalk::tools::{NoArgs, Registry, SmartHome, Tool, ToolError, ToolLimits, builtin_registry};
use livetalk_live::session::ReconnectPolicy;
use livetalk_live::{ApiVersion, Auth, ConnectOptions, Endpoint};
use livetalk_mock::ws_server::ConnectionLimits;
use livetalk_mock::{Fault, FaultAction, MockOptions, MockServer, Moment, Scenario};
use serde_json::Value;

/// How long a scenario waits for the app to reach a state before it fails.
pub const REACH: Duration = Duration::from_secs(20);

/// How long a harness gives its engine to connect to the embedded mock.
const CONNECT: Duration = Duration::from_secs(5);

/// Fast backoff so failure paths finish quickly; the budget and the logic are the real ones.
pub fn test_policy(max_attempts: u32) -> ReconnectPolicy {
    ReconnectPolicy {
        max_attempts,
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
        ..ReconnectPolicy::default()
    }
}

/// The settings of a run with an empty config file and no environment: the defaults.
pub fn default_settings() -> Settings {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let flags = FlagOverrides {
        config: Some(config),
        ..FlagOverrides::default()
    };
    Settings::resolve(&flags, &|_| None).unwrap()
}

/// The embedded mock on loopback, speaking 20× faster than real time, running `faults`.
pub async fn fast_mock(faults: Vec<Fault>) -> MockServer {
    MockServer::start(MockOptions {
        speed: 20.0,
        scenario: Scenario::new(faults),
        ..MockOptions::loopback()
    })
    .await
    .unwrap()
}

/// At user turn `turn`, the mock model calls `name` with `args`, once.
pub fn tool_calls_at(turn: u32, name: &str, args: Value) -> Fault {
    Fault::once(
        Moment::UserTurn,
        turn,
        FaultAction::ToolCalls {
            name: name.to_owned(),
            args,
            count: 1,
        },
    )
}

/// Connects `engine` to the embedded `mock` with the setup `settings` and `registry` declare.
pub async fn connect(
    engine: &mut Engine,
    mock: &MockServer,
    settings: &Settings,
    registry: &Registry,
    connect_timeout: Duration,
) {
    engine
        .connect(ConnectOptions {
            endpoint: mock.endpoint(ApiVersion::V1),
            auth: Auth::None,
            setup: build_setup(settings, registry),
            connect_timeout,
        })
        .await
        .unwrap();
}

/// Feeds `engine`'s messages to `app` as the drive loop does (through its `apply`) until
/// `done` holds; panics with `what` and the app's state after `timeout`.
pub async fn run_until(
    app: &mut App,
    engine: &mut Engine,
    timeout: Duration,
    what: &str,
    done: impl Fn(&App) -> bool,
) {
    let reached = tokio::time::timeout(timeout, async {
        while !done(app) {
            let Some(msg) = engine.next().await else {
                return;
            };
            livetalk::driver::apply(app, engine, msg).await;
        }
    })
    .await;
    assert!(
        reached.is_ok() && done(app),
        "never reached: {what}\nconnection: {:?}\ntranscript: {:#?}\nnotices: {:#?}",
        app.connection(),
        app.transcript(),
        app.notices()
    );
}

/// A tool that never finishes on its own.
pub struct Hang;

impl Tool for Hang {
    type Args = NoArgs;

    fn name(&self) -> &'static str {
        "hang"
    }

    fn description(&self) -> &'static str {
        "Never returns."
    }

    async fn call(&self, _args: NoArgs) -> Result<Value, ToolError> {
        std::future::pending().await
    }
}

impl Hang {
    /// A registry of this tool alone, whose calls time out after `timeout`.
    pub fn registry(timeout: Duration) -> Registry {
        let mut registry = Registry::new(ToolLimits {
            timeout,
            ..ToolLimits::default()
        });
        registry.register(Hang);
        registry
    }
}

/// A bridge on a free loopback port in front of `upstream`, with the defaults of
/// `livetalk serve` and no token.
pub fn bridge_options(upstream: Endpoint) -> BridgeOptions {
    BridgeOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        upstream: Upstream {
            endpoint: upstream,
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            offline: true,
        },
        token: None,
        max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        limits: ConnectionLimits::default(),
        webrtc: Default::default(),
        drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        record: None,
    }
}

pub struct Harness {
    pub mock: MockServer,
    pub engine: Engine,
    pub app: App,
    pub home: SmartHome,
}

impl Harness {
    pub async fn start(faults: Vec<Fault>) -> Harness {
        Harness::start_with(faults, test_policy(4), None).await
    }

    pub async fn start_with(
        faults: Vec<Fault>,
        policy: ReconnectPolicy,
        registry: Option<Registry>,
    ) -> Harness {
        let settings = default_settings();
        let mock = fast_mock(faults).await;
        let home = SmartHome::new();
        let registry = Arc::new(registry.unwrap_or_else(|| {
            builtin_registry(&settings.tools_enabled, settings.tool_limits, home.clone()).unwrap()
        }));
        let mut engine = Engine::new(registry, &home, livetalk::tools::Decider::Person);
        engine.set_reconnect_policy(policy);
        let app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
        Harness::ready(&settings, mock, engine, app, home).await
    }

    /// Connects `engine` (its tools as they are now) to `mock` and feeds `app` until it is
    /// ready for the user.
    pub async fn ready(
        settings: &Settings,
        mock: MockServer,
        mut engine: Engine,
        app: App,
        home: SmartHome,
    ) -> Harness {
        let registry = engine.registry();
        connect(&mut engine, &mock, settings, &registry, CONNECT).await;
        let mut harness = Harness {
            mock,
            engine,
            app,
            home,
        };
        harness.until_ready().await;
        harness
    }

    /// Applies a message as the drive loop does (intents included).
    pub async fn apply(&mut self, msg: Msg) {
        livetalk::driver::apply(&mut self.app, &mut self.engine, msg).await;
    }

    /// Feeds the app until `done` holds; panics with the history after [`REACH`].
    pub async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        run_until(&mut self.app, &mut self.engine, REACH, what, done).await;
    }

    pub async fn until_ready(&mut self) {
        self.until("ready for the user", App::ready_for_user).await;
    }

    pub async fn say(&mut self, line: &str) {
        self.until_ready().await;
        self.apply(Msg::UserText(line.into())).await;
        self.until_ready().await;
    }

    pub fn replies(&self) -> Vec<(String, ModelTurnStatus)> {
        super::replies(&self.app)
    }

    pub fn last_reply(&self) -> String {
        self.replies()
            .last()
            .map(|r| r.0.clone())
            .unwrap_or_default()
    }

    pub fn calls(&self) -> Vec<(String, Value, ToolState)> {
        self.app
            .tool_calls()
            .iter()
            .map(|c| (c.name.clone(), c.args.clone(), c.state.clone()))
            .collect()
    }

    pub fn notices(&self, level: NoticeLevel) -> Vec<String> {
        self.app
            .notices()
            .iter()
            .filter(|n| n.level == level)
            .map(|n| n.text.clone())
            .collect()
    }
}
