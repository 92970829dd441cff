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
//!
//! Bounded work and memory (hostile PDBs, THREATS.md): parsing a stream of `n` bytes takes
//! O(n) time and memory (a line keeps at most [`MAX_FIELDS`] fields, no more than its own
//! bytes; at most [`MAX_OUTSIDE_NAMES`] names are kept from outside the sections, each a
//! copy of part of the text; a path's [`spelling`], case folded, at most three times its
//! bytes); a reason for ambiguity is cut to [`MAX_WHY`] bytes). One
//! [`SrcsrvLines::target`] costs O(its path) plus at most [`TARGET_STEPS`] expansion steps
//! (a step a byte scanned or copied, or a variable or function looked up), across all its
//! alternate lines (and the one scan, of at most [`MAX_TARGET`] bytes, that finds it spent),
//! each expanded value at most [`MAX_TARGET`] bytes; and all targets of one
//! stream together spend at most [`STREAM_STEPS`] steps (a counter in the stream), after
//! which each further target costs O(its path). A fixed total is the simplest bound that
//! holds whatever the stream and however many documents the PDB names: memoizing variables
//! would not bound `%fnvar%` names built from each line's fields.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most nested expansions of one target (a variable naming a variable...): streams
/// written by indexing scripts nest two or three; a loop ends here.
const MAX_DEPTH: u32 = 16;

/// The longest target expanded: a URL a debugger could use is far shorter.
const MAX_TARGET: usize = 8192;

/// The most different lines kept for one document: real streams list a file in two or three
/// spellings (one a compiler's, one its linker's); past this many it is contested outright,
/// so that no document costs more than this many expansions.
const MAX_ALTERNATES: usize = 8;

/// The most fields kept of a source file line: its path and `VAR2`...`VAR10` (`VAR1` is
/// the path), all an expansion reads ([`field_index`]); the rest are dropped.
const MAX_FIELDS: usize = 11;

/// The most steps one target's expansions take, all its alternate lines together (a step a
/// byte scanned or copied, or a variable or function looked up): a real target takes a few
/// hundred.
const TARGET_STEPS: u64 = 100_000;

/// The most steps all the targets of one stream take together: two thousand documents at
/// [`TARGET_STEPS`], half a million real ones.
const STREAM_STEPS: u64 = 200_000_000;

/// The most different names kept of definitions outside the variables sections: real
/// streams have none; past this many the stream is ambiguous outright.
const MAX_OUTSIDE_NAMES: usize = 1024;

/// The longest reason for ambiguity kept (bytes, cut at a character): it is formatted into
/// every target's answer.
const MAX_WHY: usize = 512;

/// A lowercased path written one way, as Windows would resolve it: `/` as `\`, runs of
/// separators as one, no `.` components, `..` taken with the component before it (never
/// with the root, a drive `c:` or a UNC `\\server\share`: there it is dropped), no
/// spaces or dots ending a component (Win32 drops them), no spaces around it, and case
/// folded through upper case too (`ſ` and `s`, `K` and the Kelvin sign are one letter to a
/// debugger that compares upper-cased paths). Lines whose paths differ only so may name one
/// file to a debugger; this reader matches a document by its lowercased path alone, and
/// vouches for it only where all such lines agree ([`SrcsrvLines::target`]). Coarser is the
/// safe side: paths grouped that no debugger confuses only have to agree.
fn spelling(lowercased: &str) -> String {
    let folded: String = lowercased
        .trim()
        .chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect();
    let separator = ['\\', '/'];
    let unc = folded.starts_with(separator) && folded[1..].starts_with(separator);
    let mut components: Vec<&str> = Vec::new();
    // How many leading components are the root, once there: `..` climbs no higher.
    let mut root = 0;
    for component in folded.split(separator) {
        match component {
            "" | "." => {}
            ".." if components.len() > root && components.last() != Some(&"..") => {
                components.pop();
            }
            ".." if root > 0 => {}
            ".." => components.push(".."),
            _ => match component.trim_end_matches([' ', '.']) {
                "" => {}
                trimmed => {
                    components.push(trimmed);
                    if components.len() == 1 {
                        root = match (unc, trimmed.ends_with(':')) {
                            (true, _) => 2,
                            (false, true) => 1,
                            (false, false) => 0,
                        };
                    }
                }
            },
        }
    }
    components.join("\\")
}

