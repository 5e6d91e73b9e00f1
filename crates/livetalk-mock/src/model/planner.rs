//! The model's planner: turns what the user asked for into calls of the declared tools, and
//! takes each result into memory and into the reply being built.

use serde_json::{Map, Value, json};

use super::devices::{Device, Memory};
use super::pending::{Pending, Purpose, Segment};
use super::phrasing::{describe_change, describe_query, describe_time, missing_tool};
use super::results::{compact, failure, payload, read_state, requested_state, tidy_error};
use super::tools::{
    END_SESSION, GET_CURRENT_TIME, GET_DEVICE_STATUS, PlannedCall, SET_DEVICE_STATUS, Toolset,
};
use super::understanding::{Asked, Change, Intent, Level};

/// The demo thermostat starts at 20 °C; used to choose heating or cooling before any reading is seen.
const ASSUMED_TEMPERATURE: f64 = 20.0;

/// Plans the calls for what the user asked, from the tools declared and what the model
/// remembers of the devices.
pub(super) struct Planner<'m> {
    pub(super) tools: &'m Toolset,
    pub(super) memory: &'m Memory,
}

impl Planner<'_> {
    /// Plans the calls for one thing the user asked for, or notes why none can be made.
    pub(super) fn plan(&self, intent: Intent, pending: &mut Pending) {
        match intent {
            Intent::Query(device, asked) => self.plan_query(device, asked, false, pending),
            Intent::Change(device, change) => self.plan_change(device, change, true, pending),
            Intent::Elsewhere { name, kind, change } => {
                self.plan_elsewhere(name, kind, change, pending)
            }
            Intent::Time => {
                if self.tools.declares(GET_CURRENT_TIME) {
                    pending.calls.push((
                        PlannedCall {
                            name: GET_CURRENT_TIME.to_owned(),
                            args: json!({}),
                        },
                        Purpose::Time,
                    ));
                } else {
                    pending
                        .notes
                        .push(missing_tool("tell you the time", GET_CURRENT_TIME));
                }
            }
            Intent::Goodbye => {
                if self.tools.declares(END_SESSION) {
                    pending.calls.push((
                        PlannedCall {
                            name: END_SESSION.to_owned(),
                            args: json!({ "reason": "the user said goodbye" }),
                        },
                        Purpose::EndSession,
                    ));
                } else {
                    pending.farewell = Some(format!(
                        "Goodbye! {}",
                        missing_tool("end the session myself", END_SESSION)
                    ));
                }
            }
        }
    }

    fn plan_query(&self, device: Device, asked: Asked, silent: bool, pending: &mut Pending) {
        if !self.tools.declares(GET_DEVICE_STATUS) {
            if !silent {
                let what = format!("check the {}", device.spoken());
                pending.notes.push(missing_tool(&what, GET_DEVICE_STATUS));
            }
            return;
        }
        let already_reading = pending.calls.iter().any(
            |(_, purpose)| matches!(purpose, Purpose::Query { device: d, .. } if *d == device),
        );
        if silent && already_reading {
            return;
        }
        pending.calls.push((
            PlannedCall {
                name: GET_DEVICE_STATUS.to_owned(),
                args: json!({ "device_name": device.name() }),
            },
            Purpose::Query {
                device,
                asked,
                silent,
            },
        ));
    }

    /// Plans one `set_device_status` call; a relative change ("warmer") to a value the model has
    /// not seen yet first reads the device when `may_defer`, and finishes in the next round.
    pub(super) fn plan_change(
        &self,
        device: Device,
        change: Change,
        may_defer: bool,
        pending: &mut Pending,
    ) {
        if !self.tools.declares(SET_DEVICE_STATUS) {
            let what = format!("change the {}", device.spoken());
            pending.notes.push(missing_tool(&what, SET_DEVICE_STATUS));
            return;
        }
        let state = self.memory.state(device);
        let unknown = if matches!(change.brightness, Some(Level::By(_)))
            && state.brightness.is_none()
        {
            Some("brightness")
        } else if matches!(change.temperature, Some(Level::By(_))) && state.temperature.is_none() {
            Some("temperature")
        } else {
            None
        };
        if let Some(what) = unknown {
            if may_defer && self.tools.declares(GET_DEVICE_STATUS) {
                self.plan_query(device, Asked::General, true, pending);
                pending.deferred.push((device, change));
            } else {
                pending.notes.push(format!(
                    "I don't know the current {what} of the {}, so please tell me the exact value you want.",
                    device.spoken()
                ));
            }
            return;
        }

        // Passed on as heard, out of range or not: the tool's error is what the user should see.
        let brightness = change
            .brightness
            .map(|level| level.resolve(state.brightness));
        let temperature = change
            .temperature
            .map(|level| level.resolve(state.temperature));
        let status = match (&change.status, device) {
            (Some(status), _) => status.clone(),
            (None, Device::Lamp) if brightness == Some(0.0) => "off".to_owned(),
            (None, Device::Lamp) => "on".to_owned(),
            (None, Device::Thermostat) => match temperature {
                Some(target) => {
                    let current = state.temperature.unwrap_or(ASSUMED_TEMPERATURE);
                    if target > current {
                        "heating".to_owned()
                    } else if target < current {
                        "cooling".to_owned()
                    } else {
                        "idle".to_owned()
                    }
                }
                None => state.status.clone().unwrap_or_else(|| "idle".to_owned()),
            },
            (None, Device::DoorLock) => state.status.clone().unwrap_or_else(|| "locked".to_owned()),
        };
        // Only say "turned on" when it was asked for or actually changes something we know of.
        let mention_status =
            change.status.is_some() || state.status.as_deref().is_some_and(|known| known != status);

        let args = set_args(
            device.name(),
            &status,
            brightness,
            temperature,
            change.color,
        );
        pending.calls.push((
            PlannedCall {
                name: SET_DEVICE_STATUS.to_owned(),
                args,
            },
            Purpose::Change {
                device,
                mention_status,
            },
        ));
    }

    /// Asks the tools about a device the home does not have, as the user named it: the
    /// tool's error names the devices there are.
    fn plan_elsewhere(
        &self,
        name: String,
        kind: Device,
        change: Option<Change>,
        pending: &mut Pending,
    ) {
        let (tool, args) = match &change {
            Some(change) => {
                let status = change.status.clone().unwrap_or_else(|| {
                    match kind {
                        Device::Lamp => "on",
                        Device::Thermostat => "heating",
                        Device::DoorLock => "locked",
                    }
                    .to_owned()
                });
                let args = set_args(
                    &name,
                    &status,
                    change.brightness.map(|level| level.resolve(None)),
                    change.temperature.map(|level| level.resolve(None)),
                    change.color.clone(),
                );
                (SET_DEVICE_STATUS, args)
            }
            None => (GET_DEVICE_STATUS, json!({ "device_name": name })),
        };
        let changing = change.is_some();
        if !self.tools.declares(tool) {
            let what = format!("{} the {name}", if changing { "change" } else { "check" });
            pending.notes.push(missing_tool(&what, tool));
            return;
        }
        pending.calls.push((
            PlannedCall {
                name: tool.to_owned(),
                args,
            },
            Purpose::Elsewhere { name, changing },
        ));
    }
}

