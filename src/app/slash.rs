//! The input line's slash commands, as one table: each command's name, what it takes, its help
//! and how Tab completes its argument. Reading a typed line, the usage a bare or unknown command
//! is answered with, `/help` and the help popup, and Tab completion are all read from
//! [`SLASH_COMMANDS`], so they cannot disagree.

use std::path::PathBuf;

use super::{
    App, ConnectionState, Effect, Entry, FileEffect, ImageSent, Msg, NoticeLevel, SessionEffect,
};
use livetalk_live::excerpt;
use livetalk_live::models::{self, VOICES};

/// What a command takes after its name, and so what Tab offers there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Argument {
    /// Nothing.
    None,
    /// Free text (nothing to complete).
    Text,
    /// One of the service's prebuilt voices.
    Voice,
    /// A model id.
    Model,
    /// A file's path.
    Path,
    /// Optionally, a monitor or window to share (Tab lists them).
    Shared,
}

/// One slash command: its name (without the slash), what it takes and as what the usage shows
/// it, its help, and whether only the terminal UI has it (it opens something on the screen).
pub struct SlashCommand {
    pub name: &'static str,
    pub argument: Argument,
    /// The argument as the usage shows it ("TEXT"), empty when it takes none.
    pub placeholder: &'static str,
    pub help: &'static str,
    pub screen_only: bool,
}

impl SlashCommand {
    /// The command as the help lists it: `/voice NAME`.
    pub fn usage(&self) -> String {
        if self.placeholder.is_empty() {
            format!("/{}", self.name)
        } else {
            format!("/{} {}", self.name, self.placeholder)
        }
    }
}

/// Every slash command, in the order the help lists them.
pub const SLASH_COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "system",
        argument: Argument::Text,
        placeholder: "TEXT",
        help: "change the system instruction for the next turns",
        screen_only: false,
    },
    SlashCommand {
        name: "voice",
        argument: Argument::Voice,
        placeholder: "NAME",
        help: "speak with another prebuilt voice (Tab lists them); the conversation is kept",
        screen_only: false,
    },
    SlashCommand {
        name: "model",
        argument: Argument::Model,
        placeholder: "ID",
        help: "switch models: starts a fresh session (asks first in the terminal UI)",
        screen_only: false,
    },
    SlashCommand {
        name: "image",
        argument: Argument::Path,
        placeholder: "PATH",
        help: "show the model a picture (PNG, JPEG or WebP, sent as JPEG)",
        screen_only: false,
    },
    SlashCommand {
        name: "screen",
        argument: Argument::Shared,
        placeholder: "[NAME]",
        help: "share the screen (or one monitor or window, Tab lists them) at a frame a second; again stops",
        screen_only: false,
    },
    SlashCommand {
        name: "stop",
        argument: Argument::None,
        placeholder: "",
        help: "stop sharing the screen or video",
        screen_only: false,
    },
    SlashCommand {
        name: "preview",
        argument: Argument::None,
        placeholder: "",
        help: "hide the preview of what the model sees (the last frame or picture sent), or show it again",
        screen_only: true,
    },
    SlashCommand {
        name: "tools",
        argument: Argument::None,
        placeholder: "",
        help: "open the tool list (as F8 does)",
        screen_only: true,
    },
    SlashCommand {
        name: "events",
        argument: Argument::None,
        placeholder: "",
        help: "open the event inspector (as F12 does)",
        screen_only: true,
    },
    SlashCommand {
        name: "help",
        argument: Argument::None,
        placeholder: "",
        help: "this help",
        screen_only: false,
    },
];

/// How a message that starts with a slash is sent, for the help.
pub const ESCAPED_SLASH: (&str, &str) = ("//text", "send a message that starts with a slash");

/// The commands as the help lists them, one a row, the escaped slash last.
pub fn slash_help() -> impl Iterator<Item = (String, &'static str)> {
    SLASH_COMMANDS
        .iter()
        .map(|c| (c.usage(), c.help))
        .chain(std::iter::once((
            ESCAPED_SLASH.0.to_owned(),
            ESCAPED_SLASH.1,
        )))
}

