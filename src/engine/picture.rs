//! What `/image` and Tab after it need from the file system, done off the drive loop: the
//! picture read with bounds (a regular file of at most 20 MiB; a FIFO or a device refused
//! without blocking), decoded within limits against decompression bombs, scaled to at most
//! 1024 pixels on its longest side and encoded as JPEG, as the official clients send camera
//! frames; and the entries of the folder of a path being typed.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, ImageError, ImageFormat, ImageReader, Limits, RgbImage};
use livetalk_live::file::{FileKind, read_bounded};

use crate::app::ImageSent;

/// The longest side of a picture as sent: what the service scales camera frames to anyway.
pub const LONGEST_SIDE: u32 = 1024;

/// The widest and tallest picture decoded: a small file can claim a huge size (a
/// decompression bomb), and is refused before any pixel is allocated.
pub const DECODED_SIDE_MAX: u32 = 16_384;

/// The most memory a picture may take decoded: 160 MiB, a 48-megapixel photo in colour. A
/// larger one (a 16k × 16k PNG, grey or not) is refused before a pixel is decoded.
pub const DECODE_ALLOC_MAX: u64 = 160 << 20;

/// JPEG quality: the official clients send camera frames at about this.
const JPEG_QUALITY: u8 = 85;

/// The most entries of a folder Tab looks at.
const FOLDER_ENTRIES_MAX: usize = 2_000;

/// `~/…` as the home folder, as a shell would read it.
fn expand(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Reads the picture at `path` and makes it ready to send, or says in one sentence why not.
pub fn prepare(path: &Path) -> Result<ImageSent, String> {
    let path = expand(&path.to_string_lossy());
    let (picture, file_bytes) = decode(&path)?;
    let rgb = fit(picture);
    let jpeg = jpeg(&rgb)
        .map_err(|_| format!("picture {} could not be made into a JPEG", path.display()))?;
    Ok(sent(&path, file_bytes, &rgb, jpeg))
}

/// What the transcript says of a picture made ready from the file at `path`, with its JPEG.
pub fn sent(path: &Path, file_bytes: u64, rgb: &RgbImage, jpeg: Vec<u8>) -> ImageSent {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    ImageSent {
        name,
        file_bytes,
        width: rgb.width(),
        height: rgb.height(),
        jpeg,
        at: std::time::Instant::now(),
    }
}

/// Reads and decodes the picture at `path` (a PNG, JPEG or WebP file) within the bounds
/// above; with the file's size.
pub fn decode(path: &Path) -> Result<(DynamicImage, u64), String> {
    let shown = path.display();
    let bytes = read_bounded(path, FileKind::IMAGE).map_err(|e| e.to_string())?;
    let format = image::guess_format(&bytes)
        .ok()
        .filter(|f| matches!(f, ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP))
        .ok_or_else(|| format!("picture {shown} is not a PNG, JPEG or WebP file"))?;
    let mut reader = ImageReader::with_format(Cursor::new(&bytes), format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(DECODED_SIDE_MAX);
    limits.max_image_height = Some(DECODED_SIDE_MAX);
    limits.max_alloc = Some(DECODE_ALLOC_MAX);
    reader.limits(limits);
    let picture = reader.decode().map_err(|error| match error {
        ImageError::Limits(limit)
            if matches!(limit.kind(), image::error::LimitErrorKind::InsufficientMemory) =>
        {
            format!(
                "picture {shown} would take more than the {} MiB livetalk decodes a picture into (a 48-megapixel photo fits)",
                DECODE_ALLOC_MAX >> 20
            )
        }
        ImageError::Limits(_) => format!(
            "picture {shown} is larger than livetalk decodes (at most {DECODED_SIDE_MAX} pixels on a side)"
        ),
        _ => format!(
            "picture {shown} could not be read as a {} file (damaged, or not what its start says)",
            format_name(format)
        ),
    })?;
    Ok((picture, bytes.len() as u64))
}

/// The picture scaled so its longest side is at most [`LONGEST_SIDE`], in RGB (JPEG has no
/// transparency).
pub fn fit(picture: DynamicImage) -> RgbImage {
    // Scaled down by averaging in the picture's own pixel type: a filter that works in
    // floating point would take four times the decoded picture again.
    let picture = if picture.width().max(picture.height()) > LONGEST_SIDE {
        picture.thumbnail(LONGEST_SIDE, LONGEST_SIDE)
    } else {
        picture
    };
    picture.into_rgb8()
}

/// The picture as JPEG, at the quality the official clients send camera frames at.
pub fn jpeg(rgb: &RgbImage) -> Result<Vec<u8>, ImageError> {
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(&mut jpeg, JPEG_QUALITY).encode_image(rgb)?;
    Ok(jpeg)
}

fn format_name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "PNG",
        ImageFormat::WebP => "WebP",
        _ => "JPEG",
    }
}

/// The entries of the folder `typed` is in (names; a folder's end in `/`), sorted, at most
/// [`FOLDER_ENTRIES_MAX`] of them.
pub fn folder_entries(typed: &str) -> Vec<String> {
    let folder = match typed.rfind('/') {
        Some(at) => expand(&typed[..=at]),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .take(FOLDER_ENTRIES_MAX)
        .filter_map(Result::ok)
        .map(|entry| {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    names
}
