//! The mock server's scripted model: reads plain-English smart-home requests, plans calls to the client's declared tools and phrases replies from their results.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

const GET_DEVICE_STATUS: &str = "get_device_status";
const SET_DEVICE_STATUS: &str = "set_device_status";
const GET_CURRENT_TIME: &str = "get_current_time";
const END_SESSION: &str = "end_session";

/// The demo thermostat starts at 20 °C; used to choose heating or cooling before any reading is seen.
const ASSUMED_TEMPERATURE: f64 = 20.0;
/// How far "warmer" / "cooler" move the thermostat when no amount is given.
const TEMPERATURE_STEP: f64 = 2.0;
/// How far "brighter" / "dimmer" move the lamp when no amount is given.
const BRIGHTNESS_STEP: f64 = 20.0;

/// One function call the model wants the client to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCall {
    pub name: String,
    pub args: Value,
}

/// What the model does next.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStep {
    /// Make these calls (as one `toolCall`), then hand the results to [`ScriptedModel::tool_results`].
    CallTools(Vec<PlannedCall>),
    /// Say this and end the turn.
    Reply(String),
}

/// A deterministic stand-in for the model behind the mock Live server.
///
/// Clone + Serialize/Deserialize so a resumption handle can restore the conversation later.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScriptedModel {
    declared: BTreeSet<String>,
    memory: Memory,
    /// The calls of the last `CallTools` and what to say once they are answered.
    pending: Option<Pending>,
}

impl ScriptedModel {
    /// A model that will only ever call the tools named here (the client's function declarations).
    pub fn new(declared_tools: impl IntoIterator<Item = String>) -> Self {
        Self {
            declared: declared_tools.into_iter().collect(),
            ..Self::default()
        }
    }

    /// A user text turn: either tool calls to make first, or a direct reply.
    pub fn user_turn(&mut self, text: &str) -> ModelStep {
        // A new user turn supersedes calls that were never answered (cancelled or interrupted).
        self.pending = None;
        let understood = understand(text, self.memory.last_device);
        self.memory.last_device = understood.last_device;
        if understood.intents.is_empty() {
            return ModelStep::Reply(self.small_talk(&understood));
        }
        let mut pending = Pending {
            notes: understood.notes,
            ..Pending::default()
        };
        for intent in merge_intents(understood.intents) {
            self.plan(intent, &mut pending);
        }
        self.finish(pending)
    }

    /// The responses to the calls of the last CallTools, in the same order (each the `response`
    /// JSON the client sent). Returns the reply (or, if useful, further calls).
    pub fn tool_results(&mut self, results: &[(PlannedCall, Value)]) -> ModelStep {
        let mut pending = self.pending.take().unwrap_or_default();
        let asked = std::mem::take(&mut pending.calls);
        for (index, (call, response)) in results.iter().enumerate() {
            // Match by position first (the contract), then by equality, so a reordered or
            // restored conversation still phrases sensibly.
            let purpose = asked
                .get(index)
                .filter(|(planned, _)| planned == call)
                .or_else(|| asked.iter().find(|(planned, _)| planned == call))
                .map(|(_, purpose)| purpose.clone())
                .unwrap_or_else(|| Purpose::from_call(call));
            self.absorb(call, &purpose, response, &mut pending);
        }
        for (device, change) in std::mem::take(&mut pending.deferred) {
            self.plan_change(device, change, false, &mut pending);
        }
        self.finish(pending)
    }

    /// A user audio turn of the given length (the mock cannot transcribe speech).
    pub fn audio_turn(&mut self, speech: Duration) -> ModelStep {
        self.pending = None;
        let seconds = speech.as_secs_f64();
        let heard = if seconds < 0.3 {
            "only a very short sound".to_owned()
        } else {
            format!("about {seconds:.1} seconds of speech")
        };
        let suggestion = match self.examples().first() {
            Some(example) => format!(" Please type your request instead, for example {example}."),
            None => " Please type your request instead.".to_owned(),
        };
        ModelStep::Reply(format!(
            "I heard {heard}, but this demo model can't understand spoken words.{suggestion}"
        ))
    }

    fn declares(&self, tool: &str) -> bool {
        self.declared.contains(tool)
    }

