//! The one place the app's messages and the recording's types meet: each app type converted
//! to its format-3 spelling when recorded, and back when a recording is read. The matches are
//! exhaustive on purpose: a new or renamed message stops the build here, where its spelling
//! in the file is decided, instead of changing the format unseen.

use super::v3;
use crate::app::{self, Msg};
use crate::audio;
use crate::tools::{self, CallKey, mcp};
use livetalk_live::session::SessionChange;
use livetalk_live::{CloseInfo, ServerEvent};

impl v3::Msg {
    /// The message as a recording keeps it, or `None` for what is never recorded (raw input,
    /// layout, ticks, frames, and what came from a recording in the first place). Model audio is left
    /// out: its samples go to a WAV file (see [`model_audio`]).
    pub fn recorded(msg: &Msg) -> Option<v3::Msg> {
        Some(match msg {
            Msg::ConnectFailed(message) => v3::Msg::ConnectFailed(message.clone()),
            Msg::Server(event) => v3::Msg::Session(event.into()),
            Msg::SessionChange(change) => v3::Msg::Link(change.into()),
            Msg::Tool(event) => v3::Msg::Tool(event.into()),
            Msg::ToolVerdict { key, verdict } => v3::Msg::ToolVerdict {
                key: key.0,
                verdict: verdict.into(),
            },
            Msg::Mcp(event) => v3::Msg::Mcp(event.into()),
            Msg::ToolCatalog(catalog) => v3::Msg::ToolCatalog(catalog.into()),
            Msg::SetToolEnabled { name, enabled } => v3::Msg::SetToolEnabled {
                name: name.clone(),
                enabled: *enabled,
            },
            Msg::RestartMcpServer(name) => v3::Msg::RestartMcpServer(name.clone()),
            Msg::DevicesChanged(devices) => v3::Msg::DevicesChanged(devices_to(devices)),
            Msg::Audio(event) => v3::Msg::Audio(event.into()),
            Msg::UserText(text) => v3::Msg::UserText(text.clone()),
            Msg::BargeIn => v3::Msg::BargeIn,
            Msg::ToggleMute => v3::Msg::ToggleMute,
            Msg::ToggleTalk => v3::Msg::ToggleTalk,
            Msg::ReopenAudio => v3::Msg::ReopenAudio,
            Msg::SetEcho(mode) => v3::Msg::SetEcho((*mode).into()),
            Msg::Retry => v3::Msg::Retry,
            Msg::EndSession => v3::Msg::EndSession,
            Msg::GaveUp(message) => v3::Msg::GaveUp(message.clone()),
            Msg::Replayed { .. }
            | Msg::ReplayProgress(_)
            | Msg::Quit
            | Msg::Key(_)
            | Msg::Mouse(_)
            | Msg::Paste(_)
            | Msg::Layout(_)
            | Msg::Tick(_)
            // Written as the wire lines (`recv`, `send`), not as an applied message.
            | Msg::Wire(_)
            // Only the input line's completion; a picture's bytes are not kept (format 3 has
            // no line for them).
            | Msg::PathChoices { .. }
            | Msg::Image(_)
            // A frame shared goes on the wire, where the `send` line keeps it.
            | Msg::Screen(_)
            | Msg::SharedChoices { .. } => return None,
        })
    }
}

