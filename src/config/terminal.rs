//! The `[terminal]` table: how the terminal UI draws pictures (`graphics`, `--graphics`).

use super::ConfigError;

/// How the preview pane draws the picture the model was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Graphics {
    /// Ask the terminal (kitty, then sixel; iTerm2 by its environment); half-blocks when it
    /// does not answer in time, inside tmux, or on a terminal that has none of them.
    #[default]
    Auto,
    Kitty,
    Sixel,
    Iterm2,
    Halfblocks,
    /// No preview pane.
    Off,
}

impl Graphics {
    /// The values as a message lists them.
    pub const NAMES: &'static str = "auto, kitty, sixel, iterm2, halfblocks, off";

    pub fn parse(value: &str) -> Option<Graphics> {
        Some(match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Graphics::Auto,
            "kitty" => Graphics::Kitty,
            "sixel" => Graphics::Sixel,
            "iterm2" => Graphics::Iterm2,
            "halfblocks" => Graphics::Halfblocks,
            "off" => Graphics::Off,
            _ => return None,
        })
    }
}

/// `value` as a [`Graphics`], or one clear error naming where it came from.
pub(super) fn graphics(value: &str, source: &str) -> Result<Graphics, ConfigError> {
    Graphics::parse(value).ok_or_else(|| {
        ConfigError::new(
            source,
            "terminal.graphics",
            format!(
                "{:?} is not one of {}",
                livetalk_live::excerpt::bounded(value, 40),
                Graphics::NAMES
            ),
        )
    })
}
