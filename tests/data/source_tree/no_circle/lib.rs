//! A crate without circles.
mod app;

/// crate::app::view::draw in a doc comment is no path.
pub fn run() {
    let _ = "crate::app::view";
    let _ = r#"super::app::"view""#;
    app::view::draw();
}
