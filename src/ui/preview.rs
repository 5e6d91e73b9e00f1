//! The preview pane: the newest picture the model was shown (a share's last frame, or the last
//! `/image` picture), drawn beside the conversation in the terminal's graphics (kitty, sixel,
//! iTerm2) or half-blocks, with what it is. [`Pictures`] is the one place a picture is kept
//! encoded for the terminal: it is decoded and encoded again only when the picture or the
//! pane's size changes (a share sends at most a frame a second), never for each frame drawn.

use std::time::Instant;

use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect, Size};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui_image::picker::ProtocolType;
use ratatui_image::protocol::Protocol;
use ratatui_image::protocol::halfblocks::Halfblocks;
use ratatui_image::protocol::iterm2::Iterm2;
use ratatui_image::protocol::kitty::Kitty;
use ratatui_image::protocol::sixel::Sixel;
use ratatui_image::{FontSize, Image};
use unicode_width::UnicodeWidthStr;

use super::Theme;
use crate::app::{App, ImageSent, Previewed};
use livetalk_live::excerpt;

/// The conversation keeps at least this many columns beside the preview; with less room the
/// pane is not drawn.
const CONVERSATION_MIN_WIDTH: u16 = 40;
/// The pane takes two fifths of the room, within these widths (borders included).
const PANE_MIN_WIDTH: u16 = 20;
const PANE_MAX_WIDTH: u16 = 64;
/// The picture needs at least this many rows; with fewer the pane is not drawn.
const PICTURE_MIN_ROWS: u16 = 2;
/// The caption takes at most this many rows.
const CAPTION_MAX_ROWS: u16 = 2;
/// A character cell as half-blocks see it: two square pixels, one above the other.
pub const HALF_BLOCK_CELL: FontSize = FontSize::new(10, 20);

/// The largest character cell believed, in pixels (a 4K screen's large font is well under).
const CELL_MAX: FontSize = FontSize::new(64, 128);

/// Which picture an encoding is of: when it was made ready, and its size in bytes.
type PictureKey = (Instant, usize);

/// How pictures are drawn on this terminal, and the picture encoded for it.
pub struct Pictures {
    /// The graphics the terminal is drawn with; `None`: no preview pane.
    protocol: Option<ProtocolType>,
    /// A character cell in the terminal's pixels: what a picture is scaled by.
    cell: FontSize,
    /// The picture shown, decoded (`None` inside: it could not be).
    decoded: Option<(PictureKey, Option<DynamicImage>)>,
    /// The picture encoded for the terminal, at its size in cells.
    encoded: Option<Encoded>,
    /// Kitty images no cell shows any more, to delete from the terminal's memory.
    retired: Vec<u32>,
    /// The kitty image id the next encoding takes.
    next_kitty_id: u32,
}

struct Encoded {
    key: PictureKey,
    cells: Size,
    /// `None`: the picture could not be encoded.
    protocol: Option<Protocol>,
    kitty_id: Option<u32>,
}

impl Pictures {
    /// Pictures drawn with `protocol` on a terminal whose cells are `cell` pixels.
    pub fn new(protocol: ProtocolType, cell: FontSize) -> Pictures {
        let cell = if protocol == ProtocolType::Halfblocks || cell.width == 0 || cell.height == 0 {
            HALF_BLOCK_CELL
        } else {
            // The terminal says how large its cells are; an absurd answer must not make the
            // picture encoded for it absurdly large.
            FontSize::new(
                cell.width.min(CELL_MAX.width),
                cell.height.min(CELL_MAX.height),
            )
        };
        Pictures {
            protocol: Some(protocol),
            cell,
            decoded: None,
            encoded: None,
            retired: Vec::new(),
            // Ids of this process's own, so two livetalks in one kitty do not collide.
            next_kitty_id: (std::process::id() << 8) | 1,
        }
    }

    /// No preview pane.
    pub fn off() -> Pictures {
        Pictures {
            protocol: None,
            ..Pictures::new(ProtocolType::Halfblocks, HALF_BLOCK_CELL)
        }
    }

