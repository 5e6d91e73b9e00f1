//! What a terminal was sent, read back: `livetalk` in a raw pseudo-terminal of its own (`script`,
//! since tmux keeps graphics to itself), the cells' colours of a tmux pane, and kitty and sixel
//! pictures decoded back to pixels.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;

/// How often the output is looked at while waiting.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// `livetalk` in a pseudo-terminal of `script`'s, `columns`×`rows`, everything it writes kept.
pub struct RawTerminal {
    child: Child,
    stdin: ChildStdin,
    output: Arc<Mutex<Vec<u8>>>,
}

impl RawTerminal {
    pub fn start(scratch: &Path, columns: u16, rows: u16, args: &[&str]) -> RawTerminal {
        let line = format!(
            "stty cols {columns} rows {rows}; exec {}",
            super::pane::livetalk_line(args)
        );
        let mut command = Command::new("script");
        super::isolate(&mut command, scratch);
        let mut child = command
            .current_dir(scratch)
            .env("TERM", "xterm-256color")
            .env_remove("TMUX")
            .args(["-q", "-f", "-e", "-c", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("script runs (util-linux)");
        let stdin = child.stdin.take().expect("script's stdin");
        let mut stdout = child.stdout.take().expect("script's stdout");
        let output = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 64 * 1024];
            while let Ok(read) = stdout.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                kept.lock().unwrap().extend_from_slice(&chunk[..read]);
            }
        });
        RawTerminal {
            child,
            stdin,
            output,
        }
    }

    /// Everything written to the terminal so far.
    pub fn output(&self) -> Vec<u8> {
        self.output.lock().unwrap().clone()
    }

    /// Waits until what was written satisfies `ready`; panics with its text on timeout.
    pub fn wait_for(&self, what: &str, timeout: Duration, ready: impl Fn(&[u8]) -> bool) {
        let found = super::poll(timeout, LOOK_EVERY, || ready(&self.output()).then_some(()));
        assert!(
            found.is_some(),
            "timed out waiting for {what}; the terminal was sent:\n{}",
            String::from_utf8_lossy(&self.output())
        );
    }

    /// Types `keys` as the terminal's keyboard would send them.
    pub fn keys(&mut self, keys: &str) {
        self.stdin.write_all(keys.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits for livetalk (and `script`) to exit; returns everything written.
    pub fn wait_exit(mut self, timeout: Duration) -> Vec<u8> {
        let exited = super::poll(timeout, LOOK_EVERY, || self.child.try_wait().unwrap());
        if exited.is_none() {
            let _ = self.child.kill();
            panic!(
                "livetalk did not exit; the terminal was sent:\n{}",
                String::from_utf8_lossy(&self.output())
            );
        }
        // The reader thread has what was left once the pipe closes.
        super::poll(Duration::from_secs(5), LOOK_EVERY, || {
            (Arc::strong_count(&self.output) == 1).then_some(())
        });
        self.output()
    }
}

/// True when `haystack` holds `needle`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The colours `a` and `b` are within `tolerance` of each other in each channel.
pub fn near(a: [u8; 3], b: [u8; 3], tolerance: u8) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= tolerance)
}

/// A kitty picture as the terminal was sent it: its image id and its pixels.
pub struct KittyPicture {
    pub id: u32,
    pub pixels: image::RgbaImage,
}

/// Every picture transmitted with the kitty graphics protocol in `output` (`a=T`, chunked
/// with `m=1` until `m=0`), decoded per its format key: `f=32` RGBA, `f=24` RGB, `f=100` PNG.
pub fn kitty_pictures(output: &[u8]) -> Vec<KittyPicture> {
    let text = String::from_utf8_lossy(output);
    let mut pictures = Vec::new();
    let mut open: Option<(Vec<(String, String)>, String)> = None;
    for command in text.split("\x1b_G").skip(1) {
        let Some(end) = command.find("\x1b\\") else {
            continue;
        };
        let (control, payload) = command[..end]
            .split_once(';')
            .unwrap_or((&command[..end], ""));
        let keys: Vec<(String, String)> = control
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let key = |keys: &[(String, String)], name: &str| {
            keys.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        };
        let (first, mut data) = match open.take() {
            Some((first, data)) => (first, data),
            None if key(&keys, "a").as_deref() == Some("T") => (keys.clone(), String::new()),
            None => continue,
        };
        data.push_str(payload);
        if key(&keys, "m").as_deref() == Some("1") {
            open = Some((first, data));
            continue;
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.as_bytes())
            .expect("a kitty payload is base64");
        let number = |name: &str| key(&first, name).and_then(|v| v.parse::<u32>().ok());
        let (width, height) = (number("s").unwrap_or(0), number("v").unwrap_or(0));
        let pixels = match number("f").unwrap_or(32) {
            32 => image::RgbaImage::from_raw(width, height, bytes),
            24 => image::RgbImage::from_raw(width, height, bytes)
                .map(|rgb| image::DynamicImage::ImageRgb8(rgb).to_rgba8()),
            100 => image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
                .ok()
                .map(|png| png.to_rgba8()),
            other => panic!("kitty format f={other} unexpected"),
        }
        .expect("the payload holds the pixels its keys say");
        pictures.push(KittyPicture {
            id: number("i").unwrap_or(0),
            pixels,
        });
    }
    pictures
}

