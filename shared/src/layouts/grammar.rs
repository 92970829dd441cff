//! The grammar of each layout's keys, checked on every key before it leaves [`super::keys_for`]:
//! whatever an artifact claims, no key outside its layout's grammar is ever written.
//!
//! Hand-written rather than regular expressions: the SSQP/SymStore shape `<name>/<id>/<name>`
//! needs its two names to be equal, which regular expressions cannot say without
//! back-references.

use super::breakpad::{bundle_name, code_sym_name, sym_name};
use super::{Layout, Name};

fn is_hex(s: &str, upper: bool) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_digit()
                || if upper {
                    (b'A'..=b'F').contains(&b)
                } else {
                    (b'a'..=b'f').contains(&b)
                }
        })
}

fn lower_hex(s: &str) -> bool {
    is_hex(s, false)
}

fn upper_hex(s: &str) -> bool {
    is_hex(s, true)
}

fn lower_hex_len(s: &str, len: usize) -> bool {
    s.len() == len && lower_hex(s)
}

/// A valid name that is exactly what `Name::new` would accept as a single component.
fn valid_name(s: &str) -> bool {
    !s.contains(['/', '\\']) && Name::new(s).is_ok()
}

/// `<name>/<id>/<name>` with the same valid name twice.
fn triple(key: &str) -> Option<(&str, &str)> {
    let mut parts = key.split('/');
    let (a, id, b) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && a == b && valid_name(a)).then_some((a, id))
}

fn sym_key(key: &str, any_length: bool) -> bool {
    let check = |id: &str, len: usize| {
        if any_length {
            lower_hex(id) && id.len().is_multiple_of(2)
        } else {
            lower_hex_len(id, len)
        }
    };
    if let Some(id) = key
        .strip_prefix("_.debug/elf-buildid-sym-")
        .and_then(|r| r.strip_suffix("/_.debug"))
    {
        return check(id, 40);
    }
    if let Some(id) = key
        .strip_prefix("_.dwarf/mach-uuid-sym-")
        .and_then(|r| r.strip_suffix("/_.dwarf"))
    {
        return lower_hex_len(id, 32);
    }
    false
}

/// PE ids: `%08X` timestamp then `%x` size (SymSrv), or all lowercase (symbolicator).
fn pe_id(id: &str, allow_lower_stamp: bool) -> bool {
    id.len() > 8
        && id.len() <= 16
        && id.is_char_boundary(8)
        && (upper_hex(&id[..8]) || (allow_lower_stamp && lower_hex(&id[..8])))
        && lower_hex(&id[8..])
}

fn ssqp_id(id: &str) -> bool {
    let (head, tail) = if id.len() > 32 && id.is_char_boundary(32) {
        id.split_at(32)
    } else {
        (id, "")
    };
    pe_id(id, false)
        || (lower_hex_len(head, 32) && (tail == "FFFFFFFF" || (lower_hex(tail) && tail.len() <= 8)))
        || id
            .strip_prefix("elf-buildid-")
            .is_some_and(|b| lower_hex_len(b, 40))
        || id
            .strip_prefix("mach-uuid-")
            .is_some_and(|u| lower_hex_len(u, 32))
        || id
            .strip_prefix("sha1-")
            .is_some_and(|h| lower_hex_len(h, 40))
        || id
            .strip_prefix("r2rmap-v")
            .and_then(|r| r.split_once('-'))
            .is_some_and(|(v, sig)| {
                !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && lower_hex_len(sig, 32)
            })
        || (lower_hex(id) && id.len().is_multiple_of(2)) // WASM build id
}

fn symstore_id(id: &str) -> bool {
    let (head, tail) = if id.len() > 32 && id.is_char_boundary(32) {
        id.split_at(32)
    } else {
        (id, "")
    };
    pe_id(id, true)
        || (head.len() == 32
            && ((upper_hex(head) && (tail == "ffffffff" || (lower_hex(tail) && tail.len() <= 8)))
                || (lower_hex(head)
                    && (tail == "FFFFFFFF" || (upper_hex(tail) && tail.len() <= 8)))))
        || id
            .strip_prefix("elf-buildid-")
            .is_some_and(|b| lower_hex(b) && b.len() % 2 == 0)
        || id
            .strip_prefix("mach-uuid-")
            .is_some_and(|u| lower_hex_len(u, 32))
}

/// `<debug file>/<PDB id>/<stem>.src.zip`: a PE module's source bundle.
fn bundle_key(key: &str) -> bool {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(id), Some(file), None) => {
            valid_name(name)
                && file == super::src_zip_name(name)
                && id.len() > 32
                && symstore_id(id)
        }
        _ => false,
    }
}

