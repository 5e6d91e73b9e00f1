//! What the demo model can tell of a picture a client shows it (a JPEG video frame): its size
//! and its dominant colour, named in plain words, so `/image` and a shared screen can be
//! demonstrated offline. It keeps what it saw last, and answers "what do you see?" from it.

use std::io::Cursor;

use image::{ImageFormat, ImageReader, Limits};
use serde::{Deserialize, Serialize};

/// The widest and tallest frame decoded: clients send frames of at most about 1024 pixels, and
/// a frame claiming more is not decoded (a decompression bomb costs nothing).
const SIDE_MAX: u32 = 4_096;

/// Pixels looked at, at most: enough to tell the dominant colour.
const SAMPLES: u64 = 65_536;

/// Colour names, in the order [`colour_of`] indexes them.
const COLOURS: [&str; 9] = [
    "red", "orange", "yellow", "green", "blue", "purple", "white", "black", "grey",
];

/// What the model made of the last frame it was shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Seen {
    Picture {
        width: u32,
        height: u32,
        colour: String,
    },
    /// A frame it could not decode.
    Unreadable,
}

/// Looks at a JPEG frame.
pub(crate) fn look_at(jpeg: &[u8]) -> Seen {
    match look(jpeg) {
        Some((width, height, colour)) => Seen::Picture {
            width,
            height,
            colour: colour.to_owned(),
        },
        None => Seen::Unreadable,
    }
}

/// What the model says of what it saw last.
pub(crate) fn describe(seen: Option<&Seen>) -> String {
    match seen {
        Some(Seen::Picture {
            width,
            height,
            colour,
        }) => format!("I see a {width} by {height} picture, mostly {colour}."),
        Some(Seen::Unreadable) => {
            "I got a picture but could not make it out: this demo model reads JPEG frames."
                .to_owned()
        }
        None => "I don't see anything: nothing has been shown to me yet (share a screen or a picture first).".to_owned(),
    }
}

/// True when `text` asks what the model sees ("what do you see?", "what's on my screen?").
pub(crate) fn asked(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "what do you see",
        "what can you see",
        "what are you seeing",
        "do you see",
        "can you see",
        "on my screen",
        "on the screen",
        "what am i showing",
        "what is shown",
        "describe the picture",
        "describe the screen",
    ]
    .iter()
    .any(|cue| lower.contains(cue))
}

/// The frame's width, height and dominant colour.
fn look(jpeg: &[u8]) -> Option<(u32, u32, &'static str)> {
    let mut reader = ImageReader::with_format(Cursor::new(jpeg), ImageFormat::Jpeg);
    let mut limits = Limits::default();
    limits.max_image_width = Some(SIDE_MAX);
    limits.max_image_height = Some(SIDE_MAX);
    reader.limits(limits);
    let picture = reader.decode().ok()?.into_rgb8();
    let (width, height) = picture.dimensions();
    let pixels = u64::from(width) * u64::from(height);
    let step = usize::try_from(pixels.div_ceil(SAMPLES)).ok()?.max(1);
    let mut counts = [0u64; COLOURS.len()];
    for pixel in picture.pixels().step_by(step) {
        let [r, g, b] = pixel.0;
        counts[colour_of(r, g, b)] += 1;
    }
    let dominant = (0..COLOURS.len()).max_by_key(|&i| counts[i])?;
    Some((width, height, COLOURS[dominant]))
}

/// The index in [`COLOURS`] of the name a person would give this colour.
fn colour_of(r: u8, g: u8, b: u8) -> usize {
    let (r, g, b) = (f32::from(r), f32::from(g), f32::from(b));
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let value = max / 255.0;
    let saturation = if max == 0.0 { 0.0 } else { (max - min) / max };
    if value < 0.2 {
        return 7;
    }
    if saturation < 0.2 {
        return if value > 0.85 { 6 } else { 8 };
    }
    let chroma = max - min;
    let hue = if max == r {
        60.0 * ((g - b) / chroma).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((b - r) / chroma + 2.0)
    } else {
        60.0 * ((r - g) / chroma + 4.0)
    };
    match hue {
        h if !(15.0..330.0).contains(&h) => 0,
        h if h < 40.0 => 1,
        h if h < 70.0 => 2,
        h if h < 165.0 => 3,
        h if h < 255.0 => 4,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_get_their_plain_names() {
        let name = |r, g, b| COLOURS[colour_of(r, g, b)];
        assert_eq!(name(220, 30, 30), "red");
        assert_eq!(name(250, 140, 20), "orange");
        assert_eq!(name(240, 230, 40), "yellow");
        assert_eq!(name(30, 200, 60), "green");
        assert_eq!(name(30, 60, 220), "blue");
        assert_eq!(name(140, 40, 200), "purple");
        assert_eq!(name(250, 250, 250), "white");
        assert_eq!(name(10, 10, 10), "black");
        assert_eq!(name(128, 128, 128), "grey");
    }

    #[test]
    fn what_is_not_a_jpeg_is_said_so() {
        let seen = look_at(b"not a picture");
        assert!(describe(Some(&seen)).contains("could not make it out"));
        assert!(describe(None).contains("nothing has been shown to me yet"));
    }

    #[test]
    fn asking_what_it_sees_is_told_from_other_turns() {
        for asked_so in ["What do you see?", "what's on my screen", "Can you see it?"] {
            assert!(asked(text_of(asked_so)), "{asked_so}");
        }
        for not in [
            "Turn on the lamp",
            "What time is it?",
            "Is the front door locked?",
        ] {
            assert!(!asked(not), "{not}");
        }
    }

    fn text_of(text: &str) -> &str {
        text
    }
}
