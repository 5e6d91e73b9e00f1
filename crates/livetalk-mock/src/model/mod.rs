//! The mock server's scripted model: reads plain-English smart-home requests, plans calls to the
//! client's declared tools and phrases replies from their results, errors included; any
//! declared tool can also be called by name. This file owns the model's turns (user text, tool
//! results, user audio, pictures) and what it keeps between them; the tools, understanding, planning,
//! the turn under way, calls by name and phrasing are the modules below.

mod devices;
mod named_call;
mod pending;
mod phrasing;
mod planner;
mod results;
mod search;
pub(crate) mod sight;
mod tools;
mod understanding;
mod words;

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use devices::Memory;
use named_call::{NamedCall, named_call};
use pending::{Pending, Purpose};
use phrasing::{examples, small_talk};
use planner::{Planner, absorb, merge_intents};
pub(crate) use tools::PlannedCall;
use tools::Toolset;
use understanding::understand;

use livetalk_live::wire::FunctionDeclaration;

/// Requests the scripted model answers, as a first turn each, the way a person new to it would
/// type them: the app's empty screen suggests these, and the model's tests hold it to them.
pub const DEMO_PROMPTS: &[&str] = &[
    "What is the lamp's status?",
    "Turn it on and make it blue",
    "Dim the lamp to 30%",
    "Set the thermostat to 22 degrees",
    "Is the front door locked?",
    "What time is it?",
    "Goodbye",
];

/// A web search the scripted model answers with a grounded reply when the setup turned Google
/// Search on: the app's empty screen suggests it then, and the model's tests hold it to it.
pub const SEARCH_PROMPT: &str = "Search the web for the weather in Paris";

/// What the model does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModelStep {
    /// Make these calls (as one `toolCall`), then hand the results to [`ScriptedModel::tool_results`].
    CallTools(Vec<PlannedCall>),
    /// Say this and end the turn.
    Reply(String),
    /// Say this, grounded in a Google Search: the reply's `groundingMetadata` goes with it.
    Grounded { text: String, grounding: Value },
}

/// A deterministic stand-in for the model behind the mock Live server.
///
/// Clone + Serialize/Deserialize so a resumption handle can restore the conversation later.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ScriptedModel {
    tools: Toolset,
    memory: Memory,
    /// The calls of the last `CallTools` and what to say once they are answered.
    pending: Option<Pending>,
    /// The system instruction asks for short answers: replies keep their first sentence.
    #[serde(default)]
    brief: bool,
    /// The last frame the client showed, as the model made it out: kept across hand-overs
    /// with the rest of the conversation.
    #[serde(default)]
    seen: Option<sight::Seen>,
}

/// Words of an instruction that ask for less than the model's usual short replies: one holding
/// any of them keeps replies to their first sentence (docs/mock.md lists them).
pub(crate) const BRIEF_CUES: [&str; 8] = [
    "one sentence",
    "single sentence",
    "very brief",
    "concise",
    "as short as possible",
    "shorter",
    "briefer",
    "few words",
];

impl ScriptedModel {
    /// A model that will only ever call the tools named here, knowing nothing of their
    /// arguments.
    pub(crate) fn new(declared_tools: impl IntoIterator<Item = String>) -> Self {
        Self::with_declarations(declared_tools.into_iter().map(|name| FunctionDeclaration {
            name,
            ..FunctionDeclaration::default()
        }))
    }

    /// A model that will only ever call the tools declared here (the client's
    /// `functionDeclarations`).
    pub(crate) fn with_declarations(
        declarations: impl IntoIterator<Item = FunctionDeclaration>,
    ) -> Self {
        let mut model = Self::default();
        model.redeclare(declarations, false);
        model
    }

    /// Follows a system instruction (from `setup` or a `contextUpdate`) where this model
    /// can: asked for answers of one sentence, it keeps to the first sentence. A later
    /// instruction replaces an earlier one. Its replies are short already, so a plain "answer
    /// briefly" (as livetalk's default instruction says) changes nothing; only an ask for
    /// less than that does.
    pub(crate) fn follow_instruction(&mut self, instruction: &str) {
        let lower = instruction.to_lowercase();
        self.brief = BRIEF_CUES.iter().any(|cue| lower.contains(cue));
    }

    /// The tools the client declares now, replacing the earlier ones: a `contextUpdate` sent
    /// new ones, or a client resumed this conversation with a `setup` of its own (a tool turned
    /// off must not be called after the hand-over, nor Search used once it is off).
    pub(crate) fn redeclare(
        &mut self,
        declarations: impl IntoIterator<Item = FunctionDeclaration>,
        google_search: bool,
    ) {
        self.tools = Toolset::new(declarations, google_search);
    }

