//! Colours and emphasis for every pane, in one place; with `NO_COLOR` only bold, dim,
//! reverse and symbols remain, so nothing depends on colour to be understood.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    color: bool,
    /// The terminal shows OSC 8 hyperlinks: links are written as links.
    pub links: bool,
}

impl Theme {
    pub fn new(no_color: bool) -> Self {
        Theme {
            color: !no_color,
            links: false,
        }
    }

    /// The same, writing links as OSC 8 hyperlinks where `links` says the terminal shows them.
    pub fn with_links(self, links: bool) -> Self {
        Theme { links, ..self }
    }

    /// A link: underlined, in blue where there is colour.
    pub fn link(&self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::UNDERLINED)
    }

    fn fg(&self, color: Color) -> Style {
        if self.color {
            Style::new().fg(color)
        } else {
            Style::new()
        }
    }

    pub fn plain(&self) -> Style {
        Style::new()
    }

    pub fn dim(&self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }

    pub fn bold(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// The big status badge: the two states must be told apart from across a room.
    pub fn speaking_badge(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Magenta)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    pub fn listening_badge(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Green)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    pub fn pending_badge(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    pub fn error_badge(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    pub fn status_bar(&self) -> Style {
        if self.color {
            Style::new().bg(Color::DarkGray).fg(Color::White)
        } else {
            Style::new()
        }
    }

    pub fn user(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn model(&self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }

    pub fn tool(&self) -> Style {
        self.fg(Color::Blue)
    }

    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }

    pub fn running(&self) -> Style {
        self.fg(Color::Yellow)
    }

    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    pub fn warning(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn border(&self, focused: bool) -> Style {
        match (focused, self.color) {
            (true, true) => Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            (true, false) => Style::new().add_modifier(Modifier::BOLD),
            (false, _) => self.dim(),
        }
    }

    pub fn selected(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    pub fn highlight(&self) -> Style {
        if self.color {
            Style::new()
                .bg(Color::Yellow)
                .fg(Color::Black)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    /// The swatch colour of a lamp colour name or `#rrggbb`; `None` without colour.
    pub fn swatch(&self, name: &str) -> Option<Color> {
        if !self.color {
            return None;
        }
        let name = name.trim().to_ascii_lowercase();
        if let Some(hex) = name.strip_prefix('#')
            && hex.len() == 6
            && let Ok(rgb) = u32::from_str_radix(hex, 16)
        {
            return Some(Color::Rgb((rgb >> 16) as u8, (rgb >> 8) as u8, rgb as u8));
        }
        let rgb = match name.as_str() {
            "white" => (255, 255, 255),
            "warm white" => (255, 214, 170),
            "cool white" => (220, 235, 255),
            "daylight" => (255, 250, 240),
            "red" => (230, 30, 30),
            "crimson" => (220, 20, 60),
            "orange" => (255, 140, 0),
            "amber" => (255, 191, 0),
            "yellow" => (255, 230, 0),
            "gold" => (255, 215, 0),
            "green" => (30, 200, 60),
            "lime" => (150, 255, 0),
            "teal" => (0, 128, 128),
            "cyan" => (0, 220, 230),
            "turquoise" => (64, 224, 208),
            "blue" => (30, 90, 255),
            "navy" => (0, 0, 128),
            "indigo" => (75, 0, 130),
            "purple" => (140, 40, 200),
            "violet" => (238, 130, 238),
            "lavender" => (200, 180, 255),
            "magenta" => (255, 0, 255),
            "pink" => (255, 150, 200),
            _ => return None,
        };
        Some(Color::Rgb(rgb.0, rgb.1, rgb.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swatches_cover_every_lamp_colour_name_and_hex() {
        let no_color = true;
        let theme = Theme::new(no_color);
        assert_eq!(
            theme.swatch("blue"),
            None,
            "NO_COLOR draws no swatch colour"
        );
        let theme = Theme::new(!no_color);
        for name in crate::tools::COLOR_NAMES {
            assert!(theme.swatch(name).is_some(), "{name} has no swatch");
        }
        assert_eq!(theme.swatch("#FF8000"), Some(Color::Rgb(255, 128, 0)));
        assert_eq!(theme.swatch("chartreuse-ish"), None);
    }
}
