//! An in-process client for scenario tests: the library's engine and app over a real
//! loopback socket to the embedded mock running a fault scenario.

use std::sync::Arc;
use std::time::Duration;

use livetalk::app::{App, AppInit, ModelTurnStatus, Msg, NoticeLevel, ToolState};
use livetalk::config::{FlagOverrides, Settings};
use livetalk::driver::Source as _;
use livetalk::engine::{Engine, build_setup};
use livetalk::tools::{Registry, SmartHome, builtin_registry};
use livetalk_live::session::ReconnectPolicy;
use livetalk_live::{ApiVersion, Auth, ConnectOptions};
use livetalk_mock::{Fault, MockOptions, MockServer, Scenario};
use serde_json::Value;

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
        let mut engine = Engine::new(registry.clone(), &home, livetalk::tools::Decider::Person);
        engine.set_reconnect_policy(policy);
        let app = App::new(AppInit::new(settings.model.clone(), true, home.snapshot()));
        engine
            .connect(ConnectOptions {
                endpoint: mock.endpoint(ApiVersion::V1),
                auth: Auth::None,
                setup: build_setup(&settings, &registry),
                connect_timeout: Duration::from_secs(5),
            })
            .await
            .unwrap();
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

    /// Feeds the app until `done` holds; panics with the history after 20 s.
    pub async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        let reached = tokio::time::timeout(Duration::from_secs(20), async {
            while !done(&self.app) {
                let Some(msg) = self.engine.next().await else {
                    return;
                };
                self.apply(msg).await;
            }
        })
        .await;
        assert!(
            reached.is_ok() && done(&self.app),
            "never reached: {what}\nconnection: {:?}\ntranscript: {:#?}\nnotices: {:#?}",
            self.app.connection(),
            self.app.transcript(),
            self.app.notices()
        );
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
