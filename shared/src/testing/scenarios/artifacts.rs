//! The artifacts the scenarios upload, built byte by byte.

use crate::pipeline::Upload;
use crate::storage::CopySource;
use crate::testing::builders::{
    build_dwp, build_elf, build_fat_macho, build_msf, build_pe, build_split_binary, codeview,
    dbi_stream, dwarf5_line_table, dwarf5_line_table_with_md5, info_stream, with_section, Unit,
};
use crate::upload_meta::UploadMeta;
use crate::IdentifyOptions;

/// One artifact as uploaded.
#[derive(Clone)]
pub struct Artifact {
    pub id: String,
    pub name: String,
    pub bytes: Vec<u8>,
    /// Retention channel (`try` uploads expire in the expiry scenarios).
    pub channel: Option<&'static str>,
    /// Keyed as a source file (sourcemap.rs).
    pub as_source: bool,
    /// The build it names (the scope of its source-join records).
    pub build: Option<&'static str>,
    /// The product it names (a PDB's documents are served under `src/<product>/<build>/`).
    pub product: Option<&'static str>,
    /// Where it sits inside [`ARCHIVE`] when it is one of its entries (its id is the
    /// archive's location, `!/`, this path: its upload records share the archive's).
    pub entry: Option<&'static str>,
}

/// The archive whose entries the archive scenarios index and delete together.
pub const ARCHIVE: &str = "/ci/bundle.zip";

impl std::fmt::Debug for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

impl Artifact {
    fn new(id: &str, name: &str, bytes: Vec<u8>) -> Self {
        Artifact {
            id: id.to_string(),
            name: name.to_string(),
            bytes,
            channel: None,
            as_source: false,
            build: None,
            product: None,
            entry: None,
        }
    }

    /// The same bytes as the entry `path` of [`ARCHIVE`].
    fn in_archive(&self, path: &'static str) -> Self {
        Artifact {
            id: format!("file:{ARCHIVE}!/{path}"),
            name: crate::identity::file_name_of(path).to_string(),
            entry: Some(path),
            ..self.clone()
        }
    }

    /// The same bytes uploaded under another name (`/ci/<name>`).
    pub fn named(&self, name: &str) -> Self {
        Artifact {
            id: format!("file:/ci/{name}"),
            name: name.to_string(),
            entry: None,
            ..self.clone()
        }
    }

    fn keyed_as_source(mut self) -> Self {
        self.as_source = true;
        self
    }

    fn in_build(mut self, build: &'static str) -> Self {
        self.build = Some(build);
        self
    }

    fn of_product(mut self, product: &'static str) -> Self {
        self.product = Some(product);
        self
    }

    fn in_channel(mut self, channel: &'static str) -> Self {
        self.channel = Some(channel);
        self
    }

    pub fn upload(&self) -> Upload<'_> {
        Upload {
            id: self.id.clone(),
            source: CopySource::Bytes(&self.bytes),
            ingest_bucket: None,
            ingest_key: match self.entry {
                Some(_) => ARCHIVE.to_string(),
                None => format!("/ci/{}", self.name),
            },
            entry: self.entry.map(|path| crate::pipeline::EntryOf {
                path: path.to_string(),
                archive_etag: crate::storage::content_sha1(ARCHIVE.as_bytes()),
                archive_size: 4096,
            }),
            ingest_version: None,
            etag: crate::storage::content_sha1(&self.bytes),
            size: self.bytes.len() as u64,
            meta: UploadMeta {
                channel: self.channel.map(str::to_string),
                build: self.build.map(str::to_string),
                product: self.product.map(str::to_string),
                ..UploadMeta::default()
            },
            options: IdentifyOptions {
                as_source: self.as_source,
            },
            source_path: None,
            file_stamp: None,
        }
    }
}

