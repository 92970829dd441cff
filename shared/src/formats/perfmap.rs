//! R2R perfmaps (version 1): five header entries, `FFFFFFFF 00 <signature>` through
//! `FFFFFFFB 00 <abi>`, as described in the perfmap format document.

use super::{Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind, PerfmapInfo};

const HEADER_TOKENS: [&str; 5] = ["FFFFFFFF", "FFFFFFFE", "FFFFFFFD", "FFFFFFFC", "FFFFFFFB"];

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Perfmap;

/// The five header values, if the head starts with a well-formed perfmap header.
fn header_values(head: &[u8]) -> Option<[&str; 5]> {
    let text = std::str::from_utf8(head.get(..head.len().min(1024))?)
        .ok()
        .or_else(|| {
            // The head may end inside a multi-byte character of a later line.
            let valid = std::str::from_utf8(head).err()?.valid_up_to();
            std::str::from_utf8(&head[..valid]).ok()
        })?;
    let mut values = [""; 5];
    let mut lines = text.lines();
    for (slot, token) in values.iter_mut().zip(HEADER_TOKENS) {
        let mut fields = lines.next()?.split_whitespace();
        if fields.next()? != token || fields.next()? != "00" {
            return None;
        }
        *slot = fields.next()?;
        if fields.next().is_some() {
            return None;
        }
    }
    Some(values)
}

pub fn is_perfmap(head: &[u8]) -> bool {
    header_values(head).is_some()
}

pub fn identify(head: &[u8]) -> Result<Identity, FormatError> {
    let [signature, version, _os, arch, _abi] =
        header_values(head).ok_or_else(|| FormatError::malformed(FORMAT, "bad header"))?;
    if signature.len() != 32 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(FormatError::malformed(
            FORMAT,
            format!("signature {signature:?} is not 32 hex digits"),
        ));
    }
    let version: u32 = version.parse().map_err(|_| {
        FormatError::malformed(FORMAT, format!("version {version:?} is not a number"))
    })?;
    let mut id = Identity::new(Format::Perfmap, Kind::Symbols);
    id.arch = match arch {
        "1" => Arch::Arm,
        "2" => Arch::Arm64,
        "3" => Arch::X86_64,
        "4" => Arch::X86,
        _ => Arch::Unknown,
    };
    id.perfmap = Some(PerfmapInfo {
        signature: signature.to_ascii_lowercase(),
        version,
        path: None,
    });
    Ok(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{identify, is_perfmap};

    pub(crate) fn build_perfmap(signature: &str, version: u32) -> Vec<u8> {
        format!(
            "FFFFFFFF 00 {signature}\nFFFFFFFE 00 {version}\nFFFFFFFD 00 2\nFFFFFFFC 00 3\nFFFFFFFB 00 1\n00001000 10 System.Object::.ctor()\n"
        )
        .into_bytes()
    }

    #[test]
    fn header_is_parsed() {
        let map = build_perfmap("F5FDDF60EFB0BEE79EF02A19C3DECBA9", 1);
        assert!(is_perfmap(&map));
        let id = identify(&map).unwrap();
        let info = id.perfmap.unwrap();
        assert_eq!(info.signature, "f5fddf60efb0bee79ef02a19c3decba9");
        assert_eq!(info.version, 1);
        assert_eq!(id.arch, "x86_64");
    }

    #[test]
    fn bad_headers() {
        assert!(!is_perfmap(b"FFFFFFFF 00 abc\n"));
        assert!(identify(&build_perfmap("xyz", 1)).is_err());
        assert!(identify(&build_perfmap("F5FDDF60EFB0BEE79EF02A19C3DECBA9", 1)[..40]).is_err());
    }
}