/// The frame a wire line (`send`, `recv`) recorded, for the event inspector of a replay;
/// `base` is when the recording's time 0 is taken to be. Audio went to a WAV file and is left
/// out, counted; the size is the line's message as the wire spells it (a recording keeps no
/// frame sizes), its audio as base64. `None` for the other lines and for a message that no
/// longer reads as one.
pub fn wire_frame(line: &v3::Line, base: std::time::Instant) -> Option<app::WireFrame> {
    use livetalk_live::wire::{ClientMessage, ServerMessage};
    use std::sync::Arc;

    let at = base.checked_add(std::time::Duration::try_from_secs_f64(line.t).ok()?)?;
    let frame = |bytes, handshake, elided, body| app::WireFrame {
        at,
        bytes,
        handshake,
        elided,
        missed_before: 0,
        body,
    };
    let (message, sent, handshake) = match &line.record {
        v3::Record::Send { message } => (message, true, false),
        v3::Record::Recv {
            setup,
            message: Some(message),
            ..
        } => (message, false, *setup),
        v3::Record::Recv {
            setup,
            message: None,
            skipped: Some(why),
        } => {
            let body = app::WireBody::Unreadable(why.clone());
            return Some(frame(0, *setup, 0, body));
        }
        _ => return None,
    };
    let mut message = message.clone();
    let referred = if sent {
        Vec::new()
    } else {
        referred_audio(&message)
    };
    let elided = audio_left_out(&mut message);
    let bytes = serde_json::to_string(&message).map_or(0, |s| s.len()) + elided.div_ceil(3) * 4;
    let body = if sent {
        app::WireBody::Sent(Arc::new(
            serde_json::from_value::<ClientMessage>(message).ok()?,
        ))
    } else {
        let mut message = serde_json::from_value::<ServerMessage>(message).ok()?;
        // Samples written into the line itself (older formats) are moved out and counted like
        // those in a WAV file.
        let (mut audio, _samples) = livetalk_live::reading::take_audio(&mut message);
        for part in &mut audio {
            if let Some((_, bytes)) = referred.iter().find(|(at, _)| *at == part.part) {
                part.bytes = *bytes;
            }
        }
        app::WireBody::Received {
            message: Arc::new(message),
            audio,
        }
    };
    Some(frame(bytes, handshake, elided, body))
}

/// The model turn's parts of a recorded `recv` message whose samples went to a WAV file, with
/// their size in bytes (from the reference each holds in place of its samples).
fn referred_audio(message: &serde_json::Value) -> Vec<(usize, usize)> {
    let parts = message
        .pointer("/serverContent/modelTurn/parts")
        .and_then(serde_json::Value::as_array);
    parts
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(part, value)| {
            let data = value.pointer("/inlineData/data")?;
            let reference = serde_json::from_value::<v3::AudioRef>(data.clone()).ok()?;
            Some((
                part,
                usize::try_from(reference.sample_count.saturating_mul(2)).ok()?,
            ))
        })
        .collect()
}

