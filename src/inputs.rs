//! Input files: directory expansion and the options every command shares.

use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use symdex_shared::formats::{identify_described, Detail};
use symdex_shared::identity::file_name_of;
use symdex_shared::reader::head::HeadReader;
use symdex_shared::{
    archive, CountingReader, FileReader, FormatError, IdentifyOptions, Identity, Layout,
    RangeReader,
};

/// Which files are keyed as sources (by SHA-1): content alone cannot tell.
#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    /// Key every file that is not a binary artifact as a source file (SHA-1).
    #[arg(long)]
    pub source: bool,
    /// File extensions keyed as sources (comma list, e.g. `c,cpp,h,cs`); also
    /// SYMDEX_SOURCE_EXTENSIONS.
    #[arg(long, value_delimiter = ',', env = "SYMDEX_SOURCE_EXTENSIONS")]
    pub source_ext: Vec<String>,
}

impl SourceArgs {
    pub fn wants_source(&self, path: &Path) -> bool {
        self.source
            || path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|ext| self.source_ext.iter().any(|s| s.eq_ignore_ascii_case(ext)))
    }
}

/// Layout selection shared by `keys` and `index`.
#[derive(Args, Debug, Clone)]
pub struct LayoutArgs {
    /// Key layouts (repeatable or comma list; default: all).
    #[arg(long = "layout", value_name = "LAYOUT", value_delimiter = ',')]
    pub layouts: Vec<Layout>,
}

impl LayoutArgs {
    /// The selected layouts, all of them when none was named.
    pub fn layouts(&self) -> Vec<Layout> {
        if self.layouts.is_empty() {
            Layout::ALL.to_vec()
        } else {
            self.layouts.clone()
        }
    }
}

/// The last path component, as a string.
pub fn file_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    file_name_of(&name).to_string()
}

/// One input met while expanding the command line.
pub enum Walked {
    File(PathBuf),
    /// Not indexed, for a reason that belongs in the manifest (a symbolic link in a walk).
    Skipped(PathBuf, String),
    Error(PathBuf, io::Error),
}

/// Why a symbolic link met in a directory walk is not followed: what it points at.
fn symlink_reason(path: &Path) -> String {
    let what = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => "a symbolic link to a directory",
        Ok(_) => "a symbolic link to a file",
        Err(e) if e.kind() == io::ErrorKind::NotFound => "a dangling symbolic link",
        Err(_) => "a symbolic link that cannot be resolved (a loop?)",
    };
    format!("{what}: links met in a directory walk are not followed (name the target to index it)")
}

/// Why a path that is neither a regular file nor a directory is not indexed: reading a FIFO
/// (or a terminal) blocks until something writes to it, a device such as `/dev/zero` never
/// ends. `None` for a regular file or a directory.
fn special_reason(file_type: std::fs::FileType) -> Option<String> {
    if file_type.is_file() || file_type.is_dir() {
        return None;
    }
    #[cfg(unix)]
    let what = {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            "a named pipe (FIFO)"
        } else if file_type.is_socket() {
            "a socket"
        } else if file_type.is_char_device() {
            "a character device"
        } else if file_type.is_block_device() {
            "a block device"
        } else {
            "a special file"
        }
    };
    #[cfg(not(unix))]
    let what = "a special file";
    Some(format!("{what}: only regular files are indexed"))
}

/// The files under `paths` as `symdex index` names them: canonical (a directory's path is
/// resolved once, and the walk under it follows no link, so a file's path below it needs no
/// resolving of its own: that was two `realpath`s, six syscalls, per file of a re-index; a
/// link named on the command line is followed), nothing under `exclude` (the store itself,
/// when it sits among the inputs).
pub fn expand_paths_excluding(paths: &[PathBuf], exclude: &Path) -> Vec<Walked> {
    walk(paths, Some(exclude), true).collect()
}

/// The files under `paths`, named as given (`keys`, `check`; a link named on the command
/// line is followed).
pub fn expand_paths(paths: &[PathBuf]) -> Vec<Walked> {
    walk(paths, None, false).collect()
}

/// [`expand_paths`] as it goes: each file is handed on as the walk meets it, so that work on
/// the first files starts while the walk goes on (`keys`, `push`'s plan).
pub fn walk_paths(paths: &[PathBuf]) -> impl Iterator<Item = Walked> + Send + '_ {
    walk(paths, None, false)
}

/// Expands directories (recursively, in a stable order) into files. `exclude` (canonical) is
/// compared with the paths of a `canonical` walk.
fn walk<'a>(
    paths: &'a [PathBuf],
    exclude: Option<&'a Path>,
    canonical: bool,
) -> impl Iterator<Item = Walked> + Send + 'a {
    paths
        .iter()
        .flat_map(move |path| walk_one(path, exclude, canonical))
}

