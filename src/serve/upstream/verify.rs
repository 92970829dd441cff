//! Whether what an upstream answered is what the key names: the file is identified with the
//! indexer's own parsers, and the key must be one of the keys symdex would publish it under.
//! A key names what it must be (`buildid/<id>/debuginfo` an ELF debug file with that build id,
//! `symbols/foo.pdb/<GUID+age>/foo.pdb` that PDB); a debugger handed another file fails, or
//! worse, shows wrong symbols.

use std::path::Path;

use symdex_shared::pipeline::default_prefixes;
use symdex_shared::{
    identify, keys_for, lookup_keys_for, FileReader, FormatError, IdentifyOptions, Layout,
};

/// `Ok` when the file at `path` may be served as `key` (`rest` is the key as the upstream was
/// asked for it, its prefix replaced): a key symdex publishes it under, with the default
/// layout prefixes for `key` or none for `rest`; else why not. Files in no format
/// symdex reads (a source, a compressed `.pd_`, a `.ptr`) pass unless the key is one only a
/// binary can answer (debuginfod's `debuginfo` and `executable`).
pub fn fits(key: &str, rest: &str, path: &Path) -> Result<(), String> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let reader = FileReader::open(path).map_err(|e| format!("cannot read what arrived: {e}"))?;
    let ids = match identify(&reader, &IdentifyOptions::default()) {
        Ok(ids) => ids,
        Err(FormatError::Unrecognized(_)) if !needs_binary(key) => return Ok(()),
        Err(e) => return Err(format!("not a file {key} can name: {e}")),
    };
    let prefixes = default_prefixes();
    let matches = ids.iter().any(|id| {
        let published = keys_for(id, name, &Layout::ALL);
        let looked_up = lookup_keys_for(id, name, &Layout::ALL);
        let layout_keys = published.keys.iter().chain(looked_up.keys.iter());
        layout_keys.into_iter().any(|(layout, keys)| {
            let prefix = prefixes.get(layout).map_or("", String::as_str);
            keys.iter().any(|k| {
                k.eq_ignore_ascii_case(rest)
                    || key
                        .strip_prefix(prefix)
                        .is_some_and(|unprefixed| k.eq_ignore_ascii_case(unprefixed))
            })
        })
    });
    match matches {
        true => Ok(()),
        false => Err(format!(
            "its identity is not {key}'s (it is {})",
            ids.iter()
                .map(|id| format!("{} {}", id.format.as_str(), id.debug_id))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// debuginfod's keys for binaries: only an ELF (or Mach-O) with the build id answers them.
fn needs_binary(key: &str) -> bool {
    let parts: Vec<&str> = key.split('/').collect();
    matches!(parts.as_slice(), ["buildid", _, "debuginfo" | "executable"])
}