/// A srcsrv stream, read.
pub struct SrcsrvLines {
    /// Variables by their name, uppercased (srcsrv's names ignore case).
    variables: HashMap<String, String>,
    /// Each source file line's fields, by its first field (the document's path) lowercased:
    /// WinDbg matches the path ignoring case. Every different line naming a path is kept
    /// (real PDBs list one file as `C:\B\x.h` and `c:\b\x.h`): a document reads one way
    /// where all of them lead to one place ([`Self::target`]).
    files: HashMap<String, Vec<Vec<String>>>,
    /// The keys of [`Self::files`] by the path written one way ([`spelling`]: separators,
    /// `.` and `..`, spaces and case as Windows resolves them): a debugger may take any of
    /// their lines.
    spellings: HashMap<String, Vec<String>>,
    /// Paths written more than [`MAX_ALTERNATES`] ways: their documents are contested.
    contested_spellings: HashSet<String>,
    /// Some line defines `SRCSRVCMD` ([`defines_command`]).
    commands: bool,
    /// Why no target of this stream can be vouched for, where readers may read it two ways:
    /// a variable defined twice with different values (in its sections, or where a debugger
    /// may see one), a section header written another way, a carriage return inside a line,
    /// a NUL byte, a byte order mark.
    ambiguity: Option<String>,
    /// Documents (lowercased paths) listed on more than [`MAX_ALTERNATES`] different lines.
    contested: HashSet<String>,
    /// Names (uppercased) defined outside the variables sections and not in them: a
    /// debugger finding a section there expands them, this reader would keep them as
    /// written; a target using one is not vouched for.
    outside_only: HashSet<String>,
    /// Expansion steps all targets have taken ([`STREAM_STEPS`]).
    spent: AtomicU64,
}

/// Why an expansion stopped.
enum Stop {
    /// Nested more than [`MAX_DEPTH`] deep.
    Deep,
    /// A value longer than [`MAX_TARGET`].
    Long,
    /// Past [`TARGET_STEPS`].
    Steps,
    /// Uses a name defined only outside the variables sections.
    Outside(String),
}

/// The expansion steps one target has left.
struct Budget {
    left: u64,
}

impl Budget {
    /// Takes one step and `bytes` more.
    fn spend(&mut self, bytes: usize) -> Result<(), Stop> {
        let steps = (bytes as u64).saturating_add(1);
        if steps > self.left {
            self.left = 0;
            return Err(Stop::Steps);
        }
        self.left -= steps;
        Ok(())
    }

    /// `value` appended to `out`: its bytes spent, and the length checked before copying.
    fn push(&mut self, out: &mut String, value: &str) -> Result<(), Stop> {
        if out.len() + value.len() > MAX_TARGET {
            return Err(Stop::Long);
        }
        self.spend(value.len())?;
        out.push_str(value);
        Ok(())
    }
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
    spellings: HashMap<String, Vec<String>>,
    contested_spellings: HashSet<String>,
    ambiguity: Option<String>,
    contested: HashSet<String>,
    section: Section,
    /// Definitions outside the variables sections by name (trimmed, uppercased), at most
    /// [`MAX_OUTSIDE_NAMES`]: their value, `None` where they have several. A debugger finding
    /// a section where this reader does not takes them for definitions.
    outside: BTreeMap<String, Option<&'t str>>,
}

