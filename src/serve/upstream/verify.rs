//! Whether what an upstream answered is what the key names: the file is identified with the
//! indexer's own parsers, and the key must be one of the keys symdex would publish that file
//! under — its own keys, never a companion's (a DLL names its PDB, but is not it). A key names
//! what it must be (`buildid/<id>/debuginfo` an ELF debug file with that build id,
//! `symbols/foo.pdb/<GUID+age>/foo.pdb` that PDB); a debugger handed another file fails, or
//! worse, shows wrong symbols.
//!
//! Everything is judged on the path the upstream was asked for (the key with its `PREFIX=`
//! replaced), never on the full key: behind `teamb/=URL` the key `teamb/buildid/<id>/debuginfo`
//! names the debug file `buildid/<id>/debuginfo` all the same.

use symdex_shared::formats::{identify_described, Detail};
use symdex_shared::pipeline::default_prefixes;
use symdex_shared::{keys_for, IdentifyOptions, Layout, RangeReader};

/// Whether `rest` names a file in a format symdex does not read, whose bytes therefore pass
/// unidentified: SymSrv's cabinet-compressed files (`foo.pd_`, `foo.dl_`), its `file.ptr`
/// redirections, and debuginfod's sources and sections (`buildid/<id>/source/...`,
/// `buildid/<id>/section/<name>`: raw text and raw section bytes). Every other name is one
/// of a format symdex identifies, and unknown bytes there are refused.
pub fn opaque(rest: &str) -> bool {
    let parts: Vec<&str> = rest.split('/').collect();
    let name = parts.last().copied().unwrap_or_default();
    let compressed = name
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && ext.len() == 3 && ext.ends_with('_'));
    let debuginfod_raw = matches!(
        parts.as_slice(),
        ["buildid", _, "source", _, ..] | ["buildid", _, "section", _]
    );
    compressed || name.eq_ignore_ascii_case("file.ptr") || debuginfod_raw
}

/// `Ok` when the bytes `reader` holds may be served as `rest` (the path the upstream was asked
/// for): one of the keys symdex would publish them under, bare or behind its layout's default
/// prefix (an upstream that is itself a store serves `symbols/foo.pdb/...`; msdl, asked
/// through `symbols/=`, serves `foo.pdb/...`); else why not.
pub fn fits(rest: &str, reader: &dyn RangeReader) -> Result<(), String> {
    if opaque(rest) {
        return Ok(());
    }
    let name = rest.rsplit('/').next().unwrap_or(rest);
    // SSQP names a source by its SHA-1 (`foo.c/sha1-<hex>/foo.c`): bytes of no binary format
    // are identified as a source there, and must hash to it.
    let options = IdentifyOptions {
        as_source: rest.split('/').any(|part| part.starts_with("sha1-")),
    };
    // With what the keys depend on (split DWARF units, which compressed sections decompress):
    // the keys symdex would publish these bytes under, no more.
    let ids = identify_described(reader, &options, Detail::Keys)
        .map_err(|e| format!("not a file {rest} names: {e}"))?;
    let prefixes = default_prefixes();
    let matches = ids.iter().any(|id| {
        let own = keys_for(id, name, &Layout::ALL);
        own.keys.iter().any(|(layout, keys)| {
            let prefix = prefixes.get(layout).map_or("", String::as_str);
            keys.iter().any(|k| {
                rest.eq_ignore_ascii_case(k)
                    || rest
                        .get(..prefix.len())
                        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
                        && rest
                            .get(prefix.len()..)
                            .is_some_and(|unprefixed| unprefixed.eq_ignore_ascii_case(k))
            })
        })
    });
    match matches {
        true => Ok(()),
        false => Err(format!(
            "its identity is not {rest}'s (it is {})",
            ids.iter()
                .map(|id| format!("{} {}", id.format.as_str(), id.debug_id))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{fits, opaque};
    use symdex_shared::MemReader;

    #[test]
    fn only_formats_symdex_does_not_read_pass_unidentified() {
        for name in [
            "ntdll.pd_/0123456789ABCDEF0123456789ABCDEF1/ntdll.pd_",
            "symbols/kernel32.dl_/5A1B2C3D9e000/kernel32.dl_",
            "ntdll.pdb/0123456789ABCDEF0123456789ABCDEF1/file.ptr",
            "buildid/ab12/source/usr/src/a.c",
            "buildid/ab12/section/.gdb_index",
        ] {
            assert!(opaque(name), "{name}");
            assert!(fits(name, &MemReader(b"random")).is_ok(), "{name}");
        }
        for name in [
            "ntdll.pdb/0123456789ABCDEF0123456789ABCDEF1/ntdll.pdb",
            "kernel32.dll/5A1B2C3D9e000/kernel32.dll",
            "buildid/ab12/debuginfo",
            "buildid/ab12/executable",
            "buildid/ab12/source",
            "notes.txt/sha1-0000000000000000000000000000000000000000/notes.txt",
            "a.pdb_/0123/a.pdb_",
            "notes.txt/0123ABCD/notes.txt",
        ] {
            assert!(!opaque(name), "{name}");
            assert!(fits(name, &MemReader(b"random bytes")).is_err(), "{name}");
        }
    }

    #[test]
    fn a_source_under_ssqp_must_hash_to_its_key() {
        let text = b"int main(void) { return 0; }\n";
        let sha1 = symdex_shared::digest::sha1_hex(text);
        let key = format!("main.c/sha1-{sha1}/main.c");
        assert_eq!(fits(&key, &MemReader(text)), Ok(()));
        assert_eq!(fits(&format!("symbols/{key}"), &MemReader(text)), Ok(()));
        assert!(fits(&key, &MemReader(b"int main(void) { return 1; }\n")).is_err());
    }

    /// A binary built with split DWARF leaves `debuginfo` to its package (`.dwp`): symdex
    /// would not publish it there, so an upstream's answer of it there is not served.
    #[test]
    fn a_split_dwarf_binary_is_no_answer_for_debuginfo() {
        use symdex_shared::testing::builders::{build_split_binary, Unit};
        let binary = build_split_binary(&[Unit::Skeleton5(7)]);
        let bid = "3c".repeat(20);
        let reader = MemReader(&binary[..]);
        assert_eq!(fits(&format!("buildid/{bid}/executable"), &reader), Ok(()));
        assert!(fits(&format!("buildid/{bid}/debuginfo"), &reader).is_err());
    }
}
