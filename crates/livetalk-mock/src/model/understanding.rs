//! The model's understanding: reads a typed request clause by clause into intents (query a
//! device, change it, tell the time, say goodbye) and notes on what cannot be done.

use serde::{Deserialize, Serialize};

use super::devices::Device;
use super::words::{
    COLOUR_SHADES, COLOURS, COMMAND_VERBS, OTHER_PLACES, PRONOUNS, QUESTION_STARTS, Words, numbers,
    pick_number, split_clauses, strip_leading,
};

/// How far "warmer" / "cooler" move the thermostat when no amount is given.
const TEMPERATURE_STEP: f64 = 2.0;
/// How far "brighter" / "dimmer" move the lamp when no amount is given.
const BRIGHTNESS_STEP: f64 = 20.0;

/// What a status question wanted to know, so the answer can be "yes" or "no".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Asked {
    General,
    Is(String),
    Color,
    Brightness,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) enum Level {
    To(f64),
    By(f64),
}

impl Level {
    pub(super) fn resolve(self, current: Option<f64>) -> f64 {
        match self {
            Level::To(value) => value,
            Level::By(delta) => current.unwrap_or(0.0) + delta,
        }
    }
}

/// A requested change to one device; `status` is set only when the user named one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Change {
    pub(super) status: Option<String>,
    pub(super) color: Option<String>,
    pub(super) brightness: Option<Level>,
    pub(super) temperature: Option<Level>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.color.is_none()
            && self.brightness.is_none()
            && self.temperature.is_none()
    }

    pub(super) fn merge(&mut self, later: Change) {
        self.status = later.status.or(self.status.take());
        self.color = later.color.or(self.color.take());
        self.brightness = later.brightness.or(self.brightness);
        self.temperature = later.temperature.or(self.temperature);
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Intent {
    Query(Device, Asked),
    Change(Device, Change),
    /// A device this home does not have ("the garage light"), of the kind its noun names:
    /// asked about (`None`) or to be changed. The tool is called all the same and says so.
    Elsewhere {
        name: String,
        kind: Device,
        change: Option<Change>,
    },
    Time,
    Goodbye,
}

#[derive(Debug, Default)]
pub(super) struct Understanding {
    pub(super) intents: Vec<Intent>,
    /// Things the model must say because it can't do them ("the lamp can't be locked").
    pub(super) notes: Vec<String>,
    pub(super) last_device: Option<Device>,
    pub(super) greeted: bool,
    pub(super) thanked: bool,
    pub(super) help: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Query,
    Command,
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
    /// A device of this kind somewhere the home has none ("garage light").
    Unknown(String, Device),
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
            found.push(Mention::Unknown(format!("{prev} {word}"), device));
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
    let change = match device {
        // What a device cannot do is asked of it all the same: the tool's error says why not,
        // and the reply passes that on.
        Device::Lamp => {
            let temperature = w
                .any(&["degrees", "degree", "celsius", "fahrenheit", "temperature"])
                .then(|| temperature_level(w))
                .flatten();
            Change {
                status: if off {
                    Some("off".to_owned())
                } else if on {
                    Some("on".to_owned())
                } else if unlock {
                    Some("unlocked".to_owned())
                } else if lock {
                    Some("locked".to_owned())
                } else {
                    None
                },
                color: colour,
                brightness: if temperature.is_some() {
                    None
                } else {
                    brightness_level(w)
                },
                temperature,
            }
        }
        Device::Thermostat => {
            let brightness = w
                .any(&["brightness", "percent", "dim", "brighten"])
                .then(|| brightness_level(w))
                .flatten();
            let temperature = if brightness.is_some() {
                None
            } else {
                temperature_level(w)
            };
            let cool = w.any(&[
                "cool",
                "cooling",
                "ac",
                "aircon",
                "conditioning",
                "conditioner",
            ]);
            let heat = w.any(&["heat", "heating", "heater"]) || on;
            let status = if unlock {
                Some("unlocked")
            } else if lock {
                Some("locked")
            } else if off || w.has("idle") {
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
                brightness,
                color: colour,
            }
        }
        Device::DoorLock => {
            // A number has no meaning for a lock at all: not even a wrong setting to pass on.
            if has_number && !on && !off && colour.is_none() {
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
                } else if off {
                    Some("off".to_owned())
                } else if on {
                    Some("on".to_owned())
                } else {
                    None
                },
                color: colour,
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

pub(super) const WHICH_DEVICE: &str = "Which device do you mean? I know the living room lamp, the kitchen thermostat and the front door lock.";

pub(super) fn understand(text: &str, last_device: Option<Device>) -> Understanding {
    let mut understood = Understanding {
        last_device,
        ..Understanding::default()
    };
    let mut previous_mode: Option<Mode> = None;
    // A clause like "and the door" borrows the request of the clause before it.
    let mut previous_command: Option<Vec<String>> = None;
    let clauses = split_clauses(text);
    // A first request may name its device after the pronoun: "turn it on and make it blue"
    // is about the lamp the colour implies, not a question of which device.
    if understood.last_device.is_none() {
        understood.last_device = clauses.iter().find_map(|clause| {
            let w = Words(&clause.words);
            mentions(w)
                .into_iter()
                .find_map(|m| match m {
                    Mention::Known(device) => Some(device),
                    Mention::Unknown(..) => None,
                })
                .or_else(|| implied_device(w))
        });
    }
    for clause in clauses {
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
                Mention::Unknown(..) => None,
            })
            .collect();
        if devices.is_empty() && is_time_request(w) {
            understood.intents.push(Intent::Time);
            continue;
        }
        let command = w.any(COMMAND_VERBS) || w.has_lock_verb() || w.seq(&["make", "sure"]);
        if devices.is_empty()
            && let Some(Mention::Unknown(name, kind)) = found.first()
        {
            // Asked of the tool all the same: its answer says which devices there are.
            let change = match change_for(*kind, w) {
                Ok(Some(change)) if command || !clause.question => Some(change),
                _ => None,
            };
            understood.intents.push(Intent::Elsewhere {
                name: name.clone(),
                kind: *kind,
                change,
            });
            continue;
        }
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