/// Every sixel picture in `output` (`ESC P … q … ESC \`), decoded: each pixel painted, by its
/// colour (pixels left unpainted are not counted).
pub fn sixel_pictures(output: &[u8]) -> Vec<Vec<[u8; 3]>> {
    let text = String::from_utf8_lossy(output);
    let mut pictures = Vec::new();
    for start in text.match_indices("\x1bP").map(|(at, _)| at + 2) {
        let rest = &text[start..];
        let Some(end) = rest.find("\x1b\\") else {
            continue;
        };
        let body = &rest[..end];
        // The introducer's parameters end at `q`; anything else is another device control.
        let Some(q) = body.find('q') else { continue };
        if !body[..q].chars().all(|c| c.is_ascii_digit() || c == ';') {
            continue;
        }
        pictures.push(decode_sixel(&body[q + 1..]));
    }
    pictures
}

/// The colour of each pixel a sixel body paints (its colours defined as RGB percentages).
fn decode_sixel(body: &str) -> Vec<[u8; 3]> {
    let mut palette = std::collections::HashMap::<u32, [u8; 3]>::new();
    let mut colour = 0u32;
    let mut painted = Vec::new();
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    let number = |i: &mut usize| -> u32 {
        let mut n = 0u32;
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            n = n * 10 + chars[*i].to_digit(10).unwrap_or(0);
            *i += 1;
        }
        n
    };
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '"' => {
                // Raster attributes: numbers and semicolons.
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == ';') {
                    i += 1;
                }
            }
            '#' => {
                let mut fields = vec![number(&mut i)];
                while i < chars.len() && chars[i] == ';' {
                    i += 1;
                    fields.push(number(&mut i));
                }
                colour = fields[0];
                if let [_, 2, r, g, b] = fields[..] {
                    let scale = |v: u32| u8::try_from(v * 255 / 100).unwrap_or(255);
                    palette.insert(colour, [scale(r), scale(g), scale(b)]);
                }
            }
            '!' => {
                let count = number(&mut i);
                if let Some(&data) = chars.get(i) {
                    i += 1;
                    for _ in 0..count {
                        paint(data, colour, &palette, &mut painted);
                    }
                }
            }
            '?'..='~' => paint(c, colour, &palette, &mut painted),
            _ => {}
        }
    }
    painted
}

/// The pixels one sixel character paints (one for each of its six bits set).
fn paint(
    data: char,
    colour: u32,
    palette: &std::collections::HashMap<u32, [u8; 3]>,
    out: &mut Vec<[u8; 3]>,
) {
    let bits = (data as u32).saturating_sub(0x3f);
    let rgb = palette.get(&colour).copied().unwrap_or([0, 0, 0]);
    for _ in 0..bits.count_ones() {
        out.push(rgb);
    }
}

/// The background colours of the cells of a tmux pane's `capture-pane -e` text: each character
/// printed, with the 24-bit background it was printed on (`None`: another or none).
pub fn cell_backgrounds(captured: &str) -> Vec<(char, Option<[u8; 3]>)> {
    let mut cells = Vec::new();
    let mut background = None;
    let mut chars = captured.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() != Some(&'[') {
                continue;
            }
            chars.next();
            let mut params = String::new();
            let mut last = ' ';
            for p in chars.by_ref() {
                if p.is_ascii_alphabetic() {
                    last = p;
                    break;
                }
                params.push(p);
            }
            if last != 'm' {
                continue;
            }
            let fields: Vec<u32> = params.split(';').map(|f| f.parse().unwrap_or(0)).collect();
            let mut at = 0;
            while at < fields.len() {
                match fields[at] {
                    0 | 49 => background = None,
                    48 if fields.get(at + 1) == Some(&2) && at + 4 < fields.len() => {
                        let channel = |v: u32| u8::try_from(v).unwrap_or(255);
                        background = Some([
                            channel(fields[at + 2]),
                            channel(fields[at + 3]),
                            channel(fields[at + 4]),
                        ]);
                        at += 4;
                    }
                    48 if fields.get(at + 1) == Some(&5) => {
                        background = None;
                        at += 2;
                    }
                    38 if fields.get(at + 1) == Some(&2) => at += 4,
                    38 if fields.get(at + 1) == Some(&5) => at += 2,
                    40..=47 | 100..=107 => background = None,
                    _ => {}
                }
                at += 1;
            }
        } else if c != '\n' {
            cells.push((c, background));
        }
    }
    cells
}
