//! `gdb`: GDB build-id directories (symbolicator's "native" layout for ELF):
//! `<id[0..2]>/<id[2..]>` for binaries, `<id[0..2]>/<id[2..]>.debug` for debug files.

use super::is_debug_file;
use crate::formats::Format;
use crate::identity::Identity;

/// ELF, and WASM modules (symbolicator's native lookup of a WASM code file, under either id
/// form where they differ).
pub fn keys(id: &Identity) -> Vec<String> {
    // A source bundle of an ELF module: symbolicator's native lookup, `<gdb path>.src.zip`.
    if id.format == Format::SourceBundle {
        return id
            .code_id
            .as_ref()
            .map(|c| c.as_str().to_ascii_lowercase())
            .filter(|c| c.len() > 2)
            .map(|c| format!("{}/{}.src.zip", &c[..2], &c[2..]))
            .into_iter()
            .collect();
    }
    if !matches!(id.format, Format::Elf | Format::Wasm) {
        return Vec::new();
    }
    let mut keys = Vec::new();
    for bid in super::build_ids(id).into_iter().filter(|b| b.len() > 2) {
        let (head, rest) = bid.split_at(2);
        if id.kind.is_binary() {
            keys.push(format!("{head}/{rest}"));
        }
        if is_debug_file(id) {
            keys.push(format!("{head}/{rest}.debug"));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::super::tests::{elf, pdb, ID20};
    use super::keys;

    #[test]
    fn build_id_directories() {
        assert_eq!(
            keys(&elf(&ID20, false)),
            ["18/0a373d6afbabf0eb1f09be1bc45bd796a71085"]
        );
        assert_eq!(
            keys(&elf(&ID20, true)),
            [
                "18/0a373d6afbabf0eb1f09be1bc45bd796a71085",
                "18/0a373d6afbabf0eb1f09be1bc45bd796a71085.debug"
            ]
        );
        assert!(keys(&pdb(1)).is_empty());
    }
}
