//! What the proxy tells its presenter about each app connection: one [`ProxyEvent`] per frame,
//! per turn, per tool call and per warning, with the connection's open and close; how each is
//! printed as a conversation line (`--headless`) or as one JSON object (`--json`).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the app to the Live server.
    Send,
    /// From the Live server to the app.
    Recv,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Recv => "recv",
        }
    }
}

/// A problem visible on an app's wire. Each has one name, in `--json`, the recording and the
/// guide (docs/proxy.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// A tool call not answered within `--tool-timeout` (and not cancelled by the service).
    ToolNotAnswered,
    /// A tool call answered a second time.
    ToolAnsweredTwice,
    /// A tool answer whose id the service never issued.
    ToolUnknownId,
    /// A `goAway` came, and the connection ended before the app had opened another.
    GoAwayIgnored,
    /// A model turn sent nothing for longer than the stall limit before its `turnComplete`.
    TurnStalled,
    /// A turn completed with nothing generated.
    EmptyTurn,
    /// The service refused the setup (closed before `setupComplete`, or refused the upgrade).
    SetupRefused,
    /// Mic audio sent faster than real time.
    AudioTooFast,
    /// Mic audio at a rate its MIME type does not declare.
    AudioRate,
    /// A field the model in use does not accept (the mock's per-model rules).
    FieldNotAccepted,
    /// A frame livetalk could not read (passed on all the same).
    UnparsedFrame,
    /// One side stopped reading: the proxy closed the connection both ways.
    StalledReader,
}

impl WarningKind {
    pub const ALL: [WarningKind; 12] = [
        WarningKind::ToolNotAnswered,
        WarningKind::ToolAnsweredTwice,
        WarningKind::ToolUnknownId,
        WarningKind::GoAwayIgnored,
        WarningKind::TurnStalled,
        WarningKind::EmptyTurn,
        WarningKind::SetupRefused,
        WarningKind::AudioTooFast,
        WarningKind::AudioRate,
        WarningKind::FieldNotAccepted,
        WarningKind::UnparsedFrame,
        WarningKind::StalledReader,
    ];

    /// Its name in `--json`, the recording and the guide.
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::ToolNotAnswered => "tool_not_answered",
            WarningKind::ToolAnsweredTwice => "tool_answered_twice",
            WarningKind::ToolUnknownId => "tool_unknown_id",
            WarningKind::GoAwayIgnored => "go_away_ignored",
            WarningKind::TurnStalled => "turn_stalled",
            WarningKind::EmptyTurn => "empty_turn",
            WarningKind::SetupRefused => "setup_refused",
            WarningKind::AudioTooFast => "audio_too_fast",
            WarningKind::AudioRate => "audio_rate",
            WarningKind::FieldNotAccepted => "field_not_accepted",
            WarningKind::UnparsedFrame => "unparsed_frame",
            WarningKind::StalledReader => "stalled_reader",
        }
    }
}

/// The added delay of a connection's frames, one direction: how many, and the median and
/// 99th percentile in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DelayFigures {
    pub frames: u64,
    pub p50_us: u64,
    pub p99_us: u64,
}

impl DelayFigures {
    fn json(&self) -> Value {
        json!({"frames": self.frames, "p50_us": self.p50_us, "p99_us": self.p99_us})
    }
}

/// Something that happened on one app connection.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// An app connected; `path` is what it asked for, secrets scrubbed.
    Opened {
        peer: SocketAddr,
        path: String,
        upstream: String,
        /// The app sent no key or token, so the proxy's own key went upstream.
        proxy_key: bool,
    },
    /// A frame went through.
    Frame {
        dir: Direction,
        binary: bool,
        bytes: usize,
        /// The message's top-level fields as the wire spells them (empty when unreadable).
        kinds: Vec<String>,
        /// What the proxy added: from the frame read whole to it written on.
        delay_us: u64,
    },
    /// The app's session was set up by the service.
    SetUp {
        model: String,
    },
    /// The app sent a typed turn.
    UserText(String),
    /// The model called a tool.
    ToolCall {
        id: String,
        name: String,
        args: String,
    },
    /// The app answered a call, this long after it was made.
    ToolAnswered {
        id: String,
        name: String,
        after: Duration,
    },
    /// A model turn ended.
    Turn {
        /// What the model said in it (text, or the transcript of its voice).
        model: String,
        /// What was heard of the user (input transcription), if anything.
        heard: String,
        tool_calls: usize,
        audio_out: Duration,
        audio_in: Duration,
        interrupted: bool,
    },
    Warning {
        kind: WarningKind,
        message: String,
    },
    /// What the proxy itself has to say about a connection (its recording could not be made).
    Notice(String),
    /// The connection is over.
    Closed {
        code: Option<u16>,
        reason: String,
        /// `app`, `upstream` or `proxy`: who ended it.
        by: &'static str,
        send: DelayFigures,
        recv: DelayFigures,
    },
    /// The presenter fell behind and this many events were not shown (flags and the
    /// recording are unaffected).
    Dropped(u64),
}

