//! The model's phrasing: help and small talk, and the sentences built from tool results
//! ("Alright, I've turned on the living room lamp.").

use serde_json::Value;

use super::devices::{Device, DeviceState};
use super::pending::{Pending, Purpose, Segment};
use super::results::{compact, field_str, payload, requested_state};
use super::tools::{
    END_SESSION, GET_CURRENT_TIME, GET_DEVICE_STATUS, PlannedCall, SET_DEVICE_STATUS, Toolset,
};
use super::understanding::{Asked, Understanding};

/// The answer to a turn that asks for nothing the tools can do: its notes, help, or a greeting.
pub(super) fn small_talk(tools: &Toolset, understood: &Understanding) -> String {
    if !understood.notes.is_empty() {
        understood.notes.join(" ")
    } else if understood.help {
        help(tools)
    } else if understood.greeted {
        format!("Hello! {}", help(tools))
    } else if understood.thanked {
        "You're welcome! Anything else?".to_owned()
    } else {
        format!("Sorry, I didn't understand that. {}", help(tools))
    }
}

/// Requests the model would carry out with these tools, quoted.
pub(super) fn examples(tools: &Toolset) -> Vec<&'static str> {
    let mut examples = Vec::new();
    if tools.declares(GET_DEVICE_STATUS) {
        examples.push("\"Is the living room lamp on?\"");
    }
    if tools.declares(SET_DEVICE_STATUS) {
        examples.extend([
            "\"dim the lamp to 30%\"",
            "\"set the thermostat to 22 degrees\"",
            "\"lock the front door\"",
        ]);
    }
    if tools.declares(GET_CURRENT_TIME) {
        examples.push("\"What time is it?\"");
    }
    if tools.declares(END_SESSION) {
        examples.push("\"goodbye\"");
    }
    examples
}

/// What the model can do with these tools, for a user who asked or was not understood.
fn help(tools: &Toolset) -> String {
    let mut text = String::from(
        "I'm the livetalk demo model, so I only understand a few typed smart-home requests.",
    );
    if tools.declares(GET_DEVICE_STATUS) || tools.declares(SET_DEVICE_STATUS) {
        text.push_str(
            " I know three devices: the living room lamp (on or off, brightness, color), \
             the kitchen thermostat (temperature) and the front door lock (locked or unlocked).",
        );
    }
    let requests = examples(tools);
    let own = tools.own_tools();
    if requests.is_empty() && own.is_empty() && !tools.searches() {
        text.push_str(
            " This session didn't declare any of my tools (get_device_status, set_device_status, \
             get_current_time, end_session), so there's nothing I can do here.",
        );
    } else if !requests.is_empty() {
        text.push_str(&format!(" Try {}.", join_list(&requests, "or")));
    }
    if let Some(first) = own.first() {
        text.push_str(&format!(
            " I can also call your tools by name ({}), for example \"call {first} with …\", \
             naming each argument before its value.",
            own.join(", ")
        ));
    }
    if tools.searches() {
        text.push_str(
            " With Google Search on, I also search the web (my sources are made up), for \
             example \"search the web for the weather in Paris\".",
        );
    }
    text
}

/// Why the model cannot do something: the tool it would need was not declared.
pub(super) fn missing_tool(what: &str, tool: &str) -> String {
    format!("I can't {what}, because this session didn't declare the {tool} tool.")
}

impl Pending {
    /// The reply in words: what was done gathered into one "Alright, I've …" sentence where
    /// the first of it was said, then the notes, then any farewell.
    pub(super) fn render(&self) -> String {
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

impl Purpose {
    /// What the call tried to do, as in "Sorry, I couldn't …".
    pub(super) fn attempt(&self, call: &PlannedCall) -> String {
        match self {
            Purpose::Query { device, .. } => format!("check the {}", device.spoken()),
            // Only what was asked for: a status the planner filled in is not the user's wish.
            Purpose::Change {
                device,
                mention_status,
            } => {
                let acts = change_acts(*device, &requested_state(&call.args), *mention_status);
                if acts.is_empty() {
                    format!("change the {}", device.spoken())
                } else {
                    let tries: Vec<&str> = acts.iter().map(|act| act.attempt.as_str()).collect();
                    join_list(&tries, "and")
                }
            }
            Purpose::Elsewhere { name, changing } => {
                format!("{} the {name}", if *changing { "change" } else { "check" })
            }
            Purpose::Time => "get the current time".to_owned(),
            Purpose::EndSession => "end the session".to_owned(),
            Purpose::Other => format!("run {}", call.name),
        }
    }
}

pub(super) fn describe_query(device: Device, asked: &Asked, reported: &DeviceState) -> String {
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

pub(super) fn describe_change(
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

pub(super) fn describe_time(response: &Value) -> String {
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
