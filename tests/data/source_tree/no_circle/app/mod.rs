//! The app, its parts depending on it and on each other one way.
pub mod state;
pub mod view;

pub struct App;

impl App {
    pub fn state(&self) -> state::State {
        self::state::State
    }
}
