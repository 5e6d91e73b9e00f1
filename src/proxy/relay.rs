//! One app connection relayed: every frame both ways passed on unchanged (its type, bytes and
//! order, the close's code and reason), each timed from read to written, then read once for
//! the watch, the recording and the presenter. One task owns both sockets: a frame is written
//! before the next is read, so the proxy holds at most one frame per connection, and a side
//! that stops reading is closed, both ways with a reason, once a write has waited
//! `write_stall`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::{Sink, SinkExt as _, Stream, StreamExt as _};
use livetalk_live::budget::{Gate, Held, InputBudget};
use livetalk_live::codec::{DecodedServerFrame, decode_client, decode_server};
use livetalk_live::connection::WireTap as _;
use livetalk_live::{CloseInfo, Inbound};
use livetalk_mock::ws_server::{close_for_read_error, truncate_reason};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error, Message};

use super::Shared;
use super::events::{DelayLog, Direction, EventKind, WarningKind};
use super::watch::{Note, Watch, warning};
use crate::record::{WireMeta, WireRecorder};

/// How long the proxy waits for both closes once one side has closed.
const CLOSING: Duration = Duration::from_secs(2);

/// What one connection knows besides its sockets.
pub(super) struct Conn {
    pub id: u64,
    pub shared: Arc<Shared>,
    pub watch: Watch,
    pub upstream_host: String,
    pub recorder: Option<WireRecorder>,
    pub recording_tried: bool,
    pub send_delay: DelayLog,
    pub recv_delay: DelayLog,
}

/// Who ended the connection, and with what.
struct Ending {
    code: Option<u16>,
    reason: String,
    by: &'static str,
}

fn close_parts(frame: &Option<CloseFrame>) -> (Option<u16>, String) {
    match frame {
        Some(frame) => (Some(u16::from(frame.code)), frame.reason.to_string()),
        None => (None, String::new()),
    }
}

fn close_frame(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: truncate_reason(reason).into(),
    }))
}

