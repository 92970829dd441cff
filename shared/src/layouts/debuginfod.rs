//! `debuginfod`: `buildid/<build id>/debuginfo` and `buildid/<build id>/executable`, what
//! debuginfod clients (gdb, lldb, debuginfod-find) request. ELF, and WASM with a build id.

use super::is_debug_file;
use crate::formats::Format;
use crate::identity::{Identity, Kind};

pub fn keys(id: &Identity) -> Vec<String> {
    if !matches!(id.format, Format::Elf | Format::Wasm) {
        return Vec::new();
    }
    let mut keys = Vec::new();
    for bid in super::build_ids(id) {
        if is_debug_file(id) && !leaves_debuginfo_to_package(id) {
            keys.push(format!("buildid/{bid}/debuginfo"));
        }
        if id.kind.is_binary() {
            keys.push(format!("buildid/{bid}/executable"));
        }
    }
    // The sections debuginfod serves by name, under the build id (not WASM's payload form).
    if let Some(bid) = id.build_id.as_deref() {
        for section in &id.sections {
            keys.push(section_key(bid, &section.name));
        }
    }
    keys
}

/// A binary whose skeleton units are in it (split DWARF, built with `-gsplit-dwarf`):
/// LLDB, holding the binary, asks `debuginfo` for its DWARF package (`.dwp`), which is
/// published there once it pairs with the binary (`pipeline/packages.rs`); the binary's own
/// skeletons would only be in the way. A separate debug file keeps the key.
pub fn leaves_debuginfo_to_package(id: &Identity) -> bool {
    id.kind != Kind::Debug
        && id
            .split_dwarf
            .as_ref()
            .is_some_and(|s| !s.dwo_ids.is_empty())
}

/// `buildid/<id>/section/<name>`: one section of the debug file, what gdb asks for first.
pub fn section_key(build_id: &str, name: &str) -> String {
    format!("buildid/{build_id}/section/{name}")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{elf, pdb, ID20};
    use super::keys;
    use crate::identity::Kind;

    #[test]
    fn binaries_debug_files_and_unstripped_binaries() {
        let bid = "180a373d6afbabf0eb1f09be1bc45bd796a71085";
        assert_eq!(
            keys(&elf(&ID20, false)),
            [format!("buildid/{bid}/executable")]
        );
        let mut debug = elf(&ID20, true);
        debug.kind = Kind::Debug;
        assert_eq!(keys(&debug), [format!("buildid/{bid}/debuginfo")]);
        assert_eq!(
            keys(&elf(&ID20, true)),
            [
                format!("buildid/{bid}/debuginfo"),
                format!("buildid/{bid}/executable")
            ]
        );
        assert!(keys(&pdb(1)).is_empty());
        let mut no_id = elf(&ID20, false);
        no_id.build_id = None;
        assert!(keys(&no_id).is_empty());
    }
}
