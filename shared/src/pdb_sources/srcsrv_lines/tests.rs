use super::{line_fields, SrcsrvLines, Target, MAX_ALTERNATES, MAX_FIELDS, STREAM_STEPS};
use std::sync::atomic::Ordering;

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
    assert!(why(lines_twice, "a.c").contains("different places"));
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

/// What a stream says where this reader finds no variables section (before the first
/// header, after `end`, among the source files, under a header written another way) counts:
/// a debugger may find a section there.
#[test]
fn definitions_where_no_section_is_read_are_compared() {
    let ambiguity = |stream: &str| {
        SrcsrvLines::parse(stream.as_bytes())
            .ambiguity()
            .map(str::to_string)
    };
    let sections = "SRCSRV: ini --\nVERSION=2\nSRCSRV: variables --\nBASE=https://store\n\
        SRCSRVTRG=%base%/%var2%\nSRCSRV: source files --\na.c*a.c\n";
    let end = "SRCSRV: end --\n";
    for (before, files, after, says) in [
        (
            "SRCSRVTRG=https://evil/%var2%\n",
            "",
            "",
            "SRCSRVTRG outside",
        ),
        (
            "",
            "",
            "srcsrvtrg = https://evil/%var2%\n",
            "SRCSRVTRG outside",
        ),
        ("", "base=https://evil\n", "", "BASE outside"),
        ("", " Base =https://evil\n", "", "BASE outside"),
        ("", "", "VERSION=3\n", "VERSION outside"),
        ("srcsrv: variables --\n", "", "", "written another way"),
        ("", "", "  SRCSRV: variables --\n", "written another way"),
        ("", "", "SRCSRV: Variables --\n", "written another way"),
        (
            "",
            "",
            "SRCSRV: extra --\nSRCSRVTRG=https://evil/%var2%\n",
            "written another way",
        ),
        ("", "", "SRCSRV:variablesX\n", "written another way"),
        ("", "", "SRCSRV:   end\n\n", "written another way"),
        (
            "",
            "SRCSRV:end\nb.c*https://evil\n",
            "",
            "written another way",
        ),
        ("", "SRCSRV:\tend\n", "", "written another way"),
        ("\u{feff}", "", "", "byte order mark"),
    ] {
        let stream = format!("{before}{sections}{files}{end}{after}");
        let why = ambiguity(&stream);
        assert!(
            why.as_deref().is_some_and(|w| w.contains(says)),
            "{stream:?}: {why:?}"
        );
        let lines = SrcsrvLines::parse(stream.as_bytes());
        let Target::Elsewhere(why) = lines.target("a.c") else {
            panic!("{stream:?}: a URL");
        };
        assert!(why.starts_with("the srcsrv stream "), "{why}");
    }
    // The same value, a variable the sections do not define, and source file lines whose
    // path holds an `=` read one way.
    for (before, files, after) in [
        ("BASE=https://store\n", "", "SRCSRVTRG=%base%/%var2%\n"),
        (
            "NOTE=made by hand\n",
            "C:\\x=y.c*x=y.c\nbase*base\n",
            "VERSION=2\n",
        ),
        ("", "SRCSRVTRG*x=https://evil\nx.c*base=https://evil\n", ""),
        ("", "", "SRCSRV: end\n\n"),
    ] {
        let stream = format!("{before}{sections}{files}{end}{after}");
        let lines = SrcsrvLines::parse(stream.as_bytes());
        assert_eq!(lines.ambiguity(), None, "{stream:?}");
        assert_eq!(lines.target("a.c"), Target::Url("https://store/a.c".into()));
    }
}