/// The files of one command-line path: itself, or the files below it.
fn walk_one<'a>(
    path: &'a PathBuf,
    exclude: Option<&'a Path>,
    canonical: bool,
) -> Box<dyn Iterator<Item = Walked> + Send + 'a> {
    let resolve = |p: &PathBuf| match canonical {
        true => p.canonicalize().unwrap_or_else(|_| p.clone()),
        false => p.clone(),
    };
    if !path.is_dir() {
        // A link named here is followed: what it points at decides. A path that cannot be
        // looked at is left to the read, which says why.
        let special = std::fs::metadata(path)
            .ok()
            .and_then(|m| special_reason(m.file_type()));
        return Box::new(std::iter::once(match special {
            Some(reason) => Walked::Skipped(resolve(path), reason),
            None => Walked::File(resolve(path)),
        }));
    }
    let root = resolve(path);
    let walk = walkdir::WalkDir::new(&root).sort_by_file_name().into_iter();
    // Only a directory can be the store; below a canonical root, its path is canonical
    // already.
    let walk = walk
        .filter_entry(move |e| !e.file_type().is_dir() || exclude.is_none_or(|ex| e.path() != ex));
    Box::new(walk.filter_map(move |entry| match entry {
        Ok(e) if e.file_type().is_file() => Some(Walked::File(e.into_path())),
        Ok(e) if e.path_is_symlink() => {
            let reason = symlink_reason(e.path());
            Some(Walked::Skipped(e.into_path(), reason))
        }
        Ok(e) => special_reason(e.file_type()).map(|reason| Walked::Skipped(e.into_path(), reason)),
        Err(err) => {
            let at = err.path().unwrap_or(path).to_path_buf();
            Some(Walked::Error(at, io::Error::other(err.to_string())))
        }
    }))
}

/// The first `N` bytes of a file (`None`: shorter, or unreadable): content detection.
pub fn file_head<const N: usize>(path: &Path) -> Option<[u8; N]> {
    let mut head = [0u8; N];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .ok()?;
    Some(head)
}

/// One artifact `keys` and `check` identify: a file, or a file inside an archive.
pub struct Identified {
    /// What it is shown as: the file's path, or `archive!/entry`.
    pub shown: String,
    /// Its file name (an entry's last component).
    pub name: String,
    pub outcome: Outcome,
    /// Whether it came out of an archive (where files that are not artifacts are usual).
    pub in_archive: bool,
}

/// What an input or an archive's entry is.
pub enum Outcome {
    /// Its identities, and the bytes reading them took.
    Identified(Vec<Identity>, u64),
    /// An archive's entry `index` would skip (package metadata, a link), with the reason it
    /// would record.
    Skipped(String),
    /// An archive's entry `index` would reject (over the limits, undecodable): not read, so
    /// what it is is not known.
    Rejected(String),
    /// Not an artifact, or unreadable (`FormatError::is_io`).
    Failed(FormatError),
}

impl From<Result<(Vec<Identity>, u64), FormatError>> for Outcome {
    fn from(result: Result<(Vec<Identity>, u64), FormatError>) -> Self {
        match result {
            Ok((ids, bytes_read)) => Outcome::Identified(ids, bytes_read),
            Err(err) => Outcome::Failed(err),
        }
    }
}

/// Identifies the file at `path`, and, where it is an archive or a package, every file it
/// holds (expanded as `index` does, within `limits`, one at a time into a scratch
/// directory): each handed to `each` as it is identified.
pub fn identify_each(
    path: &Path,
    as_source: impl Fn(&Path) -> bool,
    detail: Detail,
    limits: archive::Limits,
    each: &mut dyn FnMut(Identified) -> io::Result<()>,
) -> io::Result<()> {
    match identify_first(path, as_source(path), detail) {
        First::Item(item) => each(item),
        First::Container(container) => {
            expand_each(path, container, as_source, detail, limits, each)
        }
    }
}

/// What a file is on its own: identified, or an archive whose entries are still to be walked
/// ([`expand_each`]). The part of [`identify_each`] that can run on any thread, many files at
/// once (`keys`, `push`): an archive's walk is left to the caller's turn.
pub enum First {
    Item(Identified),
    Container(archive::Container),
}

/// [`identify_each`]'s look at the file itself: through its head ([`HeadReader`]: one read
/// for most artifacts), with the details a report shows, as far as `detail` asks
/// ([`identify_described`]); a file
/// no format claims is told an archive from the same head. Under [`plain_reads`], through
/// plain positioned reads instead.
pub fn identify_first(path: &Path, as_source: bool, detail: Detail) -> First {
    let name = file_name(path);
    let (identified, container) = match plain_reads() {
        true => {
            let identified = FileReader::open(path)
                .map_err(FormatError::Io)
                .and_then(|reader| identify_reader(&reader, &name, as_source, detail));
            let container = match &identified {
                Err(FormatError::Unrecognized(_)) => container_of(path),
                _ => None,
            };
            (identified, container)
        }
        false => identify_through_head(path, &name, as_source, detail),
    };
    match container {
        Some(container) => First::Container(container),
        None => First::Item(Identified {
            shown: path.display().to_string(),
            name,
            outcome: identified.into(),
            in_archive: false,
        }),
    }
}