impl SrcsrvLines {
    /// Reads the stream's bytes (lines end in CR LF or LF, any CRs before the LF; a line that
    /// is not UTF-8 is read with its bad bytes replaced, and then names no document a PDB
    /// holds: paths in an ANSI code page are no ambiguity, only never matched).
    pub fn parse(bytes: &[u8]) -> SrcsrvLines {
        // NULs padding the stream after its last line (a writer's fixed-size buffer) end it
        // for every reader: one taking it as a C string stops at the first, and to one
        // reading its whole length they are a line naming nothing. A NUL with text after it,
        // or ending a line's last field, is another matter (below).
        let text_end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let padded = matches!(bytes[..text_end].last(), Some(b'\n' | b'\r'));
        let bytes = if padded { &bytes[..text_end] } else { bytes };
        let text = String::from_utf8_lossy(bytes);
        let commands = text.split(['\r', '\n']).any(defines_command);
        let mut reading = Reading {
            variables: HashMap::new(),
            files: HashMap::new(),
            spellings: HashMap::new(),
            contested_spellings: HashSet::new(),
            ambiguity: None,
            contested: HashSet::new(),
            section: Section::Outside,
            outside: BTreeMap::new(),
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
        let outside_only = std::mem::take(&mut reading.outside)
            .into_keys()
            .filter(|name| !reading.variables.contains_key(name))
            .collect();
        SrcsrvLines {
            variables: reading.variables,
            files: reading.files,
            spellings: reading.spellings,
            contested_spellings: reading.contested_spellings,
            commands,
            ambiguity: reading.ambiguity,
            contested: reading.contested,
            outside_only,
            spent: AtomicU64::new(0),
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
        let Some(own) = self.files.get(&key) else {
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
        // Its lines, and those naming the same path written another way ([`spelling`]:
        // separators, `.` and `..`, spaces, case): which a debugger matches is its own, so
        // all must agree.
        // At most [`MAX_ALTERNATES`] spellings, each of at most as many lines (`file`).
        let spelt = spelling(&key);
        let spellings = self.spellings.get(&spelt).map_or(&[][..], Vec::as_slice);
        let others = spellings.iter().filter(|other| **other != key);
        let alternates: Vec<&Vec<String>> = own
            .iter()
            .chain(others.clone().filter_map(|o| self.files.get(o)).flatten())
            .collect();
        let contested = self.contested_spellings.contains(&spelt)
            || std::iter::once(&key)
                .chain(others)
                .any(|k| self.contested.contains(k));
        if contested || alternates.len() > MAX_ALTERNATES {
            return Target::Elsewhere(format!(
                "the srcsrv stream lists it on more than {MAX_ALTERNATES} different lines"
            ));
        }
        let Some(target) = self.variables.get("SRCSRVTRG") else {
            return Target::Elsewhere("the srcsrv stream has no SRCSRVTRG".into());
        };
        let left = STREAM_STEPS.saturating_sub(self.spent.load(Ordering::Relaxed));
        if left == 0 {
            return Target::Elsewhere("the srcsrv stream's expansion budget is spent".into());
        }
        let limit = left.min(TARGET_STEPS);
        let mut budget = Budget { left: limit };
        // Lines that differ only where the target does not look (the path's case, a field
        // it does not use) send a debugger to one place whichever it takes; lines that
        // expand differently, or one not at all, are its own choice. Past the budget, or
        // through a name defined outside the sections, no line is vouched for.
        let mut expanded: Vec<Option<String>> = Vec::with_capacity(alternates.len());
        let mut stopped = None;
        for fields in alternates {
            match self.expand(target, fields, 0, &mut budget) {
                Ok(url) => expanded.push(Some(url)),
                Err(Stop::Deep | Stop::Long) => expanded.push(None),
                Err(stop) => {
                    stopped = Some(stop);
                    break;
                }
            }
        }
        self.spent.fetch_add(limit - budget.left, Ordering::Relaxed);
        match stopped {
            Some(Stop::Steps) if limit < TARGET_STEPS => {
                return Target::Elsewhere("the srcsrv stream's expansion budget is spent".into())
            }
            Some(Stop::Steps) => {
                return Target::Elsewhere(format!(
                    "SRCSRVTRG does not expand within {TARGET_STEPS} steps"
                ))
            }
            Some(Stop::Outside(name)) => {
                return Target::Elsewhere(format!(
                    "SRCSRVTRG uses {name}, which the srcsrv stream defines only outside its \
                     variables sections: a debugger finding a section there expands it"
                ))
            }
            Some(Stop::Deep | Stop::Long) | None => {}
        }
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
            None => {
                let shown: String = target.chars().take(80).collect();
                Target::Elsewhere(format!(
                    "SRCSRVTRG {shown:?} does not expand (nested more than {MAX_DEPTH} deep, \
                     or longer than {MAX_TARGET} bytes)"
                ))
            }
        }
    }

    /// `text` with its variables and functions expanded, spending `budget`; stops past
    /// [`MAX_DEPTH`], at a value (`text` or one made) longer than [`MAX_TARGET`], past the
    /// budget, or at a name defined only outside the variables sections.
    fn expand(
        &self,
        text: &str,
        fields: &[String],
        depth: u32,
        budget: &mut Budget,
    ) -> Result<String, Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Deep);
        }
        if text.len() > MAX_TARGET {
            return Err(Stop::Long);
        }
        budget.spend(0)?;
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find('%') {
            budget.push(&mut out, &rest[..start])?;
            let after = &rest[start + 1..];
            let Some(end) = after.find('%') else {
                // A lone `%` is itself.
                budget.push(&mut out, &rest[start..])?;
                rest = "";
                break;
            };
            budget.spend(end)?;
            let name = after[..end].to_ascii_uppercase();
            let written = &rest[start..start + end + 2];
            rest = &after[end + 1..];
            let function = matches!(name.as_str(), "FNVAR" | "FNBKSL" | "FNFILE");
            let call = if function && rest.starts_with('(') {
                let call = call_argument(rest);
                // The bytes scanned: to the closing parenthesis, or all of `rest`.
                budget.spend(call.map_or(rest.len(), |(_, tail)| rest.len() - tail.len()))?;
                call
            } else {
                None
            };
            if let Some((argument, tail)) = call {
                rest = tail;
                let argument = self.expand(argument, fields, depth + 1, budget)?;
                budget.spend(argument.len())?;
                let value = match name.as_str() {
                    "FNVAR" => {
                        let name = argument.to_ascii_uppercase();
                        match self.variables.get(&name) {
                            Some(value) => self.expand(value, fields, depth + 1, budget)?,
                            None if self.outside_only.contains(&name) => {
                                return Err(Stop::Outside(name))
                            }
                            None => String::new(),
                        }
                    }
                    "FNBKSL" => argument.replace('/', "\\"),
                    _ => argument
                        .rsplit(['\\', '/'])
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                };
                budget.push(&mut out, &value)?;
            } else if let Some(index) = field_index(&name) {
                budget.push(&mut out, fields.get(index).map_or("", String::as_str))?;
            } else if let Some(value) = self.variables.get(&name) {
                let value = self.expand(value, fields, depth + 1, budget)?;
                budget.push(&mut out, &value)?;
            } else if self.outside_only.contains(&name) {
                return Err(Stop::Outside(name));
            } else {
                // A variable the debugger defines (`%targ%`, its cache) or nobody does: kept
                // as written, so the target says what it needs.
                budget.push(&mut out, written)?;
            }
        }
        budget.push(&mut out, rest)?;
        Ok(out)
    }
}