/// The artifacts of the scenarios: an ELF debug file uploaded by three builds, another with
/// other bytes under the same build id, a PE and the PDB it names (under another file name).
pub struct Artifacts {
    pub elf_a: Artifact,
    pub elf_b: Artifact,
    pub elf_c: Artifact,
    pub elf_other: Artifact,
    /// `elf_other`'s bytes from another build: with it, two overwrites of `elf_a`'s keys at
    /// once (both mark `elf_a` waiting).
    pub elf_other_again: Artifact,
    /// Bytes of a third build under the same build id, uploaded by product `web`: its
    /// overwrite of `elf_a`'s or `elf_other`'s keys (no product) is refused by the product
    /// rule (refs/overwrites.rs).
    pub elf_other_web: Artifact,
    /// `elf_a`'s bytes uploaded by product `web`: sharing them, it makes an overwrite of no
    /// product refused.
    pub elf_a_web: Artifact,
    pub pe: Artifact,
    /// A PE naming the PDB by the name it is uploaded under (nothing to alias).
    pub pe_same_name: Artifact,
    pub pdb: Artifact,
    /// The same PDB uploaded under another file name: other keys, the same debug id (whose
    /// record points at one copy of it).
    pub pdb_renamed: Artifact,
    /// The same PDB under its own name, uploaded by a `try` build (it expires).
    pub pdb_try: Artifact,
    /// A rebuild of the PDB: the same debug id and file name, other bytes (an extra stream);
    /// it overwrites the PDB's keys in the overwrite scenarios.
    pub pdb_rebuilt: Artifact,
    /// A debug file whose DWARF names `/ci/work/src/hello.c` and headers never uploaded
    /// (their join records are more than enough for a first index to list the build's
    /// records first), and that source file; both of build `ci-7`.
    pub debug_with_sources: Artifact,
    /// The same debug file under another build id, of the same build (`ci-7`): another
    /// debug file wanting the same paths.
    pub debug_other_build: Artifact,
    /// A debug file of the same build whose line table records `src/hello.c` with the MD5
    /// of `source_edited`'s bytes (as clang writes DWARF 5): that version serves it, in any
    /// order, and `source` never does.
    pub debug_md5: Artifact,
    pub source: Artifact,
    /// Another checkout's `src/hello.c` (other bytes): its path ties with `source`'s for the
    /// debug file's (both share `src/hello.c` with it), so while both are offered neither
    /// serves it.
    pub source_edited: Artifact,
    /// `source`'s bytes from a third checkout.
    pub source_copy: Artifact,
    /// `source`'s bytes from another checkout, not asked to be a source: a source only as
    /// the debug file naming it makes it one (sourcemap.rs, "sources without flags").
    pub source_unflagged: Artifact,
    /// A `hello.c` uploaded by its base name alone (other bytes): it matches the debug file's
    /// path less well than `source`, and serves it where `source` is not offered.
    pub source_flat: Artifact,
    /// A universal Mach-O uploaded by two builds: two identities (one per slice) whose keys
    /// serve the whole file (on S3 with aliases, one key holds the bytes and the others,
    /// both slices', are aliases of it).
    pub fat_a: Artifact,
    pub fat_b: Artifact,
    /// The entries of [`ARCHIVE`], indexed and deleted together as one object's: the debug
    /// file twice (`a/app.debug`, `b/app.debug`: `elf_b`'s bytes, as a build output copying a
    /// library into two folders holds them) and the PDB (`syms/mixed.pdb`, which `pe` names).
    pub archive: Vec<Artifact>,
    /// A binary built with split DWARF (two DWARF 5 skeleton units) and its `.dwp` with
    /// exactly their DWO ids, both of build `ci-9`: the package is published at the binary's
    /// `buildid/<id>/debuginfo` once both are in (pipeline/packages.rs).
    pub split_binary: Artifact,
    pub split_package: Artifact,
    /// A PDB naming `C:\b\src\doc.c` (the MD5 of `doc_source`'s bytes) with a Source Link
    /// map of product `app`, build `ci-8`, and that source and an edited one of the same
    /// path: the source is served at `src/app/ci-8/src/doc.c` once both are in
    /// (pipeline/documents.rs), the edited one never.
    pub pdb_documents: Artifact,
    pub doc_source: Artifact,
    pub doc_source_edited: Artifact,
}