/// The file at `path` identified through its head, and the container it is when no format
/// claims it (told from the same head).
fn identify_through_head(
    path: &Path,
    name: &str,
    as_source: bool,
    detail: Detail,
) -> (Identification, Option<archive::Container>) {
    thread_local! {
        // The thread's head buffer, reused file after file.
        static HEAD: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let opened = FileReader::open(path).and_then(|file| HeadReader::reusing(file, HEAD.take()));
    let reader = match opened {
        Ok(reader) => reader,
        Err(err) => return (Err(FormatError::Io(err)), None),
    };
    let identified = identify_reader(&reader, name, as_source, detail);
    let container = match &identified {
        Err(FormatError::Unrecognized(_)) => {
            let head = reader.head();
            archive::detect(&head[..head.len().min(archive::DETECT_LEN)])
        }
        _ => None,
    };
    HEAD.set(reader.into_parts().1);
    (identified, container)
}

/// Whether identification goes through plain positioned reads, one file at a time
/// (`SYMDEX_PLAIN_READS=1`): the reference the head reader and the workers are tested
/// against (tests/cli_keys.rs), byte for byte.
pub fn plain_reads() -> bool {
    static PLAIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PLAIN.get_or_init(|| std::env::var_os("SYMDEX_PLAIN_READS").is_some_and(|v| v == "1"))
}

/// An identification: the identities and the bytes reading them took.
type Identification = Result<(Vec<Identity>, u64), FormatError>;

/// The entries of the archive at `path` (a `container`, as [`identify_first`] found it),
/// each identified and handed to `each`; a malformed archive is one item saying so.
pub fn expand_each(
    path: &Path,
    container: archive::Container,
    as_source: impl Fn(&Path) -> bool,
    detail: Detail,
    limits: archive::Limits,
    each: &mut dyn FnMut(Identified) -> io::Result<()>,
) -> io::Result<()> {
    let shown = path.display().to_string();
    let name = file_name(path);
    let scratch = tempfile::tempdir()?;
    let reader = FileReader::open(path)?;
    let options = archive::Options {
        limits,
        ..archive::Options::default()
    };
    let walked = archive::expand(
        &reader,
        container,
        &name,
        &options,
        scratch.path(),
        &mut |event| {
            let (entry, outcome) = match event {
                archive::Event::File { entry, data, .. } => {
                    let as_source = as_source(Path::new(&entry));
                    let identified = data.reader().map_err(FormatError::Io).and_then(|reader| {
                        identify_reader(&*reader, file_name_of(&entry), as_source, detail)
                    });
                    (entry, identified.into())
                }
                archive::Event::Skipped { entry, reason } => (entry, Outcome::Skipped(reason)),
                archive::Event::Rejected { entry, reason } => (entry, Outcome::Rejected(reason)),
                // Not asked for (`stored_ranges` is off).
                archive::Event::Stored { entry, .. } => (
                    entry,
                    Outcome::Rejected("reported as a stored range".into()),
                ),
            };
            each(Identified {
                shown: format!("{shown}!/{entry}"),
                name: file_name_of(&entry).to_string(),
                outcome,
                in_archive: true,
            })
        },
    );
    match walked {
        Ok(()) => Ok(()),
        Err(archive::ExpandError::Malformed(reason)) => each(Identified {
            shown,
            name,
            outcome: Outcome::Failed(FormatError::Unrecognized(format!(
                "a malformed {} archive: {reason}",
                container.as_str()
            ))),
            in_archive: false,
        }),
        Err(archive::ExpandError::Io(e)) => Err(e),
    }
}

/// The container the file at `path` is, from its first [`archive::DETECT_LEN`] bytes (all of
/// a shorter file: a tiny gzip file is one too); `None` for an unreadable file.
pub fn container_of(path: &Path) -> Option<archive::Container> {
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            io::Read::read_to_end(
                &mut io::Read::take(f, archive::DETECT_LEN as u64),
                &mut head,
            )
        })
        .ok()?;
    archive::detect(&head)
}

/// Identifies what `reader` holds, a file named `name` (its identities' file names), counting
/// the bytes it reads.
fn identify_reader(
    reader: &dyn RangeReader,
    name: &str,
    as_source: bool,
    detail: Detail,
) -> Identification {
    let reader = CountingReader::new(reader);
    let options = IdentifyOptions { as_source };
    let mut ids = identify_described(&reader, &options, detail)?;
    for id in &mut ids {
        id.fill_file_names(name);
    }
    Ok((ids, reader.bytes_read()))
}