/// A NUL byte ends the stream for a reader taking it as a C string; bytes that are not
/// UTF-8 (a path in an ANSI code page) only name no document.
#[test]
fn a_nul_byte_is_ambiguous_and_other_bytes_are_not() {
    let nul = b"SRCSRV: variables --\nSRCSRVTRG=https://store/%var2%\n\
        SRCSRV: source files --\na.c*a.c\n\0\n";
    let lines = SrcsrvLines::parse(nul);
    assert!(lines.ambiguity().is_some_and(|w| w.contains("NUL")));
    assert!(matches!(lines.target("a.c"), Target::Elsewhere(_)));
    let ansi = b"SRCSRV: variables --\nSRCSRVTRG=https://store/%var2%\n\
        SRCSRV: source files --\nC:\\caf\xe9.c*caf\xe9.c\na.c*a.c\nSRCSRV: end --\n";
    let lines = SrcsrvLines::parse(ansi);
    assert_eq!(lines.ambiguity(), None);
    assert_eq!(lines.target("a.c"), Target::Url("https://store/a.c".into()));
}

/// NULs padding the stream after its last line read alike to every reader; NULs ending the
/// last line's text, or only NULs after a stream ending mid-line, do not.
#[test]
fn nul_padding_after_the_last_line_is_no_ambiguity() {
    let text = "SRCSRV: variables --\r\nSRCSRVTRG=https://store/%var2%\r\n\
        SRCSRV: source files --\r\na.c*a.c\r\nSRCSRV: end --\r\n";
    for padding in ["\0", "\0\0\0\0\0\0\0\0"] {
        let lines = SrcsrvLines::parse(format!("{text}{padding}").as_bytes());
        assert_eq!(lines.ambiguity(), None, "{padding:?}");
        assert_eq!(lines.target("a.c"), Target::Url("https://store/a.c".into()));
    }
    let mid_line = "SRCSRV: variables --\nSRCSRVTRG=https://store/%var2%\n\
        SRCSRV: source files --\na.c*a.c\0\0";
    let lines = SrcsrvLines::parse(mid_line.as_bytes());
    assert!(lines.ambiguity().is_some_and(|w| w.contains("NUL")));
    assert!(matches!(lines.target("a.c"), Target::Elsewhere(_)));
    // Nothing but NULs: no text, nothing to vouch for either way.
    assert!(matches!(
        SrcsrvLines::parse(b"\0\0").target("a.c"),
        Target::Elsewhere(_)
    ));
}

/// Lines ended in CR CR LF (Windows text-mode writers), and a text ending in a lone CR,
/// read one way; a CR with more of the line after it does not.
#[test]
fn carriage_returns_end_lines_and_only_inside_one_are_ambiguous() {
    let doubled = b"SRCSRV: variables --\r\r\nSRCSRVTRG=https://store/%var2%\r\r\r\n\
        SRCSRV: source files --\r\r\na.c*a.c\r\r\nb.c*b.c\r";
    let lines = SrcsrvLines::parse(doubled);
    assert_eq!(lines.ambiguity(), None);
    assert_eq!(lines.target("a.c"), Target::Url("https://store/a.c".into()));
    assert_eq!(lines.target("b.c"), Target::Url("https://store/b.c".into()));
    let inside = b"SRCSRV: variables --\r\nSRCSRVTRG=https://store/%var2%\r \r\n\
        SRCSRV: source files --\r\na.c*a.c\r\n";
    assert!(SrcsrvLines::parse(inside)
        .ambiguity()
        .is_some_and(|w| w.contains("carriage return")));
}

/// One document on several lines (its path in two spellings, as ssindex and symdex's own
/// writer list it) reads one way where every line expands to one URL.
#[test]
fn lines_naming_a_document_differently_are_contested_only_where_they_lead_apart() {
    let stream = |files: &str| {
        format!(
            "SRCSRV: variables --\r\nSRCSRVTRG=https://store/%var2%\r\n\
             SRCSRV: source files --\r\n{files}SRCSRV: end --\r\n"
        )
    };
    let target = |files: &str| SrcsrvLines::parse(stream(files).as_bytes()).target(r"c:\b\x.h");
    let url = Target::Url("https://store/x.h".into());
    assert_eq!(target("C:\\B\\x.h*x.h\r\nc:\\b\\x.h*x.h\r\n"), url);
    assert_eq!(target("C:\\B\\x.h*x.h*1\r\nc:\\b\\X.H*x.h*2\r\n"), url);
    let long = "y".repeat(9000);
    for apart in [
        "C:\\B\\x.h*x.h\r\nc:\\b\\x.h*evil.h\r\n".to_string(),
        "C:\\B\\x.h*x.h\r\nc:\\b\\x.h\r\n".to_string(),
        format!("C:\\B\\x.h*x.h\r\nc:\\b\\x.h*{long}\r\n"),
    ] {
        let Target::Elsewhere(why) = target(&apart) else {
            panic!("{apart:?}: a URL");
        };
        assert!(why.contains("different places"), "{why}");
    }
    let many: String = (0..9).map(|i| format!("c:\\b\\x.h*x.h*{i}\r\n")).collect();
    let Target::Elsewhere(why) = target(&many) else {
        panic!("nine lines: a URL");
    };
    assert!(why.contains("more than 8"), "{why}");
    let eight: String = (0..8).map(|i| format!("c:\\b\\x.h*x.h*{i}\r\n")).collect();
    assert_eq!(target(&eight), url);
}