/// Takes one tool result into memory and into the reply being built.
pub(super) fn absorb(
    memory: &mut Memory,
    call: &PlannedCall,
    purpose: &Purpose,
    response: &Value,
    pending: &mut Pending,
) {
    if let Some(error) = failure(response) {
        let error = tidy_error(&error);
        match purpose {
            Purpose::EndSession => {
                pending.farewell = Some(format!(
                    "Goodbye! I couldn't end the session myself: {error}."
                ));
            }
            _ => pending.said.push(Segment::Say(format!(
                "Sorry, I couldn't {}: {error}.",
                purpose.attempt(call)
            ))),
        }
        return;
    }
    match purpose {
        Purpose::Query {
            device,
            asked,
            silent,
        } => {
            let reported = read_state(response);
            if !silent {
                pending
                    .said
                    .push(Segment::Say(describe_query(*device, asked, &reported)));
            }
            memory.state_mut(*device).update(reported);
        }
        Purpose::Change {
            device,
            mention_status,
        } => {
            let requested = requested_state(&call.args);
            let reported = read_state(response);
            pending.said.extend(describe_change(
                *device,
                &requested,
                &reported,
                *mention_status,
            ));
            let state = memory.state_mut(*device);
            state.update(requested);
            state.update(reported);
        }
        Purpose::Time => pending.said.push(Segment::Say(describe_time(response))),
        Purpose::Elsewhere { name, .. } => pending.said.push(Segment::Say(format!(
            "The {name} answered: {}.",
            compact(response)
        ))),
        Purpose::EndSession => {
            pending.farewell = Some("Goodbye! Ending the session now.".to_owned())
        }
        Purpose::Other => {
            // A tool that answers in words is quoted; anything else is shown as JSON.
            let answer = match payload(response) {
                Value::String(text) => text.trim().trim_end_matches('.').to_owned(),
                other => compact(other),
            };
            pending.said.push(Segment::Say(format!(
                "The {} tool answered: {answer}.",
                call.name
            )));
        }
    }
}

/// The intents in the order they are planned: changes of one device merged into one, repeats
/// dropped, and goodbye last.
pub(super) fn merge_intents(intents: Vec<Intent>) -> Vec<Intent> {
    let mut merged: Vec<Intent> = Vec::new();
    for intent in intents {
        match intent {
            // "turn it on and set its color to blue" is one call, not two.
            Intent::Change(device, change) => {
                let existing = merged.iter_mut().find_map(|earlier| match earlier {
                    Intent::Change(d, c) if *d == device => Some(c),
                    _ => None,
                });
                match existing {
                    Some(earlier) => earlier.merge(change),
                    None => merged.push(Intent::Change(device, change)),
                }
            }
            other => {
                if !merged.contains(&other) {
                    merged.push(other);
                }
            }
        }
    }
    if let Some(at) = merged.iter().position(|intent| *intent == Intent::Goodbye) {
        let goodbye = merged.remove(at);
        merged.push(goodbye);
    }
    merged
}

/// The arguments of a `set_device_status` call.
fn set_args(
    device_name: &str,
    status: &str,
    brightness: Option<f64>,
    temperature: Option<f64>,
    color: Option<String>,
) -> Value {
    let mut setting = Map::new();
    if let Some(temperature) = temperature {
        setting.insert("temperature_celsius".to_owned(), number_json(temperature));
    }
    if let Some(brightness) = brightness {
        setting.insert("brightness".to_owned(), number_json(brightness));
    }
    if let Some(color) = color {
        setting.insert("color".to_owned(), Value::String(color));
    }
    let mut args = json!({ "device_name": device_name, "new_status": status });
    if !setting.is_empty()
        && let Some(object) = args.as_object_mut()
    {
        object.insert("setting".to_owned(), Value::Object(setting));
    }
    args
}

fn number_json(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}