/// [`Artifacts::pdb_documents`]' document's text.
const DOC_SOURCE: &[u8] = b"int doc(void) { return 8; }\n";

/// The DWO ids of [`Artifacts::split_binary`]'s skeleton units and its package's units.
const SPLIT_DWO_IDS: [u64; 2] = [0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00];

/// The source paths `Artifacts::debug_with_sources` names, under `/ci/work`.
pub const SOURCES_NAMED: [&str; 8] = [
    "src/hello.c",
    "include/a.h",
    "include/b.h",
    "include/c.h",
    "include/d.h",
    "include/e.h",
    "include/f.h",
    "include/g.h",
];

impl Artifacts {
    pub fn new() -> Self {
        let build_id = [0x5a; 20];
        let elf = build_elf(true, false, 62, Some(&build_id), true);
        let mut other = elf.clone();
        other.extend_from_slice(b"other bytes, same build id");
        let mut web = elf.clone();
        web.extend_from_slice(b"another product's bytes, same build id");
        let guid = [7u8; 16];
        let pe = build_pe(
            true,
            0x8664,
            true,
            &[codeview(guid, 1, "C:\\b\\Mixed.PDB", 0, 0)],
            true,
        );
        let pe_same_name = build_pe(
            true,
            0x8664,
            true,
            &[codeview(guid, 1, "C:\\b\\mixed.pdb", 0, 0)],
            true,
        );
        let pdb = build_msf(
            4096,
            &[
                None,
                Some(info_stream(guid, 1)),
                None,
                Some(dbi_stream(1, 0x8664)),
            ],
        );
        let pdb_rebuilt = build_msf(
            4096,
            &[
                None,
                Some(info_stream(guid, 1)),
                None,
                Some(dbi_stream(1, 0x8664)),
                Some(b"rebuilt".to_vec()),
            ],
        );
        let with_sources = with_section(
            build_elf(true, false, 62, Some(&[0x6b; 20]), true),
            ".debug_line",
            &dwarf5_line_table("/ci/work", &SOURCES_NAMED),
        );
        let mut other_build = with_sources.clone();
        if let Some(at) = other_build.windows(20).position(|w| w == [0x6b; 20]) {
            other_build[at..at + 20].copy_from_slice(&[0x7c; 20]);
        }
        let edited = b"int main(void) { return 1; }\n".to_vec();
        let mut md5 = crate::digest::Md5::default();
        md5.update(&edited);
        let with_md5 = with_section(
            build_elf(true, false, 62, Some(&[0x4d; 20]), true),
            ".debug_line",
            &dwarf5_line_table_with_md5("/ci/work", &[("src/hello.c", md5.digest())]),
        );
        let fat = build_fat_macho((0xa1, 0xb2));
        let skeletons = SPLIT_DWO_IDS.map(Unit::Skeleton5);
        let mut artifacts = Artifacts {
            archive: Vec::new(),
            split_binary: Artifact::new(
                "file:/ci/split/app",
                "app",
                build_split_binary(&skeletons),
            )
            .in_build("ci-9"),
            split_package: Artifact::new(
                "file:/ci/split/app.dwp",
                "app.dwp",
                build_dwp(5, &SPLIT_DWO_IDS),
            )
            .in_build("ci-9"),
            debug_md5: Artifact::new("file:/ci/md5.debug", "md5.debug", with_md5).in_build("ci-7"),
            pdb_documents: Artifact::new("file:/ci/docs/app.pdb", "app.pdb", pdb_documents())
                .of_product("app")
                .in_build("ci-8"),
            doc_source: Artifact::new("file:/ci/docs/src/doc.c", "src/doc.c", DOC_SOURCE.to_vec())
                .keyed_as_source()
                .of_product("app")
                .in_build("ci-8"),
            doc_source_edited: Artifact::new(
                "file:/ci/edited/src/doc.c",
                "edited/src/doc.c",
                b"int doc(void) { return 9; }\n".to_vec(),
            )
            .keyed_as_source()
            .of_product("app")
            .in_build("ci-8"),
            fat_a: Artifact::new("file:/ci/libfat.dylib#a", "libfat.dylib", fat.clone()),
            fat_b: Artifact::new("file:/ci/libfat.dylib#b", "libfat.dylib", fat),
            debug_with_sources: Artifact::new("file:/ci/hello.debug", "hello.debug", with_sources)
                .in_build("ci-7"),
            debug_other_build: Artifact::new("file:/ci/other.debug", "other.debug", other_build)
                .in_build("ci-7"),
            source: Artifact::new(
                "file:/ci/src/hello.c",
                "src/hello.c",
                b"int main(void) { return 0; }\n".to_vec(),
            )
            .keyed_as_source()
            .in_build("ci-7"),
            source_copy: Artifact::new(
                "file:/ci/copy/src/hello.c",
                "copy/src/hello.c",
                b"int main(void) { return 0; }\n".to_vec(),
            )
            .keyed_as_source()
            .in_build("ci-7"),
            source_unflagged: Artifact::new(
                "file:/ci/unflagged/src/hello.c",
                "unflagged/src/hello.c",
                b"int main(void) { return 0; }\n".to_vec(),
            )
            .in_build("ci-7"),
            source_flat: Artifact::new(
                "file:/ci/flat/hello.c",
                "hello.c",
                b"int main(void) { return 2; }\n".to_vec(),
            )
            .keyed_as_source()
            .in_build("ci-7"),
            source_edited: Artifact::new("file:/ci/other/src/hello.c", "other/src/hello.c", edited)
                .keyed_as_source()
                .in_build("ci-7"),
            elf_a_web: Artifact::new("file:/ci/web/app.debug#a", "app.debug", elf.clone())
                .of_product("web"),
            elf_a: Artifact::new("file:/ci/app.debug#a", "app.debug", elf.clone())
                .in_channel("try"),
            elf_c: Artifact::new("file:/ci/app.debug#c", "app.debug", elf.clone()),
            elf_b: Artifact::new("file:/ci/app.debug#b", "app.debug", elf),
            elf_other_again: Artifact::new(
                "file:/ci/app.debug#other-again",
                "app.debug",
                other.clone(),
            ),
            elf_other_web: Artifact::new("file:/ci/web/app.debug", "app.debug", web)
                .of_product("web"),
            elf_other: Artifact::new("file:/ci/app.debug#other", "app.debug", other),
            pe: Artifact::new("file:/ci/mixed.dll", "mixed.dll", pe),
            pe_same_name: Artifact::new("file:/ci/same/mixed.dll", "mixed.dll", pe_same_name),
            pdb_renamed: Artifact::new("file:/ci/renamed.pdb", "renamed.pdb", pdb.clone()),
            pdb_try: Artifact::new("file:/ci/try/mixed.pdb", "mixed.pdb", pdb.clone())
                .in_channel("try"),
            pdb: Artifact::new("file:/ci/mixed.pdb", "mixed.pdb", pdb),
            pdb_rebuilt: Artifact::new(
                "file:/ci/rebuilt/mixed.pdb",
                "rebuilt/mixed.pdb",
                pdb_rebuilt,
            ),
        };
        artifacts.archive = vec![
            artifacts.elf_b.in_archive("a/app.debug"),
            artifacts.elf_b.in_archive("b/app.debug"),
            artifacts.pdb.in_archive("syms/mixed.pdb"),
        ];
        artifacts
    }
}

impl Default for Artifacts {
    fn default() -> Self {
        Self::new()
    }
}

/// [`Artifacts::pdb_documents`]' bytes.
fn pdb_documents() -> Vec<u8> {
    let mut md5 = crate::digest::Md5::default();
    md5.update(DOC_SOURCE);
    let digest = md5.digest();
    let map = br#"{"documents":{"C:\\b\\*":"https://s.example/src/app/ci-8/*"}}"#;
    // CodeView's CHKSUM_TYPE_MD5 is 1.
    let documents = [("C:\\b\\src\\doc.c", 1, digest.as_slice())];
    crate::testing::source_pdbs::pdb_with_sources([0x8d; 16], &documents, None, Some(map))
}