/// A debugger may match `C:/b/x.h`, ` c:\b\x.h `, `c:\b\.\x.h` or `c:\..\b\x.h` to the
/// document `c:\b\x.h` (paths as Windows resolves them): their lines must lead where its own
/// do. A document is still matched by its own spelling only.
#[test]
fn lines_naming_a_document_as_windows_would_resolve_it_must_agree() {
    let stream = |files: &str| {
        format!(
            "SRCSRV: variables --\r\nSRCSRVTRG=https://store/%var2%\r\n\
             SRCSRV: source files --\r\n{files}SRCSRV: end --\r\n"
        )
    };
    let target =
        |files: &str, path: &str| SrcsrvLines::parse(stream(files).as_bytes()).target(path);
    let url = Target::Url("https://store/x.h".into());
    assert_eq!(
        target("C:\\B\\x.h*x.h\r\nc:/b/x.h*x.h\r\n", r"c:\b\x.h"),
        url
    );
    for apart in [
        "C:\\B\\x.h*x.h\r\nc:/b/x.h*evil.h\r\n",
        "c:/b/x.h*evil.h\r\nC:\\B\\x.h*x.h\r\n",
        "C:\\B\\x.h*x.h\r\n c:\\b\\x.h *evil.h\r\n",
        // Paths Windows resolves to the same file: `.`, doubled separators, `..`, a
        // component ending in spaces or dots.
        "C:\\B\\x.h*x.h\r\nc:\\b\\.\\x.h*evil.h\r\n",
        "C:\\B\\x.h*x.h\r\nc:\\b\\\\x.h*evil.h\r\n",
        "C:\\B\\x.h*x.h\r\nc:\\b\\y\\..\\x.h*evil.h\r\n",
        "C:\\B\\x.h*x.h\r\nc:\\b. \\x.h*evil.h\r\n",
        // `..` at a drive's root stays there.
        "C:\\B\\x.h*x.h\r\nc:\\..\\b\\x.h*evil.h\r\n",
    ] {
        let Target::Elsewhere(why) = target(apart, r"c:\b\x.h") else {
            panic!("{apart:?}: a URL");
        };
        assert!(why.contains("different places"), "{apart:?}: {why}");
    }
    // Letters one only through upper case (`ſ` is `S` upper-cased).
    let Target::Elsewhere(why) =
        target("c:\\s\\x.h*x.h\r\nc:\\\u{17f}\\x.h*evil.h\r\n", r"c:\s\x.h")
    else {
        panic!("a long s: a URL");
    };
    assert!(why.contains("different places"), "{why}");
    // `..` at a UNC share's root stays there.
    let Target::Elsewhere(why) = target(
        "\\\\srv\\share\\x.h*x.h\r\n\\\\srv\\share\\..\\x.h*evil.h\r\n",
        r"\\srv\share\x.h",
    ) else {
        panic!("a UNC root climbed: a URL");
    };
    assert!(why.contains("different places"), "{why}");
    // `..` that climbs past the start of a relative path is kept: `..\x.h` is not `x.h`.
    assert_eq!(
        target("C:\\B\\x.h*x.h\r\n..\\c:\\b\\x.h*evil.h\r\n", r"c:\b\x.h"),
        url
    );
    // Nine lines over two spellings: past the bound, whichever spelling holds them.
    let many: String = (0..9)
        .map(|i| match i % 2 {
            0 => format!("c:\\b\\x.h*x.h*{i}\r\n"),
            _ => format!("c:/b/x.h*x.h*{i}\r\n"),
        })
        .collect();
    let Target::Elsewhere(why) = target(&many, r"c:\b\x.h") else {
        panic!("nine lines: a URL");
    };
    assert!(why.contains("more than 8"), "{why}");
    // A path spelt every way its separators allow (2^4 spellings, one line each): past the
    // bound whichever spelling is asked, and no document gathers more than the bound's
    // spellings' lines.
    let spellings: String = (0..16u32)
        .map(|bits| {
            let sep = |i: u32| if bits & (1 << i) == 0 { '\\' } else { '/' };
            format!("c:{}a{}b{}c{}x.h*x.h\r\n", sep(0), sep(1), sep(2), sep(3))
        })
        .collect();
    let lines = SrcsrvLines::parse(stream(&spellings).as_bytes());
    assert!(lines.spellings.values().all(|s| s.len() <= MAX_ALTERNATES));
    for path in [r"c:\a\b\c\x.h", "c:/a/b/c/x.h", r"c:/a\b/c\x.h"] {
        let Target::Elsewhere(why) = lines.target(path) else {
            panic!("{path}: a URL");
        };
        assert!(
            why.contains("more than 8") || why.contains("no line"),
            "{path}: {why}"
        );
    }
    // Only a line spelt another way: the document is not matched to it.
    let Target::Elsewhere(why) = target("c:/b/x.h*x.h\r\n", r"c:\b\x.h") else {
        panic!("matched through another spelling");
    };
    assert!(why.contains("no line"), "{why}");
}

