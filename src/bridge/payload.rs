//! Decoding a message's payload into its type, with the path to what did not fit: what the
//! bridge tells an app about a payload it cannot use. Also how the protocol's `{type, payload}`
//! enums are read, and their list of types taken from serde's own derive.

use std::fmt;

use serde::de::value::MapDeserializer;
use serde::de::{self, DeserializeOwned};
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

/// Decodes a message of an enum tagged `#[serde(tag = "type", content = "payload")]` from
/// its type and payload. The two are handed to serde in that order, so it reads the payload
/// straight into the variant's type and the error path is exact; it is reported from the
/// payload (`parts[0]`, or `payload` for the whole of it).
pub fn decode_tagged<T: DeserializeOwned>(
    kind: &str,
    payload: Option<&Value>,
) -> Result<T, PayloadError> {
    let kind = Value::String(kind.to_owned());
    let mut entries = vec![("type".to_owned(), &kind)];
    entries.extend(payload.map(|p| ("payload".to_owned(), p)));
    let map = MapDeserializer::<_, serde_json::Error>::new(entries.into_iter());
    serde_path_to_error::deserialize(map).map_err(|e| {
        let path = e.path().to_string();
        let path = match path.strip_prefix("payload.") {
            Some(inner) => inner.to_owned(),
            None => "payload".to_owned(),
        };
        PayloadError {
            path,
            message: e.into_inner().to_string(),
        }
    })
}

/// The `type`s an enum tagged `#[serde(tag = "type", …)]` reads, in declaration order,
/// as its derive spells them: serde lists them when it meets a type it does not know, and this
/// asks it with a type no enum has. So the protocol keeps no table of names beside its enums.
pub fn tags<T: DeserializeOwned>() -> &'static [&'static str] {
    #[derive(Debug)]
    struct Known(&'static [&'static str]);
    impl fmt::Display for Known {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("not a type")
        }
    }
    impl std::error::Error for Known {}
    impl de::Error for Known {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Known(&[])
        }
        fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
            Known(expected)
        }
    }
    let probe = MapDeserializer::<_, Known>::new(std::iter::once(("type", "\u{0}")));
    match T::deserialize(probe) {
        Err(Known(tags)) => tags,
        Ok(_) => &[],
    }
}
