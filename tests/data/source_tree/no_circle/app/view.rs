//! Draws the app.
use super::App;
use crate::app::state::State;

pub fn draw() {
    let _: Option<(App, State)> = None;
}