/// The `Elsewhere` reason of the target of `path` in `stream`, failing on a URL.
fn elsewhere(lines: &SrcsrvLines, path: &str) -> String {
    match lines.target(path) {
        Target::Elsewhere(why) => why,
        Target::Url(url) => panic!("{url}: a hostile stream gave a URL"),
    }
}

/// Empty variables nested fifteen deep, each naming the one below two hundred times: the
/// output never grows, the work would be 200^15; the step budget stops it.
#[test]
fn nested_empty_variables_stop_at_the_step_budget() {
    let mut stream = String::from("SRCSRV: variables --\nL0=\n");
    for level in 1..=14 {
        let below = format!("%l{}%", level - 1);
        stream.push_str(&format!("L{level}={}\n", below.repeat(200)));
    }
    stream.push_str("SRCSRVTRG=https://s/%L14%%var2%\nSRCSRV: source files --\na.c*a.c\n");
    let lines = SrcsrvLines::parse(stream.as_bytes());
    assert_eq!(lines.ambiguity(), None);
    let why = elsewhere(&lines, "a.c");
    assert!(why.contains("steps"), "{why}");
}

/// Unbalanced `%fnvar%(`s each scan the rest of the value: within the longest value
/// expanded they stop at the step budget; a longer value is not expanded at all.
#[test]
fn unbalanced_function_calls_stop_at_the_step_budget_or_the_length() {
    let stream = |target: &str| {
        format!(
            "SRCSRV: variables --\nSRCSRVTRG=https://s/{target}%var2%\n\
             SRCSRV: source files --\na.c*a.c\n"
        )
    };
    let within = stream(&"%fnvar%(".repeat(1000));
    let why = elsewhere(&SrcsrvLines::parse(within.as_bytes()), "a.c");
    assert!(why.contains("steps"), "{why}");
    let long = stream(&"%fnvar%(".repeat(100_000));
    let why = elsewhere(&SrcsrvLines::parse(long.as_bytes()), "a.c");
    assert!(why.contains("does not expand"), "{why}");
    // Behind a variable: its value is not expanded either.
    let behind = format!(
        "SRCSRV: variables --\nBIG={}\nSRCSRVTRG=https://s/%big%%var2%\n\
         SRCSRV: source files --\na.c*a.c\n",
        "%fnvar%(".repeat(100_000)
    );
    let why = elsewhere(&SrcsrvLines::parse(behind.as_bytes()), "a.c");
    assert!(why.contains("does not expand"), "{why}");
}

