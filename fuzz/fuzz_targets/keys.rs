//! Key building from hostile names and identities: every key a layout returns is inside its
//! grammar.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symdex_shared::identity::{Identity, Kind};
use symdex_shared::layouts::grammar::is_valid_key;
use symdex_shared::{keys_for, Format, Layout};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let split = rest.len().min(usize::from(selector) % 64);
    let (id_bytes, name) = rest.split_at(split);
    let name = String::from_utf8_lossy(name);
    let hex: String = id_bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut id = Identity::new(
        Format::ALL[usize::from(selector) % Format::ALL.len()],
        Kind::Library,
    );
    id.has_debug_info = selector & 0x80 != 0;
    if !hex.is_empty() {
        id.build_id = Some(hex.clone());
        id.uuid = Some(hex.clone());
        id.code_id = Some(symdex_shared::identity::CodeId::new(hex.clone()));
        id.debug_file = Some(name.to_string());
        id.code_file = Some(name.to_string());
        id.os = Some(["windows", "Linux", "mac"][usize::from(selector) % 3].to_string());
    }
    let set = keys_for(&id, &name, &Layout::ALL);
    for (layout, keys) in &set.keys {
        for key in keys {
            assert!(is_valid_key(*layout, key), "{layout}: {key:?}");
        }
    }
});
