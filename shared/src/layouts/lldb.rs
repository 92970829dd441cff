//! `lldb`: LLDB's File Mapped UUID Directories (symbolicator's "native" layout for Mach-O):
//! uppercase UUID split `XXXX/XXXX/XXXX/XXXX/XXXX/XXXXXXXXXXXX`, `.app` for binaries.

use crate::formats::Format;
use crate::identity::{Identity, Kind};

pub fn keys(id: &Identity) -> Vec<String> {
    // A source bundle of a Mach-O module: symbolicator's native lookup, `<lldb path>.src.zip`,
    // the UUID being the code id (or, without one, the debug id's).
    let bundle_uuid = || match &id.code_id {
        Some(code) => Some(code.as_str().to_ascii_lowercase()).filter(|c| c.len() == 32),
        None => (!id.debug_id.is_nil()).then(|| id.debug_id.uuid().simple().to_string()),
    };
    let uuid = match id.format {
        Format::Macho => id.uuid.clone().filter(|u| u.len() == 32),
        Format::SourceBundle => bundle_uuid(),
        _ => None,
    };
    let Some(uuid) = uuid.filter(|u| u.bytes().all(|b| b.is_ascii_hexdigit())) else {
        return Vec::new();
    };
    let u = uuid.to_ascii_uppercase();
    let path = format!(
        "{}/{}/{}/{}/{}/{}",
        &u[0..4],
        &u[4..8],
        &u[8..12],
        &u[12..16],
        &u[16..20],
        &u[20..]
    );
    let key = if id.format == Format::SourceBundle {
        format!("{path}.src.zip")
    } else if id.kind == Kind::Debug {
        path
    } else {
        format!("{path}.app")
    };
    vec![key]
}

#[cfg(test)]
mod tests {
    use super::super::tests::{macho, pdb};
    use super::keys;
    use crate::Kind;

    #[test]
    fn uuid_directories() {
        assert_eq!(
            keys(&macho(Kind::Library)),
            ["497B/72F6/390A/44FC/878E/5A2D63B6CC4B.app"]
        );
        assert_eq!(
            keys(&macho(Kind::Debug)),
            ["497B/72F6/390A/44FC/878E/5A2D63B6CC4B"]
        );
        assert!(keys(&pdb(1)).is_empty());
    }
}