/// All the targets of one stream spend one budget: past it every target is elsewhere,
/// however many documents the PDB names.
#[test]
fn a_streams_targets_share_one_budget() {
    let stream = b"SRCSRV: variables --\nSRCSRVTRG=https://s/%var2%\n\
        SRCSRV: source files --\na.c*a.c\nb.c*b.c\n";
    let lines = SrcsrvLines::parse(stream);
    assert_eq!(lines.target("a.c"), Target::Url("https://s/a.c".into()));
    lines.spent.store(STREAM_STEPS - 5, Ordering::Relaxed);
    let why = elsewhere(&lines, "b.c");
    assert!(why.contains("budget is spent"), "{why}");
    assert!(lines.spent.load(Ordering::Relaxed) <= STREAM_STEPS);
    let why = elsewhere(&lines, "a.c");
    assert!(why.contains("budget is spent"), "{why}");
}

/// A source file line keeps its path and `VAR2`...`VAR10`, not a string per `*`.
#[test]
fn a_line_keeps_at_most_its_first_fields() {
    let fields = line_fields(&"a*".repeat(1_000_000));
    assert_eq!(fields.len(), MAX_FIELDS);
    assert!(fields.iter().all(|f| f == "a"));
    let stream = b"SRCSRV: variables --\nSRCSRVTRG=https://s/%var10%\n\
        SRCSRV: source files --\na.c*2*3*4*5*6*7*8*9*ten*11*12\n";
    assert_eq!(
        SrcsrvLines::parse(stream).target("a.c"),
        Target::Url("https://s/ten".into())
    );
}

/// A name the target uses that only a definition outside the sections gives a value: a
/// debugger finding a section there fetches from where that value says.
#[test]
fn names_defined_only_outside_the_sections_are_not_vouched_for() {
    let sections = "SRCSRV: ini --\nVERSION=2\nSRCSRV: variables --\n\
        SRCSRVTRG=https://store.example%H%/src/p/1/%var2%\n\
        SRCSRV: source files --\na.c*a.c\n";
    for stream in [
        format!("H=.evil.com\n{sections}SRCSRV: end --\n"),
        format!("{sections}SRCSRV: end --\n h =.evil.com\n"),
        format!("{sections}h=.evil.com\n"),
    ] {
        let lines = SrcsrvLines::parse(stream.as_bytes());
        assert_eq!(lines.ambiguity(), None, "{stream:?}");
        let why = elsewhere(&lines, "a.c");
        assert!(why.contains("uses H"), "{stream:?}: {why}");
    }
    // Through `%fnvar%` with a name from the line.
    let through = "G=.evil.com\nSRCSRV: variables --\n\
        SRCSRVTRG=https://store.example%fnvar%(%var3%)/%var2%\n\
        SRCSRV: source files --\na.c*a.c*g\nb.c*b.c*other\n";
    let lines = SrcsrvLines::parse(through.as_bytes());
    let why = elsewhere(&lines, "a.c");
    assert!(why.contains("uses G"), "{why}");
    assert_eq!(
        lines.target("b.c"),
        Target::Url("https://store.example/b.c".into())
    );
    // Without the outside definition the name is the debugger's, kept as written.
    let plain = format!("{sections}SRCSRV: end --\n");
    assert_eq!(
        SrcsrvLines::parse(plain.as_bytes()).target("a.c"),
        Target::Url("https://store.example%H%/src/p/1/a.c".into())
    );
    // Past the names kept from outside the sections, the stream reads two ways outright.
    let many: String = (0..2000).map(|i| format!("N{i}=x\n")).collect();
    let stream = format!("{many}{sections}");
    assert!(SrcsrvLines::parse(stream.as_bytes())
        .ambiguity()
        .is_some_and(|w| w.contains("names outside")));
}
