//! A PDB's srcsrv stream read as WinDbg reads it to fetch one document: the variables of its
//! `ini` and `variables` sections, the line of its `source files` section whose first field
//! is the document's path, and `SRCSRVTRG` expanded with that line's fields (`%var1%`...)
//! and the variables (`%name%`, `%fnvar%(...)`, `%fnbksl%(...)`, `%fnfile%(...)`). Written
//! here rather than taken from the `srcsrv` crate, which the tests keep as a reader
//! independent of symdex.
//!
//! The one reader of the stream: identification's summary of it ([`super::SrcSrv`]: its
//! `SRCSRVTRG`, whether it runs commands), its documents' URLs and `symdex check` all come
//! from one parse, so none of them can see a variable, or a command, the others do not.

use std::collections::{HashMap, HashSet};

/// The most nested expansions of one target (a variable naming a variable...): streams
/// written by indexing scripts nest two or three; a loop ends here.
const MAX_DEPTH: u32 = 16;

/// The longest target expanded: a URL a debugger could use is far shorter.
const MAX_TARGET: usize = 8192;

/// The most different lines kept for one document: real streams list a file in two or three
/// spellings (one a compiler's, one its linker's); past this many it is contested outright,
/// so that no document costs more than this many expansions.
const MAX_ALTERNATES: usize = 8;

/// A srcsrv stream, read.
pub struct SrcsrvLines {
    /// Variables by their name, uppercased (srcsrv's names ignore case).
    variables: HashMap<String, String>,
    /// Each source file line's fields, by its first field (the document's path) lowercased:
    /// WinDbg matches the path ignoring case. Every different line naming a path is kept
    /// (real PDBs list one file as `C:\B\x.h` and `c:\b\x.h`): a document reads one way
    /// where all of them lead to one place ([`Self::target`]).
    files: HashMap<String, Vec<Vec<String>>>,
    /// Some line defines `SRCSRVCMD` ([`defines_command`]).
    commands: bool,
    /// Why no target of this stream can be vouched for, where readers may read it two ways:
    /// a variable defined twice with different values (in its sections, or where a debugger
    /// may see one), a section header written another way, a carriage return inside a line,
    /// a NUL byte, a byte order mark.
    ambiguity: Option<String>,
    /// Documents (lowercased paths) listed on more than [`MAX_ALTERNATES`] different lines.
    contested: HashSet<String>,
}

/// Where the stream sends a debugger for one document.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// Downloaded from this URL.
    Url(String),
    /// Fetched otherwise (a command, a file share), or not at all: why.
    Elsewhere(String),
}

/// Which part of the stream a line is in, as this reader finds sections.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    /// `ini` or `variables`: its lines define variables.
    Variables,
    /// `source files`: a line each document.
    Files,
    /// Before the first header, or after `end`.
    Outside,
}

/// The stream as it is being read.
struct Reading<'t> {
    variables: HashMap<String, String>,
    files: HashMap<String, Vec<Vec<String>>>,
    ambiguity: Option<String>,
    contested: HashSet<String>,
    section: Section,
    /// `NAME=value` lines outside the variables sections (`NAME` trimmed, uppercased): a
    /// debugger finding a section where this reader does not takes them for definitions.
    outside: Vec<(String, &'t str)>,
}

impl SrcsrvLines {
    /// Reads the stream's bytes (lines end in CR LF or LF, any CRs before the LF; a line that
    /// is not UTF-8 is read with its bad bytes replaced, and then names no document a PDB
    /// holds: paths in an ANSI code page are no ambiguity, only never matched).
    pub fn parse(bytes: &[u8]) -> SrcsrvLines {
        let text = String::from_utf8_lossy(bytes);
        let commands = text.split(['\r', '\n']).any(defines_command);
        let mut reading = Reading {
            variables: HashMap::new(),
            files: HashMap::new(),
            ambiguity: None,
            contested: HashSet::new(),
            section: Section::Outside,
            outside: Vec::new(),
        };
        // A debugger reading the stream as a C string stops at a NUL: it would not see the
        // definitions after it that this reader compares.
        if bytes.contains(&0) {
            reading.flag("holds a NUL byte: a reader stopping there reads less".into());
        }
        // A byte order mark hides the first header from this reader (`SRCSRV:` at a line's
        // start only), not from a debugger that skips the mark: they would read different
        // sections.
        if text.starts_with('\u{feff}') {
            reading.flag(
                "starts with a byte order mark: a reader skipping it finds a section \
                 header this one does not"
                    .into(),
            );
        }
        for line in text.split('\n') {
            // Windows text-mode writers end lines in CR CR LF; every CR before the LF ends
            // the line, for any reader.
            reading.line(line.trim_end_matches('\r'));
        }
        reading.compare_outside();
        SrcsrvLines {
            variables: reading.variables,
            files: reading.files,
            commands,
            ambiguity: reading.ambiguity,
            contested: reading.contested,
        }
    }

