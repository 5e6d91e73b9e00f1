//! Fault scenarios for the mock: goAways, drops, closes, bad frames, stalls and failing
//! resumption, scripted at chosen moments of a conversation, and the clock that counts those
//! moments across a server's connections.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// A moment in a conversation at which faults can fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// A `setup` arrived; `setupComplete` is not sent yet.
    Setup,
    /// A `setup` with a resumption handle arrived (fires before the handle is looked up).
    Resume,
    /// A complete user turn (text, or the end of speech) arrived; the model has not acted.
    UserTurn,
    /// A `toolCall` was sent.
    ToolCall,
    /// A `toolResponse` answered the last open call; the model has not gone on yet.
    ToolResponse,
    /// The first chunk of a reply was sent; the rest is still streaming.
    MidReply,
    /// The first words of a reply (its first transcription fragment, or its first text part)
    /// were sent; the rest is still streaming. Unlike `MidReply`, which with audio comes
    /// before any words, a fault here leaves the client something of the reply to show.
    ReplyText,
    /// A `turnComplete` (and the resumption update, if any) was sent.
    TurnComplete,
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// `goAway {timeLeft}`, then close with this code and reason once the time is up (unless
    /// the client left first).
    GoAway {
        /// The `timeLeft` the message announces, and the wait before the close.
        time_left: Duration,
        /// The close code (the service uses 1008).
        code: u16,
        /// The close reason (the service's is "The operation was aborted.").
        reason: String,
    },
    /// Abrupt TCP drop: no close frame.
    Drop,
    /// A close frame with any code and reason.
    Close {
        /// The close code.
        code: u16,
        /// The close reason (cut to the 123 bytes a close frame holds).
        reason: String,
    },
    /// A truncated JSON text frame.
    MalformedJson,
    /// A well-formed message with a top-level key no client knows.
    UnknownMessage,
    /// A binary frame of about this many bytes: one huge (silent) audio chunk.
    HugeMessage {
        /// The frame's size.
        bytes: usize,
    },
    /// A binary frame of this many bytes that is not UTF-8.
    Garbage {
        /// The frame's size.
        bytes: usize,
    },
    /// This text, verbatim, as one text frame.
    Raw {
        /// The frame's text.
        text: String,
    },
    /// JSON nested this deep inside a `serverContent`.
    DeepJson {
        /// How many arrays deep.
        depth: usize,
    },
    /// Send nothing for this long (requests are still read and answered afterwards).
    Stall {
        /// How long nothing is sent.
        duration: Duration,
    },
    /// Stream replies this many times slower from now on, on this connection.
    Slow {
        /// How many times slower (at least 1).
        factor: f64,
    },
    /// `interrupted` mid-turn, then `turnComplete` (unanswered calls are cancelled).
    Interrupt,
    /// `toolCallCancellation` for every unanswered call, then the turn ends.
    CancelToolCalls,
    /// A `sessionResumptionUpdate` with this handle (one the mock never issued is stale).
    ResumptionUpdate {
        /// The `newHandle`, if any.
        handle: Option<String>,
        /// The `resumable` flag.
        resumable: bool,
    },
    /// Forget every issued handle: the next resumption is refused with 1008 "session not found".
    FailResumption,
    /// At a user turn, instead of the model's answer: one `toolCall` with `count` calls of
    /// `name` with `args`; once all are answered the model says how many answers it got.
    ToolCalls {
        /// The function called, declared or not.
        name: String,
        /// The arguments of every call, of any shape.
        args: Value,
        /// How many calls the `toolCall` holds.
        count: usize,
    },
}

impl FaultAction {
    /// True when the action replaces the model's own answer to the user turn.
    pub(crate) fn takes_over_turn(&self) -> bool {
        matches!(
            self,
            FaultAction::Drop | FaultAction::Close { .. } | FaultAction::ToolCalls { .. }
        )
    }
}

