//! The tools a session declared, as the model knows them: the smart-home ones it knows by
//! heart, the names it may call, and the calls it plans of them.

use std::collections::BTreeSet;

use livetalk_live::wire::FunctionDeclaration;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(super) const GET_DEVICE_STATUS: &str = "get_device_status";
pub(super) const SET_DEVICE_STATUS: &str = "set_device_status";
pub(super) const GET_CURRENT_TIME: &str = "get_current_time";
pub(super) const END_SESSION: &str = "end_session";

/// One function call the model wants the client to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PlannedCall {
    pub(crate) name: String,
    pub(crate) args: Value,
}

/// The functions the client declared; the model calls no other.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Toolset {
    declared: BTreeSet<String>,
    /// The declarations themselves, for calls by name (their schemas say how to read the
    /// arguments).
    #[serde(default)]
    declarations: Vec<FunctionDeclaration>,
    /// The setup turned on Google Search (`googleSearch`): the model may search the web.
    #[serde(default)]
    google_search: bool,
}

impl Toolset {
    /// The tools of these declarations, with Google Search or without.
    pub(super) fn new(
        declarations: impl IntoIterator<Item = FunctionDeclaration>,
        google_search: bool,
    ) -> Self {
        let declarations: Vec<FunctionDeclaration> = declarations.into_iter().collect();
        Toolset {
            declared: declarations.iter().map(|d| d.name.clone()).collect(),
            declarations,
            google_search,
        }
    }

    /// Whether the setup turned on Google Search.
    pub(super) fn searches(&self) -> bool {
        self.google_search
    }

    /// Whether a tool of this name was declared.
    pub(super) fn declares(&self, tool: &str) -> bool {
        self.declared.contains(tool)
    }

    /// The declarations, as the client sent them.
    pub(super) fn declarations(&self) -> &[FunctionDeclaration] {
        &self.declarations
    }

    /// Declared tools other than the smart-home ones this model knows by heart, by name.
    pub(super) fn own_tools(&self) -> Vec<&str> {
        self.declared
            .iter()
            .map(String::as_str)
            .filter(|name| {
                ![
                    GET_DEVICE_STATUS,
                    SET_DEVICE_STATUS,
                    GET_CURRENT_TIME,
                    END_SESSION,
                ]
                .contains(name)
            })
            .collect()
    }
}
