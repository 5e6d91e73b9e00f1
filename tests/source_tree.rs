//! The source tree's shape, read from the sources themselves: no circle between modules or
//! between files, and no function longer than its part allows.
//!
//! Every path that names another module counts: `use` lines (their braces, `self`, aliases and
//! globs), and paths written inline in code (`crate::…`, `super::…`, `self::…`, a child module's
//! name, or a name a `use` brought in), followed through re-exports (`pub use`) to the module
//! that defines the item. Two modules that are ancestor and descendant never form a circle (a
//! module owns its children); any other pair is compared as the children of their nearest common
//! ancestor, so `app::inspector` ↔ `app::view` is a circle between files and `config` ↔ `record`
//! one between modules, however deep inside them the paths are written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One token of Rust source, with its line: comments, strings, characters, numbers and
/// lifetimes are dropped, since no path is written in them.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn lex(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // Skips a quoted literal whose opening `"` is at `i`, ended by `"` and `hashes` `#`s.
    let skip_quoted = |mut i: usize, hashes: usize, raw: bool, line: &mut usize| {
        i += 1;
        while i < c.len() {
            match c[i] {
                '\n' => *line += 1,
                '\\' if !raw => {
                    if at(i + 1) == '\n' {
                        *line += 1;
                    }
                    i += 1;
                }
                '"' if (1..=hashes).all(|h| at(i + h) == '#') => return i + 1 + hashes,
                _ => {}
            }
            i += 1;
        }
        i
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_quoted(i, 0, false, &mut line);
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                // An escaped character: '\n', '\'', '\u{1F600}'.
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                // A lifetime or a label.
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = word.contains('r') && matches!(word.as_str(), "r" | "br" | "cr");
            if matches!(word.as_str(), "b" | "c" | "r" | "br" | "cr") && at(i) == '"' {
                i = skip_quoted(i, 0, raw, &mut line);
            } else if raw && at(i) == '#' && (at(i + 1) == '#' || at(i + 1) == '"') {
                let hashes = (i..).take_while(|&k| at(k) == '#').count();
                i = skip_quoted(i + hashes, hashes, true, &mut line);
            } else if word == "r" && at(i) == '#' && ident_char(at(i + 1)) {
                // A raw identifier: r#type.
                let start = i + 1;
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
                let word = c[start..i].iter().collect();
                out.push(Token {
                    tok: Tok::Ident(word),
                    line,
                });
            } else if word == "b" && at(i) == '\'' {
                // A byte: b'x', b'\n'.
                i += if at(i + 1) == '\\' { 4 } else { 3 };
                while i < c.len() && c[i - 1] != '\'' {
                    i += 1;
                }
            } else {
                out.push(Token {
                    tok: Tok::Ident(word),
                    line,
                });
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (ident_char(c[i]) || (c[i] == '.' && at(i + 1).is_ascii_digit())) {
                i += 1;
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line,
            });
            i += 1;
        }
    }
    out
}

/// A path written in a module, as written.
#[derive(Debug, Clone)]
struct Ref {
    segments: Vec<String>,
    line: usize,
}

/// What one module holds that paths resolve through.
#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// Where its `mod NAME;` children's files are.
    child_dir: PathBuf,
    children: BTreeSet<String>,
    /// Children declared `mod NAME;`, with whether they are test code.
    file_children: Vec<(String, bool)>,
    /// Items defined here: functions, types, traits, constants, macros.
    items: BTreeSet<String>,
    /// Names a `use` brought in, each with the path it names.
    bindings: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    refs: Vec<Ref>,
    test: bool,
}

/// One function and how many lines it spans, from `fn` to its closing brace.
#[derive(Debug)]
struct Function {
    file: PathBuf,
    name: String,
    line: usize,
    lines: usize,
    test: bool,
}

/// A crate read from its root file: its modules by path (the root is `[]`), its functions.
#[derive(Debug, Default)]
struct Crate {
    modules: BTreeMap<Vec<String>, Module>,
    functions: Vec<Function>,
}

fn is(token: Option<&Token>, tok: &Tok) -> bool {
    token.is_some_and(|t| &t.tok == tok)
}