/// One scripted fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The moment it fires at.
    pub at: Moment,
    /// Fires at this occurrence of the moment (1 = the first).
    pub nth: u32,
    /// Then again every this many occurrences.
    pub every: Option<u32>,
    /// What it does.
    pub action: FaultAction,
}

impl Fault {
    /// A fault that fires once, at the `nth` occurrence of `at`.
    pub fn once(at: Moment, nth: u32, action: FaultAction) -> Self {
        Fault {
            at,
            nth: nth.max(1),
            every: None,
            action,
        }
    }

    /// A fault that fires at the `nth` occurrence and then every `every` occurrences.
    pub fn repeating(at: Moment, nth: u32, every: u32, action: FaultAction) -> Self {
        Fault {
            every: Some(every.max(1)),
            ..Fault::once(at, nth, action)
        }
    }

    fn fires_at(&self, occurrence: u32) -> bool {
        match self.every {
            _ if occurrence == self.nth => true,
            Some(every) => occurrence > self.nth && (occurrence - self.nth).is_multiple_of(every),
            None => false,
        }
    }
}

/// The default close after a goAway, as the service sends it.
pub(crate) const GO_AWAY_CLOSE_REASON: &str = "The operation was aborted.";

/// A list of faults: what [`MockOptions::scenario`](crate::MockOptions::scenario) injects.
///
/// Each fault names a [`Moment`], which occurrence of it fires the fault (`nth`, counted over
/// the whole server, across connections, so "the second turn" means the second turn of the
/// conversation even after a reconnect), optionally `every` how many further occurrences it
/// fires again, and the [`FaultAction`] to take. In a file ([`Scenario::load`]), TOML:
///
/// ```toml
/// [[fault]]
/// at = "turn_complete"   # setup | resume | user_turn | tool_call | mid_reply | reply_text | turn_complete
/// nth = 2
/// every = 3              # a goAway after the 2nd, 5th, 8th… turn
/// action = "go_away"
/// time_left_secs = 5.0   # then close 1008 "The operation was aborted." (code/reason override)
/// ```
///
/// JSON uses the same keys: `{"fault": [{"at": "user_turn", "action": "drop"}]}`. The other
/// actions and their keys: `drop`, `close` (`code`, `reason`), `malformed_json`,
/// `unknown_message`, `huge_message` (`bytes`), `garbage` (`bytes`), `raw` (`text`),
/// `deep_json` (`depth`), `stall` (`secs`), `slow` (`factor`), `interrupt`,
/// `cancel_tool_calls`, `resumption_update` (`handle`, `resumable`), `fail_resumption` and
/// `tool_calls` (`name`, `args`, `count`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    /// The faults, in the order they fire when several are due at once.
    pub faults: Vec<Fault>,
}

/// Why a scenario file could not be used. `Display` is the whole message, cause included.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read (missing, not a regular file, too large, not UTF-8).
    #[error("{0}")]
    Read(livetalk_live::file::FileError),
    /// The file is no valid scenario: its syntax, an unknown key, or a fault that is wrong.
    #[error("bad scenario {}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the fault (counted from 1) when one is.
        problem: String,
    },
}

impl Scenario {
    /// A scenario of these faults.
    pub fn new(faults: Vec<Fault>) -> Self {
        Scenario { faults }
    }

    /// Reads a scenario file: `.json` as JSON, anything else as TOML.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = livetalk_live::file::read_text(path, livetalk_live::file::FileKind::SCENARIO)
            .map_err(ScenarioError::Read)?;
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Scenario::parse(&text, json).map_err(|problem| ScenarioError::Invalid {
            path: path.to_owned(),
            problem,
        })
    }

    /// Parses scenario text (JSON or TOML); `Err` says what is wrong.
    pub(crate) fn parse(text: &str, json: bool) -> Result<Scenario, String> {
        let file: ScenarioFile = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        } else {
            toml::from_str(text).map_err(|e| e.to_string())?
        };
        let faults = file
            .fault
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                raw.validate()
                    .map_err(|e| format!("fault {}: {e}", index + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scenario { faults })
    }
}

