//! What `livetalk check` runs: a scenario, written by hand (TOML) or made from a recording,
//! as turns (typed or spoken) with what each must show. Reading a scenario file (every problem
//! one message naming the file, the line and the key), turning a recording into turns, and
//! writing a recording out as a scenario (`--write-scenario`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::app::Msg;
use crate::record::{MIC_WAV, Record, Recording, wav_contents};
use livetalk_live::ServerEvent;
use livetalk_live::file::{FileKind, read_text};
use livetalk_live::wire::FunctionCall;

/// The rate spoken turns are sent at (the Live API's input rate).
pub const SPOKEN_RATE: u32 = crate::audio::INPUT_RATE;

/// The longest spoken turn taken (ten minutes, a whole Live connection): a clip is held in
/// memory and sent in real time, so a longer one is a mistake, not a turn.
const MAX_SPOKEN_SECS: f64 = 600.0;

/// Turns a scenario may hold: a scenario is written by hand, and each turn takes seconds.
const MAX_TURNS: usize = 1000;

/// A scenario file.
const SCENARIO_FILE: FileKind = FileKind::SCENARIO;

/// One thing to check: its turns in order, and how its session is set up.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// As reports name it: the `name` key, else the file's (or recording folder's) name.
    pub name: String,
    /// The file (or recording folder) it came from.
    pub source: PathBuf,
    /// It came from a recording: its calls are compared whole, and its model and voice used.
    pub from_recording: Option<RecordedSession>,
    pub system_instruction: Option<String>,
    /// `google_search = true`: declare Google Search for its runs.
    pub google_search: bool,
    pub turns: Vec<Turn>,
}

/// What a recording fixes about its session.
#[derive(Debug, Clone)]
pub struct RecordedSession {
    pub model: String,
    pub voice: String,
}

/// One user turn and what must follow it.
#[derive(Debug, Clone)]
pub struct Turn {
    /// A picture shown to the model before the turn (`picture = "red.png"`, beside the
    /// scenario): sent as `/image` sends it, a JPEG video frame, and answered first where the
    /// model answers pictures.
    pub picture: Option<PathBuf>,
    pub input: Input,
    pub expect: Expect,
}

/// What the user does in a turn.
#[derive(Debug, Clone)]
pub enum Input {
    /// A typed turn.
    Say(String),
    /// A spoken turn: 16 kHz mono samples, sent in real time and followed by a second of
    /// silence. `from` says where they came from, for people.
    Audio { samples: Vec<i16>, from: String },
}

impl Input {
    /// "Is the living room lamp on?" or "(spoken, 1.3 s)": how a report names the turn.
    pub fn title(&self) -> String {
        match self {
            Input::Say(text) => first_words(text, 8),
            Input::Audio { samples, .. } => format!(
                "(spoken, {:.1} s)",
                samples.len() as f64 / f64::from(SPOKEN_RATE)
            ),
        }
    }
}

/// A function call: its name and arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub args: Value,
}

impl Call {
    /// The calls of one `toolCall`, as a recording holds them and a run observes them.
    pub fn all_of(calls: &[FunctionCall]) -> Vec<Call> {
        calls
            .iter()
            .map(|c| Call {
                name: c.name.clone(),
                args: c.args.clone(),
            })
            .collect()
    }
}

/// What a turn must show.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    pub tools: ToolsExpected,
    /// Each must appear (case-insensitive) in the reply's text or its transcription.
    pub reply_contains: Vec<String>,
    /// From the end of the user's turn to the model's first message.
    pub max_first_response_ms: Option<f64>,
    /// `searched = true`: the reply was grounded in a Google Search; `false`: it was not.
    pub searched: Option<bool>,
    /// Each must appear (case-insensitive) in a source's title or link.
    pub source_contains: Vec<String>,
}

/// What a turn's tool calls must be.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ToolsExpected {
    /// Anything (no expectation given).
    #[default]
    Any,
    /// No call at all (`no_tools = true`).
    None,
    /// These calls, in this order, others allowed between and after; each matches by name and
    /// by the arguments given (a subset, recursively).
    InOrder(Vec<Call>),
    /// What a recording made: the same `toolCall`s, each the same calls in any order.
    Recorded(Vec<Vec<Call>>),
}

/// The first `words` words of `text`, with an ellipsis when there were more.
pub fn first_words(text: &str, words: usize) -> String {
    let all: Vec<&str> = text.split_whitespace().collect();
    let mut title = all
        .iter()
        .take(words)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if all.len() > words {
        title.push('…');
    }
    livetalk_live::excerpt::bounded(&title, 80).into_owned()
}

