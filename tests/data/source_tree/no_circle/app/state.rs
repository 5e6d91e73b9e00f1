//! The app's state: nothing of the view, but in test code.
pub struct State;

fn brace(c: char) -> bool {
    c == '{' || c == '\'' || c == '"'
}

fn label<'a>(s: &'a str) -> &'a str {
    let _ = b'{';
    let _ = '\u{7b}';
    'outer: loop {
        break 'outer;
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws() {
        crate::app::view::draw();
        let _ = super::brace('}') && super::label("") == "";
    }
}