impl<'t> Reading<'t> {
    /// Records why the stream reads two ways (the first reason found; it reads as
    /// "the srcsrv stream <why>").
    fn flag(&mut self, mut why: String) {
        if why.len() > MAX_WHY {
            let mut cut = MAX_WHY;
            while !why.is_char_boundary(cut) {
                cut -= 1;
            }
            why.truncate(cut);
            why.push_str("...");
        }
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
        let fields = line_fields(line);
        let Some(first) = fields.first().filter(|f| !f.is_empty()) else {
            return;
        };
        let path = first.to_lowercase();
        if self.contested.contains(&path) {
            return;
        }
        if !self.files.contains_key(&path) {
            // A path spelt many ways (each separator `/` or `\\`: 2^n of them) is contested
            // outright past the bound: a document's target never gathers more than
            // [`MAX_ALTERNATES`] spellings' lines.
            let spelt = spelling(&path);
            let spellings = self.spellings.entry(spelt.clone()).or_default();
            if spellings.len() >= MAX_ALTERNATES {
                self.contested_spellings.insert(spelt);
                return;
            }
            spellings.push(path.clone());
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
        let Some((name, value)) = line.split_once('=').filter(|(n, _)| !n.contains('*')) else {
            return;
        };
        let name = name.trim().to_ascii_uppercase();
        if let Some(kept) = self.outside.get_mut(&name) {
            if *kept != Some(value) {
                *kept = None;
            }
        } else if self.outside.len() < MAX_OUTSIDE_NAMES {
            self.outside.insert(name, Some(value));
        } else {
            self.flag(format!(
                "defines more than {MAX_OUTSIDE_NAMES} names outside its variables sections"
            ));
        }
    }

    /// Compares the definitions outside the variables sections with those in them, once all
    /// are read: one of `SRCSRVTRG`, or of a variable the sections define, with another
    /// value counts wherever it stands (as [`defines_command`] has it), for a debugger may
    /// find a section there.
    fn compare_outside(&mut self) {
        let differing = self.outside.iter().find(|(name, value)| {
            let defined = self.variables.get(*name);
            (*name == "SRCSRVTRG" || defined.is_some())
                && (value.is_none() || defined.map(String::as_str) != **value)
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

/// The section a header starts, when `line` is one as this reader recognises it: `SRCSRV: `
/// at its start, then a section's name ending there or followed by a space or dash.
fn header(line: &str) -> Option<Section> {
    // Written as every writer writes it (`SRCSRV: ini ----`): one space after the colon. A
    // header spaced otherwise (`SRCSRV:end`) is one to some readers and a line to others,
    // so it is written another way ([`Reading::line`]).
    let name = line.strip_prefix("SRCSRV: ")?;
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

/// A source file line's fields (split at `*`), the first [`MAX_FIELDS`] of them.
fn line_fields(line: &str) -> Vec<String> {
    line.split('*')
        .take(MAX_FIELDS)
        .map(str::to_string)
        .collect()
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