/// Empties every `data` that points into a WAV file ([`v3::AudioRef`]) or a picture file
/// ([`crate::record::pictures::PictureRef`]); returns the bytes they stood for.
fn audio_left_out(value: &mut serde_json::Value) -> usize {
    match value {
        serde_json::Value::Object(object) => {
            let reference = object
                .get("data")
                .and_then(|d| serde_json::from_value::<v3::AudioRef>(d.clone()).ok());
            let mut bytes = 0;
            if let Some(reference) = reference {
                object.insert("data".to_owned(), serde_json::Value::String(String::new()));
                bytes = usize::try_from(reference.sample_count.saturating_mul(2)).unwrap_or(0);
            } else if let Some(picture) = object
                .get("data")
                .and_then(crate::record::pictures::PictureRef::of)
            {
                // A picture kept in `frames/`: left out and counted like audio.
                object.insert("data".to_owned(), serde_json::Value::String(String::new()));
                bytes = usize::try_from(picture.bytes).unwrap_or(0);
            }
            object.values_mut().fold(bytes, |sum, inner| {
                sum.saturating_add(audio_left_out(inner))
            })
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(0, |sum, inner| sum.saturating_add(audio_left_out(inner))),
        _ => 0,
    }
}

/// The model audio a message carries (PCM16 LE), borrowed: the recorder writes it to a WAV
/// file, never into the line.
pub fn model_audio(msg: &Msg) -> Option<&[u8]> {
    match msg {
        Msg::Server(ServerEvent::ModelAudio { pcm, .. }) => Some(pcm),
        _ => None,
    }
}

impl v3::Record {
    /// An `applied` line for `msg`, or `None` when it is never recorded.
    pub fn applied(msg: &Msg, audio: Option<v3::AudioRef>) -> Option<v3::Record> {
        Some(v3::Record::Applied {
            msg: v3::Msg::recorded(msg)?,
            audio,
        })
    }
}

/// A recorded message as the app takes it; model audio comes without its samples, which the
/// reader puts back from the WAV file.
impl From<v3::Msg> for Msg {
    fn from(msg: v3::Msg) -> Msg {
        match msg {
            v3::Msg::ConnectFailed(message) => Msg::ConnectFailed(message),
            v3::Msg::Session(event) => Msg::Server(event.into()),
            v3::Msg::Link(change) => Msg::SessionChange(change.into()),
            v3::Msg::Tool(event) => Msg::Tool(event.into()),
            v3::Msg::ToolVerdict { key, verdict } => Msg::ToolVerdict {
                key: CallKey(key),
                verdict: verdict.into(),
            },
            v3::Msg::Mcp(event) => Msg::Mcp(event.into()),
            v3::Msg::ToolCatalog(catalog) => Msg::ToolCatalog(catalog.into()),
            v3::Msg::SetToolEnabled { name, enabled } => Msg::SetToolEnabled { name, enabled },
            v3::Msg::RestartMcpServer(name) => Msg::RestartMcpServer(name),
            v3::Msg::DevicesChanged(devices) => Msg::DevicesChanged(devices_from(devices)),
            v3::Msg::Audio(event) => Msg::Audio(event.into()),
            v3::Msg::UserText(text) => Msg::UserText(text),
            v3::Msg::BargeIn => Msg::BargeIn,
            v3::Msg::ToggleMute => Msg::ToggleMute,
            v3::Msg::ToggleTalk => Msg::ToggleTalk,
            v3::Msg::ReopenAudio => Msg::ReopenAudio,
            v3::Msg::SetEcho(mode) => Msg::SetEcho(mode.into()),
            v3::Msg::Retry => Msg::Retry,
            v3::Msg::EndSession => Msg::EndSession,
            v3::Msg::GaveUp(message) => Msg::GaveUp(message),
        }
    }
}

impl From<&ServerEvent> for v3::ServerEvent {
    fn from(event: &ServerEvent) -> Self {
        use v3::ServerEvent as V;
        match event {
            ServerEvent::SetupComplete { session_id } => V::SetupComplete {
                session_id: session_id.clone(),
            },
            ServerEvent::ModelText(text) => V::ModelText(text.clone()),
            ServerEvent::ModelAudio { sample_rate, .. } => V::ModelAudio {
                sample_rate: *sample_rate,
            },
            ServerEvent::InputTranscription { text, finished } => V::InputTranscription {
                text: text.clone(),
                finished: *finished,
            },
            ServerEvent::OutputTranscription { text, finished } => V::OutputTranscription {
                text: text.clone(),
                finished: *finished,
            },
            ServerEvent::GenerationComplete => V::GenerationComplete,
            ServerEvent::Interaction { idle } => V::Interaction { idle: *idle },
            ServerEvent::TurnComplete {
                reason,
                waiting_for_input,
            } => V::TurnComplete {
                reason: reason.clone(),
                waiting_for_input: *waiting_for_input,
            },
            ServerEvent::Interrupted => V::Interrupted,
            ServerEvent::ToolCall(calls) => V::ToolCall(calls.clone()),
            ServerEvent::ToolCallCancelled(ids) => V::ToolCallCancelled(ids.clone()),
            ServerEvent::GoAway { time_left } => V::GoAway {
                time_left: *time_left,
            },
            ServerEvent::ResumptionUpdate { handle, resumable } => V::ResumptionUpdate {
                handle: handle.clone(),
                resumable: *resumable,
            },
            ServerEvent::Usage(usage) => V::Usage(usage.clone()),
            ServerEvent::VoiceActivity { speaking } => V::VoiceActivity {
                speaking: *speaking,
            },
            ServerEvent::Grounding(value) => V::Grounding(value.clone()),
            ServerEvent::FrameSkipped { reason } => V::FrameSkipped {
                reason: reason.clone(),
            },
            ServerEvent::Closed(close) => V::Closed(close.into()),
        }
    }
}

impl From<v3::ServerEvent> for ServerEvent {
    fn from(event: v3::ServerEvent) -> Self {
        use v3::ServerEvent as V;
        match event {
            V::SetupComplete { session_id } => ServerEvent::SetupComplete { session_id },
            V::ModelText(text) => ServerEvent::ModelText(text),
            V::ModelAudio { sample_rate } => ServerEvent::ModelAudio {
                pcm: Vec::new(),
                sample_rate,
            },
            V::InputTranscription { text, finished } => {
                ServerEvent::InputTranscription { text, finished }
            }
            V::OutputTranscription { text, finished } => {
                ServerEvent::OutputTranscription { text, finished }
            }
            V::GenerationComplete => ServerEvent::GenerationComplete,
            V::Interaction { idle } => ServerEvent::Interaction { idle },
            V::TurnComplete {
                reason,
                waiting_for_input,
            } => ServerEvent::TurnComplete {
                reason,
                waiting_for_input,
            },
            V::Interrupted => ServerEvent::Interrupted,
            V::ToolCall(calls) => ServerEvent::ToolCall(calls),
            V::ToolCallCancelled(ids) => ServerEvent::ToolCallCancelled(ids),
            V::GoAway { time_left } => ServerEvent::GoAway { time_left },
            V::ResumptionUpdate { handle, resumable } => {
                ServerEvent::ResumptionUpdate { handle, resumable }
            }
            V::Usage(usage) => ServerEvent::Usage(usage),
            V::VoiceActivity { speaking } => ServerEvent::VoiceActivity { speaking },
            V::Grounding(value) => ServerEvent::Grounding(value),
            V::FrameSkipped { reason } => ServerEvent::FrameSkipped { reason },
            V::Closed(close) => ServerEvent::Closed(close.into()),
        }
    }
}

impl From<&CloseInfo> for v3::CloseInfo {
    fn from(close: &CloseInfo) -> Self {
        v3::CloseInfo {
            code: close.code,
            reason: close.reason.clone(),
            message: close.message.clone(),
            initiated_by_client: close.initiated_by_client,
        }
    }
}

impl From<v3::CloseInfo> for CloseInfo {
    fn from(close: v3::CloseInfo) -> Self {
        CloseInfo {
            code: close.code,
            reason: close.reason,
            message: close.message,
            initiated_by_client: close.initiated_by_client,
        }
    }
}

impl From<&SessionChange> for v3::SessionChange {
    fn from(change: &SessionChange) -> Self {
        use v3::SessionChange as V;
        match change {
            SessionChange::Reconnecting {
                planned,
                attempt,
                reason,
                retry_in,
            } => V::Reconnecting {
                planned: *planned,
                attempt: *attempt,
                reason: reason.clone(),
                retry_in: *retry_in,
            },
            SessionChange::Reconnected { resumed } => V::Reconnected { resumed: *resumed },
            SessionChange::ResumeRejected { message } => V::ResumeRejected {
                message: message.clone(),
            },
            SessionChange::TurnLost => V::TurnLost,
            SessionChange::AnswerDropped { id, name } => V::AnswerDropped {
                id: id.clone(),
                name: name.clone(),
            },
        }
    }
}

impl From<v3::SessionChange> for SessionChange {
    fn from(change: v3::SessionChange) -> Self {
        use v3::SessionChange as V;
        match change {
            V::Reconnecting {
                planned,
                attempt,
                reason,
                retry_in,
            } => SessionChange::Reconnecting {
                planned,
                attempt,
                reason,
                retry_in,
            },
            V::Reconnected { resumed } => SessionChange::Reconnected { resumed },
            V::ResumeRejected { message } => SessionChange::ResumeRejected { message },
            V::TurnLost => SessionChange::TurnLost,
            V::AnswerDropped { id, name } => SessionChange::AnswerDropped { id, name },
        }
    }
}

impl From<&tools::ToolEvent> for v3::ToolEvent {
    fn from(event: &tools::ToolEvent) -> Self {
        use tools::ToolEvent as E;
        match event {
            E::Finished(outcome) => v3::ToolEvent::Finished(outcome.into()),
            E::Cancelled {
                key,
                id,
                name,
                duration,
            } => v3::ToolEvent::Cancelled {
                key: key.map(|k| k.0),
                id: id.clone(),
                name: name.clone(),
                duration: *duration,
            },
            E::Slow(slow) => v3::ToolEvent::Slow(v3::SlowCall {
                key: slow.key.map(|k| k.0),
                id: slow.id.clone(),
                name: slow.name.clone(),
                elapsed: slow.elapsed,
            }),
            E::Waiting(waiting) => v3::ToolEvent::Waiting(v3::WaitingCall {
                key: waiting.key.0,
                id: waiting.id.clone(),
                name: waiting.name.clone(),
            }),
            E::Progress(report) => v3::ToolEvent::Progress(v3::ProgressReport {
                key: report.key.0,
                id: report.id.clone(),
                name: report.name.clone(),
                progress: report.progress,
                total: report.total,
                message: report.message.clone(),
            }),
        }
    }
}

impl From<v3::ToolEvent> for tools::ToolEvent {
    fn from(event: v3::ToolEvent) -> Self {
        use tools::ToolEvent as E;
        match event {
            v3::ToolEvent::Finished(outcome) => E::Finished(outcome.into()),
            v3::ToolEvent::Cancelled {
                key,
                id,
                name,
                duration,
            } => E::Cancelled {
                key: key.map(CallKey),
                id,
                name,
                duration,
            },
            v3::ToolEvent::Slow(slow) => E::Slow(tools::SlowCall {
                key: slow.key.map(CallKey),
                id: slow.id,
                name: slow.name,
                elapsed: slow.elapsed,
            }),
            v3::ToolEvent::Waiting(waiting) => E::Waiting(tools::WaitingCall {
                key: CallKey(waiting.key),
                id: waiting.id,
                name: waiting.name,
            }),
            v3::ToolEvent::Progress(report) => E::Progress(tools::ProgressReport {
                key: CallKey(report.key),
                id: report.id,
                name: report.name,
                progress: report.progress,
                total: report.total,
                message: report.message,
            }),
        }
    }
}

impl From<&tools::ToolOutcome> for v3::ToolOutcome {
    fn from(outcome: &tools::ToolOutcome) -> Self {
        use tools::ToolStatus as S;
        v3::ToolOutcome {
            key: outcome.key.map(|k| k.0),
            id: outcome.id.clone(),
            name: outcome.name.clone(),
            args: outcome.args.clone(),
            status: match &outcome.status {
                S::Ok => v3::ToolStatus::Ok,
                S::Error(message) => v3::ToolStatus::Error(message.clone()),
                S::TimedOut => v3::ToolStatus::TimedOut,
                S::Panicked(message) => v3::ToolStatus::Panicked(message.clone()),
                S::Refused(message) => v3::ToolStatus::Refused(message.clone()),
                S::ByHand => v3::ToolStatus::ByHand,
            },
            response: outcome.response.clone(),
            duration: outcome.duration,
            truncated: outcome.truncated,
            unasked: outcome.unasked.map(Into::into),
        }
    }
}

impl From<v3::ToolOutcome> for tools::ToolOutcome {
    fn from(outcome: v3::ToolOutcome) -> Self {
        use tools::ToolStatus as S;
        tools::ToolOutcome {
            key: outcome.key.map(CallKey),
            id: outcome.id,
            name: outcome.name,
            args: outcome.args,
            status: match outcome.status {
                v3::ToolStatus::Ok => S::Ok,
                v3::ToolStatus::Error(message) => S::Error(message),
                v3::ToolStatus::TimedOut => S::TimedOut,
                v3::ToolStatus::Panicked(message) => S::Panicked(message),
                v3::ToolStatus::Refused(message) => S::Refused(message),
                v3::ToolStatus::ByHand => S::ByHand,
            },
            response: outcome.response,
            duration: outcome.duration,
            truncated: outcome.truncated,
            unasked: outcome.unasked.map(Into::into),
        }
    }
}

impl From<tools::Unasked> for v3::Unasked {
    fn from(unasked: tools::Unasked) -> Self {
        match unasked {
            tools::Unasked::BuiltIn => v3::Unasked::BuiltIn,
            tools::Unasked::SetToNever => v3::Unasked::SetToNever,
            tools::Unasked::ServerSaysReadOnly => v3::Unasked::ServerSaysReadOnly,
            tools::Unasked::ApproveAll => v3::Unasked::ApproveAll,
        }
    }
}

impl From<v3::Unasked> for tools::Unasked {
    fn from(unasked: v3::Unasked) -> Self {
        match unasked {
            v3::Unasked::BuiltIn => tools::Unasked::BuiltIn,
            v3::Unasked::SetToNever => tools::Unasked::SetToNever,
            v3::Unasked::ServerSaysReadOnly => tools::Unasked::ServerSaysReadOnly,
            v3::Unasked::ApproveAll => tools::Unasked::ApproveAll,
        }
    }
}

impl From<&tools::Verdict> for v3::Verdict {
    fn from(verdict: &tools::Verdict) -> Self {
        match verdict {
            tools::Verdict::Approve => v3::Verdict::Approve,
            tools::Verdict::Edit(args) => v3::Verdict::Edit(args.clone()),
            tools::Verdict::Deny => v3::Verdict::Deny,
            tools::Verdict::Answer(result) => v3::Verdict::Answer(result.clone()),
        }
    }
}

impl From<v3::Verdict> for tools::Verdict {
    fn from(verdict: v3::Verdict) -> Self {
        match verdict {
            v3::Verdict::Approve => tools::Verdict::Approve,
            v3::Verdict::Edit(args) => tools::Verdict::Edit(args),
            v3::Verdict::Deny => tools::Verdict::Deny,
            v3::Verdict::Answer(result) => tools::Verdict::Answer(result),
        }
    }
}

/// A count as the file spells it (a `usize` never exceeds a `u64` on the machines we build
/// for; saturate rather than wrap if one ever did).
fn count_to(count: usize) -> u64 {
    u64::try_from(count).unwrap_or(u64::MAX)
}

/// A recorded count as the app holds it: saturates on a hand-edited huge one.
fn count_from(count: u64) -> usize {
    usize::try_from(count).unwrap_or(usize::MAX)
}

impl From<&mcp::McpEvent> for v3::McpEvent {
    fn from(event: &mcp::McpEvent) -> Self {
        use mcp::McpEvent as E;
        match event {
            E::Up { server, tools } => v3::McpEvent::Up {
                server: server.clone(),
                tools: count_to(*tools),
            },
            E::Down { server, message } => v3::McpEvent::Down {
                server: server.clone(),
                message: message.clone(),
            },
            E::ToolsChanged { server, tools } => v3::McpEvent::ToolsChanged {
                server: server.clone(),
                tools: count_to(*tools),
            },
            E::Trimmed { server, message } => v3::McpEvent::Trimmed {
                server: server.clone(),
                message: message.clone(),
            },
        }
    }
}

impl From<v3::McpEvent> for mcp::McpEvent {
    fn from(event: v3::McpEvent) -> Self {
        use mcp::McpEvent as E;
        match event {
            v3::McpEvent::Up { server, tools } => E::Up {
                server,
                tools: count_from(tools),
            },
            v3::McpEvent::Down { server, message } => E::Down { server, message },
            v3::McpEvent::ToolsChanged { server, tools } => E::ToolsChanged {
                server,
                tools: count_from(tools),
            },
            v3::McpEvent::Trimmed { server, message } => E::Trimmed { server, message },
        }
    }
}

impl From<&mcp::Catalog> for v3::Catalog {
    fn from(catalog: &mcp::Catalog) -> Self {
        v3::Catalog {
            tools: catalog
                .tools
                .iter()
                .map(|tool| v3::ToolEntry {
                    name: tool.name.clone(),
                    server: tool.server.clone(),
                    description: tool.description.clone(),
                    enabled: tool.enabled,
                    unasked: tool.unasked.map(Into::into),
                })
                .collect(),
            servers: catalog
                .servers
                .iter()
                .map(|server| v3::ServerEntry {
                    name: server.name.clone(),
                    state: match &server.state {
                        mcp::ServerState::Starting => v3::ServerState::Starting,
                        mcp::ServerState::Up => v3::ServerState::Up,
                        mcp::ServerState::Down(why) => v3::ServerState::Down(why.clone()),
                    },
                })
                .collect(),
        }
    }
}

impl From<v3::Catalog> for mcp::Catalog {
    fn from(catalog: v3::Catalog) -> Self {
        mcp::Catalog {
            tools: catalog
                .tools
                .into_iter()
                .map(|tool| tools::ToolEntry {
                    name: tool.name,
                    server: tool.server,
                    description: tool.description,
                    enabled: tool.enabled,
                    unasked: tool.unasked.map(Into::into),
                })
                .collect(),
            servers: catalog
                .servers
                .into_iter()
                .map(|server| mcp::ServerEntry {
                    name: server.name,
                    state: match server.state {
                        v3::ServerState::Starting => mcp::ServerState::Starting,
                        v3::ServerState::Up => mcp::ServerState::Up,
                        v3::ServerState::Down(why) => mcp::ServerState::Down(why),
                    },
                })
                .collect(),
        }
    }
}

/// The smart-home devices as the file spells them.
pub fn devices_to(devices: &[tools::Device]) -> Vec<v3::Device> {
    devices
        .iter()
        .map(|device| v3::Device {
            name: device.name.clone(),
            kind: match device.kind {
                tools::DeviceKind::Light => v3::DeviceKind::Light,
                tools::DeviceKind::Thermostat => v3::DeviceKind::Thermostat,
                tools::DeviceKind::Lock => v3::DeviceKind::Lock,
            },
            status: device.status.clone(),
            brightness: device.brightness,
            color: device.color.clone(),
            temperature_celsius: device.temperature_celsius,
        })
        .collect()
}

/// Recorded smart-home devices as the app holds them.
pub fn devices_from(devices: Vec<v3::Device>) -> Vec<tools::Device> {
    devices
        .into_iter()
        .map(|device| tools::Device {
            name: device.name,
            kind: match device.kind {
                v3::DeviceKind::Light => tools::DeviceKind::Light,
                v3::DeviceKind::Thermostat => tools::DeviceKind::Thermostat,
                v3::DeviceKind::Lock => tools::DeviceKind::Lock,
            },
            status: device.status,
            brightness: device.brightness,
            color: device.color,
            temperature_celsius: device.temperature_celsius,
        })
        .collect()
}

impl From<audio::EchoMode> for v3::EchoMode {
    fn from(mode: audio::EchoMode) -> Self {
        match mode {
            audio::EchoMode::Aec => v3::EchoMode::Aec,
            audio::EchoMode::Gate => v3::EchoMode::Gate,
            audio::EchoMode::Off => v3::EchoMode::Off,
        }
    }
}

impl From<v3::EchoMode> for audio::EchoMode {
    fn from(mode: v3::EchoMode) -> Self {
        match mode {
            v3::EchoMode::Aec => audio::EchoMode::Aec,
            v3::EchoMode::Gate => audio::EchoMode::Gate,
            v3::EchoMode::Off => audio::EchoMode::Off,
        }
    }
}

impl From<app::AudioAsked> for v3::AudioAsked {
    fn from(asked: app::AudioAsked) -> Self {
        v3::AudioAsked {
            microphone: asked.microphone,
            input_wav: asked.input_wav,
            output_wav: asked.output_wav,
            push_to_talk: asked.push_to_talk,
            echo: asked.echo.into(),
        }
    }
}

impl From<v3::AudioAsked> for app::AudioAsked {
    fn from(asked: v3::AudioAsked) -> Self {
        app::AudioAsked {
            microphone: asked.microphone,
            input_wav: asked.input_wav,
            output_wav: asked.output_wav,
            push_to_talk: asked.push_to_talk,
            echo: asked.echo.into(),
        }
    }
}

impl From<&audio::AudioEvent> for v3::AudioEvent {
    fn from(event: &audio::AudioEvent) -> Self {
        use audio::AudioEvent as E;
        match event {
            E::Opened(setup) => v3::AudioEvent::Opened(v3::AudioSetup {
                input: setup.input.as_ref().map(stream_to),
                output: setup.output.as_ref().map(stream_to),
                problems: setup.problems.clone(),
            }),
            E::DeviceFailed { direction, message } => v3::AudioEvent::DeviceFailed {
                direction: match direction {
                    audio::Direction::Input => v3::Direction::Input,
                    audio::Direction::Output => v3::Direction::Output,
                },
                message: message.clone(),
            },
            E::Audible(audible) => v3::AudioEvent::Audible(*audible),
            E::Levels { mic, output } => v3::AudioEvent::Levels {
                mic: *mic,
                output: *output,
            },
            E::Figures(figures) => v3::AudioEvent::Figures(v3::AudioFigures {
                frames_sent: figures.frames_sent,
                frames_dropped: figures.frames_dropped,
                frames_gated: figures.frames_gated,
                mic_overflow: figures.mic_overflow,
                mic_gaps: figures.mic_gaps,
                underruns: figures.underruns,
                played: figures.played,
                mic_to_socket: latency_to(figures.mic_to_socket),
                socket_to_speaker: latency_to(figures.socket_to_speaker),
                interrupt_to_silence: latency_to(figures.interrupt_to_silence),
            }),
            E::Echo(echo) => v3::AudioEvent::Echo(v3::EchoFigures {
                mode: echo.mode.into(),
                cancelling: echo.cancelling,
                noise_suppression: echo.noise_suppression,
                device_delay_ms: echo.device_delay_ms,
                delay_ms: echo.delay_ms,
                erle_db: echo.erle_db,
                erl_db: echo.erl_db,
                converged: echo.converged,
                far_end_secs: echo.far_end_secs,
                echo_heard: echo.echo_heard,
            }),
            E::Silenced { echo_heard } => v3::AudioEvent::Silenced {
                echo_heard: *echo_heard,
            },
            E::InputClipEnded => v3::AudioEvent::InputClipEnded,
            E::OutputWavFull { path, max_bytes } => v3::AudioEvent::OutputWavFull {
                path: path.clone(),
                max_bytes: *max_bytes,
            },
        }
    }
}

impl From<v3::AudioEvent> for audio::AudioEvent {
    fn from(event: v3::AudioEvent) -> Self {
        use audio::AudioEvent as E;
        match event {
            v3::AudioEvent::Opened(setup) => E::Opened(audio::AudioSetup {
                input: setup.input.map(stream_from),
                output: setup.output.map(stream_from),
                problems: setup.problems,
            }),
            v3::AudioEvent::DeviceFailed { direction, message } => E::DeviceFailed {
                direction: match direction {
                    v3::Direction::Input => audio::Direction::Input,
                    v3::Direction::Output => audio::Direction::Output,
                },
                message,
            },
            v3::AudioEvent::Audible(audible) => E::Audible(audible),
            v3::AudioEvent::Levels { mic, output } => E::Levels { mic, output },
            v3::AudioEvent::Figures(figures) => E::Figures(audio::AudioFigures {
                frames_sent: figures.frames_sent,
                frames_dropped: figures.frames_dropped,
                frames_gated: figures.frames_gated,
                mic_overflow: figures.mic_overflow,
                mic_gaps: figures.mic_gaps,
                underruns: figures.underruns,
                played: figures.played,
                mic_to_socket: latency_from(figures.mic_to_socket),
                socket_to_speaker: latency_from(figures.socket_to_speaker),
                interrupt_to_silence: latency_from(figures.interrupt_to_silence),
            }),
            v3::AudioEvent::Echo(echo) => E::Echo(audio::EchoFigures {
                mode: echo.mode.into(),
                cancelling: echo.cancelling,
                noise_suppression: echo.noise_suppression,
                device_delay_ms: echo.device_delay_ms,
                delay_ms: echo.delay_ms,
                erle_db: echo.erle_db,
                erl_db: echo.erl_db,
                converged: echo.converged,
                far_end_secs: echo.far_end_secs,
                echo_heard: echo.echo_heard,
            }),
            v3::AudioEvent::Silenced { echo_heard } => E::Silenced { echo_heard },
            v3::AudioEvent::InputClipEnded => E::InputClipEnded,
            v3::AudioEvent::OutputWavFull { path, max_bytes } => {
                E::OutputWavFull { path, max_bytes }
            }
        }
    }
}

fn stream_to(stream: &audio::StreamInfo) -> v3::StreamInfo {
    v3::StreamInfo {
        name: stream.name.clone(),
        path: stream.path.clone(),
    }
}

fn stream_from(stream: v3::StreamInfo) -> audio::StreamInfo {
    audio::StreamInfo {
        name: stream.name,
        path: stream.path,
    }
}

fn latency_to(latency: audio::Latency) -> v3::Latency {
    v3::Latency {
        last: latency.last,
        worst: latency.worst,
        count: latency.count,
    }
}

fn latency_from(latency: v3::Latency) -> audio::Latency {
    audio::Latency {
        last: latency.last,
        worst: latency.worst,
        count: latency.count,
    }
}
