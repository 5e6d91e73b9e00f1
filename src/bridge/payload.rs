//! Decoding a message's payload into its type, with the path to what did not fit: what the
//! bridge tells an app about a payload it cannot use.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A payload that does not have the expected shape, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at `{path}`: {message}")]
pub struct PayloadError {
    /// Where in the payload, as a JSON path (`payload` for the whole of it).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

pub fn decode_value<T: DeserializeOwned>(value: Value) -> Result<T, PayloadError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        PayloadError {
            path: if path == "." { "payload".into() } else { path },
            message: e.into_inner().to_string(),
        }
    })
}
