//! What `/screen` captures: the X11 screen, one monitor of it (RandR) or the part of the screen
//! one window covers, read with `GetImage` over x11rb's pure-Rust connection (no libxcb, no
//! C build). A window is taken where it is on the screen each time, so it may move; a closed
//! one ends the share. Wayland desktops are reached through XWayland, where only X11 windows
//! show (docs/terminal-ui.md says so).

use image::{DynamicImage, RgbImage};
use x11rb::connection::Connection;
use x11rb::image::{BitsPerPixel, Image, ImageOrder, PixelLayout};
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, MapState, Visualtype, Window};
use x11rb::rust_connection::RustConnection;

use livetalk_live::excerpt;

/// The widest and tallest area taken: a larger one is refused rather than read each second.
const SIDE_MAX: u16 = 16_384;

/// The longest name of a monitor or window as listed and shown.
const NAME_MAX: usize = 80;

/// The most windows looked at for their names.
const WINDOWS_MAX: usize = 1_000;

/// What part of the screen is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Area {
    /// The whole screen.
    Screen,
    /// A monitor's rectangle.
    Monitor {
        x: i16,
        y: i16,
        width: u16,
        height: u16,
    },
    /// Where this window is on the screen, looked up each time.
    Window(Window),
}

/// A connection to the X server and what to take from it.
pub struct X11Capture {
    conn: RustConnection,
    screen: usize,
    area: Area,
    what: String,
}

/// One monitor or window that can be shared, by name.
struct Shareable {
    name: String,
    area: Area,
    kind: &'static str,
}

/// The sentence for a session without an X display.
fn no_display(why: &str) -> String {
    format!(
        "There is no screen to share: {why}. /screen shares an X11 display (on Wayland, the X11 windows XWayland shows); the session goes on without it."
    )
}

fn connect() -> Result<(RustConnection, usize), String> {
    let display = std::env::var("DISPLAY").unwrap_or_default();
    if display.trim().is_empty() {
        return Err(no_display("DISPLAY is not set"));
    }
    x11rb::connect(None).map_err(|e| {
        no_display(&format!(
            "the display {} could not be opened ({e})",
            excerpt::one_line(&display, 40)
        ))
    })
}

impl X11Capture {
    /// Connects to the display and finds what `name` names (a monitor or a window, exactly or
    /// as the one name that holds it); the whole screen without one.
    pub fn open(name: Option<&str>) -> Result<X11Capture, String> {
        let (conn, screen) = connect()?;
        let root = conn.setup().roots[screen].clone();
        let (area, what) = match name {
            None => {
                let display = std::env::var("DISPLAY").unwrap_or_default();
                (
                    Area::Screen,
                    format!(
                        "the screen {} ({}×{})",
                        excerpt::one_line(&display, 40),
                        root.width_in_pixels,
                        root.height_in_pixels
                    ),
                )
            }
            Some(name) => {
                let found = pick(shareables(&conn, screen), name)?;
                (found.area, format!("{} \"{}\"", found.kind, found.name))
            }
        };
        Ok(X11Capture {
            conn,
            screen,
            area,
            what,
        })
    }

    /// What is shared, as the user reads it.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Takes the area as it is now.
    pub fn grab(&mut self) -> Result<DynamicImage, String> {
        let root = &self.conn.setup().roots[self.screen];
        let (root_window, screen_w, screen_h) =
            (root.root, root.width_in_pixels, root.height_in_pixels);
        let (x, y, width, height) = match self.area {
            Area::Screen => (0, 0, screen_w, screen_h),
            Area::Monitor {
                x,
                y,
                width,
                height,
            } => (x, y, width, height),
            Area::Window(window) => {
                let gone = || format!("The {} was closed: sharing stopped.", self.what);
                let geometry = self
                    .conn
                    .get_geometry(window)
                    .ok()
                    .and_then(|c| c.reply().ok())
                    .ok_or_else(gone)?;
                let at = self
                    .conn
                    .translate_coordinates(window, root_window, 0, 0)
                    .ok()
                    .and_then(|c| c.reply().ok())
                    .ok_or_else(gone)?;
                (at.dst_x, at.dst_y, geometry.width, geometry.height)
            }
        };
        // Only what is on the screen can be read.
        let left = x.max(0);
        let top = y.max(0);
        let right = (i32::from(x) + i32::from(width)).min(i32::from(screen_w));
        let bottom = (i32::from(y) + i32::from(height)).min(i32::from(screen_h));
        if right <= i32::from(left) || bottom <= i32::from(top) {
            return Err(format!(
                "The {} is off the screen: sharing stopped.",
                self.what
            ));
        }
        let width = u16::try_from(right - i32::from(left)).unwrap_or(u16::MAX);
        let height = u16::try_from(bottom - i32::from(top)).unwrap_or(u16::MAX);
        if width > SIDE_MAX || height > SIDE_MAX {
            return Err(format!(
                "The {} is {width}×{height}, larger than livetalk shares (at most {SIDE_MAX} pixels on a side).",
                self.what
            ));
        }
        let (image, visual) = Image::get(&self.conn, root_window, left, top, width, height)
            .map_err(|e| {
                format!(
                    "The {} could not be read ({e}): sharing stopped.",
                    self.what
                )
            })?;
        let layout = visual_type(&self.conn, self.screen, visual)
            .and_then(|v| PixelLayout::from_visual_type(v).ok())
            .ok_or_else(|| {
                format!(
                    "The {} uses colours livetalk cannot read (not a true-colour visual).",
                    self.what
                )
            })?;
        Ok(DynamicImage::ImageRgb8(to_rgb(&image, layout)))
    }
}

