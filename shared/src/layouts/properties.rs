//! Property tests: whatever the identity and however hostile the name, every key a layout
//! produces is inside its grammar, and bad names are rejected with a reason.

use debugid::{CodeId, DebugId};
use proptest::prelude::*;

use super::grammar::is_valid_key;
use super::{keys_for, lookup_keys_for, Layout};
use crate::formats::{hex, Format};
use crate::identity::{Identity, Kind, PdbReference, PerfmapInfo};

/// Names a CI might upload under, hostile ones first (the pipeline's hostile-input test
/// uploads under them too).
pub(crate) fn hostile_name() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("/".to_string()),
        Just("\\".to_string()),
        Just("\0".to_string()),
        Just("\u{1b}[31m".to_string()),
        Just("\n".to_string()),
        Just("\u{85}".to_string()),
        Just("é".to_string()),
        Just("日本".to_string()),
        Just("%2e%2e".to_string()),
        "[A-Za-z0-9_.-]{1,8}",
    ];
    prop_oneof![
        prop::collection::vec(piece, 0..10).prop_map(|v| v.concat()),
        "[A-Za-z]{250,300}",
        any::<String>(),
        "[A-Za-z0-9_-]{1,12}\\.(exe|dll|pdb|so|dylib|wasm|sym|cs)",
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Executable),
        Just(Kind::Library),
        Just(Kind::Debug),
        Just(Kind::Symbols)
    ]
}

fn identity() -> impl Strategy<Value = Identity> {
    (
        0usize..Format::ALL.len(),
        kind(),
        any::<[u8; 16]>(),
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..33),
        any::<bool>(),
        any::<[u8; 20]>(),
        hostile_name(),
    )
        .prop_map(
            |(format, kind, guid, a, b, build_id, debug_info, sha1, pdb_path)| {
                let format = Format::ALL[format];
                let mut id = Identity::new(format, kind);
                id.debug_id = DebugId::from_guid_age(&guid, a).unwrap();
                id.has_debug_info = debug_info;
                match format {
                    Format::Pe => {
                        id.pe_timestamp = Some(a);
                        id.pe_size_of_image = Some(b);
                        id.pdb_references.push(PdbReference {
                            path: pdb_path,
                            debug_id: id.debug_id,
                            age: a,
                            portable: b % 2 == 0,
                            timestamp: b,
                        });
                    }
                    Format::Elf | Format::Wasm if !build_id.is_empty() => {
                        id.build_id = Some(hex(&build_id));
                        id.code_id = Some(CodeId::new(hex(&build_id)));
                        if format == Format::Wasm && a % 2 == 0 {
                            let mut payload = vec![build_id.len() as u8];
                            payload.extend(&build_id);
                            id.build_id_payload = Some(hex(&payload));
                        }
                    }
                    Format::Macho => {
                        id.uuid = Some(hex(&guid));
                        id.code_id = Some(CodeId::new(hex(&guid)));
                    }
                    Format::Perfmap => {
                        id.perfmap = Some(PerfmapInfo {
                            signature: hex(&guid),
                            version: a,
                            path: None,
                        });
                    }
                    Format::Source => id.sha1 = Some(hex(&sha1)),
                    Format::Breakpad => {
                        id.os =
                            Some(["windows", "Linux", "mac", "ios", "x"][b as usize % 5].into());
                        if !build_id.is_empty() {
                            id.code_id = Some(CodeId::new(hex(&build_id)));
                            id.code_file = Some(pdb_path.clone());
                        }
                        id.debug_file = Some(pdb_path);
                    }
                    _ => {}
                }
                id
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_key_is_inside_its_layout_grammar(id in identity(), name in hostile_name()) {
        for set in [keys_for(&id, &name, &Layout::ALL), lookup_keys_for(&id, &name, &Layout::ALL)] {
            for reason in &set.rejected {
                // The only acceptable rejections are of names; a grammar rejection means a
                // layout built a bad key.
                prop_assert!(!reason.contains("grammar"), "{reason}");
            }
            for (layout, keys) in &set.keys {
                for key in keys {
                    prop_assert!(is_valid_key(*layout, key), "{layout}: {key:?}");
                    prop_assert!(!key.starts_with('/'));
                    prop_assert!(!key.split('/').any(|c| c == ".." || c == "." || c.is_empty()), "{key:?}");
                    prop_assert!(!key.contains('\\') && !key.chars().any(char::is_control), "{key:?}");
                }
            }
            for car in &set.sidecars {
                prop_assert!(is_valid_key(Layout::Unified, &car.key));
            }
        }
    }

    #[test]
    fn a_bad_name_is_rejected_with_a_reason_never_silently(id in identity(), name in hostile_name()) {
        let set = keys_for(&id, &name, &Layout::ALL);
        let effective = match (id.format, id.debug_file.as_deref()) {
            (Format::Breakpad, Some(module)) => module.to_string(),
            (Format::SourceBundle, Some(debug_file)) => {
                crate::identity::file_name_of(debug_file).to_string()
            }
            _ => name.clone(),
        };
        if super::Name::new(&effective).is_err() {
            prop_assert!(!set.rejected.is_empty());
        }
    }
}
