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
        ("", "", "SRCSRV:   end\n\n"),
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