fn symstore_key(key: &str) -> bool {
    sym_key(key, true) || triple(key).is_some_and(|(_, id)| symstore_id(id)) || bundle_key(key)
}

/// `<name>/<guid 32 lowercase hex><age hex>/msfz0/<name>`: a PDB in an MSFZ container.
fn msfz_key(key: &str) -> bool {
    let mut parts = key.split('/');
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some(a), Some(id), Some("msfz0"), Some(b), None) => {
            a == b && valid_name(a) && a == a.to_ascii_lowercase() && id.len() > 32 && lower_hex(id)
        }
        _ => false,
    }
}

// The limits are the layouts' shared vocabulary (layouts/mod.rs); the validator sits on top.
pub use super::{MAX_COMPONENT_LEN, MAX_KEY_LEN};

/// True when `key` is a well-formed key of a build's sources served for Source Link and
/// srcsrv: `src/<product>/<build>/<path>` (sourcelink.rs), four components at least (so no
/// `<name>/<id>/<name>` key of a file named `src` has its shape), each a valid name.
pub fn is_valid_source_link_key(key: &str) -> bool {
    if too_long(key) {
        return false;
    }
    key.strip_prefix("src/")
        .is_some_and(|rest| rest.split('/').count() >= 3 && rest.split('/').all(valid_name))
}

/// Longer than a key may be, or holding a component longer than a file name may be.
fn too_long(key: &str) -> bool {
    // A key no longer than a component has no component too long: most keys, spared a pass.
    key.len() > MAX_KEY_LEN
        || (key.len() > MAX_COMPONENT_LEN && key.split('/').any(|c| c.len() > MAX_COMPONENT_LEN))
}

