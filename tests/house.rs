//! The house's floors hold: no import circle between product modules (docs/architecture.md).
//!
//! Each product source file (`src/`, `shared/src/`, `functions/*/src/`; unit-test folders
//! left out) is a module; a path it names (`use crate::a::b::C`, `crate::a::f()`,
//! `super::sibling::g`) is an arrow to the deepest module file the path reaches. Arrows between
//! a module and its own ancestors or descendants are its own rooms (a parent using its child's
//! type, a child its parent's), not floors, and are left out; a circle through modules that do
//! not contain one another fails the test with the files and the names that tie them. Read as
//! text, not parsed: written by hand because no crate here reads a crate's module graph
//! without compiling it, and the shapes the house writes are few.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's product files, by module path (`["pipeline", "sources"]`).
struct Crate {
    files: BTreeMap<Vec<String>, String>,
}

impl Crate {
    /// The modules of the crate rooted at `src` (its `lib.rs` or `main.rs` is `[]`).
    fn read(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    // Unit tests' folders are no floor of the house.
                    if name != "tests" && name != "testing" {
                        stack.push(path);
                    }
                } else if name.ends_with(".rs") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    files.insert(module_of(src, &path), text);
                }
            }
        }
        Crate { files }
    }

    /// The deepest module of this crate that `path` (absolute components) names.
    fn resolve(&self, path: &[String]) -> Option<Vec<String>> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| self.files.contains_key(m))
    }

    /// Arrows from each module to the modules it names (its own rooms left out), with the
    /// names that tie them.
    fn arrows(&self) -> BTreeMap<(Vec<String>, Vec<String>), BTreeSet<String>> {
        let mut arrows: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in &self.files {
            for named in named_paths(module, text) {
                let Some(target) = self.resolve(&named) else {
                    continue;
                };
                if target.starts_with(module) || module.starts_with(&target) {
                    continue;
                }
                let name = named.last().cloned().unwrap_or_default();
                arrows
                    .entry((module.clone(), target))
                    .or_default()
                    .insert(name);
            }
        }
        arrows
    }

    /// The circles among its modules: each strongly connected set of two or more.
    fn circles(&self) -> Vec<Vec<Vec<String>>> {
        let arrows = self.arrows();
        let mut next: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
        for (from, to) in arrows.keys() {
            next.entry(from).or_default().push(to);
        }
        let reaches = |from: &Vec<String>| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from];
            while let Some(m) = todo.pop() {
                for n in next.get(m).into_iter().flatten() {
                    if seen.insert(*n) {
                        todo.push(n);
                    }
                }
            }
            seen
        };
        let reach: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> =
            self.files.keys().map(|m| (m, reaches(m))).collect();
        let mut circles: Vec<Vec<Vec<String>>> = Vec::new();
        for module in self.files.keys() {
            let circle: Vec<Vec<String>> = reach[module]
                .iter()
                .filter(|other| reach[**other].contains(module))
                .map(|m| (*m).clone())
                .collect();
            if circle.len() >= 2 && !circles.contains(&circle) {
                circles.push(circle);
            }
        }
        circles
    }
}

/// The module path of `file` in the crate rooted at `src`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if !matches!(stem, "mod" | "lib" | "main") {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The absolute module paths `text` (the file of `module`) names through `crate::` and
/// `super::`, each followed to its last identifier (`use crate::a::{b, c::D}` names
/// `a::b` and `a::c::D`). Text after `#[cfg(test)]` is the file's unit tests: left out.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let product = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    // Comments name paths without importing them (doc links): each line up to its `//`.
    let product: String = product
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n");
    let product = product.as_str();
    let mut named = Vec::new();
    for (start, _) in product
        .match_indices("crate::")
        .chain(product.match_indices("super::"))
    {
        // `symdex_shared::…` names another crate: no circle crosses crates.
        let before = product[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &product[start..];
        let (mut base, rest) = if let Some(rest) = rest.strip_prefix("crate::") {
            (Vec::new(), rest)
        } else {
            let mut up = module.to_vec();
            let mut rest = rest;
            while let Some(r) = rest.strip_prefix("super::") {
                up.pop();
                rest = r;
            }
            (up, rest)
        };
        expand(&mut base, rest, &mut named);
    }
    named
}

/// Appends to `out` every path `rest` (after `base::`) spells, braces expanded one level.
fn expand(base: &mut Vec<String>, rest: &str, out: &mut Vec<Vec<String>>) {
    let ident = |s: &str| {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect::<String>()
    };
    let mut rest = rest;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let mut inner = base.clone();
                expand(&mut inner, item.trim(), out);
            }
            return;
        }
        let name = ident(rest);
        if name.is_empty() {
            break;
        }
        base.push(name.clone());
        match rest[name.len()..].strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    if !base.is_empty() {
        out.push(base.clone());
    }
}

/// Every crate of the workspace with product code.
fn crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots = vec![root.join("src"), root.join("shared/src")];
    for entry in std::fs::read_dir(root.join("functions")).unwrap().flatten() {
        if entry.path().join("src").is_dir() {
            roots.push(entry.path().join("src"));
        }
    }
    roots
}

#[test]
fn no_import_circle_between_product_modules() {
    let mut found = Vec::new();
    for src in crates() {
        let krate = Crate::read(&src);
        assert!(krate.files.len() > 1 || !src.ends_with("shared/src"));
        let arrows = krate.arrows();
        for circle in krate.circles() {
            let ties: Vec<String> = arrows
                .iter()
                .filter(|((from, to), _)| circle.contains(from) && circle.contains(to))
                .map(|((from, to), names)| {
                    format!("{} -> {}: {names:?}", from.join("::"), to.join("::"))
                })
                .collect();
            found.push(format!("{}: {}", src.display(), ties.join("; ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn a_circle_between_siblings_is_found_and_own_rooms_are_not_one() {
    let krate = |files: &[(&str, &str)]| Crate {
        files: files
            .iter()
            .map(|(m, text)| {
                let module = m.split("::").filter(|s| !s.is_empty()).map(String::from);
                (module.collect(), text.to_string())
            })
            .collect(),
    };
    let circle = krate(&[
        ("", "mod manifest; mod sourcemap;"),
        ("manifest", "use crate::sourcemap::SourceReport;"),
        ("sourcemap", "use crate::{digest, manifest::UploadMeta};"),
    ]);
    assert_eq!(
        circle.circles(),
        vec![vec![
            vec!["manifest".to_string()],
            vec!["sourcemap".to_string()]
        ]]
    );
    let rooms = krate(&[
        ("", "mod pipeline;"),
        ("pipeline", "use sources::offer_of; mod sources;"),
        (
            "pipeline::sources",
            "use super::{Indexer, Upload}; use super::index::x;",
        ),
        (
            "pipeline::index",
            "use super::*;\n#[cfg(test)]\nmod tests { use super::sources::y; }",
        ),
    ]);
    assert!(rooms.circles().is_empty(), "{:?}", rooms.arrows());
    // A sibling named through `super::` is an arrow.
    assert!(rooms.arrows().contains_key(&(
        vec!["pipeline".to_string(), "sources".to_string()],
        vec!["pipeline".to_string(), "index".to_string()]
    )));
}
