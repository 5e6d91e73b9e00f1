//! The pictures a recording keeps as files: each picture sent (a shared screen's frame,
//! `/image`) goes to `frames/NNNN.jpg` beside `session.jsonl`, and its `send` line holds a
//! reference to the file in place of the base64 (as audio refers to `mic.wav`); readers put
//! the picture back from it (docs/recording-format.md, "Pictures").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The folder of a recording's pictures.
pub const FRAMES_DIR: &str = "frames";

/// The largest picture file a reader takes back: a client sends frames of at most a few
/// hundred kilobytes; a file larger than this was not written by a recorder.
pub const PICTURE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Where a picture went: `file` (`frames/0001.jpg`, relative to the recording folder), of
/// `bytes` bytes. It stands where the message had the picture's base64 `data`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PictureRef {
    pub file: String,
    pub bytes: u64,
}

impl PictureRef {
    /// The reference a `data` value holds, if it is one (not a string of base64, not audio's).
    pub fn of(data: &Value) -> Option<PictureRef> {
        serde_json::from_value(data.clone()).ok()
    }

    /// The file in recording folder `dir`; `None` for a name that is not a plain file of
    /// [`FRAMES_DIR`] (a hand-edited `../`, an absolute path).
    pub fn path_in(&self, dir: &Path) -> Option<PathBuf> {
        let name = self.file.strip_prefix(FRAMES_DIR)?.strip_prefix('/')?;
        let plain = !name.is_empty()
            && name != ".."
            && name != "."
            && !name.contains(['/', '\\'])
            && !name.starts_with('.');
        plain.then(|| dir.join(FRAMES_DIR).join(name))
    }

    /// The picture's bytes, read back from `dir` (bounded by [`PICTURE_MAX_BYTES`]); why not,
    /// in words.
    pub fn read(&self, dir: &Path) -> Result<Vec<u8>, String> {
        use std::io::Read as _;
        let path = self
            .path_in(dir)
            .ok_or_else(|| format!("{} is not a file of {FRAMES_DIR}/", self.file))?;
        let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut bytes = Vec::new();
        file.take(PICTURE_MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.len() as u64 > PICTURE_MAX_BYTES {
            return Err(format!(
                "{} is larger than a recorded picture can be",
                path.display()
            ));
        }
        Ok(bytes)
    }
}

/// The picture a `send` line's message showed the model, read back from recording folder
/// `dir` as the app had it when it was sent, for a replay to show; `None` for a message without
/// one. A picture that cannot be read back is said why.
pub fn shown(message: &Value, dir: &Path) -> Option<Result<crate::app::ImageSent, String>> {
    let reference = sent(message).into_iter().next()?;
    Some(reference.read(dir).and_then(|jpeg| {
        let size = image::ImageReader::new(std::io::Cursor::new(&jpeg))
            .with_guessed_format()
            .ok()
            .and_then(|reader| reader.into_dimensions().ok());
        let (width, height) =
            size.ok_or_else(|| format!("{} is not a picture livetalk reads", reference.file))?;
        Ok(crate::app::ImageSent {
            name: reference.file.clone(),
            file_bytes: reference.bytes,
            width,
            height,
            jpeg,
            at: std::time::Instant::now(),
        })
    }))
}

/// The extension of a picture file for its MIME type.
fn extension(mime_type: &str) -> &'static str {
    match mime_type {
        "image/png" => "png",
        "image/webp" => "webp",
        _ => "jpg",
    }
}

/// Writes picture number `n` (from 1) of a recording into `dir`'s [`FRAMES_DIR`]; the
/// reference its line holds instead of the bytes.
pub(super) fn keep(
    dir: &Path,
    n: u32,
    mime_type: &str,
    bytes: &[u8],
) -> std::io::Result<PictureRef> {
    let folder = dir.join(FRAMES_DIR);
    std::fs::create_dir_all(&folder)?;
    let name = format!("{n:04}.{}", extension(mime_type));
    std::fs::write(folder.join(&name), bytes)?;
    Ok(PictureRef {
        file: format!("{FRAMES_DIR}/{name}"),
        bytes: bytes.len() as u64,
    })
}

/// The pictures a `send` line's message refers to: `realtimeInput.video`, and image
/// `mediaChunks`.
pub fn sent(message: &Value) -> Vec<PictureRef> {
    let input = &message["realtimeInput"];
    let chunks = input["mediaChunks"].as_array().into_iter().flatten();
    std::iter::once(&input["video"])
        .chain(chunks)
        .filter_map(|blob| PictureRef::of(blob.get("data")?))
        .collect()
}

/// Puts each picture a message refers to back as base64 `data`, read from recording folder
/// `dir`, as the message was sent; a picture that cannot be read is left out (`data` empty)
/// and said why, once each.
pub fn restore(message: &mut Value, dir: &Path) -> Vec<String> {
    use base64::Engine as _;
    let mut problems = Vec::new();
    let input = &mut message["realtimeInput"];
    let mut blobs: Vec<&mut Value> = Vec::new();
    if let Value::Object(input) = input {
        for (key, value) in input.iter_mut() {
            match (key.as_str(), value) {
                ("video", blob @ Value::Object(_)) => blobs.push(blob),
                ("mediaChunks", Value::Array(chunks)) => blobs.extend(chunks.iter_mut()),
                _ => {}
            }
        }
    }
    for blob in blobs {
        let Some(reference) = blob.get("data").and_then(PictureRef::of) else {
            continue;
        };
        let data = match reference.read(dir) {
            Ok(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
            Err(why) => {
                problems.push(format!("a picture sent could not be read back: {why}"));
                String::new()
            }
        };
        blob["data"] = Value::String(data);
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_goes_to_a_file_and_comes_back_as_it_was_sent() {
        let dir = tempfile::tempdir().unwrap();
        let reference = keep(dir.path(), 1, "image/jpeg", b"\xff\xd8jpeg").unwrap();
        assert_eq!(reference.file, "frames/0001.jpg");
        assert_eq!(reference.bytes, 6);
        let mut message = serde_json::json!({"realtimeInput": {"video": {
            "mimeType": "image/jpeg", "data": reference
        }}});
        assert_eq!(sent(&message), [reference]);
        assert!(restore(&mut message, dir.path()).is_empty());
        assert_eq!(message["realtimeInput"]["video"]["data"], "/9hqcGVn");
    }

    #[test]
    fn a_reference_outside_the_frames_folder_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), b"x").unwrap();
        for file in [
            "../secret",
            "frames/../secret",
            "/etc/passwd",
            "frames/",
            "frames/..",
        ] {
            let reference = PictureRef {
                file: file.to_owned(),
                bytes: 1,
            };
            assert_eq!(reference.path_in(dir.path()), None, "{file}");
        }
        let mut message = serde_json::json!({"realtimeInput": {"video": {
            "mimeType": "image/jpeg", "data": {"file": "frames/9999.jpg", "bytes": 3}
        }}});
        let problems = restore(&mut message, dir.path());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(message["realtimeInput"]["video"]["data"], "");
    }
}
