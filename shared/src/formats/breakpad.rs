//! Breakpad text symbol files: `MODULE <os> <arch> <id> <name>` and `INFO CODE_ID <id> [name]`.

use debugid::{CodeId, DebugId};

use super::{Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Breakpad;

/// The parsed MODULE record.
struct Module<'a> {
    os: &'a str,
    arch: &'a str,
    id: &'a str,
    name: &'a str,
}

fn first_line(head: &[u8]) -> &[u8] {
    let end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = &head[..end];
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn parse_module(line: &str) -> Option<Module<'_>> {
    let rest = line.strip_prefix("MODULE ")?;
    let mut parts = rest.splitn(4, ' ');
    let os = parts.next()?;
    let arch = parts.next()?;
    let id = parts.next()?;
    let name = parts.next()?.trim_end();
    let plausible = !os.is_empty()
        && os.bytes().all(|b| b.is_ascii_alphanumeric())
        && !arch.is_empty()
        && arch.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && (33..=40).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && !name.is_empty();
    plausible.then_some(Module { os, arch, id, name })
}

pub fn is_breakpad(head: &[u8]) -> bool {
    std::str::from_utf8(first_line(head))
        .ok()
        .and_then(parse_module)
        .is_some()
}

/// Identifies from the head of the file: MODULE is line 1 and INFO records follow it.
pub fn identify(head: &[u8]) -> Result<Identity, FormatError> {
    // A file cut inside its MODULE line would be published under a truncated name: a real
    // symbol file always has records after that line.
    if !head.contains(&b'\n') {
        return Err(FormatError::malformed(
            FORMAT,
            "the MODULE line does not end (a truncated file?)",
        ));
    }
    let line = std::str::from_utf8(first_line(head))
        .map_err(|_| FormatError::malformed(FORMAT, "MODULE line is not UTF-8"))?;
    let module =
        parse_module(line).ok_or_else(|| FormatError::malformed(FORMAT, "bad MODULE line"))?;
    let mut id = Identity::new(Format::Breakpad, Kind::Symbols);
    id.arch = arch_name(module.arch);
    id.debug_id = DebugId::from_breakpad(module.id)
        .map_err(|_| FormatError::malformed(FORMAT, format!("bad module id {}", module.id)))?;
    id.debug_file = Some(module.name.to_string());
    id.os = Some(module.os.to_string());
    let text = String::from_utf8_lossy(head);
    for line in text.lines().skip(1).take(32) {
        if let Some(rest) = line.strip_prefix("INFO CODE_ID ") {
            let mut parts = rest.trim_end().splitn(2, ' ');
            if let Some(code_id) = parts
                .next()
                .filter(|c| c.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                id.code_id = Some(CodeId::new(code_id.to_string()));
                id.code_file = parts.next().map(str::to_string).filter(|n| !n.is_empty());
            }
            break;
        }
        if !line.starts_with("INFO ") {
            break;
        }
    }
    Ok(id)
}

/// Breakpad architecture names are already close to Sentry's; a few aliases differ.
fn arch_name(arch: &str) -> Arch {
    let arch = arch.to_ascii_lowercase();
    match arch.as_str() {
        "amd64" | "x86_64" => Arch::X86_64,
        "i386" | "i686" | "x86" => Arch::X86,
        "aarch64" | "arm64" => Arch::Arm64,
        "ppc64" | "ppc" | "mips" | "mips64" | "arm" | "armv7" | "arm64e" | "s390x" | "riscv64" => {
            Arch::from_name(&arch)
        }
        _ => Arch::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::{identify, is_breakpad};
    use crate::Kind;

    #[test]
    fn module_and_code_id() {
        let sym = b"MODULE windows x86 878E82E5E282481B88FCBBA2CFF8C7F12 basic32-min.pdb\r\nINFO CODE_ID 5DDC1E9B6C000 basic32-min.dll\r\nFILE 0 a.c\r\n";
        assert!(is_breakpad(sym));
        let id = identify(sym).unwrap();
        assert_eq!(
            id.debug_id.to_string(),
            "878e82e5-e282-481b-88fc-bba2cff8c7f1-2"
        );
        assert_eq!(id.code_id.unwrap().as_str(), "5ddc1e9b6c000");
        assert_eq!(id.code_file.as_deref(), Some("basic32-min.dll"));
        assert_eq!(id.debug_file.as_deref(), Some("basic32-min.pdb"));
        assert_eq!(id.arch, "x86");
        assert_eq!(id.kind, Kind::Symbols);
    }

    #[test]
    fn names_may_contain_spaces_and_code_id_is_optional() {
        let sym = b"MODULE Linux x86_64 20AD60B0B4C68177552708AA192E77390 my lib.so\nFILE 0 x\n";
        let id = identify(sym).unwrap();
        assert_eq!(id.debug_file.as_deref(), Some("my lib.so"));
        assert!(id.code_id.is_none());
        assert_eq!(
            id.debug_id.to_string(),
            "20ad60b0-b4c6-8177-5527-08aa192e7739"
        );
    }

    #[test]
    fn not_breakpad() {
        assert!(!is_breakpad(b"MODULE"));
        assert!(!is_breakpad(b"MODULE Linux x86_64 XYZ name\n"));
        assert!(!is_breakpad(
            b"MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0\n"
        ));
        assert!(identify(b"MODULE Linux x86_64 nothex name\n").is_err());
    }

    #[test]
    fn a_file_cut_inside_its_module_line_is_malformed() {
        let cut = b"MODULE windows x86 878E82E5E282481B88FCBBA2CFF8C7F12 basic32-mi";
        let err = identify(cut).unwrap_err().to_string();
        assert!(err.contains("does not end"), "{err}");
    }
}
