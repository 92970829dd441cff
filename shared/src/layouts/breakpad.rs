//! `breakpad`: Breakpad symbol repositories, `<debug file>/<BREAKPAD ID>/<sym name>`.

use super::{triple, Name};
use crate::formats::Format;
use crate::identity::Identity;

/// The debug file name with a trailing `.pdb` replaced by `.sym`, otherwise `.sym` appended.
pub fn sym_name(debug_file: &str) -> String {
    let len = debug_file.len();
    if len >= 4
        && debug_file.is_char_boundary(len - 4)
        && debug_file[len - 4..].eq_ignore_ascii_case(".pdb")
    {
        format!("{}.sym", &debug_file[..len - 4])
    } else {
        format!("{debug_file}.sym")
    }
}

/// The `.sym` name of a code file: its stem (without the last extension) and `.sym`, so
/// `crash.exe` gives `crash.sym` (what Tecken serves by code file and code id).
pub fn code_sym_name(code_file: &str) -> String {
    let stem = match code_file.rfind('.') {
        Some(dot) if dot > 0 => &code_file[..dot],
        _ => code_file,
    };
    format!("{stem}.sym")
}

/// A source bundle's name in symbolicator's Breakpad-derived native lookup: the debug file
/// without a trailing `.pdb` (only that suffix, case-sensitive, as symbolicator strips it),
/// then `.src.zip` (`app.debug` → `app.debug.src.zip`).
pub fn bundle_name(debug_file: &str) -> String {
    let stem = debug_file.strip_suffix(".pdb").unwrap_or(debug_file);
    format!("{stem}.src.zip")
}

pub fn keys(id: &Identity, name: Option<&Name<'_>>) -> Vec<String> {
    if id.format == Format::SourceBundle {
        let fits = |n: &Name<'_>| bundle_name(n.as_given()).len() <= super::MAX_COMPONENT_LEN;
        return match name {
            Some(name) if !id.debug_id.is_nil() && fits(name) => vec![triple(
                name.as_given(),
                &id.debug_id.breakpad().to_string(),
                &bundle_name(name.as_given()),
            )],
            _ => Vec::new(),
        };
    }
    if id.format != Format::Breakpad {
        return Vec::new();
    }
    let mut keys = Vec::new();
    if let Some(name) = name {
        let breakpad_id = id.debug_id.breakpad().to_string();
        keys.push(triple(
            name.as_given(),
            &breakpad_id,
            &sym_name(name.as_given()),
        ));
    }
    // By code file and code id (`INFO CODE_ID <id> <code_file>`), when the code file is a
    // valid name: `crash.exe/5AB380779000/crash.sym`.
    let code_file = id.code_file.as_deref().map(crate::identity::file_name_of);
    // A PE code id is at least 9 hex digits, a GNU build id at least 8 (4 bytes).
    let code_id = id
        .code_id
        .as_ref()
        .filter(|c| (8..=80).contains(&c.as_str().len()));
    if let (Some(code_id), Some(Ok(code_file))) = (code_id, code_file.map(Name::new)) {
        keys.push(triple(
            code_file.as_given(),
            &code_id.as_str().to_ascii_uppercase(),
            &code_sym_name(code_file.as_given()),
        ));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::super::tests::{breakpad_sym, pdb};
    use super::keys;
    use crate::layouts::Name;

    #[test]
    fn sym_file_keys() {
        let id = breakpad_sym("3249d99d-0c40-4931-8610-f4e4fb0b6936-1");
        assert_eq!(
            keys(&id, Some(&Name::new("crash.pdb").unwrap())),
            ["crash.pdb/3249D99D0C4049318610F4E4FB0B69361/crash.sym"]
        );
        let id = breakpad_sym("20ad60b0-b4c6-8177-5527-08aa192e7739");
        assert_eq!(
            keys(&id, Some(&Name::new("libFoo.so").unwrap())),
            ["libFoo.so/20AD60B0B4C68177552708AA192E77390/libFoo.so.sym"]
        );
        let id = breakpad_sym("3249d99d-0c40-4931-8610-f4e4fb0b6936-1b");
        assert_eq!(
            keys(&id, Some(&Name::new("Crash.PDB").unwrap())),
            ["Crash.PDB/3249D99D0C4049318610F4E4FB0B69361b/Crash.sym"]
        );
    }

    #[test]
    fn only_breakpad_files() {
        assert!(keys(&pdb(1), Some(&Name::new("a.pdb").unwrap())).is_empty());
    }
}
