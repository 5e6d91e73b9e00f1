//! A turn under way: the calls made for it and why, and the pieces of the reply gathered from
//! their results, kept until the results come back (and across a resumption).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::devices::Device;
use super::tools::{
    END_SESSION, GET_CURRENT_TIME, GET_DEVICE_STATUS, PlannedCall, SET_DEVICE_STATUS,
};
use super::understanding::{Asked, Change};

/// Why a call was made, which decides how its result is put into words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Purpose {
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
    /// About a device the home does not have, by the name the user gave it.
    Elsewhere {
        name: String,
        changing: bool,
    },
    Time,
    EndSession,
    Other,
}

impl Purpose {
    /// The purpose a call of this name and these arguments has, for a result the model did
    /// not plan for (a restored or reordered conversation).
    pub(super) fn from_call(call: &PlannedCall) -> Self {
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
}

/// The calls of a turn and what to say once they are answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Pending {
    pub(super) calls: Vec<(PlannedCall, Purpose)>,
    /// Relative changes waiting for a reading of the device.
    pub(super) deferred: Vec<(Device, Change)>,
    pub(super) said: Vec<Segment>,
    pub(super) notes: Vec<String>,
    pub(super) farewell: Option<String>,
}

/// A piece of the reply: completed actions are gathered into one "Alright, I've …" sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum Segment {
    Done(String),
    Say(String),
}