/// Writes `message`, or says the reader stopped reading: `false` after `limit`.
async fn write<S>(sink: &mut S, message: Message, limit: Duration) -> Result<(), WriteFailed>
where
    S: Sink<Message, Error = Error> + Unpin,
{
    match tokio::time::timeout(limit, sink.send(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(WriteFailed::Gone),
        Err(_) => Err(WriteFailed::Stalled),
    }
}

enum WriteFailed {
    /// The peer is gone (its close already went, or the socket broke).
    Gone,
    /// The peer stopped reading.
    Stalled,
}

impl Conn {
    fn emit(&self, kind: EventKind) {
        if let EventKind::Warning { kind, message } = &kind
            && let Some(recorder) = &self.recorder
        {
            recorder.warning(&format!("{message} [{}]", kind.name()));
        }
        self.shared.emit(self.id, kind);
    }

    fn emit_all(&self, notes: Vec<Note>) {
        for note in notes {
            self.emit(note);
        }
    }

    /// The recording, made at the first frame the app sends (its setup names the model).
    fn record_from(&mut self, setup: Option<&livetalk_live::wire::Setup>) {
        if self.recording_tried {
            return;
        }
        self.recording_tried = true;
        let Some(dir) = &self.shared.options.record else {
            return;
        };
        let folder = dir.join(format!(
            "{}-{}",
            jiff::Zoned::now().strftime("%Y-%m-%d_%H-%M-%S"),
            self.id
        ));
        let voice = setup
            .and_then(|s| s.generation_config.as_ref())
            .and_then(|g| g.speech_config.as_ref())
            .and_then(|s| s.voice_config.as_ref())
            .and_then(|v| v.prebuilt_voice_config.as_ref())
            .map(|p| p.voice_name.clone())
            .unwrap_or_default();
        let meta = WireMeta {
            model: setup.map(|s| s.model.clone()).unwrap_or_default(),
            voice,
            endpoint_host: if self.shared.options.offline {
                "offline demo model".to_owned()
            } else {
                self.upstream_host.clone()
            },
            offline: self.shared.options.offline,
            recorded_by: "livetalk proxy",
            details: serde_json::json!({"connection": self.id}),
        };
        match WireRecorder::create(&folder, meta) {
            Ok(recorder) => {
                recorder.connecting(&self.upstream_host);
                self.recorder = Some(recorder);
            }
            Err(e) => self.shared.emit(
                self.id,
                EventKind::Notice(format!("This connection is not recorded: {e:#}")),
            ),
        }
    }

    /// What reading a frame costs, held from the process's input budget (with what its bytes
    /// held while it was read) until it has been dealt with; `None` when it cannot be, and the
    /// frame, already passed on, goes unread with a flag.
    async fn hold(&mut self, dir: Direction, passed: &Passed, read: Option<Held>) -> Option<Held> {
        let mut read = read;
        match InputBudget::process()
            .hold_after(&passed.payload, &mut read)
            .await
        {
            Ok(held) => Some(held),
            Err(refused) => {
                self.frame_event(
                    dir,
                    passed.binary,
                    passed.payload.len(),
                    Vec::new(),
                    passed.delay,
                );
                let who = match dir {
                    Direction::Send => "The app",
                    Direction::Recv => "The service",
                };
                self.emit(warning(
                    WarningKind::UnparsedFrame,
                    format!("{who} sent a frame livetalk did not read ({refused}); it went on unchanged."),
                ));
                None
            }
        }
    }

    /// A frame the app sent, after it went upstream.
    async fn app_frame(&mut self, passed: Passed, read: Option<Held>) {
        self.send_delay.add(passed.delay);
        let Some(_held) = self.hold(Direction::Send, &passed, read).await else {
            return;
        };
        let Passed {
            payload,
            binary,
            read_at,
            delay,
        } = passed;
        let payload = &payload[..];
        match decode_client(payload) {
            Ok(message) => {
                let setup = match &message {
                    livetalk_live::wire::ClientMessage::Setup(setup) => Some(setup.as_ref()),
                    _ => None,
                };
                self.record_from(setup);
                self.shared.emit(
                    self.id,
                    EventKind::Frame {
                        dir: Direction::Send,
                        binary,
                        bytes: payload.len(),
                        kinds: vec![client_kind(&message).to_owned()],
                        delay_us: delay.as_micros() as u64,
                    },
                );
                let notes = self.watch.client(&message, read_at);
                if let Some(recorder) = &self.recorder {
                    recorder.sent(&Arc::new(message), payload.len());
                }
                self.emit_all(notes);
            }
            Err(e) => {
                self.record_from(None);
                self.frame_event(Direction::Send, binary, payload.len(), Vec::new(), delay);
                self.emit(warning(
                    WarningKind::UnparsedFrame,
                    format!(
                        "The app sent a {} frame livetalk cannot read ({e}); it went on unchanged.",
                        if binary { "binary" } else { "text" }
                    ),
                ));
            }
        }
    }

    fn frame_event(
        &self,
        dir: Direction,
        binary: bool,
        bytes: usize,
        kinds: Vec<String>,
        delay: Duration,
    ) {
        self.shared.emit(
            self.id,
            EventKind::Frame {
                dir,
                binary,
                bytes,
                kinds,
                delay_us: delay.as_micros() as u64,
            },
        );
    }

    /// A frame the service sent, after it went to the app.
    async fn server_frame(&mut self, passed: Passed, read: Option<Held>) {
        self.recv_delay.add(passed.delay);
        self.record_from(None);
        let Some(_held) = self.hold(Direction::Recv, &passed, read).await else {
            return;
        };
        let Passed {
            payload,
            binary,
            read_at,
            delay,
        } = passed;
        let payload = &payload[..];
        match decode_server(payload) {
            Ok(DecodedServerFrame::Message(message)) => {
                let mut inbound = Inbound::message(message).sized(payload.len());
                inbound.at = read_at;
                let kinds = inbound
                    .reading()
                    .map(|r| r.kinds().iter().map(|k| k.name().to_owned()).collect())
                    .unwrap_or_default();
                self.frame_event(Direction::Recv, binary, payload.len(), kinds, delay);
                if inbound.reading().is_some_and(|r| r.go_away().is_some()) {
                    self.watch
                        .go_away(self.shared.opened.load(Ordering::SeqCst));
                }
                let notes = self.watch.server(&inbound, read_at);
                if let Some(recorder) = &self.recorder {
                    recorder.received(&inbound);
                }
                self.emit_all(notes);
            }
            Ok(DecodedServerFrame::Unknown { keys }) => {
                self.frame_event(Direction::Recv, binary, payload.len(), keys.clone(), delay);
                self.emit(warning(
                    WarningKind::UnparsedFrame,
                    format!(
                        "The service sent a message with no field livetalk knows ({}); it went on unchanged.",
                        livetalk_live::excerpt::one_line(&keys.join(", "), 200)
                    ),
                ));
            }
            Err(e) => {
                self.frame_event(Direction::Recv, binary, payload.len(), Vec::new(), delay);
                self.emit(warning(
                    WarningKind::UnparsedFrame,
                    format!(
                        "The service sent a frame livetalk cannot read ({e}); it went on unchanged."
                    ),
                ));
            }
        }
    }

    /// `side` stopped reading: the flag, then a Close with the reason to both sides; the one
    /// still reading (`other`) is read on until it answers, so it can take the Close in even
    /// while it was sending, and the stalled one is given a moment.
    async fn stalled<T, O>(&self, side: &str, stalled: &mut T, other: &mut O) -> Ending
    where
        T: Stream<Item = Result<Message, Error>> + Sink<Message, Error = Error> + Unpin,
        O: Stream<Item = Result<Message, Error>> + Sink<Message, Error = Error> + Unpin,
    {
        let reason = format!(
            "livetalk proxy: the {side} stopped reading for {} s; closed both ways",
            self.shared.options.write_stall.as_secs_f64()
        );
        self.emit(warning(WarningKind::StalledReader, format!("{reason}.")));
        let _ = tokio::time::timeout(CLOSING, async {
            if other.send(close_frame(1011, &reason)).await.is_ok() {
                while let Some(Ok(_)) = other.next().await {}
            }
        })
        .await;
        let _ = write(
            stalled,
            close_frame(1011, &reason),
            Duration::from_millis(100),
        )
        .await;
        Ending {
            code: Some(1011),
            reason,
            by: "proxy",
        }
    }
}

/// The app's top-level field, as the wire spells it.
fn client_kind(message: &livetalk_live::wire::ClientMessage) -> &'static str {
    use livetalk_live::wire::ClientMessage as M;
    match message {
        M::Setup(_) => "setup",
        M::ClientContent(_) => "clientContent",
        M::RealtimeInput(_) => "realtimeInput",
        M::ToolResponse(_) => "toolResponse",
        M::ContextUpdate(_) => "contextUpdate",
    }
}