    /// The graphics pictures are drawn with (`None`: not drawn).
    pub fn protocol(&self) -> Option<ProtocolType> {
        self.protocol
    }

    /// Nothing is previewed now: the picture is let go, and a kitty image deleted.
    pub fn hide(&mut self) {
        self.decoded = None;
        if let Some(id) = self.encoded.take().and_then(|e| e.kitty_id) {
            self.retired.push(id);
        }
    }

    /// The kitty images to delete from the terminal, now that no cell shows them.
    pub fn take_retired(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.retired)
    }

    /// How many cells `width`×`height` pixels take to fit `room`, keeping their aspect ratio
    /// (scaled up as well as down, so a small picture fills the pane).
    fn cells_for(&self, width: u32, height: u32, room: Size) -> Size {
        let (cw, ch) = (f64::from(self.cell.width), f64::from(self.cell.height));
        let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
        let scale = (f64::from(room.width) * cw / w).min(f64::from(room.height) * ch / h);
        let fit = |pixels: f64, cell: f64, most: u16| {
            // A hair over, so a side that fits exactly is not a cell short by rounding.
            ((pixels * scale / cell + 1e-6).floor() as u16).clamp(1, most.max(1))
        };
        Size::new(fit(w, cw, room.width), fit(h, ch, room.height))
    }

    /// `picture` encoded at `cells`: from the last encoding when it is of the same picture at
    /// the same size.
    fn encoded(&mut self, picture: &ImageSent, cells: Size) -> Option<&Protocol> {
        let protocol = self.protocol?;
        let key = (picture.at, picture.jpeg.len());
        let fresh = self
            .encoded
            .as_ref()
            .is_some_and(|e| e.key == key && e.cells == cells);
        if !fresh {
            if self.decoded.as_ref().is_none_or(|(k, _)| *k != key) {
                let image =
                    image::load_from_memory_with_format(&picture.jpeg, ImageFormat::Jpeg).ok();
                self.decoded = Some((key, image));
            }
            let image = self.decoded.as_ref().and_then(|(_, image)| image.as_ref());
            let kitty_id = (protocol == ProtocolType::Kitty).then(|| {
                let id = self.next_kitty_id;
                self.next_kitty_id = self.next_kitty_id.wrapping_add(1).max(1);
                id
            });
            let encoded =
                image.and_then(|image| encode(protocol, image, cells, self.cell, kitty_id));
            if let Some(old) = self.encoded.take().and_then(|e| e.kitty_id) {
                self.retired.push(old);
            }
            self.encoded = Some(Encoded {
                key,
                cells,
                protocol: encoded,
                kitty_id,
            });
        }
        self.encoded.as_ref().and_then(|e| e.protocol.as_ref())
    }
}

/// `image` encoded for the terminal to cover `cells` (`cell`: a cell's pixels).
fn encode(
    protocol: ProtocolType,
    image: &DynamicImage,
    cells: Size,
    cell: FontSize,
    kitty_id: Option<u32>,
) -> Option<Protocol> {
    if protocol == ProtocolType::Halfblocks {
        // Half-blocks scale the picture to two pixels a cell themselves.
        return Halfblocks::new(image.clone(), cells)
            .ok()
            .map(Protocol::Halfblocks);
    }
    // The terminal is sent the picture at the pane's size, never the whole frame.
    let scaled = image.resize_exact(
        u32::from(cells.width) * u32::from(cell.width),
        u32::from(cells.height) * u32::from(cell.height),
        FilterType::Triangle,
    );
    match protocol {
        ProtocolType::Sixel => Sixel::new(scaled, cells, false).ok().map(Protocol::Sixel),
        ProtocolType::Kitty => Kitty::new(scaled, cells, kitty_id.unwrap_or(1), false, false)
            .ok()
            .map(Protocol::Kitty),
        ProtocolType::Iterm2 => Iterm2::new(scaled, cells, false).ok().map(Protocol::ITerm2),
        ProtocolType::Halfblocks => None,
    }
}