/// The names of every monitor and window that can be shared, monitors first.
pub fn names() -> Result<Vec<String>, String> {
    let (conn, screen) = connect()?;
    Ok(shareables(&conn, screen)
        .into_iter()
        .map(|s| s.name)
        .collect())
}

/// The one monitor or window `name` means: the one so named (case aside), else the one whose
/// name holds it.
fn pick(all: Vec<Shareable>, name: &str) -> Result<Shareable, String> {
    let wanted = name.to_lowercase();
    let listed = || {
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).take(12).collect();
        if names.is_empty() {
            "there are none".to_owned()
        } else {
            format!("there are: {}", names.join(", "))
        }
    };
    if let Some(at) = all.iter().position(|s| s.name.to_lowercase() == wanted) {
        return Ok(all.into_iter().nth(at).expect("found at that place"));
    }
    let holding: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].name.to_lowercase().contains(&wanted))
        .collect();
    match holding.as_slice() {
        [one] => Ok(all.into_iter().nth(*one).expect("found at that place")),
        [] => Err(format!(
            "There is no monitor or window named \"{}\" to share ({}).",
            excerpt::one_line(name, NAME_MAX),
            listed()
        )),
        _ => Err(format!(
            "More than one monitor or window is named like \"{}\" ({}): name one whole.",
            excerpt::one_line(name, NAME_MAX),
            listed()
        )),
    }
}

/// The monitors (RandR) and the named windows on the screen.
fn shareables(conn: &RustConnection, screen: usize) -> Vec<Shareable> {
    let root = conn.setup().roots[screen].root;
    let mut all = Vec::new();
    if let Some(monitors) = conn
        .randr_get_monitors(root, true)
        .ok()
        .and_then(|c| c.reply().ok())
    {
        for monitor in monitors.monitors {
            let Some(name) = atom_name(conn, monitor.name) else {
                continue;
            };
            all.push(Shareable {
                name,
                area: Area::Monitor {
                    x: monitor.x,
                    y: monitor.y,
                    width: monitor.width,
                    height: monitor.height,
                },
                kind: "monitor",
            });
        }
    }
    for window in top_windows(conn, root) {
        if let Some(name) = window_name(conn, window) {
            all.push(Shareable {
                name,
                area: Area::Window(window),
                kind: "window",
            });
        }
    }
    all
}

/// The windows a window manager lists (`_NET_CLIENT_LIST`), or without one the root's mapped
/// children.
fn top_windows(conn: &RustConnection, root: Window) -> Vec<Window> {
    let listed = intern(conn, b"_NET_CLIENT_LIST").and_then(|atom| {
        conn.get_property(false, root, atom, AtomEnum::WINDOW, 0, WINDOWS_MAX as u32)
            .ok()?
            .reply()
            .ok()?
            .value32()
            .map(|windows| windows.collect::<Vec<_>>())
    });
    if let Some(windows) = listed.filter(|w| !w.is_empty()) {
        return windows;
    }
    let Some(tree) = conn.query_tree(root).ok().and_then(|c| c.reply().ok()) else {
        return Vec::new();
    };
    tree.children
        .into_iter()
        .take(WINDOWS_MAX)
        .filter(|&w| {
            conn.get_window_attributes(w)
                .ok()
                .and_then(|c| c.reply().ok())
                .is_some_and(|a| a.map_state == MapState::VIEWABLE)
        })
        .collect()
}