    /// Why none of the stream's targets is vouched for (it reads two ways), if so.
    pub fn ambiguity(&self) -> Option<&str> {
        self.ambiguity.as_deref()
    }

    /// The variable `name` (of its `ini` or `variables` section; names ignore case) as
    /// written, the first definition where several are (several different ones make the stream
    /// [`Self::ambiguity`]'s).
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .get(&name.to_ascii_uppercase())
            .map(String::as_str)
    }

    /// Whether the stream defines `SRCSRVCMD`: a command line a debugger runs to fetch a
    /// document (after asking, or not).
    pub fn runs_commands(&self) -> bool {
        self.commands
    }

    /// Where a debugger holding this stream fetches the document at `path`.
    pub fn target(&self, path: &str) -> Target {
        let key = path.to_lowercase();
        let Some(alternates) = self.files.get(&key) else {
            return Target::Elsewhere("the srcsrv stream lists no line for it".into());
        };
        if self.commands {
            return Target::Elsewhere(
                "fetched by a command the srcsrv stream runs (SRCSRVCMD), not downloaded".into(),
            );
        }
        if let Some(why) = &self.ambiguity {
            return Target::Elsewhere(format!("the srcsrv stream {why}"));
        }
        if self.contested.contains(&key) {
            return Target::Elsewhere(format!(
                "the srcsrv stream lists it on more than {MAX_ALTERNATES} different lines"
            ));
        }
        let Some(target) = self.variables.get("SRCSRVTRG") else {
            return Target::Elsewhere("the srcsrv stream has no SRCSRVTRG".into());
        };
        // Lines that differ only where the target does not look (the path's case, a field
        // it does not use) send a debugger to one place whichever it takes; lines that
        // expand differently, or one not at all, are its own choice.
        let expanded: Vec<Option<String>> = alternates
            .iter()
            .map(|fields| self.expand(target, fields, 0))
            .collect();
        if expanded.windows(2).any(|pair| pair[0] != pair[1]) {
            return Target::Elsewhere(
                "the srcsrv stream lists it on lines that lead to different places: which one \
                 a debugger takes is its own"
                    .into(),
            );
        }
        match expanded.into_iter().next().flatten() {
            Some(url) if is_http(&url) => Target::Url(url),
            Some(other) => Target::Elsewhere(format!("{other}: not an http(s) URL")),
            None => Target::Elsewhere(format!(
                "SRCSRVTRG {target:?} does not expand (nested more than {MAX_DEPTH} deep, or \
                 longer than {MAX_TARGET} bytes)"
            )),
        }
    }

    /// `text` with its variables and functions expanded; `None` past the depth or length.
    fn expand(&self, text: &str, fields: &[String], depth: u32) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find('%') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('%') else {
                // A lone `%` is itself.
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let name = after[..end].to_ascii_uppercase();
            rest = &after[end + 1..];
            let function = matches!(name.as_str(), "FNVAR" | "FNBKSL" | "FNFILE");
            if let (true, Some((argument, tail))) = (function, call_argument(rest)) {
                rest = tail;
                let argument = self.expand(argument, fields, depth + 1)?;
                let value = match name.as_str() {
                    "FNVAR" => match self.variables.get(&argument.to_ascii_uppercase()) {
                        Some(value) => self.expand(value, fields, depth + 1)?,
                        None => String::new(),
                    },
                    "FNBKSL" => argument.replace('/', "\\"),
                    _ => argument
                        .rsplit(['\\', '/'])
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                };
                out.push_str(&value);
            } else if let Some(index) = field_index(&name) {
                out.push_str(fields.get(index).map_or("", String::as_str));
            } else if let Some(value) = self.variables.get(&name) {
                out.push_str(&self.expand(value, fields, depth + 1)?);
            } else {
                // A variable the debugger defines (`%targ%`, its cache) or nobody does: kept
                // as written, so the target says what it needs.
                out.push('%');
                out.push_str(&after[..end]);
                out.push('%');
            }
            if out.len() > MAX_TARGET {
                return None;
            }
        }
        out.push_str(rest);
        (out.len() <= MAX_TARGET).then_some(out)
    }
}

impl<'t> Reading<'t> {
    /// Records why the stream reads two ways (the first reason found; it reads as
    /// "the srcsrv stream <why>").
    fn flag(&mut self, why: String) {
        self.ambiguity.get_or_insert(why);
    }

