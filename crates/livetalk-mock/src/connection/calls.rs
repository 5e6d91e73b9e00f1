//! The tool calls a connection has open: ids like the service's, answers matched by id (or by
//! name, for a client that sends none), and the ids cancelled when a turn is cut short.

use livetalk_live::wire::FunctionCall;
use serde_json::Value;

use crate::model::PlannedCall;

/// One call waiting for its answer.
struct OpenCall {
    id: String,
    call: PlannedCall,
    response: Option<Value>,
    /// Made by a `tool_calls` fault, not planned by the model.
    injected: bool,
}

/// The calls of the last `toolCall` sets, until every one is answered or cancelled.
pub(super) struct OpenCalls {
    open: Vec<OpenCall>,
    /// Calls made on this connection so far.
    made: u64,
    /// Ids count up from here.
    base: u64,
}

/// The answers to a complete set of calls.
pub(super) struct Answered {
    /// The calls the model planned, each with its answer, in the order they were made.
    pub(super) planned: Vec<(PlannedCall, Value)>,
    /// The answers to calls a fault made.
    pub(super) injected: Vec<Value>,
}

impl OpenCalls {
    /// Call ids of this connection count up from `base`.
    pub(super) fn new(base: u64) -> Self {
        OpenCalls {
            open: Vec::new(),
            made: 0,
            base,
        }
    }

    /// No call is waiting, answered or not.
    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Gives a call a service-like id and waits for its answer; returns the call as sent.
    pub(super) fn open(&mut self, call: PlannedCall, injected: bool) -> FunctionCall {
        self.made += 1;
        let id = format!("function-call-{}", self.base.wrapping_add(self.made));
        let function_call = FunctionCall {
            id: Some(id.clone()),
            name: call.name.clone(),
            args: call.args.clone(),
        };
        self.open.push(OpenCall {
            id,
            call,
            response: None,
            injected,
        });
        function_call
    }

    /// Takes the answer to the unanswered call with this `id` (or, without one, the first
    /// unanswered call of this `name`); false when no call is waiting for it.
    pub(super) fn answer(&mut self, id: Option<&str>, name: &str, response: Value) -> bool {
        let slot = self.open.iter_mut().find(|p| {
            p.response.is_none()
                && match id {
                    Some(id) => p.id == id,
                    None => p.call.name == name,
                }
        });
        match slot {
            Some(slot) => {
                slot.response = Some(response);
                true
            }
            None => false,
        }
    }

    /// Once every open call has its answer: the answers, and no call is open any more.
    pub(super) fn take_answered(&mut self) -> Option<Answered> {
        if self.open.is_empty() || self.open.iter().any(|p| p.response.is_none()) {
            return None;
        }
        let (injected, planned): (Vec<OpenCall>, Vec<OpenCall>) =
            self.open.drain(..).partition(|p| p.injected);
        Some(Answered {
            planned: planned
                .into_iter()
                .map(|p| (p.call, p.response.unwrap_or(Value::Null)))
                .collect(),
            injected: injected
                .into_iter()
                .map(|p| p.response.unwrap_or(Value::Null))
                .collect(),
        })
    }

    /// Closes every open call; returns the ids of those still waiting for their answer (the
    /// answered ones of an unfinished set are dropped with them).
    pub(super) fn cancel_unanswered(&mut self) -> Vec<String> {
        self.open
            .drain(..)
            .filter(|p| p.response.is_none())
            .map(|p| p.id)
            .collect()
    }
}

impl Answered {
    /// What the model says once the calls a fault made are answered: how many answers came
    /// and how many were errors. `None` when no fault made any.
    pub(super) fn injected_summary(&self) -> Option<String> {
        if self.injected.is_empty() {
            return None;
        }
        let errors = self
            .injected
            .iter()
            .filter(|r| r.get("error").is_some())
            .count();
        Some(format!(
            "I made {} tool calls and got {} answers, {errors} of them errors.",
            self.injected.len(),
            self.injected.len()
        ))
    }
}