/// True when `key` is a well-formed key of `layout`.
pub fn is_valid_key(layout: Layout, key: &str) -> bool {
    if too_long(key) {
        return false;
    }
    match layout {
        Layout::Ssqp => {
            sym_key(key, false)
                || triple(key)
                    .is_some_and(|(name, id)| name == name.to_ascii_lowercase() && ssqp_id(id))
                || msfz_key(key)
        }
        Layout::Symstore => symstore_key(key),
        Layout::SymstoreIndex2 => key.split_once('/').is_some_and(|(dir, rest)| {
            super::symstore_index2::two_tier(rest) == key && symstore_key(rest) && dir != "."
        }),
        Layout::Breakpad => {
            let mut parts = key.split('/');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(name), Some(id), Some(sym), None) => {
                    let by_debug_id = sym == sym_name(name)
                        && id.len() > 32
                        && id.is_char_boundary(32)
                        && upper_hex(&id[..32])
                        && lower_hex(&id[32..]);
                    // By code file: `<code_file>/<CODE_ID uppercase>/<stem>.sym`.
                    let by_code_id =
                        sym == code_sym_name(name) && (8..=80).contains(&id.len()) && upper_hex(id);
                    let bundle = sym == bundle_name(name)
                        && id.len() > 32
                        && id.is_char_boundary(32)
                        && upper_hex(&id[..32])
                        && lower_hex(&id[32..]);
                    valid_name(name) && (by_debug_id || by_code_id || bundle)
                }
                _ => false,
            }
        }
        Layout::Debuginfod => key
            .strip_prefix("buildid/")
            .and_then(|r| r.split_once('/'))
            .is_some_and(|(id, what)| {
                let section = what.strip_prefix("section/").is_some_and(|name| {
                    name.len() <= 64
                        && name.starts_with('.')
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
                });
                // `source/<absolute path>`: every component a valid name (sourcemap.rs).
                let source = what.strip_prefix("source/").is_some_and(|path| {
                    path.len() <= crate::formats::dwarf::MAX_PATH_LEN
                        && path.split('/').all(valid_name)
                });
                lower_hex(id) && (matches!(what, "debuginfo" | "executable") || section || source)
            }),
        Layout::Unified => {
            let key = key.strip_suffix(".meta").unwrap_or(key);
            let mut parts = key.split('/');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(head), Some(rest), Some(what), None) => {
                    lower_hex_len(head, 2)
                        && lower_hex(rest)
                        && matches!(
                            what,
                            "executable" | "debuginfo" | "breakpad" | "sourcebundle"
                        )
                }
                _ => false,
            }
        }
        Layout::Gdb => {
            let key = key
                .strip_suffix(".debug")
                .or_else(|| key.strip_suffix(".src.zip"))
                .unwrap_or(key);
            key.split_once('/')
                .is_some_and(|(head, rest)| lower_hex_len(head, 2) && lower_hex(rest))
        }
        Layout::Lldb => {
            let key = key
                .strip_suffix(".app")
                .or_else(|| key.strip_suffix(".src.zip"))
                .unwrap_or(key);
            let parts: Vec<&str> = key.split('/').collect();
            parts.len() == 6
                && parts[..5].iter().all(|p| p.len() == 4 && upper_hex(p))
                && parts[5].len() == 12
                && upper_hex(parts[5])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid_key;
    use crate::Layout;

    #[test]
    fn accepts_the_examples() {
        for (layout, key) in [
            (Layout::Ssqp, "foo.exe/542D574Ec2000/foo.exe"),
            (Layout::Ssqp, "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1/foo.pdb"),
            (Layout::Ssqp, "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4bFFFFFFFF/foo.pdb"),
            (Layout::Ssqp, "foo.so/elf-buildid-180a373d6afbabf0eb1f09be1bc45bd796a71085/foo.so"),
            (Layout::Ssqp, "_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd700000000/_.debug"),
            (Layout::Ssqp, "system.private.corelib.ni.r2rmap/r2rmap-v1-f5fddf60efb0bee79ef02a19c3decba9/system.private.corelib.ni.r2rmap"),
            (Layout::Symstore, "Foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1b/Foo.pdb"),
            (Layout::Symstore, "foo.exe/542d574ec2000/foo.exe"),
            (Layout::SymstoreIndex2, "fo/foo.exe/542D574Ec2000/foo.exe"),
            (Layout::Breakpad, "crash.pdb/3249D99D0C4049318610F4E4FB0B69361/crash.sym"),
            (Layout::Debuginfod, "buildid/180a373d/debuginfo"),
            (Layout::Debuginfod, "buildid/180a373d/source/home/ci/src/a b+c.c"),
            (Layout::Unified, "32/49d99d0c4049318610f4e4fb0b69361/breakpad"),
            (Layout::Unified, "32/49d99d0c4049318610f4e4fb0b69361/breakpad.meta"),
            (Layout::Gdb, "18/0a373d.debug"),
            (Layout::Lldb, "497B/72F6/390A/44FC/878E/5A2D63B6CC4B.app"),
        ] {
            assert!(is_valid_key(layout, key), "{layout}: {key}");
        }
    }

    #[test]
    fn rejects_keys_outside_the_grammar() {
        for (layout, key) in [
            (Layout::Ssqp, "Foo.exe/542D574Ec2000/Foo.exe"), // ssqp names are lowercase
            (Layout::Ssqp, "a.pdb/zz/b.pdb"),
            (Layout::Ssqp, "../542D574Ec2000/.."),
            (Layout::Symstore, "a/b/c/d"),
            (Layout::Symstore, "x\u{1}/542D574Ec2000/x\u{1}"),
            (Layout::SymstoreIndex2, "zz/foo.exe/542D574Ec2000/foo.exe"),
            (
                Layout::Breakpad,
                "crash.pdb/3249d99d0c4049318610f4e4fb0b69361/crash.sym",
            ),
            (Layout::Debuginfod, "buildid/../debuginfo"),
            (
                Layout::Debuginfod,
                "buildid/180a373d/source/home/../etc/passwd",
            ),
            (Layout::Debuginfod, "buildid/180a373d/source//home/a.c"),
            (Layout::Debuginfod, "buildid/180a373d/source/home/a\u{1}.c"),
            (Layout::Unified, "3/249/executable"),
            (Layout::Gdb, "18/../x"),
            (Layout::Lldb, "497b/72F6/390A/44FC/878E/5A2D63B6CC4B"),
        ] {
            assert!(!is_valid_key(layout, key), "{layout}: {key}");
        }
    }

    #[test]
    fn source_link_keys_are_four_valid_components_at_least() {
        for key in ["src/app/1.2/main.cpp", "src/app/b7/sub dir/x.h"] {
            assert!(super::is_valid_source_link_key(key), "{key}");
        }
        for key in [
            "src/app/1.2",
            "src/app/1.2/../x.c",
            "src/app/1.2//x.c",
            "src/app/./x.c",
            "sources/app/1/x.c",
            "src/app/1/a\\b.c",
            "src/app/1/a\nb.c",
        ] {
            assert!(!super::is_valid_source_link_key(key), "{key}");
        }
    }
}