/// What the pane says of the picture: a share's kind and rates, or the picture's name and size.
fn caption(shown: Previewed<'_>) -> String {
    match shown {
        Previewed::Share(sharing, _) => {
            let head = format!("sharing {}", sharing.kind());
            match sharing.rates() {
                Some((frames, bytes)) => format!(
                    "{head} · {frames:.1} frames/s · {}/s",
                    excerpt::human_size(bytes as u64)
                ),
                None => format!(
                    "{head} · {} frame{} · {}",
                    sharing.frames(),
                    if sharing.frames() == 1 { "" } else { "s" },
                    excerpt::human_size(sharing.bytes())
                ),
            }
        }
        Previewed::Image(image) => format!(
            "{} · {}×{} · {}",
            excerpt::terminal_safe(&excerpt::bounded(&image.name, 80)),
            image.width,
            image.height,
            excerpt::human_size(image.jpeg.len() as u64)
        ),
    }
}

/// Draws the preview pane at the right of `area` when the app has a picture to preview and
/// there is room for it; returns what is left of `area` for the conversation.
pub fn beside(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: Theme,
    pictures: &mut Pictures,
) -> Rect {
    let width = (area.width * 2 / 5).clamp(PANE_MIN_WIDTH, PANE_MAX_WIDTH);
    let room = area.width >= width + CONVERSATION_MIN_WIDTH && area.height >= PICTURE_MIN_ROWS + 3;
    let Some(shown) = app
        .preview()
        .filter(|_| room && pictures.protocol().is_some())
    else {
        pictures.hide();
        return area;
    };
    let [rest, pane] = Layout::horizontal([
        Constraint::Min(CONVERSATION_MIN_WIDTH),
        Constraint::Length(width),
    ])
    .areas(area);
    let inner_width = pane.width - 2;
    let caption = caption(shown);
    let caption_rows = u16::try_from(caption.width().div_ceil(usize::from(inner_width)))
        .unwrap_or(CAPTION_MAX_ROWS)
        .clamp(1, CAPTION_MAX_ROWS);
    let picture = shown.picture();
    let room = Size::new(inner_width, pane.height - 2 - caption_rows);
    let cells = pictures.cells_for(picture.width, picture.height, room);
    let pane = Rect {
        height: cells.height + caption_rows + 2,
        ..pane
    };
    let block = Block::bordered()
        .border_style(theme.border(false))
        .title(Span::styled(" Preview ", theme.bold()));
    let inner = block.inner(pane);
    frame.render_widget(block, pane);
    let [image_row, caption_area] = Layout::vertical([
        Constraint::Length(cells.height),
        Constraint::Length(caption_rows),
    ])
    .areas(inner);
    let image_area = Rect {
        x: image_row.x + (image_row.width - cells.width) / 2,
        width: cells.width,
        ..image_row
    };
    let text = match pictures.encoded(picture, cells) {
        Some(protocol) => {
            frame.render_widget(Image::new(protocol), image_area);
            caption
        }
        None => format!("{caption} (cannot be drawn)"),
    };
    frame.render_widget(
        Paragraph::new(Line::styled(text, theme.dim())).wrap(Wrap { trim: true }),
        caption_area,
    );
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_reporting_absurd_cells_gets_pictures_of_a_sane_size() {
        let pictures = Pictures::new(ProtocolType::Kitty, FontSize::new(5_000, 60_000));
        assert_eq!((pictures.cell.width, pictures.cell.height), (64, 128));
        let cells = pictures.cells_for(1024, 576, Size::new(64, 40));
        // At most the pane's cells, each at most CELL_MAX: a few megapixels at worst.
        assert!(u32::from(cells.width) * 64 * u32::from(cells.height) * 128 <= 64 * 64 * 40 * 128);
        let ordinary = Pictures::new(ProtocolType::Sixel, FontSize::new(9, 18));
        assert_eq!((ordinary.cell.width, ordinary.cell.height), (9, 18));
    }
}
