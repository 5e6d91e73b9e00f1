//! A private X display for the screen-sharing tests: Xvfb on a display number it picks itself
//! (`-displayfd`), and a window of one colour drawn on it through x11rb, whose colour the test
//! changes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    AtomEnum, ChangeWindowAttributesAux, ConnectionExt as _, CreateWindowAux, PropMode, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// A running Xvfb, stopped when dropped.
pub struct Xvfb {
    child: Child,
    /// `:N`, for `DISPLAY`.
    pub display: String,
}

impl Xvfb {
    /// Starts Xvfb with one screen of `width` × `height` in true colour; returns once it
    /// accepts connections (it writes its display number when it does).
    pub fn start(width: u16, height: u16) -> Xvfb {
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1", "-nolisten", "tcp", "-ac", "-screen", "0"])
            .arg(format!("{width}x{height}x24"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb runs (scripts/test.sh installs the xvfb package)");
        let stdout = child.stdout.take().expect("Xvfb's stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let number = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("Xvfb says its display number");
        let number = number.trim();
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "Xvfb did not start: {number:?}"
        );
        Xvfb {
            child,
            display: format!(":{number}"),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A window of one colour at the top left of the display, with a title.
pub struct SolidWindow {
    conn: RustConnection,
    window: u32,
}

/// A 24-bit true-colour pixel.
fn pixel([r, g, b]: [u8; 3]) -> u32 {
    (u32::from(r) << 16) | (u32::from(g) << 8) | u32::from(b)
}

impl SolidWindow {
    /// Opens a `width` × `height` window of colour `rgb` titled `title` on `display`, and
    /// returns once the server has drawn it.
    pub fn open(display: &str, width: u16, height: u16, rgb: [u8; 3], title: &str) -> SolidWindow {
        let (conn, screen) = x11rb::connect(Some(display)).expect("connect to Xvfb");
        let root = conn.setup().roots[screen].root;
        let window = conn.generate_id().expect("a window id");
        conn.create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            window,
            root,
            0,
            0,
            width,
            height,
            0,
            WindowClass::INPUT_OUTPUT,
            0,
            &CreateWindowAux::new().background_pixel(pixel(rgb)),
        )
        .expect("create the window");
        conn.change_property8(
            PropMode::REPLACE,
            window,
            AtomEnum::WM_NAME,
            AtomEnum::STRING,
            title.as_bytes(),
        )
        .expect("name the window");
        conn.map_window(window).expect("map the window");
        let solid = SolidWindow { conn, window };
        solid.sync();
        solid
    }

    /// Paints the window `rgb`; returns once the server has.
    pub fn paint(&self, rgb: [u8; 3]) {
        self.conn
            .change_window_attributes(
                self.window,
                &ChangeWindowAttributesAux::new().background_pixel(pixel(rgb)),
            )
            .expect("change the colour");
        self.conn
            .clear_area(false, self.window, 0, 0, 0, 0)
            .expect("repaint");
        self.sync();
    }

    /// Waits until the server has done everything asked so far (a round trip).
    fn sync(&self) {
        self.conn
            .get_input_focus()
            .expect("ask the server")
            .reply()
            .expect("the server answers");
    }
}