/// The commands in one sentence, for a usage notice, `/help` in headless mode and `--help`.
pub fn slash_summary() -> String {
    let mut summary = slash_help()
        .map(|(usage, help)| format!("{usage}: {help}"))
        .collect::<Vec<_>>()
        .join("; ");
    summary.push('.');
    summary
}

/// The voices a notice names as examples.
const VOICES_SHOWN: usize = 6;

/// What a typed line means: text for the model, or one of the app's slash commands.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SlashLine<'a> {
    Text(&'a str),
    /// `/system TEXT`.
    Instruction(&'a str),
    /// `/voice NAME`, a prebuilt voice in the service's spelling.
    Voice(&'static str),
    /// `/model ID`, as the service takes it (`models/ID`).
    Model(String),
    /// `/image PATH`.
    Image(&'a str),
    /// `/screen [NAME]`.
    ShareScreen(Option<&'a str>),
    /// `/stop`.
    Stop,
    /// `/tools`, `/events`, `/help`: what the terminal UI opens.
    Screen(&'static str),
    /// A slash command that is bare, unknown or wrongly given: what to tell the user instead
    /// of sending it.
    Usage(String),
}

pub(super) fn slash_line(text: &str) -> SlashLine<'_> {
    let text = text.trim();
    // `//text` is how a message that starts with a slash is sent.
    if let Some(rest) = text.strip_prefix("//") {
        return SlashLine::Text(&text[text.len() - rest.len() - 1..]);
    }
    let Some(command) = text.strip_prefix('/') else {
        return SlashLine::Text(text);
    };
    let name = command.split_whitespace().next().unwrap_or_default();
    let argument = command[name.len()..].trim();
    let Some(known) = SLASH_COMMANDS.iter().find(|c| c.name == name) else {
        let name = excerpt::bounded(name, 40);
        return SlashLine::Usage(format!(
            "There is no command /{name}. Commands: {}",
            slash_summary()
        ));
    };
    if argument.is_empty() && !matches!(known.argument, Argument::None | Argument::Shared) {
        return SlashLine::Usage(format!(
            "/{name} needs {}: {}. Commands: {}",
            match known.argument {
                Argument::Voice => "a voice",
                Argument::Model => "a model id",
                Argument::Path => "a file",
                _ => "the instruction",
            },
            known.usage(),
            slash_summary()
        ));
    }
    match known.argument {
        Argument::None if known.name == "stop" => SlashLine::Stop,
        Argument::None => SlashLine::Screen(known.name),
        Argument::Shared => SlashLine::ShareScreen((!argument.is_empty()).then_some(argument)),
        Argument::Text => SlashLine::Instruction(argument),
        Argument::Voice => match models::voice_name(argument) {
            Some(voice) => SlashLine::Voice(voice),
            None => SlashLine::Usage(format!(
                "There is no voice {:?}. Voices include {}… ({} in all; Tab after /voice lists them).",
                excerpt::bounded(argument, 40),
                VOICES[..VOICES_SHOWN].join(", "),
                VOICES.len()
            )),
        },
        Argument::Model => match models::model_name(argument) {
            Ok(model) => SlashLine::Model(model),
            Err(e) => SlashLine::Usage(format!(
                "/model: {}",
                excerpt::into_bounded(e.to_string(), excerpt::SUMMARY)
            )),
        },
        Argument::Path => SlashLine::Image(argument),
    }
}

/// The command a line names when it only opens something on the screen (`/events`, `/tools`,
/// `/help`), which the terminal UI does itself.
pub(super) fn screen_command(text: &str) -> Option<&'static str> {
    match slash_line(text) {
        SlashLine::Screen(name) => Some(name),
        _ => None,
    }
}

/// The model a `/model ID` line asks for, which the terminal UI asks about first.
pub(super) fn model_command(text: &str) -> Option<String> {
    match slash_line(text) {
        SlashLine::Model(model) => Some(model),
        _ => None,
    }
}

/// Model ids Tab offers after `/model`: the current default and the families the model table
/// and the price table know.
pub const MODEL_IDS: &[&str] = &[
    "gemini-3.8-live",
    "gemini-3.8-live-extended-thinking",
    "gemini-3.1-flash-live-preview",
    "gemini-2.5-flash-native-audio-preview-09-2025",
];

/// What Tab does to a typed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Nothing to complete here.
    Nothing,
    /// The line completed as far as the candidates agree, and the candidates when more than
    /// one is left (to show).
    Done { line: String, choices: Vec<String> },
    /// A file path: the files must be listed first (`typed` is the path so far).
    ListFiles { typed: String },
    /// A monitor or window to share: they must be listed first (`typed` is the name so far).
    ListShared { typed: String },
}

/// Completes `line` (the whole input line, the cursor at its end): a command's name, or its
/// argument from the voices or model ids. A path asks for the files to be listed.
pub fn complete(line: &str) -> Completion {
    let Some(command) = line.strip_prefix('/') else {
        return Completion::Nothing;
    };
    if command.starts_with('/') {
        return Completion::Nothing;
    }
    let Some((name, argument)) = command.split_once(' ') else {
        let names = SLASH_COMMANDS
            .iter()
            .filter(|c| c.name.starts_with(command))
            .map(|c| c.name);
        return finish("/", names, |c| {
            let takes = SLASH_COMMANDS
                .iter()
                .any(|k| k.name == c && k.argument != Argument::None);
            if takes { " " } else { "" }
        });
    };
    let Some(known) = SLASH_COMMANDS.iter().find(|c| c.name == name) else {
        return Completion::Nothing;
    };
    let argument = argument.trim_start();
    let head = format!("/{name} ");
    match known.argument {
        Argument::Voice => {
            let voices = VOICES.iter().copied().filter(|v| {
                v.to_ascii_lowercase()
                    .starts_with(&argument.to_ascii_lowercase())
            });
            finish(&head, voices, |_| "")
        }
        Argument::Model => {
            let ids = MODEL_IDS
                .iter()
                .copied()
                .filter(|id| id.starts_with(argument));
            finish(&head, ids, |_| "")
        }
        Argument::Path => Completion::ListFiles {
            typed: argument.to_owned(),
        },
        Argument::Shared => Completion::ListShared {
            typed: argument.to_owned(),
        },
        Argument::None | Argument::Text => Completion::Nothing,
    }
}

/// Completes a path from the entries of its folder (`entries`: names, a folder's ending in
/// `/`).
pub fn complete_path(line: &str, typed: &str, entries: &[String]) -> Completion {
    let Some(head) = line.strip_suffix(typed) else {
        return Completion::Nothing;
    };
    let (folder, stem) = match typed.rfind('/') {
        Some(at) => typed.split_at(at + 1),
        None => ("", typed),
    };
    // Hidden files only when asked for by their dot.
    let names = entries
        .iter()
        .filter(|e| e.starts_with(stem) && (stem.starts_with('.') || !e.starts_with('.')))
        .map(String::as_str);
    finish(&format!("{head}{folder}"), names, |_| "")
}

/// `head` and what was typed, completed as far as `candidates` agree (plus `after` the one left),
/// and the candidates when more than one is left.
fn finish<'a>(
    head: &str,
    candidates: impl Iterator<Item = &'a str>,
    after: impl Fn(&str) -> &'static str,
) -> Completion {
    let candidates: Vec<&str> = candidates.collect();
    match candidates.as_slice() {
        [] => Completion::Nothing,
        [only] => Completion::Done {
            line: format!("{head}{only}{}", after(only)),
            choices: Vec::new(),
        },
        [first, rest @ ..] => {
            let mut common = first.chars().count();
            for other in rest {
                common = common.min(
                    first
                        .chars()
                        .zip(other.chars())
                        .take_while(|(a, b)| a.eq_ignore_ascii_case(b))
                        .count(),
                );
            }
            // Every candidate starts with what was typed, so this is at least as long, in the
            // candidates' spelling.
            let prefix: String = first.chars().take(common).collect();
            Completion::Done {
                line: format!("{head}{prefix}"),
                choices: candidates.iter().map(|c| (*c).to_owned()).collect(),
            }
        }
    }
}

impl App {
    /// A typed line that is one of the app's commands (not text for the model).
    pub(super) fn on_command(&mut self, command: SlashLine<'_>) -> Vec<Effect> {
        match command {
            SlashLine::Text(_) => Vec::new(),
            // `/system TEXT`: the model follows a new system instruction from the next turn
            // on; the session stays, and so does the conversation.
            SlashLine::Instruction(instruction) => {
                self.notice(
                    NoticeLevel::Info,
                    format!("System instruction changed for the next turns: {instruction}"),
                );
                vec![Effect::Session(SessionEffect::SendInstruction(
                    instruction.to_owned(),
                ))]
            }
            SlashLine::Voice(voice) => {
                if voice == self.voice {
                    self.notice(
                        NoticeLevel::Info,
                        format!("Gemini speaks with {voice} already."),
                    );
                    return Vec::new();
                }
                voice.clone_into(&mut self.voice);
                self.transcript
                    .push(Entry::Change(format!("Voice is now {voice}")));
                vec![Effect::Session(SessionEffect::SetVoice(voice.to_owned()))]
            }
            SlashLine::Model(model) => {
                let id = crate::pricing::model_id(&model).to_owned();
                if id == crate::pricing::model_id(&self.model) {
                    self.notice(NoticeLevel::Info, format!("The model is {id} already."));
                    return Vec::new();
                }
                self.model = model.clone();
                // The tokens so far stay at the old model's prices; the new one's apply from
                // here.
                self.figures.reprice(self.price_book.prices(&model));
                // A reply of the old session will not come.
                self.reply.forget();
                self.transcript.push(Entry::Change(format!(
                    "Model is now {id}: a fresh session (the model does not know the conversation so far)"
                )));
                vec![Effect::Session(SessionEffect::SwitchModel(model))]
            }
            // A replay has no file to read: what it shows of the picture ends with the line.
            SlashLine::Image(_) if self.replay.is_some() => Vec::new(),
            SlashLine::Image(path) => {
                self.image_pending = true;
                vec![Effect::Files(FileEffect::PrepareImage(PathBuf::from(path)))]
            }
            SlashLine::ShareScreen(_) | SlashLine::Stop if self.replay.is_some() => Vec::new(),
            SlashLine::ShareScreen(name) => self.toggle_screen(name),
            SlashLine::Stop => self.stop_sharing(),
            SlashLine::Screen("help") => {
                self.notice(NoticeLevel::Info, format!("Commands: {}", slash_summary()));
                Vec::new()
            }
            // The terminal UI opens these itself; a line of input elsewhere has no screen.
            SlashLine::Screen(name) => {
                let what = match name {
                    "preview" => {
                        "The preview of what the model sees is part of the terminal UI (/preview there)."
                    }
                    "tools" => "The tool list is part of the terminal UI (F8 or /tools there).",
                    _ => "The event inspector is part of the terminal UI (F12 or /events there).",
                };
                self.notice(NoticeLevel::Warning, what.to_owned());
                Vec::new()
            }
            // A command the app does not know is not a message for the model.
            SlashLine::Usage(usage) => {
                self.notice(NoticeLevel::Warning, usage);
                Vec::new()
            }
        }
    }

    /// The picture `/image` asked for is ready (or why it is not): it is shown in the
    /// transcript and sent as a video frame.
    pub(super) fn on_image(&mut self, prepared: Result<ImageSent, String>) -> Vec<Effect> {
        self.image_pending = false;
        let image = match prepared {
            Ok(image) => image,
            Err(problem) => {
                // A replay sends nothing: its picture could not be read back from the recording.
                let said = if self.replay.is_some() {
                    problem
                } else {
                    format!("{problem}; nothing was sent.")
                };
                self.notice(NoticeLevel::Warning, said);
                return Vec::new();
            }
        };
        let open = matches!(
            self.connection,
            ConnectionState::Connected | ConnectionState::Reconnecting
        );
        if !open || self.closing {
            return Vec::new();
        }
        self.fold_user_speech();
        self.preview_picture(image.clone());
        self.transcript.push(Entry::Image {
            name: image.name,
            file_bytes: image.file_bytes,
            width: image.width,
            height: image.height,
        });
        // The offline demo model answers a picture at once, unless it follows another closely
        // (a frame of a stream); the service takes it as what the model sees, and speaks of it
        // at the next turn.
        let streaming = self.last_picture_at.is_some_and(|before| {
            image.at.saturating_duration_since(before) < livetalk_mock::PICTURE_STREAM_GAP
        });
        self.last_picture_at = Some(image.at);
        if self.offline && !streaming {
            self.reply.sent();
        }
        vec![Effect::Session(SessionEffect::SendImage(image.jpeg))]
    }

    /// True while a picture is being made ready to send: the next typed turn waits for it.
    pub fn image_pending(&self) -> bool {
        self.image_pending
    }

    /// Tab in the input line: completes a command, a voice or a model id at once; a path once
    /// its folder is listed.
    pub(super) fn complete_input(&mut self) -> Vec<Effect> {
        match complete(self.view.input.text()) {
            Completion::Nothing => Vec::new(),
            Completion::Done { line, choices } => {
                self.completed(line, choices);
                Vec::new()
            }
            Completion::ListFiles { typed } => vec![Effect::Files(FileEffect::ListPaths(typed))],
            Completion::ListShared { typed } => {
                vec![Effect::Screen(crate::app::ScreenEffect::List(typed))]
            }
        }
    }

    /// The monitors and windows that can be shared were listed: completes the name after
    /// `/screen`, if the line still ends with it.
    pub(super) fn on_shared_choices(&mut self, typed: &str, names: &[String]) {
        let line = self.view.input.text();
        let Some(head) = line.strip_suffix(typed) else {
            return;
        };
        let head = head.to_owned();
        let lower = typed.to_lowercase();
        let names = names
            .iter()
            .filter(|n| n.to_lowercase().starts_with(&lower))
            .map(String::as_str);
        if let Completion::Done { line, choices } = finish(&head, names, |_| "") {
            self.completed(line, choices);
        }
    }

    /// The folder of the path being typed was listed: completes it, if the line still ends
    /// with it.
    pub(super) fn on_path_choices(&mut self, typed: &str, entries: &[String]) {
        if let Completion::Done { line, choices } =
            complete_path(self.view.input.text(), typed, entries)
        {
            self.completed(line, choices);
        }
    }

    /// `/model ID` in the terminal UI: asks before the fresh session.
    pub(super) fn ask_model(&mut self, model: String) {
        let id = crate::pricing::model_id(&model).to_owned();
        let current = crate::pricing::model_id(&self.model).to_owned();
        if id == current {
            self.notice(NoticeLevel::Info, format!("The model is {id} already."));
            return;
        }
        self.notice(
            NoticeLevel::Warning,
            format!(
                "Switch to {id}? A model cannot change within a session: a fresh session starts, and the model will not know the conversation so far. y switches, n keeps {current}."
            ),
        );
        self.view.confirm_model = Some((model, self.notices.len() - 1));
    }

    /// Yes to `/model`: the command goes on as typed (so it is recorded as such).
    pub(super) fn confirm_model(&mut self) -> Vec<Effect> {
        let Some((model, notice)) = self.view.confirm_model.take() else {
            return Vec::new();
        };
        self.view.notices_dismissed = self.view.notices_dismissed.max(notice + 1);
        self.intent(Msg::UserText(format!("/model {model}")))
    }

    /// No to `/model`: the question goes away, and the session stays.
    pub(super) fn decline_model(&mut self) {
        if let Some((_, notice)) = self.view.confirm_model.take() {
            self.view.notices_dismissed = self.view.notices_dismissed.max(notice + 1);
        }
    }

    fn completed(&mut self, line: String, choices: Vec<String>) {
        self.view.input.replace(&line);
        if choices.len() > 1 {
            self.notice(NoticeLevel::Info, format!("Tab: {}", choices.join("  ")));
        }
    }
}
