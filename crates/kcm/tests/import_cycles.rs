//! No import cycles between the files of any crate of the workspace (`crates/*/src`).
//!
//! A file's `use` (or an inline `crate::`/`super::`/`self::` path) naming an item of another
//! module file is an edge to the deepest module file the path reaches. A parent's `pub use`
//! of its own descendants (its facade) and `mod x;` are not edges. Every strongly connected
//! component of more than one file is a cycle, and a cycle fails the test: two files that
//! import each other cannot be read, tested or moved one at a time.
//!
//! The rules are exactly those of the project's `cycles.py` checker, ported so that `cargo
//! test` enforces them: the text is scanned with the same (regular-expression-like) rules,
//! comments and string literals first blanked out, so the two always agree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn no_import_cycles_in_any_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/kcm sits two levels below the workspace root");
    let cycles = workspace_cycles(root);
    assert!(
        cycles.is_empty(),
        "import cycles between files (break each by moving what both sides need into a third \
         file, or by importing through the parent module's facade):\n{}",
        cycles
            .iter()
            .map(|c| format!("  {}", c.join(" <-> ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every cycle of every crate under `root/crates`, each as its sorted files relative to `root`.
fn workspace_cycles(root: &Path) -> Vec<Vec<String>> {
    let mut crates: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("read crates/")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("src").is_dir())
        .collect();
    crates.sort();
    let mut cycles = Vec::new();
    for krate in crates {
        let edges = analyze(&krate.join("src"));
        for component in strongly_connected(&edges) {
            let mut files: Vec<String> = component
                .iter()
                .map(|path| {
                    path.strip_prefix(root)
                        .unwrap_or(path)
                        .to_string_lossy()
                        .replace('\\', "/")
                })
                .collect();
            files.sort();
            cycles.push(files);
        }
    }
    cycles
}

// -------------------------------------------------------------------------------------------
// Scanning
// -------------------------------------------------------------------------------------------

/// `src` with `//` comments, `/* */` comments and string literals blanked, in that order
/// (`re.sub(r"//[^\n]*")`, `re.sub(r"/\*.*?\*/", flags=S)`, `re.sub(r'"(\\.|[^"\\])*"', '""')`).
fn strip(src: &str) -> String {
    let no_line_comments: String = src
        .split_inclusive('\n')
        .map(|line| match line.find("//") {
            Some(at) => {
                if line.ends_with('\n') {
                    format!("{}\n", &line[..at])
                } else {
                    line[..at].to_owned()
                }
            }
            None => line.to_owned(),
        })
        .collect();

    let mut no_block_comments = String::with_capacity(no_line_comments.len());
    let mut rest = no_line_comments.as_str();
    while let Some(open) = rest.find("/*") {
        match rest[open + 2..].find("*/") {
            Some(close) => {
                no_block_comments.push_str(&rest[..open]);
                rest = &rest[open + 2 + close + 2..];
            }
            None => break,
        }
    }
    no_block_comments.push_str(rest);

    let chars: Vec<char> = no_block_comments.chars().collect();
    let mut out = String::with_capacity(no_block_comments.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '"'
            && let Some(end) = string_end(&chars, i)
        {
            out.push_str("\"\"");
            i = end + 1;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// The index of the quote closing the string literal opened at `start`, if it closes:
/// `\` escapes any character but a newline.
fn string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                if i + 1 < chars.len() && chars[i + 1] != '\n' {
                    i += 2;
                } else {
                    return None;
                }
            }
            '"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier starting at byte `at` of `s`, if one does.
fn ident_at(s: &str, at: usize) -> Option<&str> {
    let first = s[at..].chars().next()?;
    if !is_ident_start(first) {
        return None;
    }
    let len = s[at..]
        .char_indices()
        .find(|&(_, c)| !is_ident_char(c))
        .map_or(s.len() - at, |(i, _)| i);
    Some(&s[at..at + len])
}

/// Whether byte `at` of `s` starts a word (`\b` before a word character).
fn word_start(s: &str, at: usize) -> bool {
    s[..at]
        .chars()
        .next_back()
        .is_none_or(|c| !is_ident_char(c))
}

/// Expands a use tree `a::{b, c::{d, e}}` into its paths, as segments.
fn parse_tree(tree: &str) -> Vec<Vec<String>> {
    let s = tree.trim();
    if s.starts_with('{') && s.ends_with('}') && s.len() >= 2 {
        let inner = &s[1..s.len() - 1];
        let mut parts = Vec::new();
        let (mut depth, mut current) = (0_i32, String::new());
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                parts.push(std::mem::take(&mut current));
            } else {
                current.push(c);
            }
        }
        parts.push(current);
        return parts
            .iter()
            .filter(|p| !p.trim().is_empty())
            .flat_map(|p| parse_tree(p))
            .collect();
    }
    if let Some(i) = s.find("::{") {
        let head = &s[..i];
        if !head.contains('{') {
            let head_segments: Vec<String> = head.split("::").map(str::to_owned).collect();
            return parse_tree(&s[i + 2..])
                .into_iter()
                .map(|tail| head_segments.iter().cloned().chain(tail).collect())
                .collect();
        }
    }
    let s = strip_trailing_alias(s);
    vec![
        s.split("::")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
    ]
}

/// `path as Name` → `path` (only a trailing rename, `\s+as\s+IDENT$`).
fn strip_trailing_alias(s: &str) -> &str {
    let before_name = s.trim_end_matches(is_ident_char);
    if !s[before_name.len()..].starts_with(is_ident_start) {
        return s;
    }
    let before_space = before_name.trim_end();
    if before_space.len() == before_name.len() {
        return s;
    }
    let Some(before_as) = before_space.strip_suffix("as") else {
        return s;
    };
    let kept = before_as.trim_end();
    if kept.len() == before_as.len() {
        return s;
    }
    kept
}

/// Every module file of a crate: module path (`[]` for `lib.rs`/`main.rs`) → file.
fn modules(crate_src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut mods = BTreeMap::new();
    let mut dirs = vec![crate_src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let Ok(rel) = path
                .with_extension("")
                .strip_prefix(crate_src)
                .map(Path::to_path_buf)
            else {
                continue;
            };
            let mut segments: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if segments == ["lib"] || segments == ["main"] {
                segments.clear();
            } else if segments.last().is_some_and(|s| s == "mod") {
                segments.pop();
            }
            mods.insert(segments, path);
        }
    }
    mods
}

/// An inline `mod name { ... }`: byte extent of the declaration and its body, and its name.
struct InlineModule {
    start: usize,
    end: usize,
    name: String,
}

/// Inline modules of stripped source `src` (`\bmod\s+(IDENT)\s*\{`, extent by brace depth).
fn inline_modules(src: &str) -> Vec<InlineModule> {
    let bytes = src.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(rel) = src[from..].find("mod") {
        let at = from + rel;
        from = at + 3;
        if !word_start(src, at) {
            continue;
        }
        let after_kw = at + 3;
        let name_at = after_kw + (src[after_kw..].len() - src[after_kw..].trim_start().len());
        if name_at == after_kw {
            continue;
        }
        let Some(name) = ident_at(src, name_at) else {
            continue;
        };
        let after_name = name_at + name.len();
        let brace = after_name + (src[after_name..].len() - src[after_name..].trim_start().len());
        if bytes.get(brace) != Some(&b'{') {
            continue;
        }
        let mut depth = 0_i32;
        let mut end = brace;
        while end < bytes.len() {
            match bytes[end] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        found.push(InlineModule {
            start: at,
            end,
            name: name.to_owned(),
        });
    }
    found
}

/// One path a file names: where, its segments, and whether it is a `pub use`.
struct UsePath {
    at: usize,
    segments: Vec<String>,
    is_pub: bool,
}

/// `use` declarations of stripped `src` (`\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);`).
fn use_declarations(src: &str) -> Vec<UsePath> {
    let mut found = Vec::new();
    let mut from = 0;
    while from < src.len() {
        let Some(rel) = src[from..].find("use") else {
            break;
        };
        let at = from + rel;
        from = at + 3;
        if !word_start(src, at) {
            continue;
        }
        let after = &src[at + 3..];
        let body_at = after.len() - after.trim_start().len();
        if body_at == 0 {
            continue;
        }
        let body_start = at + 3 + body_at;
        let Some(semicolon) = src[body_start..].find(';') else {
            continue;
        };
        if semicolon == 0 {
            continue;
        }
        let (start, is_pub) = pub_prefix(src, at).map_or((at, false), |p| (p, true));
        for segments in parse_tree(&src[body_start..body_start + semicolon]) {
            found.push(UsePath {
                at: start,
                segments,
                is_pub,
            });
        }
        from = body_start + semicolon + 1;
    }
    found
}

/// Where a `pub` or `pub(...)` qualifier (then whitespace) ends right before byte `at`.
fn pub_prefix(src: &str, at: usize) -> Option<usize> {
    let before = &src[..at];
    let trimmed = before.trim_end();
    if trimmed.len() == before.len() {
        return None;
    }
    let candidate = if let Some(without_paren) = trimmed.strip_suffix(')') {
        let open = without_paren.rfind('(')?;
        if without_paren[open + 1..].contains(')') {
            return None;
        }
        &trimmed[..open]
    } else {
        trimmed
    };
    let start = candidate.strip_suffix("pub")?.len();
    word_start(src, start).then_some(start)
}

/// Inline `crate::`/`super::`/`self::` paths of stripped `src`
/// (`(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::IDENT)+)`).
fn inline_paths(src: &str) -> Vec<UsePath> {
    let mut found = Vec::new();
    for (at, _) in src.char_indices() {
        if src[..at]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident_char(c) || c == ':')
        {
            continue;
        }
        let Some(head) = ["crate", "super", "self"]
            .into_iter()
            .find(|kw| src[at..].starts_with(kw))
        else {
            continue;
        };
        let mut segments = vec![head.to_owned()];
        let mut i = at + head.len();
        while src[i..].starts_with("::") {
            match ident_at(src, i + 2) {
                Some(ident) => {
                    segments.push(ident.to_owned());
                    i += 2 + ident.len();
                }
                None => break,
            }
        }
        if segments.len() > 1 {
            found.push(UsePath {
                at,
                segments,
                is_pub: false,
            });
        }
    }
    found
}

/// File → the module files it depends on, for one crate.
fn analyze(crate_src: &Path) -> HashMap<PathBuf, BTreeSet<PathBuf>> {
    let mods = modules(crate_src);
    let mut edges = HashMap::new();
    for (module, path) in &mods {
        let Ok(text) = fs::read_to_string(path) else {
            continue;
        };
        let src = strip(&text);
        let inline = inline_modules(&src);
        let module_at = |pos: usize| -> Vec<String> {
            module
                .iter()
                .cloned()
                .chain(
                    inline
                        .iter()
                        .filter(|m| m.start <= pos && pos <= m.end)
                        .map(|m| m.name.clone()),
                )
                .collect()
        };
        let mut targets = BTreeSet::new();
        let paths = use_declarations(&src).into_iter().chain(inline_paths(&src));
        for UsePath {
            at,
            segments,
            is_pub,
        } in paths
        {
            let Some(target) = resolve(&mods, &module_at(at), &segments) else {
                continue;
            };
            let Some(target_file) = mods.get(&target) else {
                continue;
            };
            if target_file == path {
                continue;
            }
            // A parent's re-export of a descendant is its facade, not a dependency.
            if is_pub && target.starts_with(module) {
                continue;
            }
            targets.insert(target_file.clone());
        }
        edges.insert(path.clone(), targets);
    }
    edges
}

/// The deepest module file `segments`, named from module `current`, reaches.
fn resolve(
    mods: &BTreeMap<Vec<String>, PathBuf>,
    current: &[String],
    segments: &[String],
) -> Option<Vec<String>> {
    let first = segments.first()?;
    let (base, rest): (Vec<String>, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), &segments[1..]),
        "super" | "self" => {
            let mut base = current.to_vec();
            let mut rest = segments;
            while let Some(head) = rest.first() {
                match head.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => {
            let mut child = current.to_vec();
            child.push(first.clone());
            if !mods.contains_key(&child) {
                return None;
            }
            (current.to_vec(), segments)
        }
    };
    let mut target = mods.contains_key(&base).then(|| base.clone());
    let mut probe = base;
    for segment in rest {
        probe.push(segment.clone());
        if mods.contains_key(&probe) {
            target = Some(probe.clone());
        } else {
            break;
        }
    }
    target
}

// -------------------------------------------------------------------------------------------
// Cycles
// -------------------------------------------------------------------------------------------

/// Tarjan's strongly connected components of more than one file.
fn strongly_connected(edges: &HashMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Tarjan<'a> {
        edges: &'a HashMap<PathBuf, BTreeSet<PathBuf>>,
        index: HashMap<&'a PathBuf, usize>,
        low: HashMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            if let Some(targets) = self.edges.get(v) {
                for w in targets {
                    // Targets are module files, so every one has an entry.
                    let Some((w, _)) = self.edges.get_key_value(w) else {
                        continue;
                    };
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let mut nodes: Vec<&PathBuf> = edges.keys().collect();
    nodes.sort();
    for v in nodes {
        if !tarjan.index.contains_key(v) {
            tarjan.visit(v);
        }
    }
    tarjan.out
}

// -------------------------------------------------------------------------------------------
// The checker's own rules
// -------------------------------------------------------------------------------------------

/// A throwaway crate: `files` written under `<tmp>/crates/demo/src`.
fn demo_workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        let path = dir.path().join("crates/demo/src").join(name);
        fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }
    dir
}

#[test]
fn checker_rules_match_the_python_checker() {
    struct Case {
        name: &'static str,
        files: &'static [(&'static str, &'static str)],
        cycles: &'static [&'static [&'static str]],
    }
    let cases = [
        Case {
            name: "two siblings importing each other",
            files: &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a.rs", "use super::b::B;\npub struct A;\n"),
                ("b.rs", "use crate::a::A;\npub struct B;\n"),
            ],
            cycles: &[&["crates/demo/src/a.rs", "crates/demo/src/b.rs"]],
        },
        Case {
            name: "a parent's facade and a child's use of the parent are not a cycle",
            files: &[
                ("lib.rs", "pub mod m;\n"),
                (
                    "m/mod.rs",
                    "mod x;\npub use x::X;\npub use x::Y as Z;\npub struct P;\n",
                ),
                ("m/x.rs", "use super::P;\npub struct X;\npub struct Y;\n"),
            ],
            cycles: &[],
        },
        Case {
            name: "an inline path in code is an edge, in a comment or string it is not",
            files: &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a.rs", "fn f() { crate::b::g(); }\n// crate::b::h\n"),
                (
                    "b.rs",
                    "pub fn g() { let _ = \"crate::a::f\"; super::a::f(); }\n",
                ),
            ],
            cycles: &[&["crates/demo/src/a.rs", "crates/demo/src/b.rs"]],
        },
        Case {
            name: "use trees, renames and inline test modules",
            files: &[
                ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
                ("a.rs", "use crate::{b::{B as Bee}, c};\n"),
                (
                    "b.rs",
                    "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::super::c::C;\n}\n",
                ),
                ("c.rs", "pub struct C;\n"),
            ],
            cycles: &[],
        },
        Case {
            name: "a test module importing back closes a cycle too",
            files: &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a.rs", "use crate::b::B;\n"),
                (
                    "b.rs",
                    "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::*;\n}\n",
                ),
            ],
            cycles: &[&["crates/demo/src/a.rs", "crates/demo/src/b.rs"]],
        },
    ];
    for case in cases {
        let dir = demo_workspace(case.files);
        let got = workspace_cycles(dir.path());
        let want: Vec<Vec<String>> = case
            .cycles
            .iter()
            .map(|c| c.iter().map(|f| (*f).to_owned()).collect())
            .collect();
        assert_eq!(got, want, "{}", case.name);
    }
}

#[test]
fn use_trees_expand_like_the_python_checker() {
    let strings = |paths: Vec<Vec<String>>| -> Vec<String> {
        paths.into_iter().map(|p| p.join("::")).collect()
    };
    assert_eq!(
        strings(parse_tree("super::{a::{B, C as D}, e, self}")),
        ["super::a::B", "super::a::C", "super::e", "super::self"]
    );
    assert_eq!(
        strings(parse_tree("std::sync::Arc as A")),
        ["std::sync::Arc"]
    );
    assert_eq!(strings(parse_tree("crate::x::*")), ["crate::x::*"]);
    assert_eq!(
        strip("a // b\n\"c\" /* d */ e \"f\\\"g\""),
        "a \n\"\"  e \"\""
    );
}
