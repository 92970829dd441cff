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

    /// The module a path names, as [`Self::resolve`] finds it, followed through imports: a
    /// name a module only brings in with a `use` (`pub use lease::Lease;`, or a private
    /// `use decide::Deciding;` a child reaches through `super::`) is named from the module
    /// it comes from. Else two siblings tie each other through their parent's re-exports
    /// (`super::Lease` in one, `super::KeyRecord` in the other) and no circle is seen.
    fn origin(&self, path: &[String]) -> Option<Vec<String>> {
        let mut path = path.to_vec();
        // A few hops at most (a re-export of a re-export); a `use` naming itself ends it.
        for _ in 0..8 {
            let target = self.resolve(&path)?;
            let Some(name) = path.get(target.len()) else {
                return Some(target);
            };
            let from = imported_paths(&target, &self.files[&target])
                .into_iter()
                .find(|p| p.last() == Some(name) && self.resolve(p).is_some_and(|m| m != target));
            match from {
                Some(from) => path = from,
                None => return Some(target),
            }
        }
        self.resolve(&path)
    }

    /// Arrows from each module to the modules it names (its own rooms left out), with the
    /// names that tie them.
    fn arrows(&self) -> BTreeMap<(Vec<String>, Vec<String>), BTreeSet<String>> {
        let mut arrows: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in &self.files {
            for named in named_paths(module, text) {
                let Some(target) = self.origin(&named) else {
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
/// `a::b` and `a::c::D`). Text after `#[cfg(test)] mod tests {` is the file's unit tests:
/// left out (a `mod tests;` declared among the children is not: what follows it is product).
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let product = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or(text);
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

/// The absolute paths the `use` declarations of `text` (the file of `module`) bring in,
/// product code only: `crate::` and `super::` paths as [`named_paths`] reads them, and paths
/// relative to the module (`use lease::{InTurn, Lease};` names its child `lease`). Paths into
/// other crates (`std::`, `serde::`) come out under the module too, and resolve to it: left
/// for the caller to tell apart.
fn imported_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let product = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or(text);
    let mut paths = Vec::new();
    for line in product.lines().map(str::trim_start) {
        let Some(at) = line.find("use ") else {
            continue;
        };
        // `use`, `pub use`, `pub(crate) use`, `pub(super) use`: nothing else before it.
        let before = &line[..at];
        if !(before.is_empty() || (before.starts_with("pub") && before.ends_with(' '))) {
            continue;
        }
        let rest = &line[at + "use ".len()..];
        // The declaration runs on to its `;` (a brace group may span lines).
        let offset = rest.as_ptr() as usize - product.as_ptr() as usize;
        let decl = &product[offset..];
        let decl = &decl[..decl.find(';').unwrap_or(decl.len())];
        let decl: String = decl.split_whitespace().collect::<Vec<_>>().join(" ");
        if decl.starts_with("crate::") || decl.starts_with("super::") {
            paths.extend(named_paths(module, &format!("use {decl};")));
            continue;
        }
        let decl = decl.strip_prefix("self::").unwrap_or(&decl);
        let mut base = module.to_vec();
        expand(&mut base, decl, &mut paths);
    }
    paths
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
    // A name the parent only imports from a child (re-exported or not) is that child's: two
    // siblings naming each other's types through their parent make a circle. What follows a
    // `mod tests;` among the children is product code.
    let through_parent = krate(&[
        ("", "mod refs;"),
        (
            "refs",
            "mod lease;\n#[cfg(test)]\nmod tests;\nmod records;\n\n\
             pub use lease::{Lease, Wait};\nuse records::{key_file, KeyRecord};\n\
             pub use crate::storage::STATE_PREFIX;\npub struct RefStore;",
        ),
        ("refs::records", "use super::{Lease, RefStore};"),
        ("refs::lease", "use super::KeyRecord;"),
        ("refs::decide", "use super::{RefStore, STATE_PREFIX};"),
        ("storage", "pub const STATE_PREFIX: &str = \"_symdex\";"),
    ]);
    let refs = |m: &str| vec!["refs".to_string(), m.to_string()];
    assert_eq!(
        through_parent.circles(),
        vec![vec![refs("lease"), refs("records")]]
    );
    // Followed to where it is defined, a name the parent defines stays the parent's.
    let arrows = through_parent.arrows();
    assert!(arrows.contains_key(&(refs("decide"), vec!["storage".to_string()])));
    assert!(!arrows
        .keys()
        .any(|(from, to)| from == &refs("decide") && to != &vec!["storage".to_string()]));
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A line that imports all of a module of the house: `use super::*;` or `pub use child::*;`
/// (an outside crate's prelude, `use proptest::prelude::*`, is that crate's choice).
fn glob_of_the_house(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("use super::") && line.ends_with("::*;")
        || line.starts_with("use self::") && line.ends_with("::*;")
        || line.starts_with("use crate::") && line.ends_with("::*;")
        || line.starts_with("pub") && line.contains(" use ") && line.ends_with("::*;")
}

/// Explicit imports (docs/architecture.md): a file says which names it takes from the house,
/// tests too, so that a reader finds where each comes from.
#[test]
fn no_glob_imports_of_the_house() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for src in crates() {
        rust_files(&src, &mut files);
    }
    rust_files(&root.join("tests"), &mut files);
    for entry in std::fs::read_dir(root.join("functions")).unwrap().flatten() {
        if entry.path().join("tests").is_dir() {
            rust_files(&entry.path().join("tests"), &mut files);
        }
    }
    assert!(files.len() > 100, "{} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if glob_of_the_house(line) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "glob imports:\n{}", found.join("\n"));
    for (line, glob) in [
        ("    use super::*;", true),
        ("use crate::refs::tests::*;", true),
        ("pub use child::*;", true),
        ("pub(crate) use lease::*;", true),
        ("use proptest::prelude::*;", false),
        ("use super::{a, b};", false),
    ] {
        assert_eq!(glob_of_the_house(line), glob, "{line}");
    }
}