/// One event of connection `conn`, `t` seconds after the proxy started.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyEvent {
    pub conn: u64,
    pub t: f64,
    pub kind: EventKind,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl ProxyEvent {
    /// The event as one JSON object (`--json`); every field a scrubbed value.
    pub fn json(&self) -> Value {
        let (name, mut body) = match &self.kind {
            EventKind::Opened {
                peer,
                path,
                upstream,
                proxy_key,
            } => (
                "open",
                json!({"peer": peer.to_string(), "path": path, "upstream": upstream, "proxy_key": proxy_key}),
            ),
            EventKind::Frame {
                dir,
                binary,
                bytes,
                kinds,
                delay_us,
            } => (
                "frame",
                json!({"dir": dir.name(), "type": if *binary {"binary"} else {"text"}, "bytes": bytes, "kinds": kinds, "delay_us": delay_us}),
            ),
            EventKind::SetUp { model } => ("setup_complete", json!({"model": model})),
            EventKind::UserText(text) => ("user_text", json!({"text": text})),
            EventKind::ToolCall { id, name, args } => {
                ("tool_call", json!({"id": id, "name": name, "args": args}))
            }
            EventKind::ToolAnswered { id, name, after } => (
                "tool_answered",
                json!({"id": id, "name": name, "after_ms": ms(*after)}),
            ),
            EventKind::Turn {
                model,
                heard,
                tool_calls,
                audio_out,
                audio_in,
                interrupted,
            } => (
                "turn",
                json!({"model": model, "heard": heard, "tool_calls": tool_calls, "audio_out_ms": ms(*audio_out), "audio_in_ms": ms(*audio_in), "interrupted": interrupted}),
            ),
            EventKind::Warning { kind, message } => {
                ("warning", json!({"kind": kind.name(), "message": message}))
            }
            EventKind::Closed {
                code,
                reason,
                by,
                send,
                recv,
            } => (
                "close",
                json!({"code": code, "reason": reason, "by": by, "delay": {"send": send.json(), "recv": recv.json()}}),
            ),
            EventKind::Notice(message) => ("notice", json!({"message": message})),
            EventKind::Dropped(count) => ("dropped", json!({"events": count})),
        };
        if let Value::Object(fields) = &mut body {
            let mut all = serde_json::Map::new();
            all.insert("event".into(), name.into());
            all.insert("conn".into(), self.conn.into());
            all.insert("t".into(), json!((self.t * 1e6).round() / 1e6));
            all.append(fields);
            return Value::Object(all);
        }
        body
    }

    /// The event as a conversation line (`--headless`), or `None` for what only `--json`
    /// shows (each frame).
    pub fn line(&self) -> Option<String> {
        let c = self.conn;
        let text = match &self.kind {
            EventKind::Opened {
                peer,
                path,
                upstream,
                proxy_key,
            } => format!(
                "[{c}] app {peer} connected: {path} (upstream {upstream}{})",
                if *proxy_key {
                    ", with the proxy's key"
                } else {
                    ""
                }
            ),
            EventKind::Frame { .. } => return None,
            EventKind::SetUp { model } => format!("[{c}] session set up ({model})"),
            EventKind::UserText(text) => format!("[{c}] you: {text}"),
            EventKind::ToolCall { name, args, .. } => format!("[{c}] tool call: {name}({args})"),
            EventKind::ToolAnswered { name, after, .. } => {
                format!(
                    "[{c}] tool answered by the app: {name} after {} ms",
                    ms(*after)
                )
            }
            EventKind::Turn {
                model,
                heard,
                tool_calls,
                audio_out,
                interrupted,
                ..
            } => {
                let mut line = String::new();
                if !heard.is_empty() {
                    line.push_str(&format!("[{c}] heard: {heard}\n"));
                }
                let said = if model.is_empty() && !audio_out.is_zero() {
                    format!("({:.1} s of audio)", audio_out.as_secs_f64())
                } else {
                    model.clone()
                };
                line.push_str(&format!("[{c}] gemini: {said}"));
                if *tool_calls > 0 {
                    line.push_str(&format!(" [{tool_calls} tool call(s)]"));
                }
                if *interrupted {
                    line.push_str(" [interrupted]");
                }
                line
            }
            EventKind::Warning { kind, message } => {
                format!("[{c}] warning ({}): {message}", kind.name())
            }
            EventKind::Closed {
                code,
                reason,
                by,
                send,
                recv,
            } => {
                let code = code.map_or("no code".to_owned(), |c| c.to_string());
                let reason = if reason.is_empty() {
                    String::new()
                } else {
                    format!(" \"{reason}\"")
                };
                format!(
                    "[{c}] closed by the {by}: {code}{reason}; added delay p50 {:.3} ms, p99 {:.3} ms ({} frames)",
                    send.p50_us.max(recv.p50_us) as f64 / 1e3,
                    send.p99_us.max(recv.p99_us) as f64 / 1e3,
                    send.frames + recv.frames
                )
            }
            EventKind::Notice(message) => format!("[{c}] livetalk proxy: {message}"),
            EventKind::Dropped(count) => {
                format!("livetalk proxy: {count} events not shown (the output fell behind)")
            }
        };
        Some(text)
    }
}

