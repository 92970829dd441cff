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
    /// What a debugger could take for its srcsrv stream was not all read: the named-stream
    /// map, the stream itself or its part past the first 16 MiB, or a second stream of that
    /// name (which one a debugger opens is its own). It may define `SRCSRVCMD` unseen, so a
    /// store refusing srcsrv commands refuses it too (fail closed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub srcsrv_unchecked: bool,
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
            && !self.srcsrv_unchecked
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
    /// one and the stream vouches for it: read whole, the only one of its name, reading one
    /// way ([`SrcsrvLines::ambiguity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// It defines `SRCSRVCMD`: a command debuggers run (after asking, or not) to fetch a
    /// file. Defined in its `ini` or `variables` section, in any case, or anywhere a
    /// debugger might take for one ([`SrcsrvLines::runs_commands`]), as far as the stream
    /// was read ([`PdbSources::srcsrv_unchecked`] says where it was not). A deployment may
    /// refuse such PDBs (`SYMDEX_REFUSE_SRCSRV_COMMANDS`).
    pub commands: bool,
}

/// The longest `SRCSRVTRG` kept (characters): a target a debugger could use is far shorter.
const MAX_SRCSRV_TARGET_CHARS: usize = 4096;

impl SrcSrv {
    /// Reads a srcsrv stream's bytes (of `size` bytes in the PDB; `bytes` may be fewer, the
    /// head read): what the store records of it, and the stream parsed, for its documents'
    /// URLs ([`SrcSrv::urls`]). One parse ([`SrcsrvLines`]) for both, so the variables it
    /// reports are those a debugger expands (of the `ini` and `variables` sections, names
    /// ignoring case).
    pub fn read(bytes: &[u8], size: u32) -> (SrcSrv, SrcsrvLines) {
        let lines = SrcsrvLines::parse(bytes);
        // A stream that reads two ways has no target to record (its reader says why).
        let target = lines
            .variable("SRCSRVTRG")
            .filter(|_| lines.ambiguity().is_none())
            .map(|t| t.chars().take(MAX_SRCSRV_TARGET_CHARS).collect());
        // A longer stream's unread part may define SRCSRVCMD unseen: its reader says so in
        // `PdbSources::srcsrv_unchecked`, and a refusing store refuses it as well.
        let srcsrv = SrcSrv {
            size,
            target,
            commands: lines.runs_commands(),
        };
        (srcsrv, lines)
    }

    /// The download URL the stream (`lines`) gives `documents` (their paths), each where it
    /// has one: `SRCSRVTRG` expanded with the document's line and the stream's variables, as
    /// WinDbg expands it; a document fetched otherwise (a command, a file share) has none.
    pub fn urls(lines: &SrcsrvLines, documents: &mut [Document]) {
        for document in documents {
            document.srcsrv_url = match lines.target(&document.path) {
                SrcsrvTarget::Url(url) => Some(url),
                SrcsrvTarget::Elsewhere(_) => None,
            };
        }
    }
}

impl Document {
    /// Its path as a want names it in the join records (sourcemap.rs): `\\` turned into `/`.
    pub fn want_path(&self) -> String {
        self.path.replace('\\', "/")
    }
}

#[cfg(test)]
mod tests {
    use super::{Document, PdbSources, SrcSrv};

    #[test]
    fn srcsrv_urls_are_the_target_with_each_documents_line() {
        let stream = b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\nSRCSRVTRG=https://s/src/p/1/%var2%\r\n\
            SRCSRV: source files --\r\nC:\\b\\A.c*a.c\r\nC:\\b\\x\\y.h*x/y.h\r\nshort\r\nSRCSRV: end --\r\n";
        let document = |path: &str| Document {
            path: path.into(),
            checksum: None,
            srcsrv_url: None,
        };
        let mut documents = [
            document("c:\\b\\a.c"),
            document("C:\\b\\x\\y.h"),
            document("short"),
        ];
        let (read, lines) = SrcSrv::read(stream, stream.len() as u32);
        assert!(!read.commands);
        assert_eq!(read.target.as_deref(), Some("https://s/src/p/1/%var2%"));
        SrcSrv::urls(&lines, &mut documents);
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
        let (read, lines) = SrcSrv::read(commands, commands.len() as u32);
        assert!(read.commands);
        SrcSrv::urls(&lines, &mut documents);
        assert_eq!(
            documents[0].srcsrv_url, None,
            "fetched by a command: no URL"
        );
    }

