//! A file name as it may stand inside a key (KEYS.md §5): names are untrusted, and a key is
//! built only from a [`Name`] that passed [`Name::new`].

use crate::identity::file_name_of;

/// Longest name accepted in a key: a component may be 255 bytes (file systems), and the
/// longest component derived from a name (Breakpad's `<stem>.sym`) adds 4.
pub const MAX_NAME_LEN: usize = 250;

/// Why a name would break a Windows symbol cache (SymSrv, Visual Studio and dotnet-symbol
/// save files under the key's name), or a reader: device names, `:` (alternate data streams),
/// trailing dots and spaces (silently dropped), invisible bidirectional and format characters
/// (a name that displays as another), and U+FFFD (a file name that was not UTF-8).
fn windows_unsafe(name: &str) -> Option<&'static str> {
    const DEVICES: [&str; 4] = ["con", "prn", "aux", "nul"];
    let stem = name.split('.').next().unwrap_or(name).trim_end();
    // Compared without case, not lowercased: every artifact's name passes here.
    let numbered = |prefix: &str| {
        stem.len() == 4
            && stem.is_char_boundary(3)
            && stem[..3].eq_ignore_ascii_case(prefix)
            && stem.as_bytes()[3].is_ascii_digit()
    };
    if DEVICES.iter().any(|d| stem.eq_ignore_ascii_case(d)) || numbered("com") || numbered("lpt") {
        return Some("is a Windows device name");
    }
    if name.contains(':') {
        return Some("contains ':' (a Windows alternate data stream)");
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Some("ends with a dot or a space (Windows drops them)");
    }
    // Bidirectional controls and other invisible format characters (Unicode category Cf).
    let invisible = |c: char| {
        matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
    };
    if name.chars().any(invisible) {
        return Some("contains an invisible bidirectional or format character");
    }
    if name.contains('\u{FFFD}') {
        return Some("is not valid UTF-8 (U+FFFD)");
    }
    None
}

/// A file name that is safe inside a key: one component, no control characters, not `.` or
/// `..`, at most [`MAX_NAME_LEN`] bytes, nothing that breaks a Windows symbol cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'a>(&'a str);

impl<'a> Name<'a> {
    /// Validates the last component of `path` (both `/` and `\` separate).
    pub fn new(path: &'a str) -> Result<Self, String> {
        let name = file_name_of(path);
        if name.is_empty() {
            return Err(format!("name {path:?} is empty"));
        }
        if name == "." || name == ".." {
            return Err(format!("name {name:?} is a relative path component"));
        }
        if name.len() > MAX_NAME_LEN {
            return Err(format!(
                "name is {} bytes long (at most {MAX_NAME_LEN})",
                name.len()
            ));
        }
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return Err(format!(
                "name {name:?} contains the control character {:?}",
                c
            ));
        }
        if let Some(reason) = windows_unsafe(name) {
            return Err(format!("name {name:?} {reason}"));
        }
        Ok(Name(name))
    }

    /// The name as given (case kept).
    pub fn as_given(&self) -> &'a str {
        self.0
    }

    /// ASCII-lowercased, as SSQP clients request it.
    pub fn lower(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::Name;

    #[test]
    fn names_are_validated() {
        assert_eq!(Name::new("Foo.PDB").unwrap().as_given(), "Foo.PDB");
        assert_eq!(Name::new(r"C:\out\Foo.PDB").unwrap().as_given(), "Foo.PDB");
        assert_eq!(Name::new("Foo.PDB").unwrap().lower(), "foo.pdb");
        for bad in [
            "",
            "..",
            ".",
            "a/..",
            "a\\.",
            "bad\0name",
            "tab\tname",
            "del\u{7f}",
            "c1\u{85}x",
        ] {
            assert!(Name::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(Name::new(&"x".repeat(250)).is_ok());
        assert!(Name::new(&"x".repeat(251)).is_err());
        for unsafe_name in [
            "CON",
            "nul.pdb",
            "Com1.dll",
            "lpt9.sym",
            "LPT1 .txt",
            "aUx",
            "a:b.dll",
            "...",
            "trailing.",
            "space ",
            "evil\u{202E}lld.exe",
            "zero\u{200B}width.pdb",
            "lossy\u{FFFD}.so",
        ] {
            assert!(Name::new(unsafe_name).is_err(), "{unsafe_name:?} accepted");
        }
        for fine in [
            "console.dll",
            "com10.dll",
            "nullable.pdb",
            "con-1.pdb",
            "c\u{f3}m1.dll",
            "\u{e9}om1",
            // Four bytes with no character boundary after the third.
            "\u{e9}\u{e9}",
            "a\u{20ac}.dll",
            "a.b.c",
        ] {
            assert!(Name::new(fine).is_ok(), "{fine:?} refused");
        }
        assert!(Name::new("naïve.pdb").is_ok());
    }
}