/// A window's title (`_NET_WM_NAME`, else `WM_NAME`), made fit to show.
fn window_name(conn: &RustConnection, window: Window) -> Option<String> {
    let utf8 = intern(conn, b"UTF8_STRING");
    let net_name = intern(conn, b"_NET_WM_NAME");
    let read = |property: u32, kind: u32| {
        conn.get_property(false, window, property, kind, 0, 256)
            .ok()?
            .reply()
            .ok()
            .map(|r| r.value)
            .filter(|v| !v.is_empty())
    };
    let bytes = net_name
        .zip(utf8)
        .and_then(|(name, utf8)| read(name, utf8))
        .or_else(|| read(AtomEnum::WM_NAME.into(), AtomEnum::STRING.into()))?;
    fit_name(&String::from_utf8_lossy(&bytes))
}

fn atom_name(conn: &RustConnection, atom: u32) -> Option<String> {
    let reply = conn.get_atom_name(atom).ok()?.reply().ok()?;
    fit_name(&String::from_utf8_lossy(&reply.name))
}

/// A name from the X server on one line, without control characters, bounded.
fn fit_name(name: &str) -> Option<String> {
    let name = excerpt::one_line(name, NAME_MAX);
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

fn intern(conn: &RustConnection, name: &[u8]) -> Option<u32> {
    Some(conn.intern_atom(true, name).ok()?.reply().ok()?.atom).filter(|&a| a != 0)
}

fn visual_type(conn: &RustConnection, screen: usize, visual: u32) -> Option<Visualtype> {
    conn.setup().roots[screen]
        .allowed_depths
        .iter()
        .flat_map(|d| d.visuals.iter())
        .find(|v| v.visual_id == visual)
        .copied()
}

/// The image's pixels as RGB, by their visual's masks; 32-bit BGRX, what true-colour servers
/// send, read directly.
fn to_rgb(image: &Image<'_>, layout: PixelLayout) -> RgbImage {
    let (width, height) = (u32::from(image.width()), u32::from(image.height()));
    let bgrx = image.bits_per_pixel() == BitsPerPixel::B32
        && image.byte_order() == ImageOrder::LsbFirst
        && layout.decode(0x00ff_0000) == (0xffff, 0, 0)
        && layout.decode(0x0000_ff00) == (0, 0xffff, 0)
        && layout.decode(0x0000_00ff) == (0, 0, 0xffff);
    if bgrx {
        let stride = image.data().len() / usize::from(image.height()).max(1);
        let data = image.data();
        return RgbImage::from_fn(width, height, |x, y| {
            let at = y as usize * stride + x as usize * 4;
            image::Rgb([data[at + 2], data[at + 1], data[at]])
        });
    }
    RgbImage::from_fn(width, height, |x, y| {
        let (r, g, b) = layout.decode(image.get_pixel(x as u16, y as u16));
        image::Rgb([(r >> 8) as u8, (g >> 8) as u8, (b >> 8) as u8])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Shareable {
        Shareable {
            name: name.to_owned(),
            area: Area::Screen,
            kind: "window",
        }
    }

    #[test]
    fn a_name_picks_the_one_it_names_or_the_one_holding_it() {
        let all = || {
            vec![
                named("DP-1"),
                named("Terminal — vim"),
                named("Firefox"),
                named("Fire drill"),
            ]
        };
        assert_eq!(pick(all(), "dp-1").unwrap().name, "DP-1");
        assert_eq!(pick(all(), "vim").unwrap().name, "Terminal — vim");
        let many = pick(all(), "fire").err().unwrap();
        assert!(
            many.contains("More than one") && many.contains("Firefox"),
            "{many}"
        );
        let none = pick(all(), "slack").err().unwrap();
        assert!(
            none.contains("no monitor or window named \"slack\""),
            "{none}"
        );
    }

    #[test]
    fn names_from_the_server_are_made_fit_to_show() {
        assert_eq!(
            fit_name("a\x1b[31mred\nname\u{9b}2J").as_deref(),
            Some("a [31mred name 2J")
        );
        assert_eq!(fit_name("   "), None);
        assert_eq!(
            fit_name(&"x".repeat(200)).unwrap().chars().count(),
            NAME_MAX
        );
    }
}