    fn plan(&self, intent: Intent, pending: &mut Pending) {
        match intent {
            Intent::Query(device, asked) => self.plan_query(device, asked, false, pending),
            Intent::Change(device, change) => self.plan_change(device, change, true, pending),
            Intent::Time => {
                if self.declares(GET_CURRENT_TIME) {
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
                if self.declares(END_SESSION) {
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
        if !self.declares(GET_DEVICE_STATUS) {
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
    fn plan_change(&self, device: Device, change: Change, may_defer: bool, pending: &mut Pending) {
        if !self.declares(SET_DEVICE_STATUS) {
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
            if may_defer && self.declares(GET_DEVICE_STATUS) {
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

        let brightness = change
            .brightness
            .map(|level| level.resolve(state.brightness).clamp(0.0, 100.0));
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

        let mut setting = Map::new();
        if let Some(temperature) = temperature {
            setting.insert("temperature_celsius".to_owned(), number_json(temperature));
        }
        if let Some(brightness) = brightness {
            setting.insert("brightness".to_owned(), number_json(brightness));
        }
        if let Some(color) = change.color {
            setting.insert("color".to_owned(), Value::String(color));
        }
        let mut args = json!({ "device_name": device.name(), "new_status": status });
        if !setting.is_empty()
            && let Some(object) = args.as_object_mut()
        {
            object.insert("setting".to_owned(), Value::Object(setting));
        }
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

    /// Takes one tool result into memory and into the reply being built.
    fn absorb(
        &mut self,
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
                self.memory.state_mut(*device).update(reported);
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
                let memory = self.memory.state_mut(*device);
                memory.update(requested);
                memory.update(reported);
            }
            Purpose::Time => pending.said.push(Segment::Say(describe_time(response))),
            Purpose::EndSession => {
                pending.farewell = Some("Goodbye! Ending the session now.".to_owned())
            }
            Purpose::Other => pending.said.push(Segment::Say(format!(
                "The {} tool answered: {}.",
                call.name,
                compact(response)
            ))),
        }
    }

    fn finish(&mut self, pending: Pending) -> ModelStep {
        if pending.calls.is_empty() {
            return ModelStep::Reply(pending.render());
        }
        let calls = pending.calls.iter().map(|(call, _)| call.clone()).collect();
        self.pending = Some(pending);
        ModelStep::CallTools(calls)
    }

    fn small_talk(&self, understood: &Understanding) -> String {
        if !understood.notes.is_empty() {
            understood.notes.join(" ")
        } else if understood.help {
            self.help()
        } else if understood.greeted {
            format!("Hello! {}", self.help())
        } else if understood.thanked {
            "You're welcome! Anything else?".to_owned()
        } else {
            format!("Sorry, I didn't understand that. {}", self.help())
        }
    }

    fn examples(&self) -> Vec<&'static str> {
        let mut examples = Vec::new();
        if self.declares(GET_DEVICE_STATUS) {
            examples.push("\"Is the living room lamp on?\"");
        }
        if self.declares(SET_DEVICE_STATUS) {
            examples.extend([
                "\"dim the lamp to 30%\"",
                "\"set the thermostat to 22 degrees\"",
                "\"lock the front door\"",
            ]);
        }
        if self.declares(GET_CURRENT_TIME) {
            examples.push("\"What time is it?\"");
        }
        if self.declares(END_SESSION) {
            examples.push("\"goodbye\"");
        }
        examples
    }

    fn help(&self) -> String {
        let mut text = String::from(
            "I'm the livetalk demo model, so I only understand a few typed smart-home requests.",
        );
        if self.declares(GET_DEVICE_STATUS) || self.declares(SET_DEVICE_STATUS) {
            text.push_str(
                " I know three devices: the living room lamp (on or off, brightness, color), \
                 the kitchen thermostat (temperature) and the front door lock (locked or unlocked).",
            );
        }
        let examples = self.examples();
        if examples.is_empty() {
            text.push_str(
                " This session didn't declare any of my tools (get_device_status, set_device_status, \
                 get_current_time, end_session), so there's nothing I can do here.",
            );
        } else {
            text.push_str(&format!(" Try {}.", join_list(&examples, "or")));
        }
        text
    }
}

fn missing_tool(what: &str, tool: &str) -> String {
    format!("I can't {what}, because this session didn't declare the {tool} tool.")
}

// ---------------------------------------------------------------------------------------------
// Devices and what the model remembers about them.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Device {
    Lamp,
    Thermostat,
    DoorLock,
}

impl Device {
    /// The name the tools know the device by.
    fn name(self) -> &'static str {
        match self {
            Device::Lamp => "living room lamp",
            Device::Thermostat => "kitchen thermostat",
            Device::DoorLock => "front door lock",
        }
    }

    /// The name that reads well in a sentence about the device's state.
    fn spoken(self) -> &'static str {
        match self {
            Device::DoorLock => "front door",
            other => other.name(),
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        let name = name.trim().to_lowercase();
        if name.contains("lamp") || name.contains("light") {
            Some(Device::Lamp)
        } else if name.contains("thermostat") {
            Some(Device::Thermostat)
        } else if name.contains("lock") || name.contains("door") {
            Some(Device::DoorLock)
        } else {
            None
        }
    }
}

/// What is known of one device; `None` where no tool result has said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct DeviceState {
    status: Option<String>,
    brightness: Option<f64>,
    color: Option<String>,
    temperature: Option<f64>,
}

impl DeviceState {
    fn update(&mut self, newer: DeviceState) {
        self.status = newer.status.or(self.status.take());
        self.brightness = newer.brightness.or(self.brightness);
        self.color = newer.color.or(self.color.take());
        self.temperature = newer.temperature.or(self.temperature);
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Memory {
    /// What "it" refers to.
    last_device: Option<Device>,
    lamp: DeviceState,
    thermostat: DeviceState,
    door_lock: DeviceState,
}

impl Memory {
    fn state(&self, device: Device) -> &DeviceState {
        match device {
            Device::Lamp => &self.lamp,
            Device::Thermostat => &self.thermostat,
            Device::DoorLock => &self.door_lock,
        }
    }

    fn state_mut(&mut self, device: Device) -> &mut DeviceState {
        match device {
            Device::Lamp => &mut self.lamp,
            Device::Thermostat => &mut self.thermostat,
            Device::DoorLock => &mut self.door_lock,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Plans in flight.

/// What a status question wanted to know, so the answer can be "yes" or "no".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Asked {
    General,
    Is(String),
    Color,
    Brightness,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Level {
    To(f64),
    By(f64),
}

impl Level {
    fn resolve(self, current: Option<f64>) -> f64 {
        match self {
            Level::To(value) => value,
            Level::By(delta) => current.unwrap_or(0.0) + delta,
        }
    }
}

/// A requested change to one device; `status` is set only when the user named one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Change {
    status: Option<String>,
    color: Option<String>,
    brightness: Option<Level>,
    temperature: Option<Level>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.color.is_none()
            && self.brightness.is_none()
            && self.temperature.is_none()
    }

    fn merge(&mut self, later: Change) {
        self.status = later.status.or(self.status.take());
        self.color = later.color.or(self.color.take());
        self.brightness = later.brightness.or(self.brightness);
        self.temperature = later.temperature.or(self.temperature);
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Intent {
    Query(Device, Asked),
    Change(Device, Change),
    Time,
    Goodbye,
}

/// Why a call was made, which decides how its result is put into words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Purpose {
    Query {
        device: Device,
        asked: Asked,
        /// A reading taken only to resolve a relative change; not reported on its own.
        silent: bool,
    },
    Change {
        device: Device,
        mention_status: bool,
    },
    Time,
    EndSession,
    Other,
}

impl Purpose {
    fn from_call(call: &PlannedCall) -> Self {
        let device = call
            .args
            .get("device_name")
            .and_then(Value::as_str)
            .and_then(Device::from_name);
        match (call.name.as_str(), device) {
            (GET_DEVICE_STATUS, Some(device)) => Purpose::Query {
                device,
                asked: Asked::General,
                silent: false,
            },
            (SET_DEVICE_STATUS, Some(device)) => Purpose::Change {
                device,
                mention_status: true,
            },
            (GET_CURRENT_TIME, _) => Purpose::Time,
            (END_SESSION, _) => Purpose::EndSession,
            _ => Purpose::Other,
        }
    }

    /// What the call tried to do, as in "Sorry, I couldn't …".
    fn attempt(&self, call: &PlannedCall) -> String {
        match self {
            Purpose::Query { device, .. } => format!("check the {}", device.spoken()),
            Purpose::Change { device, .. } => {
                let acts = change_acts(*device, &requested_state(&call.args), true);
                if acts.is_empty() {
                    format!("change the {}", device.spoken())
                } else {
                    let tries: Vec<&str> = acts.iter().map(|act| act.attempt.as_str()).collect();
                    join_list(&tries, "and")
                }
            }
            Purpose::Time => "get the current time".to_owned(),
            Purpose::EndSession => "end the session".to_owned(),
            Purpose::Other => format!("run {}", call.name),
        }
    }
}

/// A piece of the reply: completed actions are gathered into one "Alright, I've …" sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Segment {
    Done(String),
    Say(String),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Pending {
    calls: Vec<(PlannedCall, Purpose)>,
    /// Relative changes waiting for a reading of the device.
    deferred: Vec<(Device, Change)>,
    said: Vec<Segment>,
    notes: Vec<String>,
    farewell: Option<String>,
}

impl Pending {
    fn render(&self) -> String {
        let mut sentences: Vec<String> = Vec::new();
        let mut done: Vec<&str> = Vec::new();
        let mut done_at = None;
        for segment in &self.said {
            match segment {
                Segment::Done(act) => {
                    done_at.get_or_insert(sentences.len());
                    done.push(act);
                }
                Segment::Say(text) => sentences.push(text.clone()),
            }
        }
        if let Some(at) = done_at {
            sentences.insert(at, format!("Alright, I've {}.", join_list(&done, "and")));
        }
        sentences.extend(self.notes.iter().cloned());
        sentences.extend(self.farewell.iter().cloned());
        if sentences.is_empty() {
            "Okay.".to_owned()
        } else {
            sentences.join(" ")
        }
    }
}

fn merge_intents(intents: Vec<Intent>) -> Vec<Intent> {
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

// ---------------------------------------------------------------------------------------------
// Reading tool results.

/// The tool's answer, unwrapped from the `{"output": …}` / `{"result": …}` envelopes clients use.
fn payload(response: &Value) -> &Value {
    if let Some(object) = response.as_object()
        && !object.contains_key("status")
        && !object.contains_key("error")
    {
        for key in ["output", "result", "response"] {
            if let Some(inner) = object.get(key) {
                return inner;
            }
        }
    }
    response
}

/// The error a result reports, if any (`{"error": …}` or `{"success": false, …}`).
fn failure(response: &Value) -> Option<String> {
    fn check(value: &Value) -> Option<String> {
        let object = value.as_object()?;
        let failed = [object.get("success"), object.get("ok")]
            .into_iter()
            .any(|flag| flag == Some(&Value::Bool(false)));
        match object.get("error") {
            Some(Value::Null | Value::Bool(false)) | None if !failed => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Object(inner)) => Some(
                inner
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| compact(&Value::Object(inner.clone())), str::to_owned),
            ),
            Some(other @ (Value::Number(_) | Value::Array(_))) => Some(compact(other)),
            _ => Some(
                object
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the tool reported a failure without saying why")
                    .to_owned(),
            ),
        }
    }
    check(response).or_else(|| check(payload(response)))
}

/// "Device not found." → "device not found", ready to follow a colon.
fn tidy_error(error: &str) -> String {
    let trimmed = error.trim().trim_end_matches(['.', '!']);
    let mut chars = trimmed.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => first
            .to_lowercase()
            .chain(trimmed.chars().skip(1))
            .collect(),
        _ => trimmed.to_owned(),
    }
}

/// A field of the result, at the top or inside a nested settings/state object.
fn field<'a>(response: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    let object = payload(response).as_object()?;
    let nested = [
        "settings",
        "setting",
        "settings_updated",
        "state",
        "attributes",
    ]
    .into_iter()
    .filter_map(|key| object.get(key)?.as_object());
    std::iter::once(object).chain(nested).find_map(|level| {
        keys.iter().find_map(|key| {
            level
                .get(*key)
                .filter(|value| !value.is_null() && !value.is_object())
        })
    })
}

fn field_str(response: &Value, keys: &[&str]) -> Option<String> {
    match field(response, keys)? {
        Value::String(text) => Some(text.trim().to_owned()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn field_num(response: &Value, keys: &[&str]) -> Option<f64> {
    match field(response, keys)? {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().trim_end_matches('%').trim().parse().ok(),
        _ => None,
    }
}

fn read_state(response: &Value) -> DeviceState {
    DeviceState {
        status: field_str(response, &["status", "new_status", "state"]).map(|s| s.to_lowercase()),
        brightness: field_num(response, &["brightness"]),
        color: field_str(response, &["color", "colour"]).map(|s| s.to_lowercase()),
        temperature: field_num(
            response,
            &[
                "temperature_celsius",
                "temperature",
                "target_temperature_celsius",
                "target_temperature",
            ],
        ),
    }
}

fn requested_state(args: &Value) -> DeviceState {
    let setting = args.get("setting");
    let number = |key: &str| setting.and_then(|s| s.get(key)).and_then(Value::as_f64);
    DeviceState {
        status: args
            .get("new_status")
            .and_then(Value::as_str)
            .map(str::to_owned),
        brightness: number("brightness"),
        color: setting
            .and_then(|s| s.get("color"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        temperature: number("temperature_celsius"),
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 200 {
        let cut: String = text.chars().take(200).collect();
        format!("{cut}…")
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------------
// Phrasing replies.

fn describe_query(device: Device, asked: &Asked, reported: &DeviceState) -> String {
    let off_note = if reported.status.as_deref() == Some("off") {
        ", though it's currently off"
    } else {
        ""
    };
    match (asked, &reported.color, reported.brightness) {
        (Asked::Color, Some(color), _) => {
            return format!("The {}'s color is {color}{off_note}.", device.spoken());
        }
        (Asked::Brightness, _, Some(brightness)) => {
            return format!(
                "The {} is set to {}% brightness{off_note}.",
                device.spoken(),
                format_number(brightness)
            );
        }
        _ => {}
    }
    let Some(status) = &reported.status else {
        return format!(
            "I checked the {}, but the result didn't say what state it's in.",
            device.spoken()
        );
    };
    match asked {
        Asked::Is(wanted) if wanted == status => {
            format!("Yes, {}.", describe_state(device, reported, false))
        }
        Asked::Is(_) => format!("No, {}.", describe_state(device, reported, true)),
        _ => format!("{}.", capitalize(&describe_state(device, reported, false))),
    }
}

/// "the living room lamp is currently off", without the full stop.
fn describe_state(device: Device, state: &DeviceState, currently: bool) -> String {
    let status = state.status.as_deref().unwrap_or("in an unknown state");
    let now = if currently { "currently " } else { "" };
    let mut text = format!("the {} is {now}{status}", device.spoken());
    match device {
        Device::Lamp if status == "on" => {
            if let Some(brightness) = state.brightness {
                text.push_str(&format!(" at {}% brightness", format_number(brightness)));
            }
            if let Some(color) = &state.color {
                text.push_str(&format!(" with its color set to {color}"));
            }
        }
        Device::Thermostat => {
            if let Some(temperature) = state.temperature {
                text.push_str(&format!(
                    " and set to {} degrees Celsius",
                    format_number(temperature)
                ));
            }
        }
        _ => {}
    }
    text
}

struct Act {
    done: String,
    attempt: String,
}

fn act(done: String, attempt: String) -> Act {
    Act { done, attempt }
}

/// The things a `set_device_status` call does, in past ("turned on …") and plain ("turn on …") form.
fn change_acts(device: Device, state: &DeviceState, mention_status: bool) -> Vec<Act> {
    let name = device.spoken();
    let status = state.status.as_deref().filter(|_| mention_status);
    let mut acts = Vec::new();
    match device {
        Device::Lamp => {
            match status {
                Some(s @ ("on" | "off")) => acts.push(act(
                    format!("turned {s} the {name}"),
                    format!("turn {s} the {name}"),
                )),
                Some(other) => acts.push(act(
                    format!("set the {name} to {other}"),
                    format!("set the {name} to {other}"),
                )),
                None => {}
            }
            let mut setting = |what: &str, value: String| {
                let owner = if acts.is_empty() {
                    format!("the {name}'s")
                } else {
                    "its".to_owned()
                };
                let text = format!("set {owner} {what} to {value}");
                acts.push(act(text.clone(), text));
            };
            if let Some(brightness) = state.brightness {
                setting("brightness", format!("{}%", format_number(brightness)));
            }
            if let Some(color) = &state.color {
                setting("color", color.clone());
            }
        }
        Device::Thermostat => {
            if let Some(temperature) = state.temperature {
                let text = format!(
                    "set the {name} to {} degrees Celsius",
                    format_number(temperature)
                );
                acts.push(act(text.clone(), text));
            } else if let Some(status) = status {
                acts.push(act(
                    format!("switched the {name} to {status}"),
                    format!("switch the {name} to {status}"),
                ));
            }
        }
        Device::DoorLock => match status {
            Some(s @ ("locked" | "unlocked")) => {
                let verb = s.trim_end_matches("ed");
                acts.push(act(format!("{s} the {name}"), format!("{verb} the {name}")));
            }
            Some(other) => acts.push(act(
                format!("set the {} to {other}", device.name()),
                format!("set the {} to {other}", device.name()),
            )),
            None => {}
        },
    }
    acts
}

fn describe_change(
    device: Device,
    requested: &DeviceState,
    reported: &DeviceState,
    mention_status: bool,
) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mismatch = match (&requested.status, &reported.status) {
        (Some(wanted), Some(got)) if !wanted.eq_ignore_ascii_case(got) => Some((wanted, got)),
        _ => None,
    };
    // Say what the device reports, not what was asked for.
    let mut effective = DeviceState {
        status: reported.status.clone().or_else(|| requested.status.clone()),
        ..DeviceState::default()
    };
    if requested.brightness.is_some() {
        effective.brightness = reported.brightness.or(requested.brightness);
    }
    if requested.color.is_some() {
        effective.color = reported.color.clone().or_else(|| requested.color.clone());
    }
    if requested.temperature.is_some() {
        effective.temperature = reported.temperature.or(requested.temperature);
    }
    let acts = change_acts(device, &effective, mention_status && mismatch.is_none());
    segments.extend(acts.into_iter().map(|act| Segment::Done(act.done)));
    if let Some((wanted, got)) = mismatch {
        segments.push(Segment::Say(format!(
            "I asked for the {} to be {wanted}, but it reports {got}.",
            device.spoken()
        )));
    } else if device == Device::Thermostat
        && effective.temperature.is_some()
        && let Some(status @ ("heating" | "cooling")) = effective.status.as_deref()
    {
        segments.push(Segment::Say(format!("The thermostat is now {status}.")));
    }
    if segments.is_empty() {
        segments.push(Segment::Say(format!(
            "{}.",
            capitalize(&describe_state(device, &effective, false))
        )));
    }
    segments
}

fn describe_time(response: &Value) -> String {
    let raw = match payload(response) {
        Value::String(text) => Some(text.clone()),
        _ => field_str(
            response,
            &[
                "time",
                "current_time",
                "datetime",
                "date_time",
                "now",
                "local_time",
                "iso8601",
                "iso",
            ],
        ),
    };
    let Some(raw) = raw else {
        return format!("The clock tool answered {}.", compact(response));
    };
    let zone = field_str(response, &["timezone", "time_zone", "tz", "zone"]);
    match (speak_time(&raw), zone) {
        (Some(spoken), Some(zone)) => format!("It's {spoken} ({zone})."),
        (Some(spoken), None) => format!("It's {spoken}."),
        (None, _) => format!("The current time is {raw}."),
    }
}

/// "2024-05-01T15:04:05+02:00" → "3:04 PM on Wednesday, May 1".
fn speak_time(raw: &str) -> Option<String> {
    use jiff::civil::{DateTime, Time};
    let raw = raw.trim();
    let datetime = raw
        .parse::<jiff::Zoned>()
        .map(|zoned| zoned.datetime())
        .or_else(|_| raw.parse::<DateTime>())
        .or_else(|_| {
            raw.parse::<jiff::Timestamp>()
                .map(|ts| ts.to_zoned(jiff::tz::TimeZone::UTC).datetime())
        });
    if let Ok(datetime) = datetime {
        return Some(format!(
            "{} on {}",
            clock(datetime.hour(), datetime.minute()),
            datetime.strftime("%A, %B %-d")
        ));
    }
    raw.parse::<Time>()
        .ok()
        .map(|time| clock(time.hour(), time.minute()))
}

fn clock(hour: i8, minute: i8) -> String {
    let half = if hour < 12 { "AM" } else { "PM" };
    let hour = match hour % 12 {
        0 => 12,
        other => other,
    };
    format!("{hour}:{minute:02} {half}")
}

fn format_number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.1}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn number_json(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn join_list<S: AsRef<str>>(items: &[S], conjunction: &str) -> String {
    match items {
        [] => String::new(),
        [only] => only.as_ref().to_owned(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} {conjunction} {}", init.join(", "), last.as_ref())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Understanding text.

#[derive(Debug, Default)]
struct Understanding {
    intents: Vec<Intent>,
    /// Things the model must say because it can't do them ("the lamp can't be locked").
    notes: Vec<String>,
    last_device: Option<Device>,
    greeted: bool,
    thanked: bool,
    help: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Query,
    Command,
}

/// The lower-cased words of one clause; clauses end at punctuation and joining words.
#[derive(Debug, Default)]
struct Clause {
    words: Vec<String>,
    question: bool,
}

fn split_clauses(text: &str) -> Vec<Clause> {
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let mut padded = String::with_capacity(lower.len() + 16);
    for (i, &c) in chars.iter().enumerate() {
        let between_digits = i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        match c {
            '%' => padded.push_str(" percent "),
            '°' => padded.push_str(" degrees "),
            '?' => padded.push_str(" ? | "),
            '.' if between_digits => padded.push('.'),
            ',' | '.' | ';' | ':' | '!' | '\n' => padded.push_str(" | "),
            '\'' | '’' | '‘' => padded.push('\''),
            c if c.is_alphanumeric() => padded.push(c),
            _ => padded.push(' '),
        }
    }
    let mut clauses = vec![Clause::default()];
    for raw in padded.split_whitespace() {
        for word in split_digits(raw.trim_matches('\'')) {
            match word.as_str() {
                "|" | "and" | "then" | "also" | "plus" | "but" => clauses.push(Clause::default()),
                "?" => {
                    if let Some(current) = clauses.last_mut() {
                        current.question = true;
                    }
                }
                _ => {
                    if let Some(current) = clauses.last_mut() {
                        current.words.push(word);
                    }
                }
            }
        }
    }
    clauses.retain(|clause| !clause.words.is_empty());
    clauses
}

/// "22c" → "22", "c"; decimals stay whole.
fn split_digits(word: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut last_numeric = None;
    for c in word.chars() {
        let numeric = c.is_ascii_digit() || c == '.';
        match parts.last_mut() {
            Some(part) if last_numeric == Some(numeric) => part.push(c),
            _ => parts.push(c.to_string()),
        }
        last_numeric = Some(numeric);
    }
    parts.retain(|part| !part.is_empty() && part != ".");
    parts
}

const GREETINGS: &[&[&str]] = &[
    &["hi"],
    &["hello"],
    &["hey"],
    &["hiya"],
    &["howdy"],
    &["good", "morning"],
    &["good", "afternoon"],
    &["good", "evening"],
];

const FILLERS: &[&[&str]] = &[
    &["okay"],
    &["ok"],
    &["so"],
    &["well"],
    &["um"],
    &["uh"],
    &["hmm"],
    &["please"],
    &["alright"],
    &["all", "right"],
    &["now"],
    &["great"],
    &["cool"],
    &["nice"],
    &["perfect"],
    &["oh"],
    &["yes"],
    &["yeah"],
    &["no"],
    &["sure"],
    &["just"],
    &["actually"],
    &["kindly"],
    &["maybe"],
    &["can", "you"],
    &["could", "you"],
    &["would", "you"],
    &["will", "you"],
    &["you", "can"],
    &["i", "want", "to"],
    &["i'd", "like", "to"],
    &["i'd", "like", "you", "to"],
    &["i", "would", "like", "to"],
    &["i", "would", "like", "you", "to"],
    &["i", "need", "to"],
    &["i", "need", "you", "to"],
    &["go", "ahead", "and"],
    &["let's"],
    &["lets"],
];

const QUESTION_STARTS: &[&str] = &[
    "is", "are", "was", "were", "what", "what's", "whats", "which", "how", "how's", "hows", "does",
    "do", "did", "has", "have", "tell", "check", "show", "status", "whether", "any",
];

const COMMAND_VERBS: &[&str] = &[
    "turn",
    "switch",
    "set",
    "put",
    "make",
    "change",
    "unlock",
    "dim",
    "brighten",
    "raise",
    "lower",
    "increase",
    "decrease",
    "reduce",
    "heat",
    "cool",
    "warm",
    "open",
    "enable",
    "disable",
    "activate",
    "deactivate",
    "adjust",
    "ensure",
    "start",
];

const COLOURS: &[&str] = &[
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "white",
    "cyan",
    "magenta",
    "violet",
    "teal",
    "turquoise",
    "amber",
    "indigo",
    "lavender",
    "gold",
];

const COLOUR_SHADES: &[&str] = &["warm", "cool", "light", "dark", "pale", "deep", "bright"];

/// Rooms and places the demo has no device in, so "bedroom lamp" is not the living room lamp.
const OTHER_PLACES: &[&str] = &[
    "bedroom",
    "bathroom",
    "garage",
    "office",
    "hallway",
    "hall",
    "dining",
    "garden",
    "patio",
    "back",
    "side",
    "basement",
    "attic",
    "upstairs",
    "downstairs",
    "porch",
    "nursery",
    "guest",
    "kids",
    "study",
    "laundry",
    "balcony",
    "yard",
];

const PRONOUNS: &[&str] = &["it", "its", "it's", "that", "them", "this"];

/// A clause's words with the lookups the parser needs.
#[derive(Clone, Copy)]
struct Words<'a>(&'a [String]);

impl<'a> Words<'a> {
    fn get(self, index: usize) -> &'a str {
        self.0.get(index).map_or("", String::as_str)
    }

    fn has(self, word: &str) -> bool {
        self.0.iter().any(|w| w == word)
    }

    fn any(self, words: &[&str]) -> bool {
        self.0.iter().any(|w| words.contains(&w.as_str()))
    }

    fn seq(self, phrase: &[&str]) -> bool {
        self.0
            .windows(phrase.len())
            .any(|window| window.iter().zip(phrase).all(|(a, b)| a == b))
    }

    fn starts_with(self, phrase: &[&str]) -> bool {
        self.0.len() >= phrase.len() && self.0.iter().zip(phrase).all(|(a, b)| a == b)
    }

    /// "lock" is a verb in "lock the door" / "please lock it", a noun in "the lock".
    fn lock_is_verb(self, index: usize) -> bool {
        index == 0
            || matches!(
                self.get(index - 1),
                "please" | "and" | "to" | "then" | "you" | "also" | "just" | "now" | "should"
            )
    }

    fn has_lock_verb(self) -> bool {
        self.0
            .iter()
            .enumerate()
            .any(|(i, w)| w == "lock" && self.lock_is_verb(i))
    }
}

fn strip_leading<'a>(mut words: &'a [String], greeted: &mut bool) -> &'a [String] {
    loop {
        let matched = |phrases: &[&[&str]]| {
            phrases
                .iter()
                .find(|phrase| Words(words).starts_with(phrase))
                .map(|phrase| phrase.len())
        };
        if let Some(len) = matched(GREETINGS) {
            *greeted = true;
            words = &words[len..];
        } else if let Some(len) = matched(FILLERS) {
            words = &words[len..];
        } else {
            return words;
        }
    }
}

fn is_goodbye(w: Words) -> bool {
    w.any(&["bye", "goodbye", "goodnight", "farewell"])
        || [
            &["good", "bye"][..],
            &["good", "night"],
            &["see", "you"],
            &["see", "ya"],
            &["that's", "all"],
            &["thats", "all"],
            &["that", "is", "all"],
            &["that'll", "be", "all"],
            &["i'm", "done"],
            &["im", "done"],
            &["we're", "done"],
            &["end", "session"],
            &["end", "the", "session"],
            &["end", "the", "call"],
            &["hang", "up"],
        ]
        .iter()
        .any(|phrase| w.seq(phrase))
        || (w.0.len() <= 2 && w.any(&["quit", "exit"]))
}

fn is_help(w: Words) -> bool {
    w.any(&["help", "commands"])
        || w.seq(&["what", "can", "you", "do"])
        || w.seq(&["what", "do", "you", "understand"])
        || w.seq(&["what", "do", "you", "know"])
        || (w.any(&["devices"]) && w.any(&["what", "which"]))
}

fn is_time_request(w: Words) -> bool {
    w.any(&["time", "date", "clock"]) || (w.has("day") && w.any(&["what", "which", "what's"]))
}

enum Mention {
    Known(Device),
    Unknown(String),
}

fn is_device_noun(word: &str) -> bool {
    matches!(
        word,
        "lamp"
            | "lamps"
            | "light"
            | "lights"
            | "thermostat"
            | "door"
            | "lock"
            | "heater"
            | "heating"
    )
}

fn mentions(w: Words) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    for (i, word) in w.0.iter().enumerate() {
        let prev = if i == 0 { "" } else { w.get(i - 1) };
        let next = w.get(i + 1);
        let device = match word.as_str() {
            "lamp" | "lamps" | "light" | "lights" if !COLOURS.contains(&next) => Device::Lamp,
            "living" if next == "room" && !is_device_noun(w.get(i + 2)) => Device::Lamp,
            "thermostat" | "heating" | "heater" | "ac" | "aircon" | "conditioning"
            | "conditioner" => Device::Thermostat,
            "kitchen" if !is_device_noun(next) => Device::Thermostat,
            "door" | "doors" | "deadbolt" => Device::DoorLock,
            "lock" | "locks" if !w.lock_is_verb(i) && prev != "door" => Device::DoorLock,
            _ => continue,
        };
        let elsewhere = OTHER_PLACES.contains(&prev)
            || (device != Device::Thermostat && prev == "kitchen")
            || (device != Device::Lamp && prev == "room");
        if elsewhere {
            found.push(Mention::Unknown(format!("{prev} {word}")));
        } else if !found
            .iter()
            .any(|m| matches!(m, Mention::Known(d) if *d == device))
        {
            found.push(Mention::Known(device));
        }
    }
    found
}

/// The device a request can only be about ("dim" → lamp, "degrees" → thermostat, "unlock" → lock).
fn implied_device(w: Words) -> Option<Device> {
    if colour_in(w).is_some()
        || w.any(&[
            "brightness",
            "bright",
            "brighter",
            "brighten",
            "dim",
            "dimmer",
            "darker",
            "percent",
            "color",
            "colour",
        ])
    {
        Some(Device::Lamp)
    } else if w.any(&[
        "degrees",
        "degree",
        "celsius",
        "fahrenheit",
        "temperature",
        "warmer",
        "cooler",
        "colder",
        "hotter",
        "warm",
        "heat",
        "cool",
    ]) {
        Some(Device::Thermostat)
    } else if w.any(&["unlock", "unlocked", "locked"]) || w.has_lock_verb() {
        Some(Device::DoorLock)
    } else {
        None
    }
}

fn colour_in(w: Words) -> Option<String> {
    for (i, word) in w.0.iter().enumerate() {
        if COLOURS.contains(&word.as_str()) {
            let shade = if i == 0 { "" } else { w.get(i - 1) };
            return Some(if COLOUR_SHADES.contains(&shade) {
                format!("{shade} {word}")
            } else {
                word.clone()
            });
        }
    }
    // An unlisted colour still counts when it is named as one: "set its color to chartreuse".
    let keyword =
        w.0.iter()
            .position(|word| word == "color" || word == "colour")?;
    let to = w.0[keyword..].iter().position(|word| word == "to")? + keyword;
    let value = w.get(to + 1);
    (!value.is_empty() && !value.starts_with(|c: char| c.is_ascii_digit()) && value != "the")
        .then(|| value.to_owned())
}

struct Number {
    start: usize,
    end: usize,
    value: f64,
}

fn number_word(word: &str) -> Option<f64> {
    const UNITS: &[&str] = &[
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: &[&str] = &[
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if let Some(value) = UNITS.iter().position(|unit| *unit == word) {
        return Some(value as f64);
    }
    TENS.iter()
        .position(|tens| *tens == word)
        .map(|index| (index as f64 + 2.0) * 10.0)
}

fn numbers(w: Words) -> Vec<Number> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < w.0.len() {
        let word = w.get(i);
        if word.starts_with(|c: char| c.is_ascii_digit())
            && let Ok(value) = word.parse::<f64>()
        {
            found.push(Number {
                start: i,
                end: i,
                value,
            });
        } else if let Some(mut value) = number_word(word) {
            let start = i;
            if value >= 20.0
                && let Some(unit) = number_word(w.get(i + 1)).filter(|u| (1.0..10.0).contains(u))
            {
                value += unit;
                i += 1;
            }
            if w.get(i + 1) == "hundred" {
                value *= 100.0;
                i += 1;
            }
            found.push(Number {
                start,
                end: i,
                value,
            });
        }
        i += 1;
    }
    found
}

/// The number that goes with a unit word when there is one ("to 30 percent"), else the last.
fn pick_number<'n>(w: Words, found: &'n [Number], units: &[&str]) -> Option<&'n Number> {
    found
        .iter()
        .find(|n| units.contains(&w.get(n.end + 1)))
        .or_else(|| found.last())
}

fn brightness_level(w: Words) -> Option<Level> {
    let down = w.any(&[
        "dim", "dimmer", "darker", "lower", "decrease", "reduce", "down",
    ]);
    let up = w.any(&["brighter", "brighten", "increase", "raise", "up"]);
    let found = numbers(w);
    if let Some(number) = pick_number(w, &found, &["percent"]) {
        let by = number.start > 0 && w.get(number.start - 1) == "by";
        return Some(match (by, down) {
            (true, true) => Level::By(-number.value),
            (true, false) => Level::By(number.value),
            (false, _) => Level::To(number.value),
        });
    }
    if w.has("half") {
        Some(Level::To(50.0))
    } else if w.any(&["full", "max", "maximum", "brightest"]) {
        Some(Level::To(100.0))
    } else if down {
        Some(Level::By(-BRIGHTNESS_STEP))
    } else if up {
        Some(Level::By(BRIGHTNESS_STEP))
    } else {
        None
    }
}

fn temperature_level(w: Words) -> Option<Level> {
    let down = w.any(&["cooler", "colder", "lower", "decrease", "reduce", "down"]);
    let up = w.any(&["warmer", "hotter", "warm", "raise", "increase", "up"]);
    let found = numbers(w);
    let units = ["degrees", "degree", "celsius", "c", "fahrenheit", "f"];
    if let Some(number) = pick_number(w, &found, &units) {
        let by = number.start > 0 && w.get(number.start - 1) == "by";
        let fahrenheit = matches!(w.get(number.end + 1), "fahrenheit" | "f")
            || matches!(w.get(number.end + 2), "fahrenheit" | "f");
        let mut value = number.value;
        if fahrenheit {
            // Round to half degrees: the thermostat works in Celsius.
            value = if by {
                value * 5.0 / 9.0
            } else {
                (value - 32.0) * 5.0 / 9.0
            };
            value = (value * 2.0).round() / 2.0;
        }
        return Some(match (by, down) {
            (true, true) => Level::By(-value),
            (true, false) => Level::By(value),
            (false, _) => Level::To(value),
        });
    }
    if down {
        Some(Level::By(-TEMPERATURE_STEP))
    } else if up {
        Some(Level::By(TEMPERATURE_STEP))
    } else {
        None
    }
}

/// What a command clause asks of one device; `Err` is a sentence saying why it can't be done.
fn change_for(device: Device, w: Words) -> Result<Option<Change>, String> {
    let on = w.has("on");
    let off = w.has("off");
    let lock = w.any(&["locked", "secure", "secured"]) || w.has_lock_verb();
    let unlock = w.any(&["unlock", "unlocked", "open"]);
    let colour = colour_in(w);
    let has_number = !numbers(w).is_empty();
    let name = device.spoken();
    let change = match device {
        Device::Lamp => {
            if lock || unlock {
                return Err(format!("The {name} can't be locked or unlocked."));
            }
            if has_number && w.any(&["degrees", "degree", "celsius", "fahrenheit", "temperature"]) {
                return Err(format!("The {name} doesn't have a temperature setting."));
            }
            Change {
                status: if off {
                    Some("off".to_owned())
                } else if on {
                    Some("on".to_owned())
                } else {
                    None
                },
                color: colour,
                brightness: brightness_level(w),
                temperature: None,
            }
        }
        Device::Thermostat => {
            if lock || unlock {
                return Err(format!("The {name} can't be locked or unlocked."));
            }
            if colour.is_some() || w.any(&["brightness", "percent", "dim", "brighten"]) {
                return Err(format!(
                    "The {name} has no color or brightness, only a temperature."
                ));
            }
            let temperature = temperature_level(w);
            let cool = w.any(&[
                "cool",
                "cooling",
                "ac",
                "aircon",
                "conditioning",
                "conditioner",
            ]);
            let heat = w.any(&["heat", "heating", "heater"]) || on;
            let status = if off || w.has("idle") {
                Some("idle")
            } else if temperature.is_some() {
                // The target decides between heating and cooling.
                None
            } else if cool {
                Some("cooling")
            } else if heat {
                Some("heating")
            } else {
                None
            };
            Change {
                status: status.map(str::to_owned),
                temperature,
                ..Change::default()
            }
        }
        Device::DoorLock => {
            if on || off {
                return Err(format!(
                    "The {} can only be locked or unlocked.",
                    device.name()
                ));
            }
            if colour.is_some() || has_number {
                return Err(format!(
                    "The {} can only be locked or unlocked.",
                    device.name()
                ));
            }
            Change {
                status: if unlock {
                    Some("unlocked".to_owned())
                } else if lock {
                    Some("locked".to_owned())
                } else {
                    None
                },
                ..Change::default()
            }
        }
    };
    Ok((!change.is_empty()).then_some(change))
}

fn asked_about(device: Device, w: Words) -> Asked {
    let is = |status: &str| Asked::Is(status.to_owned());
    match device {
        Device::Lamp if w.any(&["color", "colour"]) => Asked::Color,
        Device::Lamp if w.any(&["bright", "brightness", "dim"]) => Asked::Brightness,
        Device::Lamp if w.has("off") => is("off"),
        Device::Lamp if w.has("on") => is("on"),
        Device::Thermostat if w.any(&["off", "idle"]) => is("idle"),
        Device::Thermostat if w.any(&["cooling", "cool", "ac"]) => is("cooling"),
        Device::Thermostat if w.any(&["heating", "heat", "on"]) => is("heating"),
        Device::DoorLock if w.any(&["unlocked", "open"]) => is("unlocked"),
        Device::DoorLock if w.any(&["locked", "secure", "secured"]) => is("locked"),
        _ => Asked::General,
    }
}

const WHICH_DEVICE: &str = "Which device do you mean? I know the living room lamp, the kitchen thermostat and the front door lock.";

fn understand(text: &str, last_device: Option<Device>) -> Understanding {
    let mut understood = Understanding {
        last_device,
        ..Understanding::default()
    };
    let mut previous_mode: Option<Mode> = None;
    // A clause like "and the door" borrows the request of the clause before it.
    let mut previous_command: Option<Vec<String>> = None;
    for clause in split_clauses(text) {
        let words = strip_leading(&clause.words, &mut understood.greeted);
        let w = Words(words);
        if words.is_empty() {
            continue;
        }
        if is_goodbye(w) {
            understood.intents.push(Intent::Goodbye);
            continue;
        }
        if matches!(w.get(0), "thanks" | "thank" | "cheers" | "thx") {
            understood.thanked = true;
            continue;
        }
        if is_help(w) {
            understood.help = true;
            continue;
        }
        let found = mentions(w);
        let mut devices: Vec<Device> = found
            .iter()
            .filter_map(|m| match m {
                Mention::Known(device) => Some(*device),
                Mention::Unknown(_) => None,
            })
            .collect();
        if devices.is_empty() {
            if is_time_request(w) {
                understood.intents.push(Intent::Time);
                continue;
            }
            if let Some(Mention::Unknown(name)) = found.first() {
                understood.notes.push(format!(
                    "I don't know a {name}. The devices here are the living room lamp, the kitchen thermostat and the front door lock."
                ));
                continue;
            }
        }
        let command = w.any(COMMAND_VERBS) || w.has_lock_verb() || w.seq(&["make", "sure"]);
        let refers_back =
            w.any(PRONOUNS) || (command && w.any(&["on", "off", "up", "down", "brighter"]));
        if devices.is_empty() {
            // Only a pronoun or a bare command ("turn off") falls back to the last device, so
            // "what's the weather like?" or "make me a sandwich" is not taken as being about
            // the lamp.
            let fallback = understood.last_device.filter(|_| refers_back);
            devices.extend(implied_device(w).or(fallback));
        }

        let explicit_mode = if QUESTION_STARTS.contains(&w.get(0)) {
            Some(Mode::Query)
        } else if command {
            Some(Mode::Command)
        } else if clause.question {
            Some(Mode::Query)
        } else {
            None
        };
        let Some(&first_device) = devices.first() else {
            if refers_back && !understood.notes.iter().any(|note| note == WHICH_DEVICE) {
                understood.notes.push(WHICH_DEVICE.to_owned());
            }
            continue;
        };
        let mode = explicit_mode.or(previous_mode).unwrap_or_else(|| {
            if matches!(change_for(first_device, w), Ok(Some(_))) {
                Mode::Command
            } else {
                Mode::Query
            }
        });

        for &device in &devices {
            match mode {
                Mode::Query => understood
                    .intents
                    .push(Intent::Query(device, asked_about(device, w))),
                Mode::Command => {
                    let inherited = || {
                        previous_command
                            .as_deref()
                            .and_then(|earlier| change_for(device, Words(earlier)).ok().flatten())
                    };
                    match change_for(device, w) {
                        Ok(Some(change)) => understood.intents.push(Intent::Change(device, change)),
                        Ok(None) => match inherited() {
                            Some(change) => understood.intents.push(Intent::Change(device, change)),
                            None => understood.notes.push(format!(
                                "I'm not sure what to change on the {}.",
                                device.spoken()
                            )),
                        },
                        Err(note) => understood.notes.push(note),
                    }
                }
            }
        }
        understood.last_device = devices.last().copied();
        previous_mode = Some(mode);
        if mode == Mode::Command && change_for(first_device, w).is_ok_and(|c| c.is_some()) {
            previous_command = Some(words.to_vec());
        }
    }
    understood
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_TOOLS: [&str; 4] = [
        GET_DEVICE_STATUS,
        SET_DEVICE_STATUS,
        GET_CURRENT_TIME,
        END_SESSION,
    ];

    fn model() -> ScriptedModel {
        ScriptedModel::new(ALL_TOOLS.map(str::to_owned))
    }

    fn model_with(tools: &[&str]) -> ScriptedModel {
        ScriptedModel::new(tools.iter().map(|tool| (*tool).to_owned()))
    }

    fn call(name: &str, args: Value) -> PlannedCall {
        PlannedCall {
            name: name.to_owned(),
            args,
        }
    }

    fn calls(step: ModelStep) -> Vec<PlannedCall> {
        match step {
            ModelStep::CallTools(calls) => calls,
            ModelStep::Reply(reply) => panic!("expected tool calls, got reply {reply:?}"),
        }
    }

    fn reply(step: ModelStep) -> String {
        match step {
            ModelStep::Reply(reply) => reply,
            ModelStep::CallTools(calls) => panic!("expected a reply, got calls {calls:?}"),
        }
    }

    /// Answers each call with the matching response, in order.
    fn answer(
        model: &mut ScriptedModel,
        planned: &[PlannedCall],
        responses: &[Value],
    ) -> ModelStep {
        assert_eq!(planned.len(), responses.len(), "one response per call");
        let results: Vec<(PlannedCall, Value)> = planned
            .iter()
            .cloned()
            .zip(responses.iter().cloned())
            .collect();
        model.tool_results(&results)
    }

    fn set_call(device: &str, status: &str, setting: Option<Value>) -> PlannedCall {
        let mut args = json!({ "device_name": device, "new_status": status });
        if let (Some(setting), Some(object)) = (setting, args.as_object_mut()) {
            object.insert("setting".to_owned(), setting);
        }
        call(SET_DEVICE_STATUS, args)
    }

    fn get_call(device: &str) -> PlannedCall {
        call(GET_DEVICE_STATUS, json!({ "device_name": device }))
    }

    #[test]
    fn seed_000_three_turn_dialogue() {
        let mut model = model();

        let planned = calls(model.user_turn("Is the living room lamp on?"));
        assert_eq!(planned, vec![get_call("living room lamp")]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"device_name": "living room lamp", "status": "off"})],
        ));
        assert_eq!(said, "No, the living room lamp is currently off.");

        let planned = calls(model.user_turn("Okay, please turn it on and set its color to blue."));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"color": "blue"}))
            )]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[
                json!({"device_name": "living room lamp", "status": "on", "settings_updated": {"color": "blue"}}),
            ],
        ));
        assert_eq!(
            said,
            "Alright, I've turned on the living room lamp and set its color to blue."
        );

        let planned = calls(model.user_turn("What's the kitchen thermostat set to?"));
        assert_eq!(planned, vec![get_call("kitchen thermostat")]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[
                json!({"device_name": "kitchen thermostat", "status": "idle", "temperature_celsius": 20}),
            ],
        ));
        assert_eq!(
            said,
            "The kitchen thermostat is idle and set to 20 degrees Celsius."
        );
    }

    #[test]
    fn thermostat_reading_without_temperature_says_only_the_status() {
        let mut model = model();
        let planned = calls(model.user_turn("what's the thermostat set to"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"device_name": "kitchen thermostat", "status": "idle"})],
        ));
        assert_eq!(said, "The kitchen thermostat is idle.");
    }

    #[test]
    fn pronouns_follow_the_last_device_mentioned() {
        let mut model = model();
        let planned = calls(model.user_turn("is the door locked"));
        assert_eq!(planned, vec![get_call("front door lock")]);
        let said = reply(answer(&mut model, &planned, &[json!({"status": "locked"})]));
        assert_eq!(said, "Yes, the front door is locked.");

        let planned = calls(model.user_turn("Unlock it please."));
        assert_eq!(planned, vec![set_call("front door lock", "unlocked", None)]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "unlocked"})],
        ));
        assert_eq!(said, "Alright, I've unlocked the front door.");

        // A request only the lamp can satisfy goes to the lamp even though "it" was the door.
        let planned = calls(model.user_turn("make it red"));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"color": "red"}))
            )]
        );
        let _ = answer(&mut model, &planned, &[json!({"status": "on"})]);
        let planned = calls(model.user_turn("now turn it off"));
        assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
    }

    #[test]
    fn pronoun_without_any_earlier_device_asks_which() {
        let mut model = model();
        let said = reply(model.user_turn("turn it on"));
        assert_eq!(said, WHICH_DEVICE);
    }

    #[test]
    fn one_request_naming_several_devices_makes_several_calls() {
        let mut model = model();
        let planned = calls(model.user_turn("Turn on the lamp and lock the door"));
        assert_eq!(
            planned,
            vec![
                set_call("living room lamp", "on", None),
                set_call("front door lock", "locked", None)
            ]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "on"}), json!({"status": "locked"})],
        ));
        assert_eq!(
            said,
            "Alright, I've turned on the living room lamp and locked the front door."
        );

        let planned = calls(model.user_turn("is the lamp on and the door locked?"));
        assert_eq!(
            planned,
            vec![get_call("living room lamp"), get_call("front door lock")]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[
                json!({"status": "on", "brightness": 80, "color": "red"}),
                json!({"status": "unlocked"}),
            ],
        ));
        assert_eq!(
            said,
            "Yes, the living room lamp is on at 80% brightness with its color set to red. \
             No, the front door is currently unlocked."
        );

        let planned = calls(model.user_turn("switch off the light and the thermostat"));
        assert_eq!(
            planned,
            vec![
                set_call("living room lamp", "off", None),
                set_call("kitchen thermostat", "idle", None)
            ]
        );
    }

    #[test]
    fn lamp_commands() {
        let mut model = model();
        let planned = calls(model.user_turn("Dim the lamp to 30%"));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"brightness": 30}))
            )]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "on", "brightness": 30})],
        ));
        assert_eq!(
            said,
            "Alright, I've set the living room lamp's brightness to 30%."
        );

        let planned =
            calls(model.user_turn("set the living room light brightness to fifty percent"));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"brightness": 50}))
            )]
        );
        let _ = answer(&mut model, &planned, &[json!({"status": "on"})]);

        // Relative changes use the brightness seen in the last result.
        let planned = calls(model.user_turn("make the lamp a bit brighter"));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"brightness": 70}))
            )]
        );

        let planned = calls(model.user_turn("LIGHTS OFF"));
        assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
        let said = reply(answer(&mut model, &planned, &[json!({"status": "off"})]));
        assert_eq!(said, "Alright, I've turned off the living room lamp.");

        let planned =
            calls(model.user_turn("Turn the lamp on, set it to warm white and 40 percent"));
        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"brightness": 40, "color": "warm white"}))
            )]
        );
        let said = reply(answer(&mut model, &planned, &[json!({"status": "on"})]));
        assert_eq!(
            said,
            "Alright, I've turned on the living room lamp, set its brightness to 40% and set its color to warm white."
        );
    }

    #[test]
    fn lamp_questions() {
        let mut model = model();
        let planned = calls(model.user_turn("what color is the lamp?"));
        assert_eq!(planned, vec![get_call("living room lamp")]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "on", "color": "blue", "brightness": 60})],
        ));
        assert_eq!(said, "The living room lamp's color is blue.");

        let planned = calls(model.user_turn("how bright is it"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "off", "brightness": 60})],
        ));
        assert_eq!(
            said,
            "The living room lamp is set to 60% brightness, though it's currently off."
        );

        let planned = calls(model.user_turn("Is the living room lamp off?"));
        let said = reply(answer(&mut model, &planned, &[json!({"status": "off"})]));
        assert_eq!(said, "Yes, the living room lamp is off.");
    }

    #[test]
    fn thermostat_commands() {
        let mut model = model();
        let planned = calls(model.user_turn("Set the thermostat to 22 degrees"));
        assert_eq!(
            planned,
            vec![set_call(
                "kitchen thermostat",
                "heating",
                Some(json!({"temperature_celsius": 22}))
            )]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "heating", "settings_updated": {"temperature_celsius": 22}})],
        ));
        assert_eq!(
            said,
            "Alright, I've set the kitchen thermostat to 22 degrees Celsius. The thermostat is now heating."
        );

        let planned = calls(model.user_turn("make the kitchen cooler"));
        assert_eq!(
            planned,
            vec![set_call(
                "kitchen thermostat",
                "cooling",
                Some(json!({"temperature_celsius": 20}))
            )]
        );

        let planned = calls(model.user_turn("set the heating to 21.5°C"));
        assert_eq!(
            planned,
            vec![set_call(
                "kitchen thermostat",
                "cooling",
                Some(json!({"temperature_celsius": 21.5}))
            )]
        );

        let planned = calls(model.user_turn("turn off the thermostat"));
        assert_eq!(planned, vec![set_call("kitchen thermostat", "idle", None)]);
        let said = reply(answer(&mut model, &planned, &[json!({"status": "idle"})]));
        assert_eq!(
            said,
            "Alright, I've switched the kitchen thermostat to idle."
        );

        let planned = calls(model.user_turn("set the thermostat to seventy two fahrenheit"));
        assert_eq!(
            planned,
            vec![set_call(
                "kitchen thermostat",
                "idle",
                Some(json!({"temperature_celsius": 22}))
            )]
        );
    }

    #[test]
    fn relative_change_to_an_unknown_value_reads_the_device_first() {
        let mut model = model();
        let planned = calls(model.user_turn("make it warmer in the kitchen"));
        assert_eq!(planned, vec![get_call("kitchen thermostat")]);
        let next = calls(answer(
            &mut model,
            &planned,
            &[json!({"status": "idle", "temperature_celsius": 19})],
        ));
        assert_eq!(
            next,
            vec![set_call(
                "kitchen thermostat",
                "heating",
                Some(json!({"temperature_celsius": 21}))
            )]
        );
        let said = reply(answer(&mut model, &next, &[json!({"status": "heating"})]));
        assert_eq!(
            said,
            "Alright, I've set the kitchen thermostat to 21 degrees Celsius. The thermostat is now heating."
        );
    }

    #[test]
    fn lock_commands_and_questions() {
        let mut model = model();
        for (text, status) in [
            ("Lock the front door", "locked"),
            ("please unlock the door", "unlocked"),
            ("can you lock it?", "locked"),
            ("open the front door", "unlocked"),
        ] {
            let planned = calls(model.user_turn(text));
            assert_eq!(
                planned,
                vec![set_call("front door lock", status, None)],
                "{text}"
            );
            let _ = answer(&mut model, &planned, &[json!({"status": status})]);
        }
        let planned = calls(model.user_turn("is the lock locked"));
        assert_eq!(planned, vec![get_call("front door lock")]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "unlocked"})],
        ));
        assert_eq!(said, "No, the front door is currently unlocked.");
        let planned = calls(model.user_turn("check the lock"));
        let said = reply(answer(&mut model, &planned, &[json!({"status": "locked"})]));
        assert_eq!(said, "The front door is locked.");
    }

    #[test]
    fn impossible_requests_are_explained() {
        let mut model = model();
        assert_eq!(
            reply(model.user_turn("turn on the front door")),
            "The front door lock can only be locked or unlocked."
        );
        assert_eq!(
            reply(model.user_turn("lock the lamp")),
            "The living room lamp can't be locked or unlocked."
        );
        let said = reply(model.user_turn("turn on the bedroom lamp"));
        assert!(said.starts_with("I don't know a bedroom lamp."), "{said}");
    }

    #[test]
    fn time_and_goodbye() {
        let mut model = model();
        let planned = calls(model.user_turn("What time is it?"));
        assert_eq!(planned, vec![call(GET_CURRENT_TIME, json!({}))]);
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"current_time": "2024-05-01T15:04:05+02:00", "timezone": "Europe/Paris"})],
        ));
        assert_eq!(said, "It's 3:04 PM on Wednesday, May 1 (Europe/Paris).");

        let planned = calls(model.user_turn("what's the time"));
        let said = reply(answer(&mut model, &planned, &[json!({"time": "09:30"})]));
        assert_eq!(said, "It's 9:30 AM.");

        let planned = calls(model.user_turn("time?"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"time": "half past nine"})],
        ));
        assert_eq!(said, "The current time is half past nine.");

        let planned = calls(model.user_turn("That's all, thanks. Bye!"));
        assert_eq!(
            planned,
            vec![call(
                END_SESSION,
                json!({"reason": "the user said goodbye"})
            )]
        );
        let said = reply(answer(&mut model, &planned, &[json!({"success": true})]));
        assert_eq!(said, "Goodbye! Ending the session now.");
    }

    #[test]
    fn goodbye_comes_after_other_calls() {
        let mut model = model();
        let planned = calls(model.user_turn("goodbye, and turn off the lamp"));
        assert_eq!(
            planned,
            vec![
                set_call("living room lamp", "off", None),
                call(END_SESSION, json!({"reason": "the user said goodbye"}))
            ]
        );
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "off"}), json!({})],
        ));
        assert_eq!(
            said,
            "Alright, I've turned off the living room lamp. Goodbye! Ending the session now."
        );
    }

    #[test]
    fn undeclared_tools_are_never_called() {
        let mut model = model_with(&[GET_DEVICE_STATUS]);
        assert_eq!(
            reply(model.user_turn("turn on the lamp")),
            "I can't change the living room lamp, because this session didn't declare the set_device_status tool."
        );
        assert_eq!(
            reply(model.user_turn("what time is it")),
            "I can't tell you the time, because this session didn't declare the get_current_time tool."
        );
        assert_eq!(
            reply(model.user_turn("bye")),
            "Goodbye! I can't end the session myself, because this session didn't declare the end_session tool."
        );
        // The declared part of a mixed request still runs, and the rest is explained.
        let planned = calls(model.user_turn("is the lamp on and lock the door"));
        assert_eq!(planned, vec![get_call("living room lamp")]);
        let said = reply(answer(&mut model, &planned, &[json!({"status": "on"})]));
        assert_eq!(
            said,
            "Yes, the living room lamp is on. I can't change the front door, because this session didn't declare the set_device_status tool."
        );

        let mut bare = model_with(&[]);
        let said = reply(bare.user_turn("is the lamp on"));
        assert!(said.contains("get_device_status"), "{said}");
        let said = reply(bare.user_turn("blah"));
        assert!(said.contains("didn't declare any of my tools"), "{said}");
    }

    #[test]
    fn relative_change_without_a_status_tool_asks_for_a_value() {
        let mut model = model_with(&[SET_DEVICE_STATUS]);
        assert_eq!(
            reply(model.user_turn("make it warmer in the kitchen")),
            "I don't know the current temperature of the kitchen thermostat, so please tell me the exact value you want."
        );
    }

    #[test]
    fn error_results_are_reported_in_plain_words() {
        let mut model = model();
        let planned = calls(model.user_turn("turn on the lamp"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"success": false, "error": "Device is offline."})],
        ));
        assert_eq!(
            said,
            "Sorry, I couldn't turn on the living room lamp: device is offline."
        );

        let planned = calls(model.user_turn("is the door locked"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"error": {"message": "Lock unreachable"}})],
        ));
        assert_eq!(
            said,
            "Sorry, I couldn't check the front door: lock unreachable."
        );

        let planned = calls(model.user_turn("set the thermostat to 25"));
        let said = reply(answer(&mut model, &planned, &[json!({"success": false})]));
        assert_eq!(
            said,
            "Sorry, I couldn't set the kitchen thermostat to 25 degrees Celsius: the tool reported a failure without saying why."
        );

        let planned = calls(model.user_turn("bye"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"error": "not allowed"})],
        ));
        assert_eq!(
            said,
            "Goodbye! I couldn't end the session myself: not allowed."
        );
    }

    #[test]
    fn results_in_an_output_envelope_are_understood() {
        let mut model = model();
        let planned = calls(model.user_turn("Is the living room lamp on?"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"output": {"status": "on"}})],
        ));
        assert_eq!(said, "Yes, the living room lamp is on.");
    }

    #[test]
    fn a_device_reporting_a_different_state_is_believed() {
        let mut model = model();
        let planned = calls(model.user_turn("lock the door"));
        let said = reply(answer(
            &mut model,
            &planned,
            &[json!({"status": "unlocked"})],
        ));
        assert_eq!(
            said,
            "I asked for the front door to be locked, but it reports unlocked."
        );
    }

    #[test]
    fn unknown_requests_get_help_not_calls() {
        let mut model = model();
        for text in ["What's the weather like?", "sing me a song", "", "   "] {
            let said = reply(model.user_turn(text));
            assert!(
                said.starts_with("Sorry, I didn't understand that."),
                "{text}: {said}"
            );
            assert!(said.contains("living room lamp"), "{said}");
            assert!(said.contains("\"dim the lamp to 30%\""), "{said}");
        }
        let said = reply(model.user_turn("Hello!"));
        assert!(
            said.starts_with("Hello! I'm the livetalk demo model"),
            "{said}"
        );
        // Not about the lamp just because the lamp came up before.
        let _ = model.user_turn("is the lamp on");
        for text in ["make me a sandwich", "what's the weather like?"] {
            let said = reply(model.user_turn(text));
            assert!(
                said.starts_with("Sorry, I didn't understand that."),
                "{text}: {said}"
            );
        }
        let said = reply(model.user_turn("what can you do?"));
        assert!(said.starts_with("I'm the livetalk demo model"), "{said}");
        assert_eq!(
            reply(model.user_turn("thanks")),
            "You're welcome! Anything else?"
        );
    }

    #[test]
    fn audio_turns_are_acknowledged() {
        let mut model = model();
        let said = reply(model.audio_turn(Duration::from_millis(2300)));
        assert!(
            said.starts_with("I heard about 2.3 seconds of speech"),
            "{said}"
        );
        assert!(said.contains("type your request"), "{said}");
    }

    #[test]
    fn results_without_a_pending_plan_are_still_phrased() {
        let mut model = model();
        let said = reply(model.tool_results(&[(
            set_call("living room lamp", "on", Some(json!({"color": "green"}))),
            json!({"status": "on"}),
        )]));
        assert_eq!(
            said,
            "Alright, I've turned on the living room lamp and set its color to green."
        );
    }

    #[test]
    fn serde_round_trip_keeps_the_conversation() {
        let mut model = model();
        let planned = calls(model.user_turn("Is the living room lamp on?"));
        let _ = answer(
            &mut model,
            &planned,
            &[json!({"status": "off", "brightness": 40})],
        );
        let planned = calls(model.user_turn("make it brighter"));

        let saved = serde_json::to_string(&model).expect("model serializes");
        let mut restored: ScriptedModel = serde_json::from_str(&saved).expect("model deserializes");
        assert_eq!(
            serde_json::to_string(&restored).expect("serializes again"),
            saved
        );

        assert_eq!(
            planned,
            vec![set_call(
                "living room lamp",
                "on",
                Some(json!({"brightness": 60}))
            )]
        );
        let said = reply(answer(
            &mut restored,
            &planned,
            &[json!({"status": "on", "brightness": 60})],
        ));
        assert_eq!(
            said,
            "Alright, I've turned on the living room lamp and set its brightness to 60%."
        );
        // "it" still means the lamp after the restore.
        let planned = calls(restored.user_turn("turn it off"));
        assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
    }
}