    /// A reply as the instruction wants it.
    fn styled(&self, step: ModelStep) -> ModelStep {
        match step {
            ModelStep::Reply(text) if self.brief => ModelStep::Reply(first_sentence(&text)),
            ModelStep::Grounded { text, grounding } if self.brief => ModelStep::Grounded {
                text: first_sentence(&text),
                grounding,
            },
            other => other,
        }
    }

    /// A user text turn: either tool calls to make first, or a direct reply.
    pub(crate) fn user_turn(&mut self, text: &str) -> ModelStep {
        let step = self.user_turn_unstyled(text);
        self.styled(step)
    }

    fn user_turn_unstyled(&mut self, text: &str) -> ModelStep {
        // A new user turn supersedes calls that were never answered (cancelled or interrupted).
        self.pending = None;
        match named_call(text, self.tools.declarations()) {
            Some(NamedCall::Call(call)) => {
                let pending = Pending {
                    calls: vec![(call, Purpose::Other)],
                    ..Pending::default()
                };
                return self.finish(pending);
            }
            Some(NamedCall::Problem(problem)) => return ModelStep::Reply(problem),
            None => {}
        }
        if let Some(query) = search::asked(text) {
            return search::answer(&self.tools, &query);
        }
        if sight::asked(text) {
            return ModelStep::Reply(sight::describe(self.seen.as_ref()));
        }
        let understood = understand(text, self.memory.last_device);
        self.memory.last_device = understood.last_device;
        if understood.intents.is_empty() {
            return ModelStep::Reply(small_talk(&self.tools, &understood));
        }
        let mut pending = Pending {
            notes: understood.notes,
            ..Pending::default()
        };
        let planner = Planner {
            tools: &self.tools,
            memory: &self.memory,
        };
        for intent in merge_intents(understood.intents) {
            planner.plan(intent, &mut pending);
        }
        self.finish(pending)
    }

    /// The responses to the calls of the last CallTools, in the same order (each the `response`
    /// JSON the client sent). Returns the reply (or, if useful, further calls).
    pub(crate) fn tool_results(&mut self, results: &[(PlannedCall, Value)]) -> ModelStep {
        let step = self.tool_results_unstyled(results);
        self.styled(step)
    }

    fn tool_results_unstyled(&mut self, results: &[(PlannedCall, Value)]) -> ModelStep {
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
            absorb(&mut self.memory, call, &purpose, response, &mut pending);
        }
        let planner = Planner {
            tools: &self.tools,
            memory: &self.memory,
        };
        for (device, change) in std::mem::take(&mut pending.deferred) {
            planner.plan_change(device, change, false, &mut pending);
        }
        self.finish(pending)
    }

    /// A user audio turn of the given length (the mock cannot transcribe speech).
    pub(crate) fn audio_turn(&mut self, speech: Duration) -> ModelStep {
        self.pending = None;
        let seconds = speech.as_secs_f64();
        let heard = if seconds < 0.3 {
            "only a very short sound".to_owned()
        } else {
            format!("about {seconds:.1} seconds of speech")
        };
        let suggestion = match examples(&self.tools).first() {
            Some(example) => format!(" Please type your request instead, for example {example}."),
            None => " Please type your request instead.".to_owned(),
        };
        self.styled(ModelStep::Reply(format!(
            "I heard {heard}, but this demo model can't understand spoken words.{suggestion}"
        )))
    }

    /// A picture the client showed (a JPEG video frame): the model keeps what it can tell of
    /// it, its size and its colour, for "what do you see?"; returns what it made of it.
    pub(crate) fn see(&mut self, jpeg: &[u8]) -> &sight::Seen {
        self.seen.insert(sight::look_at(jpeg))
    }

    /// The model says what it saw last.
    pub(crate) fn picture_turn(&mut self) -> ModelStep {
        self.pending = None;
        self.styled(ModelStep::Reply(sight::describe(self.seen.as_ref())))
    }

    /// Ends the model's part of a turn: the calls to make, kept with what to say once they
    /// are answered, or the reply when there is nothing to call.
    fn finish(&mut self, pending: Pending) -> ModelStep {
        if pending.calls.is_empty() {
            return ModelStep::Reply(pending.render());
        }
        let calls = pending.calls.iter().map(|(call, _)| call.clone()).collect();
        self.pending = Some(pending);
        ModelStep::CallTools(calls)
    }
}

/// The text up to and including its first sentence end (all of it when there is none).
fn first_sentence(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '.' | '!' | '?')
                && text[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map(|(i, c)| i + c.len_utf8());
    match end {
        Some(end) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}
