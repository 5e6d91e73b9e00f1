//! What the demo model can tell of a picture a client shows it (a JPEG video frame): its size
//! and its dominant colour, named in plain words, so `/image` can be demonstrated offline.

use std::io::Cursor;

use image::{ImageFormat, ImageReader, Limits};

/// The widest and tallest frame decoded: clients send frames of at most about 1024 pixels, and
/// a frame claiming more is not decoded (a decompression bomb costs nothing).
const SIDE_MAX: u32 = 4_096;

/// Pixels looked at, at most: enough to tell the dominant colour.
const SAMPLES: u64 = 65_536;

/// Colour names, in the order [`colour_of`] indexes them.
const COLOURS: [&str; 9] = [
    "red", "orange", "yellow", "green", "blue", "purple", "white", "black", "grey",
];

/// What the model says of a JPEG frame.
pub(crate) fn describe(jpeg: &[u8]) -> String {
    match look(jpeg) {
        Some((width, height, colour)) => {
            format!("I see a {width} by {height} picture, mostly {colour}.")
        }
        None => "I got a picture but could not make it out: this demo model reads JPEG frames."
            .to_owned(),
    }
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
        assert!(describe(b"not a picture").contains("could not make it out"));
    }
}