/// Counts moments over the whole server and says which faults fire.
#[derive(Debug, Default)]
pub(crate) struct FaultClock {
    scenario: Scenario,
    seen: Mutex<HashMap<Moment, u32>>,
}

impl FaultClock {
    pub(crate) fn new(scenario: Scenario) -> Self {
        FaultClock {
            scenario,
            seen: Mutex::default(),
        }
    }

    /// Records one occurrence of `moment`; returns the actions due now, in scenario order.
    pub(crate) fn tick(&self, moment: Moment) -> Vec<FaultAction> {
        if !self.scenario.faults.iter().any(|f| f.at == moment) {
            return Vec::new();
        }
        let occurrence = {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let count = seen.entry(moment).or_insert(0);
            *count += 1;
            *count
        };
        self.scenario
            .faults
            .iter()
            .filter(|f| f.at == moment && f.fires_at(occurrence))
            .map(|f| f.action.clone())
            .collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default, alias = "faults")]
    fault: Vec<RawFault>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    at: Moment,
    nth: Option<u32>,
    every: Option<u32>,
    action: String,
    time_left_secs: Option<f64>,
    code: Option<u16>,
    reason: Option<String>,
    bytes: Option<usize>,
    secs: Option<f64>,
    factor: Option<f64>,
    text: Option<String>,
    depth: Option<usize>,
    handle: Option<String>,
    resumable: Option<bool>,
    name: Option<String>,
    args: Option<Value>,
    count: Option<usize>,
}

/// A required key of a fault, or why it is missing.
fn required<T>(value: Option<T>, key: &str) -> Result<T, String> {
    value.ok_or_else(|| format!("`{key}` is required"))
}

/// `Err(message)` unless `holds`.
fn ensure(holds: bool, message: &str) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(message.to_owned())
    }
}

