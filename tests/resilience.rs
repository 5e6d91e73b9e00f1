//! Session lifetime scenarios over real loopback sockets: the library's engine and app against
//! the embedded mock running a fault scenario. goAway → seamless resumption mid-conversation;
//! network drop → automatic recovery; bad key / unknown model → one clear message, no retry
//! storm; stale handle → fresh session with a notice; the retry budget; the tool-call guard;
//! a handle resumes only under the key it was issued for.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::harness::{Hang, Harness, test_policy, tool_calls_at};
use common::ws::JsonSocket;
use livetalk::app::{App, ConnectionState, ModelTurnStatus, Msg, NoticeLevel, ToolState};
use livetalk::driver::Source as _;
use livetalk_live::ApiVersion;
use livetalk_live::endpoint::standard_path;
use livetalk_mock::{Fault, FaultAction, MockOptions, MockServer, Moment};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

fn go_away(secs: f64) -> FaultAction {
    FaultAction::GoAway {
        time_left: Duration::from_secs_f64(secs),
        code: 1008,
        reason: "The operation was aborted.".into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn go_away_resumes_seamlessly_and_the_model_still_knows_earlier_tool_results() {
    let mut h = Harness::start(vec![Fault::once(Moment::TurnComplete, 1, go_away(5.0))]).await;
    h.say("What's the kitchen thermostat set to?").await;
    assert!(h.last_reply().contains("20"), "{}", h.last_reply());

    // The goAway came with the turn's end: the hand-over happens at once.
    h.until("the hand-over", |app| {
        (app.reconnects(), app.handovers()) == (0, 1)
            && *app.connection() == ConnectionState::Connected
    })
    .await;
    assert_eq!(h.mock.connections(), 2);
    assert_eq!(
        h.mock.resumptions(),
        1,
        "the new connection resumed by handle"
    );

    // Warmer than the 20 °C read before the hand-over: a model that remembers the tool result
    // sets 22 °C at once; one that forgot must read the thermostat again first.
    h.say("Make it warmer.").await;
    let calls = h.calls();
    assert_eq!(calls.len(), 2, "no second reading: {calls:?}");
    assert_eq!(calls[1].0, "set_device_status", "{calls:?}");
    assert_eq!(calls[1].1["device_name"], "kitchen thermostat");
    assert_eq!(
        calls[1].1["setting"]["temperature_celsius"],
        json!(22),
        "{calls:?}"
    );
    assert!(h.last_reply().contains("22"), "{}", h.last_reply());
    assert!(h.replies().iter().all(|r| r.1 == ModelTurnStatus::Complete));

    assert!(
        h.notices(NoticeLevel::Error).is_empty(),
        "{:?}",
        h.app.notices()
    );
    assert!(
        h.notices(NoticeLevel::Info)
            .contains(&"Reconnected; the conversation continues.".to_owned())
    );
    let figures = h.engine.session_status().figures();
    assert_eq!((figures.connections, figures.resumed), (2, 1));
    assert_eq!(figures.queued, 0, "nothing left unsent");
    assert_eq!(h.mock.stray_tool_responses(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_away_mid_reply_waits_for_the_turn_boundary() {
    let mut h = Harness::start(vec![Fault::once(Moment::MidReply, 1, go_away(20.0))]).await;
    h.say("What's the kitchen thermostat set to?").await;
    h.until("the hand-over", |app| {
        (app.reconnects(), app.handovers()) == (0, 1)
            && *app.connection() == ConnectionState::Connected
    })
    .await;
    let replies = h.replies();
    assert_eq!(replies.len(), 1);
    assert_eq!(
        replies[0].1,
        ModelTurnStatus::Complete,
        "the reply was not cut: {replies:?}"
    );
    assert!(replies[0].0.contains("20"), "{replies:?}");
    h.say("Make it warmer.").await;
    assert!(h.last_reply().contains("22"), "{}", h.last_reply());
}

#[tokio::test(flavor = "multi_thread")]
async fn when_a_turn_outlasts_the_go_away_the_deadline_moves_anyway() {
    // A reply slowed far beyond timeLeft: waiting for its end would hit the server's close.
    let mut h = Harness::start(vec![
        Fault::once(Moment::MidReply, 1, FaultAction::Slow { factor: 200.0 }),
        Fault::once(Moment::MidReply, 1, go_away(0.4)),
    ])
    .await;
    h.apply(Msg::UserText(
        "What's the kitchen thermostat set to?".into(),
    ))
    .await;
    h.until("the forced hand-over", |app| {
        (app.reconnects(), app.handovers()) == (0, 1)
            && *app.connection() == ConnectionState::Connected
    })
    .await;
    h.until_ready().await;
    // The reply had started (audio came) but was cut by the move, not finished.
    assert!(h.app.model_audio_bytes() > 0);
    let replies = h.replies();
    assert!(
        replies.iter().all(|r| r.1 == ModelTurnStatus::Interrupted),
        "{replies:?}"
    );
    assert_eq!(h.mock.resumptions(), 1);
    h.say("Is the front door locked?").await;
    assert!(h.last_reply().contains("front door"), "{}", h.last_reply());
    assert!(
        h.notices(NoticeLevel::Error).is_empty(),
        "{:?}",
        h.app.notices()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_network_drop_recovers_and_the_unanswered_turn_is_answered() {
    // The second user turn is lost with the connection before the model answers it.
    let mut h = Harness::start(vec![Fault::once(Moment::UserTurn, 2, FaultAction::Drop)]).await;
    h.say("What's the kitchen thermostat set to?").await;
    h.say("Make it warmer.").await;

    assert_eq!(h.app.reconnects(), 1);
    assert_eq!(*h.app.connection(), ConnectionState::Connected);
    assert_eq!((h.mock.connections(), h.mock.resumptions()), (2, 1));
    assert!(h.last_reply().contains("22"), "{:?}", h.replies());
    let warnings = h.notices(NoticeLevel::Warning);
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("Connection lost: The connection was lost")),
        "{warnings:?}"
    );
    assert!(
        h.notices(NoticeLevel::Error).is_empty(),
        "{:?}",
        h.app.notices()
    );
    assert_eq!(h.mock.stray_tool_responses(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_key_or_unknown_model_on_reconnect_is_one_clear_message_and_no_retry_storm() {
    let cases = [
        (
            1007,
            "API key not valid. Please pass a valid API key.",
            "The API key was rejected (1007): API key not valid. Please pass a valid API key. Check GEMINI_API_KEY",
        ),
        (
            1008,
            "models/gemini-nope is not found for API version v1, or is not supported for bidiGenerateContent. Call ListModels",
            "Check `model` and `api_version`",
        ),
    ];
    for (code, reason, expected) in cases {
        let mut h = Harness::start(vec![
            Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
            Fault::once(
                Moment::Setup,
                2,
                FaultAction::Close {
                    code,
                    reason: reason.into(),
                },
            ),
        ])
        .await;
        h.say("What's the kitchen thermostat set to?").await;
        h.until("the end", App::is_finished).await;
        // Let any (wrong) further attempt show up before counting.
        assert!(h.engine.next().await.is_none(), "the engine has stopped");
        assert_eq!(h.mock.connections(), 2, "one reconnect attempt, no storm");
        let errors = h.notices(NoticeLevel::Error);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains(expected), "{errors:?}");
        assert!(h.app.can_retry());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_handle_falls_back_to_a_fresh_session_with_a_notice() {
    let mut h = Harness::start(vec![
        Fault::once(Moment::TurnComplete, 1, FaultAction::FailResumption),
        Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
    ])
    .await;
    h.say("What's the kitchen thermostat set to?").await;
    h.until("a fresh session", |app| {
        *app.connection() == ConnectionState::Connected && app.reconnects() == 1
    })
    .await;
    let warnings = h.notices(NoticeLevel::Warning);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("session not found") && w.contains("Starting a fresh session")),
        "{warnings:?}"
    );
    assert_eq!(h.mock.connections(), 3, "refused resume, then fresh");
    assert_eq!(h.mock.resumptions(), 0);
    assert_eq!(h.engine.session_status().figures().fresh_fallbacks, 1);
    // The fresh model has forgotten the 20 °C it read, so it reads the thermostat again:
    // proof the fallback was really fresh.
    h.say("Make it warmer.").await;
    let names: Vec<String> = h.calls().into_iter().map(|c| c.0).collect();
    assert_eq!(
        names,
        [
            "get_device_status",
            "get_device_status",
            "set_device_status"
        ]
    );
    assert!(h.last_reply().contains("22"), "{}", h.last_reply());
}

#[tokio::test(flavor = "multi_thread")]
async fn when_the_budget_is_spent_the_reason_shows_and_retry_reconnects() {
    let overloaded = || FaultAction::Close {
        code: 1013,
        reason: "Try again later.".into(),
    };
    let mut h = Harness::start_with(
        vec![
            Fault::once(Moment::TurnComplete, 1, FaultAction::Drop),
            Fault::once(Moment::Setup, 2, overloaded()),
            Fault::once(Moment::Setup, 3, overloaded()),
        ],
        test_policy(2),
        None,
    )
    .await;
    h.say("What's the kitchen thermostat set to?").await;
    h.until("giving up", App::is_finished).await;
    let errors = h.notices(NoticeLevel::Error);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "Gave up reconnecting after 2 attempts. Last error: The server is overloaded (1013)"
        ),
        "{errors:?}"
    );
    assert_eq!(h.mock.connections(), 3);

    // The retry key: the link comes back and resumes.
    assert!(h.app.can_retry());
    h.apply(Msg::Retry).await;
    h.until("connected again", |app| {
        *app.connection() == ConnectionState::Connected
    })
    .await;
    assert_eq!(h.mock.resumptions(), 1);
    h.say("Make it warmer.").await;
    assert!(h.last_reply().contains("22"), "{}", h.last_reply());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_call_is_flagged_then_answered_once_with_an_error() {
    let registry = Hang::registry(Duration::from_millis(900));
    let mut h = Harness::start_with(
        vec![tool_calls_at(1, "hang", json!({}))],
        test_policy(2),
        Some(registry),
    )
    .await;
    h.apply(Msg::UserText("Please do the slow thing.".into()))
        .await;
    h.until("the watchdog", |app| {
        app.tool_calls().first().is_some_and(|c| c.slow)
    })
    .await;
    assert_eq!(h.app.tool_calls()[0].state, ToolState::Running);
    assert!(
        h.notices(NoticeLevel::Warning)
            .iter()
            .any(|w| w.starts_with("hang has been running for 0.")),
        "{:?}",
        h.app.notices()
    );
    h.until_ready().await;
    assert_eq!(h.app.tool_calls()[0].state, ToolState::TimedOut);
    assert_eq!(
        h.last_reply(),
        "I made 1 tool calls and got 1 answers, 1 of them errors."
    );
    assert_eq!(h.mock.stray_tool_responses(), 0);
    drop(h.home);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_running_when_its_connection_drops_is_stopped_and_never_answered_elsewhere() {
    let registry = Hang::registry(Duration::from_secs(30));
    let mut h = Harness::start_with(
        vec![
            tool_calls_at(1, "hang", json!({})),
            Fault::once(Moment::ToolCall, 1, FaultAction::Drop),
        ],
        test_policy(2),
        Some(registry),
    )
    .await;
    h.apply(Msg::UserText("Please do the slow thing.".into()))
        .await;
    h.until("the call stopped and the link back", |app| {
        app.tool_calls().first().map(|c| &c.state) == Some(&ToolState::Cancelled)
            && *app.connection() == ConnectionState::Connected
    })
    .await;
    h.until_ready().await;
    assert_eq!(h.app.reconnects(), 1);
    assert_eq!(h.mock.resumptions(), 1);
    assert_eq!(
        h.mock.stray_tool_responses(),
        0,
        "no answer reached the new connection"
    );
    assert!(h.app.tool_calls()[0].response.is_none(), "never answered");
}

/// Where a raw client puts its API key, as the two SDKs do.
enum KeyIn {
    Query(&'static str),
    Header(&'static str),
    Nowhere,
}

/// A raw client's setup asking for resumption (resuming `handle` when given). Returns the
/// first handle the mock issues, or the close code and reason that refused the setup.
async fn resumable_setup(
    mock: &MockServer,
    key: KeyIn,
    handle: Option<&str>,
) -> Result<String, (u16, String)> {
    let mut url = format!("{}{}", mock.base_url(), standard_path(ApiVersion::V1));
    if let KeyIn::Query(key) = key {
        url.push_str(&format!("?key={key}"));
    }
    let mut request = url.into_client_request().unwrap();
    if let KeyIn::Header(key) = key {
        request
            .headers_mut()
            .insert("x-goog-api-key", HeaderValue::from_static(key));
    }
    let mut client = JsonSocket::connect(request)
        .await
        .waiting(Duration::from_secs(10));
    let resumption = match handle {
        Some(handle) => json!({"handle": handle}),
        None => json!({}),
    };
    client
        .send(json!({"setup": {"model": "models/m", "sessionResumption": resumption}}))
        .await;
    let issued = |m: &Value| {
        m["sessionResumptionUpdate"]["newHandle"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
    };
    match client.until(|m| issued(m).is_some()).await {
        Ok(read) => {
            let _ = client.ws.close(None).await;
            Ok(issued(read.last().unwrap()).unwrap())
        }
        Err(closed) => Err((closed.code, closed.reason)),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumption_handle_resumes_only_under_the_key_it_was_issued_for() {
    let mock = MockServer::start(MockOptions::loopback()).await.unwrap();
    let handle = resumable_setup(&mock, KeyIn::Query("key-A"), None)
        .await
        .unwrap();
    let other = resumable_setup(&mock, KeyIn::Query("key-A"), None)
        .await
        .unwrap();
    assert_ne!(handle, other);

    // Another key, or none, is told what the service says for a handle it does not know,
    // which livetalk's client reads as "start a fresh session".
    for stranger in [
        KeyIn::Header("key-B"),
        KeyIn::Query("key-B"),
        KeyIn::Nowhere,
    ] {
        let (code, reason) = resumable_setup(&mock, stranger, Some(&handle))
            .await
            .unwrap_err();
        assert_eq!(code, 1008, "{reason}");
        assert!(reason.contains("session not found"), "{reason}");
    }
    assert_eq!(mock.resumptions(), 0);

    // The same key resumes, whichever way it is sent.
    resumable_setup(&mock, KeyIn::Header("key-A"), Some(&handle))
        .await
        .unwrap();
    resumable_setup(&mock, KeyIn::Query("key-A"), Some(&handle))
        .await
        .unwrap();
    assert_eq!(mock.resumptions(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_tool_work_is_lost_with_the_connection_is_asked_again_after_resuming() {
    // Right after the model's tool call, and right after the tool's answer: either way the
    // connection takes the model's work on the turn with it, and nothing was said yet.
    for moment in [Moment::ToolCall, Moment::ToolResponse] {
        let mut h = Harness::start(vec![Fault::once(moment, 1, FaultAction::Drop)]).await;
        h.say("What's the kitchen thermostat set to?").await;
        h.until("the question answered on the resumed session", |app| {
            common::replies(app).iter().any(|r| r.0.contains("20"))
        })
        .await;
        assert_eq!(h.app.reconnects(), 1, "{moment:?}");
        assert_eq!(h.mock.resumptions(), 1, "{moment:?}");
        assert_eq!(h.app.turns_lost(), 0, "{moment:?}");
        assert!(
            h.notices(NoticeLevel::Warning)
                .iter()
                .all(|n| !n.contains("turn was lost")),
            "{moment:?}: {:?}",
            h.app.notices()
        );
        // The conversation goes on.
        h.say("Is the front door locked?").await;
        assert!(h.last_reply().contains("front door"), "{}", h.last_reply());
    }
}

#[test]
fn headless_without_resumption_says_a_turn_was_lost_and_exits_1() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = scratch.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        "[[fault]]\nat = \"tool_response\"\naction = \"drop\"\n",
    )
    .unwrap();
    let mock = common::MockProcess::start(
        scratch.path(),
        &["--speed", "20", "--scenario", scenario.to_str().unwrap()],
    );
    let config = scratch.path().join("config.toml");
    std::fs::write(&config, "[session]\nresumption = false\n").unwrap();
    let run = common::run_livetalk(
        scratch.path(),
        &[
            "--headless",
            "--endpoint",
            &mock.url,
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        &[
            "What's the kitchen thermostat set to?",
            "Is the front door locked?",
        ],
    );
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("The last turn was lost with the connection"),
        "{}",
        run.stderr
    );
    // The next line still got its answer.
    assert!(run.stdout.contains("front door"), "{}", run.stdout);
}
