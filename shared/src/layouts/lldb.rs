//! `lldb`: LLDB's File Mapped UUID Directories (symbolicator's "native" layout for Mach-O):
//! uppercase UUID split `XXXX/XXXX/XXXX/XXXX/XXXX/XXXXXXXXXXXX`, `.app` for binaries.

use crate::formats::Format;
use crate::identity::{Identity, Kind};

pub fn keys(id: &Identity) -> Vec<String> {
    let Some(uuid) = id
        .uuid
        .as_deref()
        .filter(|u| u.len() == 32 && id.format == Format::Macho)
    else {
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
    let key = if id.kind == Kind::Debug {
        path
    } else {
        format!("{path}.app")
    };
    vec![key]
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;

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