impl RawFault {
    fn validate(self) -> Result<Fault, String> {
        let secs = |value: Option<f64>, key: &str| -> Result<Duration, String> {
            let value = required(value, key)?;
            ensure(
                value.is_finite() && (0.0..=3600.0).contains(&value),
                &format!("`{key}` must be between 0 and 3600 seconds"),
            )?;
            Ok(Duration::from_secs_f64(value))
        };
        let bytes = |default: usize| -> Result<usize, String> {
            let bytes = self.bytes.unwrap_or(default);
            ensure(bytes <= 64 << 20, "`bytes` must be at most 64 MiB")?;
            Ok(bytes)
        };
        let action = match self.action.as_str() {
            "go_away" => FaultAction::GoAway {
                time_left: secs(self.time_left_secs.or(Some(10.0)), "time_left_secs")?,
                code: self.code.unwrap_or(1008),
                reason: self
                    .reason
                    .clone()
                    .unwrap_or_else(|| GO_AWAY_CLOSE_REASON.to_owned()),
            },
            "drop" => FaultAction::Drop,
            "close" => FaultAction::Close {
                code: required(self.code, "code")?,
                reason: self.reason.clone().unwrap_or_default(),
            },
            "malformed_json" => FaultAction::MalformedJson,
            "unknown_message" => FaultAction::UnknownMessage,
            "huge_message" => FaultAction::HugeMessage {
                bytes: bytes(20 << 20)?,
            },
            "garbage" => FaultAction::Garbage { bytes: bytes(64)? },
            "raw" => FaultAction::Raw {
                text: required(self.text.clone(), "text")?,
            },
            "deep_json" => FaultAction::DeepJson {
                depth: self.depth.unwrap_or(10_000).min(1_000_000),
            },
            "stall" => FaultAction::Stall {
                duration: secs(self.secs, "secs")?,
            },
            "slow" => {
                let factor = required(self.factor, "factor")?;
                ensure(
                    factor.is_finite() && (1.0..=1000.0).contains(&factor),
                    "`factor` must be between 1 and 1000",
                )?;
                FaultAction::Slow { factor }
            }
            "interrupt" => FaultAction::Interrupt,
            "cancel_tool_calls" => FaultAction::CancelToolCalls,
            "resumption_update" => FaultAction::ResumptionUpdate {
                handle: self.handle.clone(),
                resumable: self.resumable.unwrap_or(true),
            },
            "fail_resumption" => FaultAction::FailResumption,
            "tool_calls" => FaultAction::ToolCalls {
                name: required(self.name.clone(), "name")?,
                args: self.args.clone().unwrap_or_else(|| serde_json::json!({})),
                count: self.count.unwrap_or(1).clamp(1, 10_000),
            },
            other => {
                return Err(format!(
                    "unknown action {other:?}; actions: go_away, drop, close, malformed_json, unknown_message, huge_message, garbage, raw, deep_json, stall, slow, interrupt, cancel_tool_calls, resumption_update, fail_resumption, tool_calls"
                ));
            }
        };
        ensure(self.nth != Some(0), "`nth` counts from 1")?;
        ensure(self.every != Some(0), "`every` must be at least 1")?;
        Ok(Fault {
            at: self.at,
            nth: self.nth.unwrap_or(1),
            every: self.every,
            action,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_json_scenarios_parse_to_the_same_faults() {
        let toml = r#"
            [[fault]]
            at = "turn_complete"
            nth = 2
            every = 3
            action = "go_away"
            time_left_secs = 1.5

            [[fault]]
            at = "user_turn"
            action = "close"
            code = 1011
            reason = "Internal error encountered."
        "#;
        let json = r#"{"fault": [
            {"at": "turn_complete", "nth": 2, "every": 3, "action": "go_away", "time_left_secs": 1.5},
            {"at": "user_turn", "action": "close", "code": 1011, "reason": "Internal error encountered."}
        ]}"#;
        let from_toml = Scenario::parse(toml, false).unwrap();
        let from_json = Scenario::parse(json, true).unwrap();
        assert_eq!(from_toml, from_json);
        assert_eq!(
            from_toml.faults[0],
            Fault::repeating(
                Moment::TurnComplete,
                2,
                3,
                FaultAction::GoAway {
                    time_left: Duration::from_millis(1500),
                    code: 1008,
                    reason: GO_AWAY_CLOSE_REASON.into()
                }
            )
        );
    }

    #[test]
    fn bad_scenarios_say_which_fault_and_why() {
        let error = Scenario::parse("[[fault]]\nat = \"setup\"\naction = \"explode\"\n", false)
            .unwrap_err();
        let text = format!("{error:#}");
        assert!(
            text.contains("fault 1") && text.contains("unknown action \"explode\""),
            "{text}"
        );
        let error =
            Scenario::parse("[[fault]]\nat = \"setup\"\naction = \"close\"\n", false).unwrap_err();
        assert!(format!("{error:#}").contains("`code` is required"));
        assert!(Scenario::parse("[[fault]]\nat = \"lunch\"\naction = \"drop\"\n", false).is_err());
        let words = Scenario::parse(
            "[[fault]]\nat = \"reply_text\"\naction = \"interrupt\"\n",
            false,
        )
        .unwrap();
        assert_eq!(
            words.faults,
            vec![Fault::once(Moment::ReplyText, 1, FaultAction::Interrupt)]
        );
    }

    #[test]
    fn the_clock_fires_at_the_nth_and_then_every_nth_occurrence() {
        let clock = FaultClock::new(Scenario::new(vec![
            Fault::repeating(Moment::TurnComplete, 2, 3, FaultAction::Interrupt),
            Fault::once(Moment::UserTurn, 1, FaultAction::Drop),
        ]));
        let fired: Vec<bool> = (1..=9)
            .map(|_| !clock.tick(Moment::TurnComplete).is_empty())
            .collect();
        assert_eq!(
            fired,
            [false, true, false, false, true, false, false, true, false]
        );
        assert_eq!(clock.tick(Moment::UserTurn), vec![FaultAction::Drop]);
        assert!(clock.tick(Moment::UserTurn).is_empty(), "once means once");
        assert!(clock.tick(Moment::Setup).is_empty());
    }
}
