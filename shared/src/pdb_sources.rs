//! What a PDB or Portable PDB says about the sources it was built from: its documents with
//! their checksums, its Source Link map, and its srcsrv stream (formats/pdb/sources.rs,
//! formats/portable_pdb/sources.rs read them). The store's source serving and its check of
//! a PDB against what it serves start from this.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::sourcelink::{document_place, BuildRoot, DocumentPlace, SourceLinkMap};

mod srcsrv_lines;

pub use srcsrv_lines::{SrcsrvLines, Target as SrcsrvTarget};

/// The most documents read of one PDB: real ones name tens of thousands.
pub const MAX_DOCUMENTS: usize = 1_000_000;

/// The most bytes of a srcsrv stream read.
pub const MAX_SRCSRV_BYTES: usize = 16 << 20;

/// The sources of one PDB.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdbSources {
    /// Every document (source file) its debug information names, in the order first named,
    /// each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<Document>,
    /// Its Source Link map (a PDB's `sourcelink` stream, a Portable PDB's Source Link
    /// custom debug information).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_link: Option<SourceLinkMap>,
    /// Its srcsrv stream, when it has one (PDBs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srcsrv: Option<SrcSrv>,
    /// Why some of the above may be missing (a stream that could not be read, more documents
    /// or bytes than are read), one line per reason: the lists are then not the whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

impl PdbSources {
    /// Where the store serves `document` of these sources, uploaded for `product` and `build`
    /// under the build `root` (if given): its `src/<product>/<build>/<path>` key
    /// (`Ok`, not yet checked against the key grammar), or where else its debugger fetches it
    /// (`Err`: [`DocumentPlace::Elsewhere`] or [`DocumentPlace::Unmapped`]). What the indexer
    /// asks for (pipeline/documents.rs) and the missing-sources replay looks for.
    pub fn document_key(
        &self,
        document: &Document,
        root: Option<&BuildRoot>,
        (product, build): (&str, &str),
    ) -> Result<String, DocumentPlace> {
        let srcsrv_url = document.srcsrv_url.as_deref();
        let map = self.source_link.as_ref();
        match document_place(&document.path, srcsrv_url, map, root, (product, build)) {
            DocumentPlace::Store(rest) => Ok(format!("src/{product}/{build}/{rest}")),
            other => Err(other),
        }
    }

    /// Whether there is nothing to say (no documents, no map, no srcsrv, nothing unread).
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
            && self.source_link.is_none()
            && self.srcsrv.is_none()
            && self.unread.is_empty()
    }
}

/// One source file a PDB names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// The path as the compiler recorded it (untrusted; a Windows path as often as not).
    pub path: String,
    /// The checksum the compiler recorded of the file, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    /// The URL the PDB's srcsrv stream downloads it from, when its line there and the
    /// stream's `SRCSRVTRG` name one ([`SrcSrv::urls`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srcsrv_url: Option<String>,
}

/// A document's checksum: its algorithm and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksum {
    pub algorithm: ChecksumAlgorithm,
    /// The digest, lowercase hex.
    pub digest: String,
}

/// The checksum algorithms PDBs record (CodeView `CHKSUM_TYPE_*`, Portable PDB hash GUIDs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChecksumAlgorithm {
    Md5,
    Sha1,
    Sha256,
}

impl ChecksumAlgorithm {
    /// The digest length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            ChecksumAlgorithm::Md5 => 16,
            ChecksumAlgorithm::Sha1 => 20,
            ChecksumAlgorithm::Sha256 => 32,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChecksumAlgorithm::Md5 => "md5",
            ChecksumAlgorithm::Sha1 => "sha1",
            ChecksumAlgorithm::Sha256 => "sha256",
        }
    }
}

impl fmt::Display for ChecksumAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a PDB's srcsrv stream says, as far as the store cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrcSrv {
    /// Its size in bytes.
    pub size: u32,
    /// Its `SRCSRVTRG` variable as written (where a debugger finds each file), when it has
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// It defines `SRCSRVCMD`: a command debuggers run (after asking, or not) to fetch a
    /// file. A deployment may refuse such PDBs (`SYMDEX_REFUSE_SRCSRV_COMMANDS`).
    pub commands: bool,
}

