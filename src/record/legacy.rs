//! Recordings of formats 1 and 2, which kept the wire frames plus app-level side lines (user
//! text, tool results, link notices) instead of the messages the app applied: rebuilds those
//! messages, in the order the app applied them, so old recordings replay and inspect like new
//! ones.

use std::time::Duration;

use super::format::convert::devices_from;
use super::format::recv::recv_events;
use super::{Applied, AudioFiles, Record, Recording};
use crate::app::Msg;
use crate::tools::{SlowCall, ToolEvent, ToolOutcome, ToolStatus};
use livetalk_live::session::SessionChange;
use livetalk_live::{CloseInfo, ServerEvent};

fn duration(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

fn tool_event(record: &Record) -> Option<ToolEvent> {
    match record {
        Record::ToolResult {
            id,
            name,
            args,
            outcome,
            error,
            duration_ns,
            response,
            truncated,
            ..
        } => {
            let message = error.clone().unwrap_or_default();
            let status = match outcome.as_str() {
                "ok" => ToolStatus::Ok,
                "timed_out" => ToolStatus::TimedOut,
                "panicked" => ToolStatus::Panicked(message),
                _ => ToolStatus::Error(message),
            };
            Some(ToolEvent::Finished(ToolOutcome {
                key: None,
                id: id.clone(),
                name: name.clone(),
                args: args.clone(),
                status,
                response: response.clone(),
                duration: duration(*duration_ns),
                truncated: *truncated,
                unasked: None,
            }))
        }
        Record::ToolCancelled {
            id,
            name,
            duration_ns,
            ..
        } => Some(ToolEvent::Cancelled {
            key: None,
            id: id.clone(),
            name: name.clone(),
            duration: duration(*duration_ns),
        }),
        _ => None,
    }
}

fn link_event(record: &Record) -> Option<SessionChange> {
    match record {
        Record::Reconnecting {
            planned,
            attempt,
            reason,
            retry_in_ns,
            ..
        } => Some(SessionChange::Reconnecting {
            planned: *planned,
            attempt: *attempt,
            reason: reason.clone(),
            retry_in: duration(*retry_in_ns),
        }),
        Record::Reconnected { resumed, .. } => {
            Some(SessionChange::Reconnected { resumed: *resumed })
        }
        Record::ResumeRejected { message, .. } => Some(SessionChange::ResumeRejected {
            message: message.clone(),
        }),
        Record::AnswerDropped { id, name, .. } => Some(SessionChange::AnswerDropped {
            id: id.clone(),
            name: name.clone(),
        }),
        _ => None,
    }
}

/// A session event as a connection's reader produced it.
struct Arrival {
    t: f64,
    event: ServerEvent,
    /// The `setupComplete` a connection opens with: after a reconnect, the first event of
    /// the new connection the app gets.
    opens_connection: bool,
}

/// The message of an app-level line, and what it says about the frames after it.
enum Placed {
    /// A message of its own.
    Step(Msg),
    /// The session left its connection: frames the old one read after this never reached the app.
    Reconnecting(SessionChange),
    /// The end of the session, itself a session event the app applied.
    Ended(ServerEvent),
}

/// Hands out the arrivals the app applied, in order, skipping the frames a replaced
/// connection read after the session had left it.
struct Arrivals {
    queue: std::vec::IntoIter<Arrival>,
    applied: u64,
    between_connections: bool,
}

impl Arrivals {
    fn next_applied(&mut self) -> Option<Arrival> {
        loop {
            let arrival = self.queue.next()?;
            if self.between_connections && !arrival.opens_connection {
                continue;
            }
            self.between_connections = false;
            return Some(arrival);
        }
    }
}

/// The messages the app applied, in the order it applied them. Frames are logged by the
/// session's reader when they arrive; app-level lines carry how many session events had been
/// applied (`at`), which puts them back in exactly the right place among the frames. A
/// reconnect line also says the old connection is gone: frames it read after that never
/// reached the app, and the next events come from the new connection's `setupComplete`.
/// Returns the messages and warnings (e.g. audio missing from a WAV file cut short).
pub fn applied(recording: &Recording) -> (Vec<Applied>, Vec<String>) {
    let mut audio = AudioFiles::new(&recording.dir);
    // Since format 2 the app's end of the session has a line of its own.
    let closes_end_session = recording.meta.format < 2;
    let mut session: Vec<Arrival> = Vec::new();
    let mut app_level: Vec<(f64, u64, Placed)> = Vec::new();
    for line in recording.lines() {
        let t = line.t;
        let mut app_line = |at: u64, msg: Msg| app_level.push((t, at, Placed::Step(msg)));
        match &line.record {
            Record::Recv {
                setup,
                message,
                skipped,
            } => {
                for event in recv_events(*setup, message.as_ref(), skipped.as_deref(), &mut audio) {
                    session.push(Arrival {
                        t,
                        opens_connection: *setup
                            && matches!(event, ServerEvent::SetupComplete { .. }),
                        event,
                    });
                }
            }
            Record::Close {
                code,
                reason,
                message,
                initiated_by_client,
            } if closes_end_session => session.push(Arrival {
                t,
                event: ServerEvent::Closed(CloseInfo {
                    code: *code,
                    reason: reason.clone(),
                    message: message.clone(),
                    initiated_by_client: *initiated_by_client,
                }),
                opens_connection: false,
            }),
            Record::SessionEnded {
                code,
                reason,
                message,
                initiated_by_client,
                at,
            } => app_level.push((
                t,
                *at,
                Placed::Ended(ServerEvent::Closed(CloseInfo {
                    code: *code,
                    reason: reason.clone(),
                    message: message.clone(),
                    initiated_by_client: *initiated_by_client,
                })),
            )),
            Record::ConnectFailed { message } => app_line(0, Msg::ConnectFailed(message.clone())),
            Record::UserText { text, at } => app_line(*at, Msg::UserText(text.clone())),
            Record::EndSession { at } => app_line(*at, Msg::EndSession),
            Record::Retry { at } => app_line(*at, Msg::Retry),
            Record::Devices { devices, at } => {
                app_line(*at, Msg::DevicesChanged(devices_from(devices.clone())))
            }
            // The only run error these formats knew: a headless turn that got no answer.
            Record::Error { message, at } => app_line(*at, Msg::GaveUp(message.clone())),
            Record::ToolSlow {
                id,
                name,
                elapsed_ns,
                at,
                ..
            } => app_line(
                *at,
                Msg::Tool(ToolEvent::Slow(SlowCall {
                    key: None,
                    id: id.clone(),
                    name: name.clone(),
                    elapsed: duration(*elapsed_ns),
                })),
            ),
            record @ (Record::ToolResult { at, .. } | Record::ToolCancelled { at, .. }) => {
                if let Some(event) = tool_event(record) {
                    app_line(*at, Msg::Tool(event));
                }
            }
            record @ (Record::Reconnecting { at, .. }
            | Record::Reconnected { at, .. }
            | Record::ResumeRejected { at, .. }
            | Record::AnswerDropped { at, .. }) => {
                if let Some(event) = link_event(record) {
                    let placed = if matches!(record, Record::Reconnecting { .. }) {
                        Placed::Reconnecting(event)
                    } else {
                        Placed::Step(Msg::SessionChange(event))
                    };
                    app_level.push((t, *at, placed));
                }
            }
            Record::Close { .. }
            | Record::Link { .. }
            | Record::Ended { .. }
            | Record::Warning { .. }
            | Record::Applied { .. }
            | Record::Meta(_)
            | Record::Connect { .. }
            | Record::Send { .. } => {}
        }
    }

    let event_step = |t: f64, event: ServerEvent| Applied {
        t,
        msg: Msg::Server(event),
    };
    let mut steps = Vec::with_capacity(session.len() + app_level.len());
    let mut arrivals = Arrivals {
        queue: session.into_iter(),
        applied: 0,
        between_connections: false,
    };
    for (t, at, placed) in app_level {
        while arrivals.applied < at {
            let Some(arrival) = arrivals.next_applied() else {
                break;
            };
            steps.push(event_step(arrival.t, arrival.event));
            arrivals.applied += 1;
        }
        match placed {
            Placed::Step(msg) => steps.push(Applied { t, msg }),
            Placed::Reconnecting(event) => {
                steps.push(Applied {
                    t,
                    msg: Msg::SessionChange(event),
                });
                arrivals.between_connections = true;
            }
            Placed::Ended(event) => {
                steps.push(event_step(t, event));
                arrivals.applied += 1;
            }
        }
    }
    while let Some(arrival) = arrivals.next_applied() {
        steps.push(event_step(arrival.t, arrival.event));
    }
    (steps, audio.warnings(&recording.dir))
}