    /// One line, its line ending removed.
    fn line(&mut self, line: &'t str) {
        // A debugger may end a line at a lone CR too, and then sees a definition this
        // reader takes for part of a value.
        if line.contains('\r') {
            self.flag(
                "holds a carriage return inside a line: readers may split it differently".into(),
            );
        }
        if let Some(section) = header(line) {
            self.section = section;
            return;
        }
        // Where a section starts is the debugger's to decide: a header in another case,
        // indented or named otherwise may start one for it and none here.
        let loose = line.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if loose
            .get(..7)
            .is_some_and(|start| start.eq_ignore_ascii_case("SRCSRV:"))
        {
            let shown: String = loose.chars().take(80).collect();
            self.flag(format!(
                "has a section header written another way ({shown:?}): a debugger may find a \
                 section there that this reader does not"
            ));
            return;
        }
        match self.section {
            Section::Variables => self.define(line),
            Section::Files => {
                self.file(line);
                self.note_outside(line);
            }
            Section::Outside => self.note_outside(line),
        }
    }

    /// A line of a variables section.
    fn define(&mut self, line: &str) {
        let Some((name, value)) = line.split_once('=') else {
            return;
        };
        let name = name.trim().to_ascii_uppercase();
        match self.variables.get(&name) {
            // Which of two definitions a debugger takes is its own (the `srcsrv` crate
            // takes the last, this reader the first): a target using either is not vouched
            // for (fail closed).
            Some(first) if first != value => self.flag(format!(
                "defines {name} twice, differently: which one a debugger takes is its own"
            )),
            Some(_) => {}
            None => {
                self.variables.insert(name, value.to_string());
            }
        }
    }

    /// A line of the source files section: every different line naming a path is kept,
    /// up to [`MAX_ALTERNATES`].
    fn file(&mut self, line: &str) {
        let fields: Vec<String> = line.split('*').map(str::to_string).collect();
        let Some(first) = fields.first().filter(|f| !f.is_empty()) else {
            return;
        };
        let path = first.to_lowercase();
        if self.contested.contains(&path) {
            return;
        }
        let alternates = self.files.entry(path.clone()).or_default();
        if alternates.contains(&fields) {
            return;
        }
        if alternates.len() >= MAX_ALTERNATES {
            self.contested.insert(path);
            return;
        }
        alternates.push(fields);
    }

    /// Keeps a line outside the variables sections that could be a definition. A source
    /// file line's first field is a path: only a line with no `*` before its first `=`
    /// could be one.
    fn note_outside(&mut self, line: &'t str) {
        if let Some((name, value)) = line.split_once('=').filter(|(n, _)| !n.contains('*')) {
            self.outside.push((name.trim().to_ascii_uppercase(), value));
        }
    }

    /// Compares the definitions outside the variables sections with those in them, once all
    /// are read: one of `SRCSRVTRG`, or of a variable the sections define, with another
    /// value counts wherever it stands (as [`defines_command`] has it), for a debugger may
    /// find a section there.
    fn compare_outside(&mut self) {
        let differing = self.outside.iter().find(|(name, value)| {
            let defined = self.variables.get(name);
            (name == "SRCSRVTRG" || defined.is_some())
                && defined.map(String::as_str) != Some(*value)
        });
        if let Some((name, _)) = differing {
            let why = format!(
                "defines {name} outside its variables sections, differently: a definition \
                 counts wherever it stands"
            );
            self.flag(why);
        }
    }
}

/// The section a header starts, when `line` is one as this reader recognises it: `SRCSRV:`
/// at its start, then a section's name ending there or followed by a space or dash.
fn header(line: &str) -> Option<Section> {
    let name = line.strip_prefix("SRCSRV:")?.trim_start();
    let is = |word: &str| {
        name.strip_prefix(word)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '-']))
    };
    if is("ini") || is("variables") {
        Some(Section::Variables)
    } else if is("source files") {
        Some(Section::Files)
    } else if is("end") {
        Some(Section::Outside)
    } else {
        None
    }
}

/// Whether `line` defines `SRCSRVCMD` (not empty), whatever section it is in. Sections are
/// for the debugger to find, and a stream written to mislead could have it see one where
/// this reader does not (a header in another case or indented, lines ended by a lone CR, a
/// second `variables` section after the files): a definition counts wherever it stands.
/// Every definition counts, not only the one a debugger takes (which of several it takes
/// is its own), and the name ignores case as srcsrv's names do. No real source file line
/// starts `SRCSRVCMD=`: its first field is the document's path.
fn defines_command(line: &str) -> bool {
    line.split_once('=').is_some_and(|(name, value)| {
        name.trim().eq_ignore_ascii_case("SRCSRVCMD") && !value.trim().is_empty()
    })
}

/// `VAR<n>` (1 to 10) as an index into a line's fields.
fn field_index(name: &str) -> Option<usize> {
    let n: usize = name.strip_prefix("VAR")?.parse().ok()?;
    (1..=10).contains(&n).then(|| n - 1)
}

/// A function's parenthesised argument at the start of `rest` (parentheses nest), and what
/// follows it.
fn call_argument(rest: &str) -> Option<(&str, &str)> {
    let inner = rest.strip_prefix('(')?;
    let mut depth = 1u32;
    for (at, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&inner[..at], &inner[at + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

fn is_http(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

#[cfg(test)]
mod tests;