fn ident(token: Option<&Token>) -> Option<&str> {
    match token.map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

fn punct(c: char) -> Tok {
    Tok::Punct(c)
}

/// The tree of one `use`, from `i` (after `use`) to its `;`: each leaf's whole path, the name it
/// binds (`None` for a glob, `_` for a trait brought in unnamed) and its line.
fn use_tree(
    toks: &[Token],
    i: &mut usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) {
    loop {
        let Some(token) = toks.get(*i) else { return };
        match &token.tok {
            Tok::PathSep => {
                // A leading `::` names an outside crate.
                prefix.push("::".to_owned());
                *i += 1;
            }
            Tok::Ident(segment) => {
                prefix.push(segment.clone());
                *i += 1;
                if is(toks.get(*i), &Tok::PathSep) {
                    *i += 1;
                    continue;
                }
                let mut name = segment.clone();
                if ident(toks.get(*i)) == Some("as") {
                    name = ident(toks.get(*i + 1)).unwrap_or("_").to_owned();
                    *i += 2;
                }
                if segment == "self" && prefix.len() > 1 {
                    prefix.pop();
                    if name == "self" {
                        name = prefix.last().cloned().unwrap_or_default();
                    }
                }
                out.push((prefix, Some(name), token.line));
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push((prefix, None, token.line));
                return;
            }
            Tok::Punct('{') => {
                *i += 1;
                while !is(toks.get(*i), &punct('}')) && *i < toks.len() {
                    use_tree(toks, i, prefix.clone(), out);
                    if is(toks.get(*i), &punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}

/// The index of the token closing the bracket opened at `open`.
fn closing(toks: &[Token], open: usize) -> usize {
    let (o, c) = match toks[open].tok {
        Tok::Punct('[') => ('[', ']'),
        Tok::Punct('(') => ('(', ')'),
        _ => ('{', '}'),
    };
    let mut depth = 0;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.tok == punct(o) {
            depth += 1;
        } else if t.tok == punct(c) {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len() - 1
}

/// Reads one file of a module into the crate: its items, uses, paths, inline modules and
/// functions.
fn scan(krate: &mut Crate, path: Vec<String>, file: &Path, text: &str, test: bool) {
    let toks = lex(text);
    // The open braces: each an inline module (its path) or a block, and whether it is test code.
    let mut scopes: Vec<(Option<Vec<String>>, bool)> = vec![(Some(path.clone()), test)];
    let module_of = |scopes: &[(Option<Vec<String>>, bool)]| {
        scopes
            .iter()
            .rev()
            .find_map(|(m, _)| m.clone())
            .unwrap_or_default()
    };
    let mut pending_test = false;
    let mut i = 0;
    while i < toks.len() {
        let here = module_of(&scopes);
        let in_test = scopes.last().is_some_and(|s| s.1);
        let at_item_level = scopes.last().is_some_and(|s| s.0.is_some());
        let next = toks.get(i + 1);
        match &toks[i].tok {
            Tok::Punct('#') if is(next, &punct('[')) || is(next, &punct('!')) => {
                let open = if is(next, &punct('!')) { i + 2 } else { i + 1 };
                let end = closing(&toks, open);
                let words: Vec<&str> = (open..end).filter_map(|k| ident(toks.get(k))).collect();
                if words.contains(&"test") && !words.contains(&"not") && words[0] != "cfg_attr" {
                    pending_test = true;
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(word) if word == "use" => {
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&toks, &mut i, Vec::new(), &mut leaves);
                let module = krate.modules.entry(here).or_default();
                for (segments, name, line) in leaves {
                    match name {
                        Some(name) if name != "_" => {
                            module.bindings.insert(name, segments.clone());
                        }
                        Some(_) => {}
                        None => module.globs.push(segments.clone()),
                    }
                    module.refs.push(Ref { segments, line });
                }
                pending_test = false;
                continue;
            }
            Tok::Ident(word) if word == "mod" && ident(next).is_some() => {
                let name = ident(next).unwrap_or_default().to_owned();
                let module_test = pending_test || in_test;
                let parent = krate.modules.entry(here.clone()).or_default();
                parent.children.insert(name.clone());
                pending_test = false;
                if is(toks.get(i + 2), &punct('{')) {
                    let child_dir = parent.child_dir.join(&name);
                    let mut inner = here.clone();
                    inner.push(name);
                    let module = krate.modules.entry(inner.clone()).or_default();
                    module.file = file.to_owned();
                    module.child_dir = child_dir;
                    module.test = module_test;
                    scopes.push((Some(inner), module_test));
                    i += 3;
                } else {
                    parent.file_children.push((name, module_test));
                    i += 2;
                }
                continue;
            }
            Tok::Ident(word)
                if at_item_level
                    && matches!(
                        word.as_str(),
                        "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                    )
                    && ident(next).is_some() =>
            {
                let name = ident(next).unwrap_or_default().to_owned();
                krate
                    .modules
                    .entry(here.clone())
                    .or_default()
                    .items
                    .insert(name);
            }
            Tok::Ident(word) if word == "macro_rules" && is(next, &punct('!')) => {
                if let Some(name) = ident(toks.get(i + 2)) {
                    krate
                        .modules
                        .entry(here.clone())
                        .or_default()
                        .items
                        .insert(name.to_owned());
                }
            }
            _ => {}
        }
        if let (Tok::Ident(word), Some(name)) = (&toks[i].tok, ident(next))
            && word == "fn"
        {
            let mut k = i + 2;
            while k < toks.len() && !matches!(toks[k].tok, Tok::Punct('{') | Tok::Punct(';')) {
                if matches!(toks[k].tok, Tok::Punct('(') | Tok::Punct('[')) {
                    k = closing(&toks, k);
                }
                k += 1;
            }
            if is(toks.get(k), &punct('{')) {
                let end = closing(&toks, k);
                krate.functions.push(Function {
                    file: file.to_owned(),
                    name: name.to_owned(),
                    line: toks[i].line,
                    lines: toks[end].line - toks[i].line + 1,
                    test: pending_test || in_test,
                });
            }
        }
        match &toks[i].tok {
            Tok::Ident(first) if is(next, &Tok::PathSep) => {
                // An inline path: its segments up to the last name.
                let mut segments = vec![first.clone()];
                let line = toks[i].line;
                i += 1;
                while is(toks.get(i), &Tok::PathSep) {
                    match ident(toks.get(i + 1)) {
                        Some(s) => segments.push(s.to_owned()),
                        None => break,
                    }
                    i += 2;
                }
                krate
                    .modules
                    .entry(here)
                    .or_default()
                    .refs
                    .push(Ref { segments, line });
                continue;
            }
            Tok::Punct('{') => {
                scopes.push((None, pending_test || in_test));
                pending_test = false;
            }
            Tok::Punct('}') => {
                if scopes.len() > 1 {
                    scopes.pop();
                }
                pending_test = false;
            }
            Tok::Punct(';') | Tok::Punct(',') => pending_test = false,
            _ => {}
        }
        i += 1;
    }
}

/// Reads a crate from its root file (`lib.rs` or `main.rs`) and every module file it declares.
fn read_crate(root: &Path) -> Crate {
    let mut krate = Crate::default();
    let dir = root.parent().expect("a root file in a folder").to_owned();
    let mut queue = vec![(Vec::<String>::new(), root.to_owned(), dir, false)];
    while let Some((path, file, child_dir, test)) = queue.pop() {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        {
            let module = krate.modules.entry(path.clone()).or_default();
            module.file = file.clone();
            module.child_dir = child_dir;
            module.test = test;
        }
        let before: BTreeSet<Vec<String>> = krate.modules.keys().cloned().collect();
        scan(&mut krate, path.clone(), &file, &text, test);
        // Files declared here, and in the inline modules this file holds.
        let declaring: Vec<Vec<String>> = krate
            .modules
            .iter()
            .filter(|(p, m)| m.file == file && (**p == path || !before.contains(*p)))
            .map(|(p, _)| p.clone())
            .collect();
        for parent in declaring {
            let module = &krate.modules[&parent];
            for (name, child_test) in module.file_children.clone() {
                let flat = module.child_dir.join(format!("{name}.rs"));
                let nested = module.child_dir.join(&name).join("mod.rs");
                let (child_file, grandchildren) = if flat.exists() {
                    (flat, module.child_dir.join(&name))
                } else if nested.exists() {
                    (nested, module.child_dir.join(&name))
                } else {
                    panic!(
                        "{}: `mod {name};` has no file {} or {}",
                        module.file.display(),
                        flat.display(),
                        nested.display()
                    );
                };
                let mut child = parent.clone();
                child.push(name);
                queue.push((child, child_file, grandchildren, child_test || module.test));
            }
        }
    }
    krate
}

/// The module a path written in `from` names: through `crate`, `super`, `self`, child modules
/// and `use`d names, to the module that defines its item. `None` for a path outside the crate
/// (another crate, a local value, an associated item of a type that is not a module's).
fn resolve(
    krate: &Crate,
    from: &[String],
    segments: &[String],
    depth: usize,
) -> Option<Vec<String>> {
    if depth > 16 || segments.is_empty() {
        return None;
    }
    let module = krate.modules.get(from)?;
    let first = segments[0].as_str();
    match first {
        "crate" => walk(krate, Vec::new(), &segments[1..], depth),
        "self" => walk(krate, from.to_vec(), &segments[1..], depth),
        "super" => {
            let mut at = from.to_vec();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
            walk(krate, at, rest, depth)
        }
        name if module.children.contains(name) => walk(krate, from.to_vec(), segments, depth),
        name => {
            let bound = module.bindings.get(name)?;
            if bound.len() == 1 && bound[0] == name {
                return None;
            }
            let mut whole = bound.clone();
            whole.extend_from_slice(&segments[1..]);
            resolve(krate, from, &whole, depth + 1)
        }
    }
}

fn walk(krate: &Crate, mut at: Vec<String>, rest: &[String], depth: usize) -> Option<Vec<String>> {
    for (k, segment) in rest.iter().enumerate() {
        let module = krate.modules.get(&at)?;
        if module.children.contains(segment) {
            at.push(segment.clone());
            continue;
        }
        if segment == "super" {
            at.pop()?;
            continue;
        }
        if module.items.contains(segment) {
            return Some(at);
        }
        let mut onward = vec![segment.clone()];
        onward.extend_from_slice(&rest[k + 1..]);
        if let Some(bound) = module.bindings.get(segment) {
            let mut whole = bound.clone();
            whole.extend_from_slice(&rest[k + 1..]);
            return resolve(krate, &at, &whole, depth + 1).or(Some(at));
        }
        for glob in &module.globs {
            if let Some(there) = resolve(krate, &at, glob, depth + 1).filter(|t| *t != at)
                && krate.modules.get(&there).is_some_and(|m| {
                    m.items.contains(segment)
                        || m.bindings.contains_key(segment)
                        || m.children.contains(segment)
                })
            {
                return walk(krate, there, &onward, depth + 1);
            }
        }
        return Some(at);
    }
    Some(at)
}

/// One way a module leans on another: where it is written.
#[derive(Debug, Clone)]
struct Evidence {
    file: PathBuf,
    line: usize,
    path: String,
}

/// The circles among the children of each module, each described with one path per step.
fn circles(krate: &Crate, base: &Path) -> Vec<String> {
    // Per common ancestor: its children, and which leans on which (with the first evidence).
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<(String, String), Evidence>> = BTreeMap::new();
    // Test code leans where it must, and nothing leans on it.
    for (from, module) in krate.modules.iter().filter(|(_, m)| !m.test) {
        for r in &module.refs {
            let Some(to) = resolve(krate, from, &r.segments, 0) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            let key = (from[common].clone(), to[common].clone());
            let file = module
                .file
                .strip_prefix(base)
                .unwrap_or(&module.file)
                .to_owned();
            graphs
                .entry(from[..common].to_vec())
                .or_default()
                .entry(key)
                .or_insert(Evidence {
                    file,
                    line: r.line,
                    path: r.segments.join("::"),
                });
        }
    }
    let mut found = Vec::new();
    for (parent, edges) in &graphs {
        for cycle in cycles(edges) {
            let name = |child: &str| {
                let mut whole = parent.clone();
                whole.push(child.to_owned());
                whole.join("::")
            };
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let e = &edges[&(w[0].clone(), w[1].clone())];
                    format!(
                        "  {} → {} ({}:{}: {})",
                        name(&w[0]),
                        name(&w[1]),
                        e.file.display(),
                        e.line,
                        e.path
                    )
                })
                .collect();
            found.push(format!("a circle:\n{}", steps.join("\n")));
        }
    }
    found
}

/// One circle through each strongly connected group of more than one node (as node lists whose
/// last is the first).
fn cycles<V>(edges: &BTreeMap<(String, String), V>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a.as_str()).or_default().push(b.as_str());
    }
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for m in next.get(n).into_iter().flatten() {
                if seen.insert(*m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &node in next.keys() {
        if done.contains(node) || !reach(node).contains(node) {
            continue;
        }
        // The group: every node that reaches `node` and is reached from it.
        let group: BTreeSet<&str> = reach(node)
            .into_iter()
            .filter(|m| reach(m).contains(node))
            .collect();
        done.extend(group.iter().copied());
        // The shortest way round from `node`, breadth first.
        let mut back: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([node]);
        'search: while let Some(n) = queue.pop_front() {
            for &m in next.get(n).into_iter().flatten() {
                if !group.contains(m) {
                    continue;
                }
                if m == node {
                    back.insert(node, n);
                    break 'search;
                }
                if let std::collections::btree_map::Entry::Vacant(slot) = back.entry(m) {
                    slot.insert(n);
                    queue.push_back(m);
                }
            }
        }
        let mut cycle = vec![node.to_owned()];
        let mut at = back[node];
        while at != node {
            cycle.push(at.to_owned());
            at = back[at];
        }
        cycle.push(node.to_owned());
        cycle.reverse();
        out.push(cycle);
    }
    out
}

/// Functions outside test code longer than `limit` says for their file.
fn long_functions(krate: &Crate, base: &Path, limit: impl Fn(&Path) -> usize) -> Vec<String> {
    krate
        .functions
        .iter()
        .filter(|f| !f.test)
        .filter_map(|f| {
            let file = f.file.strip_prefix(base).unwrap_or(&f.file);
            let most = limit(file);
            (f.lines > most).then(|| {
                format!(
                    "{}:{}: fn {} is {} lines (at most {most} here)",
                    file.display(),
                    f.line,
                    f.name,
                    f.lines
                )
            })
        })
        .collect()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    root().join("tests/data/source_tree")
}

#[test]
fn the_app_and_its_libraries_have_no_circle_between_modules_or_files() {
    let mut found = Vec::new();
    for crate_root in [
        "src/lib.rs",
        "src/main.rs",
        "crates/livetalk-live/src/lib.rs",
        "crates/livetalk-mock/src/lib.rs",
    ] {
        let krate = read_crate(&root().join(crate_root));
        assert!(krate.modules.len() > 1 || crate_root.ends_with("main.rs"));
        found.extend(circles(&krate, &root()));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_circle_is_found_through_use_lines_inline_paths_and_re_exports() {
    let krate = read_crate(&fixture().join("circle/lib.rs"));
    let found = circles(&krate, &fixture());
    assert_eq!(
        found,
        [
            // Between modules: an inline `crate::` path one way, a `use` through a re-export the
            // other.
            "a circle:\n  \
             config → record (circle/config.rs:8: crate::record::locate::record_folder)\n  \
             record → config (circle/record/recorder.rs:3: crate::config::Settings)",
            // Between files: a `super::` path one way, a `use` of a name the parent brought in
            // the other.
            "a circle:\n  \
             record::locate → record::recorder (circle/record/locate.rs:5: super::Recorder)\n  \
             record::recorder → record::locate (circle/record/recorder.rs:4: super::locate::record_folder)",
        ]
    );
}

#[test]
fn test_code_and_descendants_are_no_circle_and_paths_in_comments_and_strings_are_not_paths() {
    let krate = read_crate(&fixture().join("no_circle/lib.rs"));
    assert_eq!(circles(&krate, &fixture()), Vec::<String>::new());
    assert_eq!(krate.modules.len(), 5, "{:?}", krate.modules.keys());
}

/// The most lines a function outside tests may span: 100 in the settings (`config`) and `main`,
/// which only dispatches; 150 elsewhere.
fn lines_allowed(file: &Path) -> usize {
    if file.starts_with("src/config") || file == Path::new("src/main.rs") {
        100
    } else {
        150
    }
}

#[test]
fn no_function_outside_tests_is_longer_than_its_part_allows() {
    let mut found = Vec::new();
    for crate_root in ["src/lib.rs", "src/main.rs"] {
        let krate = read_crate(&root().join(crate_root));
        found.extend(long_functions(&krate, &root(), lines_allowed));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_long_function_is_found_and_one_in_tests_is_not() {
    let krate = read_crate(&fixture().join("long/lib.rs"));
    assert_eq!(
        long_functions(&krate, &fixture(), |_| 150),
        ["long/lib.rs:3: fn long is 152 lines (at most 150 here)"]
    );
}