// ---- scenario files ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    system_instruction: Option<String>,
    #[serde(default)]
    google_search: bool,
    #[serde(default)]
    turn: Vec<toml::Spanned<TurnEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnEntry {
    say: Option<String>,
    audio: Option<PathBuf>,
    picture: Option<PathBuf>,
    #[serde(default)]
    expect: ExpectEntry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectEntry {
    tools: Option<Vec<CallEntry>>,
    #[serde(default)]
    no_tools: bool,
    #[serde(default)]
    reply_contains: Vec<String>,
    max_first_response_ms: Option<f64>,
    searched: Option<bool>,
    #[serde(default)]
    source_contains: OneOrMore,
}

/// A list of words, or one.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum OneOrMore {
    #[default]
    None,
    One(String),
    More(Vec<String>),
}

impl OneOrMore {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMore::None => Vec::new(),
            OneOrMore::One(one) => vec![one],
            OneOrMore::More(more) => more,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEntry {
    name: String,
    #[serde(default = "empty_object")]
    args: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A scenario file that cannot be used: one sentence naming the file, and where it can, the
/// line and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadScenario(pub String);

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Reads a scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, BadScenario> {
    let shown = path.display();
    let text = read_text(path, SCENARIO_FILE).map_err(|e| BadScenario(e.to_string()))?;
    let deserializer = toml::Deserializer::parse(&text).map_err(|e| {
        let line = e.span().map(|s| line_at(&text, s.start)).unwrap_or(1);
        BadScenario(format!("{shown}: line {line}: {}", e.message()))
    })?;
    let file: ScenarioFile = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        // A turn is read spanned (for its line); the span's wrapper is no key of the file.
        let key = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        let line = inner.span().map(|s| line_at(&text, s.start)).unwrap_or(1);
        let key = if key == "." {
            String::new()
        } else {
            format!("key `{key}`: ")
        };
        BadScenario(format!("{shown}: line {line}: {key}{}", inner.message()))
    })?;
    if file.turn.is_empty() {
        return Err(BadScenario(format!(
            "{shown}: line 1: key `turn`: the scenario has no turns (add [[turn]] with say = \"…\" or audio = \"clip.wav\")"
        )));
    }
    if file.turn.len() > MAX_TURNS {
        return Err(BadScenario(format!(
            "{shown}: key `turn`: {} turns; a scenario holds at most {MAX_TURNS}",
            file.turn.len()
        )));
    }
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut turns = Vec::new();
    for (index, spanned) in file.turn.into_iter().enumerate() {
        let line = line_at(&text, spanned.span().start);
        let at = |key: &str, problem: String| {
            BadScenario(format!(
                "{shown}: line {line}: key `turn[{index}].{key}`: {problem}"
            ))
        };
        let entry = spanned.into_inner();
        let input = match (entry.say, entry.audio) {
            (Some(_), Some(_)) => {
                return Err(at(
                    "say",
                    "a turn is typed (say) or spoken (audio), not both".into(),
                ));
            }
            (None, None) => {
                return Err(at(
                    "say",
                    "the turn says nothing: give say = \"…\" or audio = \"clip.wav\"".into(),
                ));
            }
            (Some(text), None) if text.trim().is_empty() => {
                return Err(at("say", "is empty".into()));
            }
            (Some(text), None) => Input::Say(text),
            (None, Some(audio)) => {
                let file = folder.join(&audio);
                let samples = spoken_samples(&file).map_err(|e| at("audio", e))?;
                Input::Audio {
                    samples,
                    from: audio.display().to_string(),
                }
            }
        };
        let e = entry.expect;
        let tools = match (e.tools, e.no_tools) {
            (Some(tools), true) if !tools.is_empty() => {
                return Err(at(
                    "expect.no_tools",
                    "no_tools = true and tools = […] contradict each other".into(),
                ));
            }
            (_, true) => ToolsExpected::None,
            (Some(tools), false) if !tools.is_empty() => ToolsExpected::InOrder(
                tools
                    .into_iter()
                    .map(|c| Call {
                        name: c.name,
                        args: c.args,
                    })
                    .collect(),
            ),
            _ => ToolsExpected::Any,
        };
        if let Some(ms) = e.max_first_response_ms
            && !(ms.is_finite() && ms > 0.0)
        {
            return Err(at(
                "expect.max_first_response_ms",
                format!("{ms} is not a positive number of milliseconds"),
            ));
        }
        let source_contains = e.source_contains.into_vec();
        if source_contains.iter().any(|words| words.trim().is_empty()) {
            return Err(at(
                "expect.source_contains",
                "holds an empty string, which every source contains".into(),
            ));
        }
        if e.searched == Some(false) && !source_contains.is_empty() {
            return Err(at(
                "expect.searched",
                "searched = false and source_contains contradict each other".into(),
            ));
        }
        turns.push(Turn {
            picture: entry.picture.map(|picture| folder.join(picture)),
            input,
            expect: Expect {
                tools,
                reply_contains: e.reply_contains,
                max_first_response_ms: e.max_first_response_ms,
                searched: e.searched,
                source_contains,
            },
        });
    }
    Ok(Scenario {
        name: file.name.unwrap_or_else(|| file_name(path)),
        source: path.to_owned(),
        from_recording: None,
        system_instruction: file.system_instruction,
        google_search: file.google_search,
        turns,
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A WAV file as 16 kHz mono samples.
fn spoken_samples(path: &Path) -> Result<Vec<i16>, String> {
    let clip = crate::audio::wav::read_mono(path).map_err(|e| format!("{e:#}"))?;
    if clip.duration().as_secs_f64() > MAX_SPOKEN_SECS {
        return Err(format!(
            "{} lasts {:.0} s; a spoken turn lasts at most {MAX_SPOKEN_SECS:.0} s",
            path.display(),
            clip.duration().as_secs_f64()
        ));
    }
    let out = crate::audio::resample::StreamResampler::whole(&clip.samples, clip.rate, SPOKEN_RATE)
        .map_err(|e| format!("{e:#}"))?;
    Ok(out.into_iter().map(crate::audio::pcm::f32_to_i16).collect())
}

// ---- recordings ----

/// A recording as a scenario: its typed turns as typed (a `//` turn as the `/` text it sent),
/// its spoken turns as the mic audio sent from the end of the model's previous turn to the
/// end of this one, and each turn's `toolCall`s as what must come again. Every user turn is
/// one: a spoken turn whose audio cannot be read from `mic.wav` is an error naming the file,
/// never a turn left out (the check would pass on fewer turns than the recording holds).
pub fn from_recording(recording: &Recording) -> Result<Scenario, BadScenario> {
    // Read one message at a time: a recording is not held whole.
    let applied = recording.steps();
    let mut turns: Vec<Turn> = Vec::new();
    // Each spoken turn's speech: its turn's index, and from when until when (seconds into
    // the recording) its mic audio was sent.
    let mut spoken: Vec<(usize, f64, f64)> = Vec::new();
    // Where the current turn stands: its model turn ended (a new speech starts a new turn).
    let mut turn_over = true;
    // When the model's previous turn ended, and when the current spoken turn's speech ended.
    let mut previous_end = 0.0;
    let mut speech: Option<(f64, Option<f64>)> = None;
    let close_speech = |turns: &Vec<Turn>,
                        spoken: &mut Vec<(usize, f64, f64)>,
                        speech: &mut Option<(f64, Option<f64>)>,
                        end: f64| {
        if let Some((from, ended)) = speech.take() {
            spoken.push((turns.len() - 1, from, ended.unwrap_or(end)));
        }
    };
    let mut end = 0.0;
    // The pictures sent (a shared screen's frames, `/image`): a turn shows the model the last
    // one sent before it, what the model saw when it was asked.
    let pictures = picture_sends(recording);
    let mut last_turn_at = f64::NEG_INFINITY;
    for entry in applied {
        end = entry.t;
        match &entry.msg {
            Msg::UserText(text) => {
                let Some(text) = typed_turn(text) else {
                    continue;
                };
                close_speech(&turns, &mut spoken, &mut speech, entry.t);
                turns.push(Turn {
                    picture: picture_between(&pictures, last_turn_at, entry.t),
                    input: Input::Say(text.to_owned()),
                    expect: recorded_expect(),
                });
                last_turn_at = entry.t;
                turn_over = false;
            }
            Msg::Server(ServerEvent::InputTranscription { .. })
            | Msg::Server(ServerEvent::VoiceActivity { speaking: true })
                if turn_over =>
            {
                turns.push(Turn {
                    picture: picture_between(&pictures, last_turn_at, entry.t),
                    input: Input::Audio {
                        samples: Vec::new(),
                        from: format!("{}, {MIC_WAV}", recording.dir.display()),
                    },
                    expect: recorded_expect(),
                });
                speech = Some((previous_end, None));
                last_turn_at = entry.t;
                turn_over = false;
            }
            Msg::Server(ServerEvent::VoiceActivity { speaking: false }) => {
                if let Some((_, ended)) = &mut speech {
                    ended.get_or_insert(entry.t);
                }
            }
            Msg::Server(
                ServerEvent::ModelText(_)
                | ServerEvent::ModelAudio { .. }
                | ServerEvent::OutputTranscription { .. }
                | ServerEvent::GenerationComplete,
            ) => {
                if let Some((_, ended)) = &mut speech {
                    ended.get_or_insert(entry.t);
                }
            }
            Msg::Server(ServerEvent::ToolCall(calls)) => {
                if let Some((_, ended)) = &mut speech {
                    ended.get_or_insert(entry.t);
                }
                if let Some(Turn {
                    expect:
                        Expect {
                            tools: ToolsExpected::Recorded(groups),
                            ..
                        },
                    ..
                }) = turns.last_mut()
                {
                    groups.push(Call::all_of(calls));
                }
            }
            Msg::Server(ServerEvent::TurnComplete { .. }) => {
                close_speech(&turns, &mut spoken, &mut speech, entry.t);
                turn_over = true;
                previous_end = entry.t;
            }
            _ => {}
        }
    }
    close_speech(&turns, &mut spoken, &mut speech, end);
    if turns.is_empty() {
        return Err(BadScenario(format!(
            "{}: the recording has no user turn to check (nothing typed, nothing spoken)",
            recording.dir.display()
        )));
    }
    if !spoken.is_empty() {
        let path = recording.dir.join(MIC_WAV);
        let numbers: Vec<String> = spoken.iter().map(|(i, _, _)| (i + 1).to_string()).collect();
        let unreadable = |why: String| {
            BadScenario(format!(
                "{}: {why}: the recording's spoken turn(s) {} cannot be sent again",
                path.display(),
                numbers.join(", ")
            ))
        };
        let samples = match wav_contents(&path) {
            Ok(Some((rate, samples))) if rate == SPOKEN_RATE => samples,
            Ok(Some((rate, _))) => {
                return Err(unreadable(format!(
                    "its audio is at {rate} Hz, not the {SPOKEN_RATE} Hz a recording's microphone is kept at"
                )));
            }
            Ok(None) => return Err(unreadable("missing".into())),
            Err(e) => return Err(unreadable(e)),
        };
        let sends = mic_sends(recording);
        for (index, from, until) in spoken {
            let audio = mic_between(&sends, &samples, from, until).map_err(|why| {
                BadScenario(format!(
                    "{}: {why} (turn {}, spoken from {from:.1} s to {until:.1} s into the recording)",
                    path.display(),
                    index + 1
                ))
            })?;
            if let Input::Audio { samples, .. } = &mut turns[index].input {
                *samples = audio;
            }
        }
    }
    Ok(Scenario {
        name: file_name(&recording.dir),
        source: recording.dir.clone(),
        from_recording: Some(RecordedSession {
            model: recording.meta.model.clone(),
            voice: recording.meta.voice.clone(),
        }),
        system_instruction: None,
        google_search: false,
        turns,
    })
}

/// What a recorded typed line sent the model: the line itself, or for `//text` the `/text` it
/// sent; `None` for a slash command, which sent nothing (as the app reads a line).
fn typed_turn(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    match line.strip_prefix('/') {
        Some(rest) if rest.starts_with('/') => Some(rest),
        Some(_) => None,
        None => Some(line),
    }
}

fn recorded_expect() -> Expect {
    Expect {
        tools: ToolsExpected::Recorded(Vec::new()),
        ..Expect::default()
    }
}

/// When each picture was sent, and its file in the recording.
fn picture_sends(recording: &Recording) -> Vec<(f64, PathBuf)> {
    recording
        .lines()
        .filter_map(|line| match &line.record {
            Record::Send { message } => Some(
                crate::record::pictures::sent(message)
                    .into_iter()
                    .filter_map(|p| p.path_in(&recording.dir))
                    .map(|path| (line.t, path))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The last picture sent after `from` and up to `until` (seconds into the recording).
fn picture_between(sends: &[(f64, PathBuf)], from: f64, until: f64) -> Option<PathBuf> {
    sends
        .iter()
        .rev()
        .find(|(t, _)| *t > from && *t <= until)
        .map(|(_, path)| path.clone())
}

/// When each chunk of mic audio was sent, and where it is in `mic.wav`.
fn mic_sends(recording: &Recording) -> Vec<(f64, u64, u64)> {
    recording
        .lines()
        .filter_map(|line| match &line.record {
            Record::Send { message } => {
                let data = &message["realtimeInput"]["audio"]["data"];
                (data["file"] == MIC_WAV).then(|| {
                    (
                        line.t,
                        data["sample_offset"].as_u64().unwrap_or(0),
                        data["sample_count"].as_u64().unwrap_or(0),
                    )
                })
            }
            _ => None,
        })
        .collect()
}

/// The mic samples sent after `from` and up to `until` (seconds into the recording); why not,
/// when none were sent then or the file lacks some of them (cut short, or not this session's).
fn mic_between(
    sends: &[(f64, u64, u64)],
    samples: &[i16],
    from: f64,
    until: f64,
) -> Result<Vec<i16>, String> {
    let mut out = Vec::new();
    let max = (MAX_SPOKEN_SECS * f64::from(SPOKEN_RATE)) as usize;
    for &(t, offset, count) in sends {
        if t > from && t <= until {
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(count).unwrap_or(usize::MAX));
            let Some(sent) = samples.get(start..end) else {
                return Err(format!(
                    "holds {} samples, but the recording sent samples {start} to {end} from it",
                    samples.len()
                ));
            };
            out.extend_from_slice(sent);
            if out.len() >= max {
                out.truncate(max);
                break;
            }
        }
    }
    if out.is_empty() {
        return Err("the recording sent none of its audio for this spoken turn".into());
    }
    Ok(out)
}

// ---- writing a scenario ----

/// A recording as a scenario file's text: its typed turns as `say`, its spoken turns as
/// `audio` entries named `<stem>-turnN.wav` (written by the caller beside the file), its tool
/// calls as expectations (`no_tools` where it made none).
pub fn scenario_text(scenario: &Scenario, audio_stem: &str) -> String {
    let mut out = String::new();
    out += &format!(
        "# Made by `livetalk check --write-scenario` from {}.\n",
        scenario.source.display()
    );
    out += "# Edit freely: tools match in order, by name and by the arguments given (a subset).\n";
    out += &format!("name = {}\n", toml_string(&scenario.name));
    for (index, turn) in scenario.turns.iter().enumerate() {
        out += "\n[[turn]]\n";
        if let Some(picture) = &turn.picture {
            out += &format!(
                "picture = {}\n",
                toml_string(&picture_file_name(audio_stem, index + 1, picture))
            );
        }
        match &turn.input {
            Input::Say(text) => out += &format!("say = {}\n", toml_string(text)),
            Input::Audio { .. } => {
                out += &format!(
                    "audio = {}\n",
                    toml_string(&spoken_file_name(audio_stem, index + 1))
                )
            }
        }
        out += "[turn.expect]\n";
        match &turn.expect.tools {
            ToolsExpected::Recorded(groups) if groups.iter().all(Vec::is_empty) => {
                out += "no_tools = true\n";
            }
            ToolsExpected::Recorded(groups) => {
                let calls: Vec<String> = groups
                    .iter()
                    .flatten()
                    .map(|call| match toml_value(&call.args) {
                        Some(args) => {
                            format!("{{ name = {}, args = {args} }}", toml_string(&call.name))
                        }
                        None => format!("{{ name = {} }}", toml_string(&call.name)),
                    })
                    .collect();
                out += &format!("tools = [{}]\n", calls.join(", "));
            }
            _ => {}
        }
    }
    out
}

/// The name of the picture turn `n` shows (a copy of `from`, the recording's file) beside a
/// written scenario.
pub fn picture_file_name(stem: &str, n: usize, from: &Path) -> String {
    let extension = from.extension().and_then(|e| e.to_str()).unwrap_or("jpg");
    format!("{stem}-turn{n}.{extension}")
}

/// The name of spoken turn `n`'s WAV file beside a written scenario.
pub fn spoken_file_name(stem: &str, n: usize) -> String {
    format!("{stem}-turn{n}.wav")
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A JSON value in TOML (which has no null: a null leaves its key out).
fn toml_value(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(toml_value).collect()),
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), toml_value(v)?)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
    })
}
