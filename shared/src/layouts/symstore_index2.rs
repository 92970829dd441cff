//! `symstore_index2`: the two-tier SymStore layout (an `index2.txt` at the root): each symstore
//! key under a directory named after its first two characters.

use super::{symstore, Name};
use crate::identity::Identity;

/// The file whose presence at the store root tells SymSrv the store is two-tier.
pub const MARKER_KEY: &str = "index2.txt";

/// `foo.exe/...` -> `fo/foo.exe/...`; only the first character when the second is `.` or `/`.
pub fn two_tier(key: &str) -> String {
    let mut chars = key.chars();
    let first = chars.next().unwrap_or('_');
    match chars.next() {
        Some(second) if second != '.' && second != '/' => format!("{first}{second}/{key}"),
        _ => format!("{first}/{key}"),
    }
}

pub fn keys(id: &Identity, name: Option<&Name<'_>>) -> Vec<String> {
    symstore::keys(id, name)
        .iter()
        .map(|k| two_tier(k))
        // A name starting with `..` gets the tier directory `.`: clients normalise `./x` to `x`,
        // which is the plain symstore key, so there is no separate two-tier key to write.
        .filter(|k| !k.starts_with("./"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::pe;
    use super::{keys, two_tier};
    use crate::layouts::Name;

    #[test]
    fn prefixes() {
        assert_eq!(
            two_tier("foo.exe/542D574Ec2000/foo.exe"),
            "fo/foo.exe/542D574Ec2000/foo.exe"
        );
        assert_eq!(
            two_tier("_.debug/elf-buildid-sym-ab/_.debug"),
            "_/_.debug/elf-buildid-sym-ab/_.debug"
        );
        assert_eq!(two_tier("a/1/a"), "a/a/1/a");
        let dotted = keys(&pe(1, 0x1000), Some(&Name::new("..odd.exe").unwrap()));
        assert!(dotted.is_empty(), "{dotted:?}");
        let hidden = keys(&pe(1, 0x1000), Some(&Name::new(".hidden.exe").unwrap()));
        assert_eq!(hidden[0], ".h/.hidden.exe/000000011000/.hidden.exe");
        let keys = keys(
            &pe(0x542d_574e, 0xc2000),
            Some(&Name::new("Foo.exe").unwrap()),
        );
        assert!(keys.contains(&"Fo/Foo.exe/542D574Ec2000/Foo.exe".to_string()));
        assert!(keys.contains(&"fo/foo.exe/542D574Ec2000/foo.exe".to_string()));
    }
}
