//! `symstore`: what SymSrv (WinDbg, Visual Studio, symchk) requests, with the file name as
//! given, plus the lowercase-name variants and the forms symbolicator sends (KEYS.md §4).

use super::ssqp::{dwarf_sym_key, elf_sym_key};
use super::{guid_hex, is_debug_file, src_zip_name, triple, Name};
use crate::formats::Format;
use crate::identity::{Identity, Kind};

pub fn keys(id: &Identity, name: Option<&Name<'_>>) -> Vec<String> {
    let mut keys = Vec::new();
    // `<name>/<id>/<name>` with the name as given and, where different, lowercased.
    let both_cases = |keys: &mut Vec<String>, key_id: &str| {
        if let Some(name) = name {
            keys.push(triple(name.as_given(), key_id, name.as_given()));
            let lower = name.lower();
            keys.push(triple(&lower, key_id, &lower));
        }
    };
    let lower = name.map(Name::lower);
    match id.format {
        Format::Pe => {
            if let (Some(stamp), Some(size)) = (id.pe_timestamp, id.pe_size_of_image) {
                both_cases(&mut keys, &format!("{stamp:08X}{size:x}"));
                // symbolicator's ssqp lookup lowercases the whole PE id.
                if let Some(lower) = &lower {
                    keys.push(triple(lower, &format!("{stamp:08x}{size:x}"), lower));
                }
            }
        }
        Format::Pdb => {
            let guid = guid_hex(&id.debug_id);
            let age = id.debug_id.appendix();
            both_cases(&mut keys, &format!("{}{age:x}", guid.to_ascii_uppercase()));
            // symbolicator's ssqp lookup: lowercase GUID, UPPERCASE age.
            if let Some(lower) = &lower {
                keys.push(triple(lower, &format!("{guid}{age:X}"), lower));
            }
        }
        Format::PortablePdb => {
            let guid = guid_hex(&id.debug_id);
            both_cases(&mut keys, &format!("{}ffffffff", guid.to_ascii_uppercase()));
            // What Visual Studio sends for portable PDBs.
            if let Some(lower) = &lower {
                keys.push(triple(lower, &format!("{guid}FFFFFFFF"), lower));
            }
        }
        Format::Elf => {
            // Unpadded build id, any length: what symbolicator requests.
            if let Some(bid) = id.build_id.as_deref() {
                if is_debug_file(id) {
                    keys.push(elf_sym_key(bid));
                } else {
                    both_cases(&mut keys, &format!("elf-buildid-{bid}"));
                }
            }
        }
        Format::Macho => {
            if let Some(uuid) = id.uuid.as_deref() {
                if id.kind == Kind::Debug {
                    keys.push(dwarf_sym_key(uuid));
                } else {
                    both_cases(&mut keys, &format!("mach-uuid-{uuid}"));
                }
            }
        }
        // The source bundle of a PE module, beside its PDB: `foo.pdb/<GUID><age>/foo.src.zip`
        // (and symbolicator's lowercase ssqp form).
        Format::SourceBundle => {
            // A PDB's bundle, when `<stem>.src.zip` fits a key component.
            let is_pdb = name.is_some_and(|n| {
                n.lower().ends_with(".pdb")
                    && src_zip_name(n.as_given()).len() <= super::MAX_COMPONENT_LEN
            });
            if let (Some(name), true, false) = (name, is_pdb, id.debug_id.is_nil()) {
                let guid = guid_hex(&id.debug_id);
                let age = id.debug_id.appendix();
                let given = name.as_given();
                keys.push(format!(
                    "{given}/{}{age:x}/{}",
                    guid.to_ascii_uppercase(),
                    src_zip_name(given)
                ));
                let lower = name.lower();
                keys.push(format!("{lower}/{guid}{age:X}/{}", src_zip_name(&lower)));
            }
        }
        // SymSrv requests no PDZ: only Microsoft.SymbolStore knows the container (ssqp). A
        // DWARF package has no id of its own: it is served only with its binary.
        Format::Pdz
        | Format::Wasm
        | Format::Breakpad
        | Format::Perfmap
        | Format::Source
        | Format::Dwp => {}
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::super::tests::{elf, macho, pdb, pe, portable_pdb, ID20};
    use super::keys;
    use crate::layouts::Name;
    use crate::{Identity, Kind};

    fn symstore(id: &Identity, name: &str) -> Vec<String> {
        let mut k = keys(id, Some(&Name::new(name).unwrap()));
        k.sort();
        k.dedup();
        k
    }

    #[test]
    fn pe_keeps_the_name_as_given_and_adds_variants() {
        assert_eq!(
            symstore(&pe(0x542d_574e, 0xc2000), "Foo.exe"),
            [
                "Foo.exe/542D574Ec2000/Foo.exe",
                "foo.exe/542D574Ec2000/foo.exe",
                "foo.exe/542d574ec2000/foo.exe"
            ]
        );
    }

    #[test]
    fn pdb_guid_uppercase_age_lowercase_and_symbolicator_variant() {
        assert_eq!(
            symstore(&pdb(0x1b), "Foo.pdb"),
            [
                "Foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1b/Foo.pdb",
                "foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1b/foo.pdb",
                "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1B/foo.pdb",
            ]
        );
        // Age below 10: the symbolicator form equals the SSQP key (deduplicated in the union).
        assert!(symstore(&pdb(1), "foo.pdb")
            .contains(&"foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1/foo.pdb".to_string()));
    }

    #[test]
    fn portable_pdb_both_forms() {
        assert_eq!(
            symstore(&portable_pdb(0x1234), "Foo.pdb"),
            [
                "Foo.pdb/497B72F6390A44FC878E5A2D63B6CC4Bffffffff/Foo.pdb",
                "foo.pdb/497B72F6390A44FC878E5A2D63B6CC4Bffffffff/foo.pdb",
                "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4bFFFFFFFF/foo.pdb",
            ]
        );
    }

    #[test]
    fn elf_ids_are_unpadded_and_any_length() {
        assert_eq!(
            symstore(&elf(&ID20[..16], false), "libFoo.so"),
            [
                "libFoo.so/elf-buildid-180a373d6afbabf0eb1f09be1bc45bd7/libFoo.so",
                "libfoo.so/elf-buildid-180a373d6afbabf0eb1f09be1bc45bd7/libfoo.so",
            ]
        );
        assert_eq!(
            symstore(&elf(&[0xcd; 24], true), "x.debug"),
            [format!(
                "_.debug/elf-buildid-sym-{}/_.debug",
                "cd".repeat(24)
            )]
        );
    }

    #[test]
    fn mach_o_with_the_name_as_given() {
        assert_eq!(
            symstore(&macho(Kind::Library), "Foo.dylib")[0],
            "Foo.dylib/mach-uuid-497b72f6390a44fc878e5a2d63b6cc4b/Foo.dylib"
        );
    }
}