/// Relays until both sides have closed (or one is gone and the other has been told).
pub(super) async fn run<A, U>(mut conn: Conn, mut app: A, app_gate: Gate, mut up: U, up_gate: Gate)
where
    A: Stream<Item = Result<Message, Error>> + Sink<Message, Error = Error> + Unpin,
    U: Stream<Item = Result<Message, Error>> + Sink<Message, Error = Error> + Unpin,
{
    let stall = conn.shared.options.write_stall;
    let mut app_open = true;
    let mut up_open = true;
    let mut ending: Option<Ending> = None;
    let mut closing_by: Option<tokio::time::Instant> = None;
    let mut judged = false;
    loop {
        let due = conn.watch.next_due();
        tokio::select! {
            frame = app.next(), if app_open => match frame {
                Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                    let held = app_gate.take();
                    match pass(&mut up, message, stall).await {
                        Ok(passed) => conn.app_frame(passed, held).await,
                        Err(WriteFailed::Stalled) => {
                            ending = Some(conn.stalled("Live server", &mut up, &mut app).await);
                            break;
                        }
                        Err(WriteFailed::Gone) => {}
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = close_parts(&frame);
                    ending.get_or_insert(Ending { code, reason, by: "app" });
                    let _ = write(&mut up, Message::Close(frame), stall).await;
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    app_open = false;
                    // The app broke the protocol (a message over the bound, bad UTF-8): it is
                    // told why where it can be, and the service that its app is gone.
                    let told = close_for_read_error(&e);
                    let (code, reason) = match &told {
                        Some(frame) => (u16::from(frame.code), frame.reason.to_string()),
                        None => (1001, "the app's connection broke".to_owned()),
                    };
                    if let Some(frame) = told {
                        let _ = write(&mut app, Message::Close(Some(frame)), Duration::from_secs(1)).await;
                    }
                    let reason = format!("livetalk proxy: {reason}");
                    let _ = write(&mut up, close_frame(1001, &reason), stall).await;
                    ending.get_or_insert(Ending { code: Some(code), reason, by: "app" });
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
                None => {
                    app_open = false;
                    if ending.is_none() {
                        let reason = "livetalk proxy: the app's connection ended without a close".to_owned();
                        let _ = write(&mut up, close_frame(1001, &reason), stall).await;
                        ending = Some(Ending { code: None, reason, by: "app" });
                    }
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
            },
            frame = up.next(), if up_open => match frame {
                Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                    let held = up_gate.take();
                    match pass(&mut app, message, stall).await {
                        Ok(passed) => conn.server_frame(passed, held).await,
                        Err(WriteFailed::Stalled) => {
                            ending = Some(conn.stalled("app", &mut app, &mut up).await);
                            break;
                        }
                        Err(WriteFailed::Gone) => {}
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = close_parts(&frame);
                    if let Some(note) = conn.watch.refused(code, &reason) {
                        conn.emit(note);
                    }
                    ending.get_or_insert(Ending { code, reason, by: "upstream" });
                    let _ = write(&mut app, Message::Close(frame), stall).await;
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    up_open = false;
                    let told = close_for_read_error(&e);
                    let reason = match &told {
                        Some(frame) => format!("livetalk proxy: the Live server broke the protocol: {}", frame.reason),
                        None => "livetalk proxy: the Live server's connection broke".to_owned(),
                    };
                    if let Some(frame) = told {
                        let _ = write(&mut up, Message::Close(Some(frame)), Duration::from_secs(1)).await;
                    }
                    let _ = write(&mut app, close_frame(1014, &reason), stall).await;
                    ending.get_or_insert(Ending { code: Some(1014), reason, by: "proxy" });
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
                None => {
                    up_open = false;
                    if ending.is_none() {
                        let reason = "livetalk proxy: the Live server's connection ended without a close".to_owned();
                        let _ = write(&mut app, close_frame(1014, &reason), stall).await;
                        ending = Some(Ending { code: None, reason, by: "upstream" });
                    }
                    closing_by.get_or_insert(tokio::time::Instant::now() + CLOSING);
                }
            },
            _ = sleep_until(due), if due.is_some() => {
                let notes = conn.watch.tick(Instant::now());
                conn.emit_all(notes);
            }
            _ = tokio::time::sleep_until(closing_by.unwrap_or_else(tokio::time::Instant::now)), if closing_by.is_some() => break,
        }
        // What was left hanging is judged when the connection is over for either side, not
        // once both closes have gone round.
        if let (Some(ending), false) = (&ending, judged) {
            judged = true;
            conn.judge(ending);
        }
        if !app_open && !up_open {
            break;
        }
    }
    let ending = ending.unwrap_or(Ending {
        code: None,
        reason: String::new(),
        by: "proxy",
    });
    if !judged {
        conn.judge(&ending);
    }
    conn.finish(ending);
}

/// A data frame written on, timed.
struct Passed {
    payload: bytes::Bytes,
    binary: bool,
    read_at: Instant,
    /// From the frame read whole to it written on: what the proxy added.
    delay: Duration,
}

/// Writes a data frame read just now on to `sink`.
async fn pass<S>(sink: &mut S, message: Message, limit: Duration) -> Result<Passed, WriteFailed>
where
    S: Sink<Message, Error = Error> + Unpin,
{
    let read_at = Instant::now();
    let (payload, binary) = payload_of(&message);
    write(sink, message, limit).await?;
    Ok(Passed {
        payload,
        binary,
        read_at,
        delay: read_at.elapsed(),
    })
}

impl Conn {
    /// What the connection left hanging (a goAway not followed).
    fn judge(&mut self, ending: &Ending) {
        let notes = self.watch.ended(
            self.shared.opened.load(Ordering::SeqCst),
            ending.by == "app",
        );
        self.emit_all(notes);
    }

    /// The recording's end and the presenter's last word.
    fn finish(&mut self, ending: Ending) {
        let by_app = ending.by == "app";
        if let Some(recorder) = &self.recorder {
            let close = CloseInfo {
                code: ending.code,
                reason: ending.reason.clone(),
                message: format!("The connection was closed by the {}.", ending.by),
                initiated_by_client: by_app,
            };
            recorder.closed(&close);
            recorder.ended(&close);
        }
        self.emit(EventKind::Closed {
            code: ending.code,
            reason: ending.reason,
            by: ending.by,
            send: self.send_delay.figures(),
            recv: self.recv_delay.figures(),
        });
    }
}

fn sleep_until(due: Option<Instant>) -> tokio::time::Sleep {
    tokio::time::sleep_until(
        due.map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std),
    )
}

/// A data message's bytes (shared, not copied) and whether it is binary.
fn payload_of(message: &Message) -> (bytes::Bytes, bool) {
    match message {
        Message::Text(text) => (bytes::Bytes::from(text.clone()), false),
        Message::Binary(bytes) => (bytes.clone(), true),
        _ => (bytes::Bytes::new(), false),
    }
}
