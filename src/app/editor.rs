//! The person's side of tool calls: approving, denying, editing the arguments of a call that
//! waits for them, and typing any open call's result by hand. Keys open the editor and move
//! in it (view state); what the user decides leaves as an intent ([`Msg::ToolVerdict`]), so a
//! recording holds the verdict as applied, never the keys.
//!
//! A typed result is read so: text starting with `{` is a JSON object, sent as it is (and
//! checked: bad JSON says why and the editor stays open); `error: TEXT` sends
//! `{"error": "TEXT"}`, the one-key error a failing tool would give; anything else is plain
//! text, sent as `{"result": "TEXT"}`.

use serde_json::{Value, json};

use super::view::{Editor, EditorPurpose, InputLine};
use super::{App, Effect, Msg, ToolState};
use crate::tools::{CallKey, Verdict};

/// How a typed result that reports a failure starts.
pub const ERROR_PREFIX: &str = "error:";

/// The response a typed result stands for, or why it stands for none.
pub fn typed_result(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "Type a result: a JSON object, plain text, or \"{ERROR_PREFIX} what went wrong\"."
        ));
    }
    if text.starts_with('{') {
        return json_object(text);
    }
    let is_error = text
        .get(..ERROR_PREFIX.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(ERROR_PREFIX));
    if is_error {
        let message = text[ERROR_PREFIX.len()..].trim();
        if message.is_empty() {
            return Err(format!("Say what went wrong after \"{ERROR_PREFIX}\"."));
        }
        return Ok(json!({ "error": message }));
    }
    Ok(json!({ "result": text }))
}

/// Typed arguments: a JSON object, or why not.
pub fn typed_arguments(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(json!({}));
    }
    json_object(text)
}

fn json_object(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("Not a JSON object: it must be {…}.".to_owned()),
        Err(error) => Err(format!("Not valid JSON: {error}.")),
    }
}

impl App {
    /// The call the tool-log keys act on: the selected one, else the newest.
    fn selected_call(&self) -> Option<usize> {
        let index = self
            .view
            .tool_selected
            .unwrap_or(self.tool_calls.len().checked_sub(1)?);
        (index < self.tool_calls.len()).then_some(index)
    }

    /// The selected call, if it waits for the user.
    fn selected_waiting_call(&self) -> Option<usize> {
        self.selected_call()
            .filter(|&i| self.tool_calls[i].state == ToolState::Waiting)
    }

    fn verdict(&self, call: usize, verdict: Verdict) -> Vec<Effect> {
        self.intent(Msg::ToolVerdict {
            key: CallKey(call as u64),
            verdict,
        })
    }

    pub(super) fn approve_selected(&mut self) -> Vec<Effect> {
        match self.selected_waiting_call() {
            Some(call) => self.verdict(call, Verdict::Approve),
            None => self.nothing_waits(),
        }
    }

    pub(super) fn deny_selected(&mut self) -> Vec<Effect> {
        match self.selected_waiting_call() {
            Some(call) => self.verdict(call, Verdict::Deny),
            None => self.nothing_waits(),
        }
    }

    /// Opens the editor on the selected waiting call's arguments.
    pub(super) fn edit_selected(&mut self) -> Vec<Effect> {
        let Some(call) = self.selected_waiting_call() else {
            return self.nothing_waits();
        };
        let args = serde_json::to_string(&self.tool_calls[call].args).unwrap_or_default();
        self.open_editor(call, EditorPurpose::Arguments, &args);
        Vec::new()
    }

    /// Opens the editor for the selected open call's result.
    pub(super) fn answer_selected(&mut self) -> Vec<Effect> {
        match self.selected_call() {
            Some(call) if self.tool_calls[call].state.is_open() => {
                self.open_editor(call, EditorPurpose::Result, "");
            }
            _ => self.notice(
                super::NoticeLevel::Info,
                "That call has been answered already; select a waiting or running one.".to_owned(),
            ),
        }
        Vec::new()
    }

    /// Selects the oldest call waiting for the user and moves the focus to the tool log.
    pub(super) fn go_to_waiting(&mut self) {
        match self.first_waiting_call() {
            Some(call) => {
                self.view.popup = None;
                self.view.focus = super::Focus::ToolLog;
                self.view.tool_selected = Some(call);
            }
            None => {
                self.nothing_waits();
            }
        }
    }

    fn nothing_waits(&mut self) -> Vec<Effect> {
        self.notice(
            super::NoticeLevel::Info,
            "No call waits for you there; select one marked \"waiting for you\".".to_owned(),
        );
        Vec::new()
    }

    fn open_editor(&mut self, call: usize, purpose: EditorPurpose, text: &str) {
        if self.replay.is_some() {
            return;
        }
        self.view.popup = None;
        self.view.tool_selected = Some(call);
        self.view.editor = Some(Editor {
            call,
            purpose,
            line: InputLine::with_text(text),
            problem: None,
        });
    }

    /// Enter in the editor: the verdict, or the problem shown with the editor kept open.
    pub(super) fn submit_editor(&mut self) -> Vec<Effect> {
        let Some(editor) = &mut self.view.editor else {
            return Vec::new();
        };
        let text = editor.line.text();
        let read = match editor.purpose {
            EditorPurpose::Arguments => typed_arguments(text).map(Verdict::Edit),
            EditorPurpose::Result => typed_result(text).map(Verdict::Answer),
        };
        match read {
            Ok(verdict) => {
                let call = editor.call;
                self.view.editor = None;
                self.verdict(call, verdict)
            }
            Err(problem) => {
                editor.problem = Some(problem);
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_results_are_objects_text_or_one_key_errors() {
        assert_eq!(
            typed_result(r#" {"temperature": 21} "#),
            Ok(json!({"temperature": 21}))
        );
        assert_eq!(
            typed_result("error: garage on fire"),
            Ok(json!({"error": "garage on fire"}))
        );
        assert_eq!(
            typed_result("ERROR:  jammed"),
            Ok(json!({"error": "jammed"}))
        );
        assert_eq!(
            typed_result("the lamp is purple"),
            Ok(json!({"result": "the lamp is purple"}))
        );
        let Err(why) = typed_result(r#"{"temperature": }"#) else {
            panic!("bad JSON must be refused");
        };
        assert!(
            why.starts_with("Not valid JSON") && why.contains("column"),
            "{why}"
        );
        assert!(typed_result("  ").is_err());
        assert!(typed_result("error:").is_err());
    }

    #[test]
    fn typed_arguments_must_be_an_object() {
        assert_eq!(
            typed_arguments(r#"{"device_name": "lamp"}"#),
            Ok(json!({"device_name": "lamp"}))
        );
        assert_eq!(typed_arguments(""), Ok(json!({})));
        assert!(typed_arguments("[1, 2]").unwrap_err().contains("object"));
        assert!(
            typed_arguments("{\"a\": ")
                .unwrap_err()
                .contains("Not valid JSON")
        );
    }
}
