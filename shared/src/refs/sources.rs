//! The source records of a [`UploadLayout::Flat`] store ([`SourceRecord`]): the uploads of one
//! ingest location, and the stamp of a local input file ([`FileStamp`]).

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

use super::layout::{source_file, UploadLayout};
use super::RefStore;

/// The uploads of one ingest location (for removals by key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub source: String,
    pub uploads: BTreeSet<String>,
    /// A local input file as it was when last hashed: a re-index of the same file trusts its
    /// content identity instead of reading it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileStamp>,
}

/// A local file's status and the content identity (SHA-1) read from it, as git's index keeps
/// them: the same size, modification and change times (nanoseconds), inode and device mean
/// the same bytes. The change time cannot be set back by a user, and a stamp is only taken of
/// a file not modified within [`FileStamp::SETTLED`] of the stat (a write in the same clock
/// tick as the stat would otherwise go unseen).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
    pub device: u64,
    pub etag: String,
}

impl FileStamp {
    /// How long a file must have been left alone before its stamp is trusted.
    pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

    /// Whether `other` describes the same file status (its etag aside).
    pub fn same_status(&self, other: &FileStamp) -> bool {
        (
            self.size,
            self.mtime_ns,
            self.ctime_ns,
            self.inode,
            self.device,
        ) == (
            other.size,
            other.mtime_ns,
            other.ctime_ns,
            other.inode,
            other.device,
        )
    }
}

impl<'s> RefStore<'s> {
    /// The source record of one ingest location (`None` in a [`UploadLayout::ByLocation`]
    /// store, which keeps none).
    pub async fn source(&self, source: &str) -> io::Result<Option<SourceRecord>> {
        if self.layout().await? != UploadLayout::Flat {
            return Ok(None);
        }
        self.read(&source_file(source)).await
    }
}