/// A log of the added delay per frame, in buckets an eighth of a power of two wide (within
/// 9 % of the true value), so a connection of hours costs a few hundred counters.
#[derive(Debug, Clone)]
pub struct DelayLog {
    buckets: Vec<u64>,
    frames: u64,
}

const SUB_BUCKETS: f64 = 8.0;
const BUCKETS: usize = 8 * 40;

impl Default for DelayLog {
    fn default() -> Self {
        DelayLog {
            buckets: vec![0; BUCKETS],
            frames: 0,
        }
    }
}

impl DelayLog {
    pub fn add(&mut self, delay: Duration) {
        let us = delay.as_secs_f64() * 1e6;
        let bucket = if us < 1.0 {
            0
        } else {
            ((us.log2() * SUB_BUCKETS) as usize + 1).min(BUCKETS - 1)
        };
        self.buckets[bucket] += 1;
        self.frames += 1;
    }

    /// The value at quantile `q` (0 to 1), in microseconds: the middle of its bucket.
    fn quantile(&self, q: f64) -> u64 {
        if self.frames == 0 {
            return 0;
        }
        let rank = ((self.frames as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                if i == 0 {
                    return 0;
                }
                let low = 2f64.powf((i - 1) as f64 / SUB_BUCKETS);
                let high = 2f64.powf(i as f64 / SUB_BUCKETS);
                return ((low + high) / 2.0).round() as u64;
            }
        }
        0
    }

    pub fn figures(&self) -> DelayFigures {
        DelayFigures {
            frames: self.frames,
            p50_us: self.quantile(0.5),
            p99_us: self.quantile(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_quantiles_are_within_a_bucket() {
        let mut log = DelayLog::default();
        for _ in 0..98 {
            log.add(Duration::from_micros(100));
        }
        log.add(Duration::from_micros(900));
        log.add(Duration::from_millis(5));
        let figures = log.figures();
        assert_eq!(figures.frames, 100);
        assert!((91..=110).contains(&figures.p50_us), "{figures:?}");
        assert!((820..=980).contains(&figures.p99_us), "{figures:?}");
    }

    #[test]
    fn every_event_is_one_json_object_with_its_connection_and_time() {
        let event = ProxyEvent {
            conn: 3,
            t: 1.5,
            kind: EventKind::Warning {
                kind: WarningKind::EmptyTurn,
                message: "nothing".into(),
            },
        };
        let value = event.json();
        assert_eq!(value["event"], "warning");
        assert_eq!(value["conn"], 3);
        assert_eq!(value["kind"], "empty_turn");
        assert!(event.line().unwrap().contains("empty_turn"));
        let names: std::collections::HashSet<_> =
            WarningKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), WarningKind::ALL.len());
    }
}
