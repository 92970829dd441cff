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

/// A srcsrv stream, read.
pub struct SrcsrvLines {
    /// Variables by their name, uppercased (srcsrv's names ignore case).
    variables: HashMap<String, String>,
    /// Each source file line's fields, by its first field (the document's path) lowercased:
    /// WinDbg matches the path ignoring case. The first line naming a path is kept (one naming
    /// it differently makes it `contested`).
    files: HashMap<String, Vec<String>>,
    /// Some line defines `SRCSRVCMD` ([`defines_command`]).
    commands: bool,
    /// Why no target of this stream can be vouched for, where readers may read it two ways:
    /// a variable defined twice with different values, or a carriage return inside a line.
    ambiguity: Option<String>,
    /// Documents (lowercased paths) listed on two lines with different fields.
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

impl SrcsrvLines {
    /// Reads the stream's bytes (lines end in CR LF or LF; a line that is not UTF-8 is read
    /// with its bad bytes replaced, and then names no document a PDB holds).
    pub fn parse(bytes: &[u8]) -> SrcsrvLines {
        let text = String::from_utf8_lossy(bytes);
        let commands = text.split(['\r', '\n']).any(defines_command);
        let mut variables: HashMap<String, String> = HashMap::new();
        let mut files: HashMap<String, Vec<String>> = HashMap::new();
        let mut ambiguity = None;
        let mut contested = HashSet::new();
        let mut section = "";
        for line in text.lines() {
            // `lines` ends a line at LF (CR LF); a debugger may end one at a lone CR too, and
            // then sees a definition this reader takes for part of a value.
            if line.contains('\r') && ambiguity.is_none() {
                ambiguity = Some(
                    "a line of the srcsrv stream holds a carriage return: \
                    readers may split it differently"
                        .to_string(),
                );
            }
            if let Some(header) = line.strip_prefix("SRCSRV:") {
                let header = header.trim_start();
                section = if header.starts_with("ini") || header.starts_with("variables") {
                    "variables"
                } else if header.starts_with("source files") {
                    "files"
                } else {
                    ""
                };
                continue;
            }
            match section {
                "variables" => {
                    if let Some((name, value)) = line.split_once('=') {
                        let name = name.trim().to_ascii_uppercase();
                        match variables.get(&name) {
                            // Which of two definitions a debugger takes is its own (the
                            // `srcsrv` crate takes the last, this reader the first): a
                            // target using either is not vouched for (fail closed).
                            Some(first) if first != value && ambiguity.is_none() => {
                                ambiguity = Some(format!(
                                    "the srcsrv stream defines {name} twice, differently: \
                                     which one a debugger takes is its own"
                                ));
                            }
                            Some(_) => {}
                            None => {
                                variables.insert(name, value.to_string());
                            }
                        }
                    }
                }
                "files" => {
                    let fields: Vec<String> = line.split('*').map(str::to_string).collect();
                    if let Some(first) = fields.first().filter(|f| !f.is_empty()) {
                        let path = first.to_lowercase();
                        match files.get(&path) {
                            Some(listed) if listed != &fields => {
                                contested.insert(path);
                            }
                            Some(_) => {}
                            None => {
                                files.insert(path, fields);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        SrcsrvLines {
            variables,
            files,
            commands,
            ambiguity,
            contested,
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
        let Some(fields) = self.files.get(&path.to_lowercase()) else {
            return Target::Elsewhere("the srcsrv stream lists no line for it".into());
        };
        if self.commands {
            return Target::Elsewhere(
                "fetched by a command the srcsrv stream runs (SRCSRVCMD), not downloaded".into(),
            );
        }
        if let Some(why) = &self.ambiguity {
            return Target::Elsewhere(why.clone());
        }
        if self.contested.contains(&path.to_lowercase()) {
            return Target::Elsewhere(
                "the srcsrv stream lists it on two lines, differently: which one a debugger \
                 takes is its own"
                    .into(),
            );
        }
        let Some(target) = self.variables.get("SRCSRVTRG") else {
            return Target::Elsewhere("the srcsrv stream has no SRCSRVTRG".into());
        };
        match self.expand(target, fields, 0) {
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
mod tests {
    use super::{SrcsrvLines, Target};

    #[test]
    fn targets_expand_fields_variables_and_functions() {
        let stream = b"SRCSRV: ini ------\r\nVERSION=2\r\nSRCSRV: variables ------\r\n\
            BASE=https://s.example/src/app/1\r\nsrcsrvtrg=%base%/%var2%\r\n\
            SRCSRV: source files ------\r\nC:\\b\\x\\A.cpp*x/A.cpp\r\nSRCSRV: end ------\r\n";
        let lines = SrcsrvLines::parse(stream);
        assert_eq!(
            lines.target(r"c:\B\x\a.CPP"),
            Target::Url("https://s.example/src/app/1/x/A.cpp".into())
        );
        assert!(matches!(
            lines.target(r"C:\b\other.h"),
            Target::Elsewhere(_)
        ));
        let functions = b"SRCSRV: variables --\nHOST=https://h\nW=HOST\n\
            SRCSRVTRG=%fnvar%(%w%)/%fnfile%(%var1%)/%fnbksl%(a/b)\n\
            SRCSRV: source files --\n/w/d/f.c*f.c\nSRCSRV: end --\n";
        assert_eq!(
            SrcsrvLines::parse(functions).target("/w/d/f.c"),
            Target::Url("https://h/f.c/a\\b".into())
        );
    }

    #[test]
    fn commands_loops_and_local_targets_are_not_downloads() {
        let command = b"SRCSRV: variables --\nSRCSRVTRG=%targ%\\%var2%\n\
            SRCSRVCMD=cmd /c get %var2%\nSRCSRV: source files --\na.c*a.c\n";
        let Target::Elsewhere(why) = SrcsrvLines::parse(command).target("a.c") else {
            panic!("a command is no download");
        };
        assert!(why.contains("SRCSRVCMD"), "{why}");
        // Defined in the ini section, in lower case: a command all the same, to a debugger
        // and so to every reader of this parse.
        let in_ini = b"SRCSRV: ini --\nsrcsrvcmd=cmd /c calc\nSRCSRV: variables --\n\
            SRCSRVTRG=https://s/%var2%\nSRCSRV: source files --\na.c*a.c\n";
        let lines = SrcsrvLines::parse(in_ini);
        assert!(lines.runs_commands());
        assert_eq!(lines.variable("SrcSrvCmd"), Some("cmd /c calc"));
        let Target::Elsewhere(why) = lines.target("a.c") else {
            panic!("a command in the ini section is no download");
        };
        assert!(why.contains("SRCSRVCMD"), "{why}");
        let plain = b"SRCSRV: ini --\nVERSION=2\nSRCSRV: variables --\nSRCSRVCMD=\n\
            SRCSRVTRG=https://s/%var2%\nSRCSRV: source files --\na.c*a.c\n";
        let lines = SrcsrvLines::parse(plain);
        assert!(!lines.runs_commands(), "an empty SRCSRVCMD runs nothing");
        assert_eq!(lines.target("a.c"), Target::Url("https://s/a.c".into()));
        let looping = b"SRCSRV: variables --\nA=%b%\nB=%a%\nSRCSRVTRG=%a%\n\
            SRCSRV: source files --\na.c*a.c\n";
        assert!(matches!(
            SrcsrvLines::parse(looping).target("a.c"),
            Target::Elsewhere(_)
        ));
        let share = b"SRCSRV: variables --\nSRCSRVTRG=\\\\share\\%var2%\n\
            SRCSRV: source files --\na.c*a.c\n";
        assert!(matches!(
            SrcsrvLines::parse(share).target("a.c"),
            Target::Elsewhere(_)
        ));
        assert!(matches!(
            SrcsrvLines::parse(&[0xff, b'%', b'\n']).target("a.c"),
            Target::Elsewhere(_)
        ));
    }

    /// A stream two readers read two ways vouches for no target: a debugger taking the
    /// other definition (or line) would fetch from elsewhere than the audit says.
    #[test]
    fn streams_that_read_two_ways_vouch_for_no_target() {
        let why = |stream: &[u8], path: &str| match SrcsrvLines::parse(stream).target(path) {
            Target::Elsewhere(why) => why,
            Target::Url(url) => panic!("{url}: an ambiguous stream gave a URL"),
        };
        let twice = b"SRCSRV: variables --\nSRCSRVTRG=https://store/%var2%\n\
            SRCSRV: source files --\na.c*a.c\nSRCSRV: variables --\n\
            srcsrvtrg=https://evil/%var2%\n";
        assert!(why(twice, "a.c").contains("SRCSRVTRG twice"));
        assert!(SrcsrvLines::parse(twice).ambiguity().is_some());
        let base_twice = b"SRCSRV: ini --\nBASE=https://store\nSRCSRV: variables --\n\
            BASE=https://evil\nSRCSRVTRG=%base%/%var2%\nSRCSRV: source files --\na.c*a.c\n";
        assert!(why(base_twice, "a.c").contains("BASE twice"));
        let lone_cr = b"SRCSRV: variables --\nX=1\rSRCSRVTRG=https://evil/%var2%\n\
            SRCSRVTRG=https://store/%var2%\nSRCSRV: source files --\na.c*a.c\n";
        assert!(why(lone_cr, "a.c").contains("carriage return"));
        let lines_twice = b"SRCSRV: variables --\nSRCSRVTRG=https://s/%var2%\n\
            SRCSRV: source files --\nA.c*good.c\na.C*evil.c\nb.c*b.c\n";
        assert!(why(lines_twice, "a.c").contains("two lines"));
        let lines = SrcsrvLines::parse(lines_twice);
        assert_eq!(lines.target("b.c"), Target::Url("https://s/b.c".into()));
        assert!(
            lines.ambiguity().is_none(),
            "one contested line taints only itself"
        );
        // The same definition or line twice reads one way.
        let repeated = b"SRCSRV: variables --\r\nSRCSRVTRG=https://s/%var2%\r\n\
            SRCSRVTRG=https://s/%var2%\r\nSRCSRV: source files --\r\na.c*a.c\r\na.c*a.c\r\n";
        let lines = SrcsrvLines::parse(repeated);
        assert!(lines.ambiguity().is_none());
        assert_eq!(lines.target("a.c"), Target::Url("https://s/a.c".into()));
    }
}