    /// Where and how a stream may define `SRCSRVCMD`, each flagged: the `ini` section as
    /// well as `variables` (WinDbg takes variables from both), any case (srcsrv's names
    /// ignore it), after an empty definition, and wherever a debugger might see a section
    /// this reader does not.
    #[test]
    fn srcsrv_commands_are_seen_wherever_a_debugger_could_take_them() {
        let flagged = |stream: &[u8]| {
            let (read, lines) = SrcSrv::read(stream, stream.len() as u32);
            let mut documents = [Document {
                path: r"C:\a.c".into(),
                checksum: None,
                srcsrv_url: None,
            }];
            SrcSrv::urls(&lines, &mut documents);
            // The summary and the URLs come of one parse: a command means no URL.
            assert_eq!(
                documents[0].srcsrv_url.is_none(),
                read.commands || read.target.is_none(),
                "{}",
                String::from_utf8_lossy(stream)
            );
            read.commands
        };
        let files = "SRCSRV: source files ------\r\nC:\\a.c*a.c\r\nSRCSRV: end ------\r\n";
        let stream = |ini: &str, variables: &str| {
            format!(
                "SRCSRV: ini ------\r\nVERSION=2\r\n{ini}SRCSRV: variables ------\r\n\
                 SRCSRVTRG=https://s/%var2%\r\n{variables}{files}"
            )
            .into_bytes()
        };
        for (ini, variables) in [
            ("", "SRCSRVCMD=cmd /c git show %var2%\r\n"),
            ("SRCSRVCMD=cmd /c calc\r\n", ""),
            ("srcsrvcmd=cmd /c calc\r\n", ""),
            ("", "SrcSrvCmd = calc\r\n"),
            ("SRCSRVCMD=\r\n", "SRCSRVCMD=calc\r\n"),
            ("SRCSRVCMD=calc\r\n", "SRCSRVCMD=\r\n"),
            ("NOTE=x\rSRCSRVCMD=calc\r\n", ""),
        ] {
            assert!(flagged(&stream(ini, variables)), "{ini:?} {variables:?}");
        }
        for (ini, variables) in [
            ("", ""),
            ("SRCSRVCMD=\r\n", "SRCSRVCMD= \r\n"),
            (
                "NOTE=SRCSRVCMD=calc\r\n",
                "SRCSRVCMDX=calc\r\nMY_SRCSRVCMD=calc\r\n",
            ),
        ] {
            assert!(!flagged(&stream(ini, variables)), "{ini:?} {variables:?}");
        }
        // Sections a debugger could find where this reader finds none, or another.
        for misleading in [
            "srcsrv: variables --\nSRCSRVCMD=calc\n",
            "  SRCSRV: variables --\nSRCSRVCMD=calc\n",
            "SRCSRV: source files --\nSRCSRVCMD=calc\n",
            "SRCSRV: source files --\na.c*a.c\nSRCSRV: variables --\nSRCSRVCMD=calc\n",
            "SRCSRVCMD=calc\n",
        ] {
            let stream = format!("SRCSRV: ini --\nVERSION=2\n{misleading}");
            assert!(flagged(stream.as_bytes()), "{misleading:?}");
        }
        let stream = stream("", "");
        let (read, _) = SrcSrv::read(&stream, stream.len() as u32);
        assert_eq!(read.target.as_deref(), Some("https://s/%var2%"));
        // What a longer stream holds past the head read is not taken for a command here
        // (its reader marks the PDB's sources unchecked: `formats::pdb::sources`).
        let (read, _) = SrcSrv::read(&stream, stream.len() as u32 + 1);
        assert!(!read.commands);
        let (junk, _) = SrcSrv::read(&[0xff, 0, b'\n', b'='], 4);
        assert!(!junk.commands && junk.target.is_none());
        assert!(PdbSources::default().is_empty());
    }

    /// `SRCSRVTRG` is read where WinDbg reads variables, `ini` too, and kept as written;
    /// defined in both, differently, it is none of them (which a debugger takes is its own).
    #[test]
    fn srcsrv_target_is_read_from_either_section_when_it_reads_one_way() {
        let stream = b"SRCSRV: ini --\nsrcsrvtrg=https://ini/%var2%\nSRCSRV: variables --\n\
            SRCSRV: source files --\nSRCSRV: end --\n";
        let (read, _) = SrcSrv::read(stream, stream.len() as u32);
        assert_eq!(read.target.as_deref(), Some("https://ini/%var2%"));
        let stream = b"SRCSRV: ini --\nsrcsrvtrg=https://ini/%var2%\nSRCSRV: variables --\n\
            SRCSRVTRG=https://variables/%var2%\nSRCSRV: source files --\nSRCSRV: end --\n";
        let (read, lines) = SrcSrv::read(stream, stream.len() as u32);
        assert_eq!(read.target, None);
        assert!(lines
            .ambiguity()
            .is_some_and(|why| why.contains("SRCSRVTRG twice")));
        let long = format!(
            "SRCSRV: variables --\nSRCSRVTRG=https://x/{}\n",
            "y".repeat(10_000)
        );
        let (read, _) = SrcSrv::read(long.as_bytes(), long.len() as u32);
        assert_eq!(read.target.map(|t| t.chars().count()), Some(4096));
    }
}