impl SrcSrv {
    /// Reads the variables that matter of a srcsrv stream's bytes (of `size` bytes in the
    /// PDB; `bytes` may be fewer, the head read). Lines end in CR LF or LF; variable names
    /// are case-insensitive.
    pub fn read(bytes: &[u8], size: u32) -> SrcSrv {
        let text = String::from_utf8_lossy(bytes);
        let mut target = None;
        let mut commands = false;
        let mut in_variables = false;
        for line in text.lines() {
            if line.starts_with("SRCSRV:") {
                in_variables = line.starts_with("SRCSRV: variables");
                continue;
            }
            if !in_variables {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let name = name.trim();
            if name.eq_ignore_ascii_case("SRCSRVCMD") && !value.trim().is_empty() {
                commands = true;
            } else if name.eq_ignore_ascii_case("SRCSRVTRG") && target.is_none() {
                target = Some(value.chars().take(4096).collect());
            }
        }
        SrcSrv {
            size,
            target,
            commands,
        }
    }
}

impl Document {
    /// Its path as a want names it in the join records (sourcemap.rs): `\\` turned into `/`.
    pub fn want_path(&self) -> String {
        self.path.replace('\\', "/")
    }
}

impl SrcSrv {
    /// The download URL its stream gives `documents` (their paths), each where it has one:
    /// `SRCSRVTRG` expanded with the document's line and the stream's variables, as WinDbg
    /// expands it ([`SrcsrvLines`]); a document fetched otherwise (a command, a file share)
    /// has none.
    pub fn urls(bytes: &[u8], documents: &mut [Document]) {
        let lines = SrcsrvLines::parse(bytes);
        for document in documents {
            document.srcsrv_url = match lines.target(&document.path) {
                SrcsrvTarget::Url(url) => Some(url),
                SrcsrvTarget::Elsewhere(_) => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PdbSources, SrcSrv};

    #[test]
    fn srcsrv_urls_are_the_target_with_each_documents_line() {
        let stream = b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\nSRCSRVTRG=https://s/src/p/1/%var2%\r\n\
            SRCSRV: source files --\r\nC:\\b\\A.c*a.c\r\nC:\\b\\x\\y.h*x/y.h\r\nshort\r\nSRCSRV: end --\r\n";
        let document = |path: &str| super::Document {
            path: path.into(),
            checksum: None,
            srcsrv_url: None,
        };
        let mut documents = [
            document("c:\\b\\a.c"),
            document("C:\\b\\x\\y.h"),
            document("short"),
        ];
        SrcSrv::urls(stream, &mut documents);
        assert_eq!(
            documents[0].srcsrv_url.as_deref(),
            Some("https://s/src/p/1/a.c")
        );
        assert_eq!(
            documents[1].srcsrv_url.as_deref(),
            Some("https://s/src/p/1/x/y.h")
        );
        assert_eq!(
            documents[2].srcsrv_url.as_deref(),
            Some("https://s/src/p/1/"),
            "a field the line lacks is empty, as WinDbg has it (and no key)"
        );
        let commands = b"SRCSRV: variables --\nSRCSRVTRG=%targ%\\%var2%\nSRCSRVCMD=cmd /c x\n\
            SRCSRV: source files --\nC:\\b\\A.c*a.c\nSRCSRV: end --\n";
        let mut documents = [document("C:\\b\\A.c")];
        SrcSrv::urls(commands, &mut documents);
        assert_eq!(
            documents[0].srcsrv_url, None,
            "fetched by a command: no URL"
        );
    }

    #[test]
    fn srcsrv_commands_are_seen_in_the_variables_section_only() {
        let stream = b"SRCSRV: ini ------\r\nVERSION=2\r\nSRCSRV: variables ------\r\n\
            srcsrvtrg=%targ%\\%var2%\r\nSRCSRVCMD=cmd /c git show %var2%\r\n\
            SRCSRV: source files ------\r\nC:\\a.c*a.c\r\nSRCSRV: end ------\r\n";
        let read = SrcSrv::read(stream, stream.len() as u32);
        assert!(read.commands);
        assert_eq!(read.target.as_deref(), Some("%targ%\\%var2%"));
        let plain =
            b"SRCSRV: ini --\nVERSION=2\nSRCSRV: variables --\nSRCSRVTRG=https://x/%var2%\n\
            SRCSRV: source files --\nSRCSRVCMD=x*y\nSRCSRV: end --\n";
        let read = SrcSrv::read(plain, 1);
        assert!(!read.commands);
        assert_eq!(read.target.as_deref(), Some("https://x/%var2%"));
        let junk = SrcSrv::read(&[0xff, 0, b'\n', b'='], 4);
        assert!(!junk.commands && junk.target.is_none());
        assert!(PdbSources::default().is_empty());
    }
}
