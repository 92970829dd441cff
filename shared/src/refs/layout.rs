//! Where each record lives: the store's upload layout ([`UploadLayout`], decided once and
//! kept in its marker) and the names of the record files.

use std::io;

use serde::{Deserialize, Serialize};

use super::swap::{parse, MAX_ATTEMPTS};
use super::RefStore;
#[cfg(doc)]
use crate::storage::StoreTraits;
use crate::storage::{STATE_PREFIX, UPLOADS_DIR};

/// Where a [`UploadLayout::Flat`] store keeps its source records.
pub(super) const SOURCES_DIR: &str = "_symdex/sources/";
/// The store's [`UploadLayout`], written once.
pub const LAYOUT_FILE: &str = "_symdex/layout.json";

/// How a store names its upload records: decided once per store and kept in its marker
/// ([`LAYOUT_FILE`]), so every writer follows the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UploadLayout {
    /// `_symdex/uploads/<sha1 of upload>.json`, and per ingest location a source record
    /// listing its uploads (`_symdex/sources/`, written by the plan): stores made before
    /// upload records were named by location, and local stores (the CLI keeps an input's
    /// file stamp in its source record).
    Flat,
    /// `_symdex/uploads/<sha1 of location>/<sha1 of upload>.json` (`location_of`): the
    /// upload record is the upload's registration with its location, found by a removal
    /// listing the location's directory — no source record, one request less per artifact.
    /// New S3 stores ([`crate::storage::StoreTraits::uploads_by_location`]).
    ByLocation,
}

/// The marker's content.
#[derive(Serialize, Deserialize)]
pub(super) struct LayoutMarker {
    pub(super) uploads: UploadLayout,
}

/// The location an upload id names: up to its first `@` (every id names its location, then
/// `@` and a version or content identity) or `!/` (an archive's entry), whichever comes
/// first. A location holding either is cut short the same way for each of its uploads and
/// for its removal: it shares a directory with the locations that begin alike, told apart
/// by their records' `source`.
pub(super) fn location_of(upload: &str) -> &str {
    let cut = [upload.find('@'), upload.find("!/")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(upload.len());
    &upload[..cut]
}

/// The name of an upload's record under [`UPLOADS_DIR`], which is also the owner its
/// objects name (invariant 7): SHA-1s, short and ASCII as S3 metadata must be, so the
/// upload is found from its object.
pub(super) fn upload_name(layout: UploadLayout, upload: &str) -> String {
    let leaf = crate::digest::sha1_hex(upload.as_bytes());
    match layout {
        UploadLayout::Flat => leaf,
        UploadLayout::ByLocation => format!("{}/{leaf}", location_dir(upload)),
    }
}

/// The directory of a location's upload records in a [`UploadLayout::ByLocation`] store.
pub(super) fn location_dir(location: &str) -> String {
    crate::digest::sha1_hex(location_of(location).as_bytes())
}

pub(super) fn upload_file(layout: UploadLayout, upload: &str) -> String {
    format!("{UPLOADS_DIR}{}.json", upload_name(layout, upload))
}

/// Whether `owner` has the form of an upload record's name (either layout's).
pub(super) fn is_upload_name(owner: &str) -> bool {
    let sha1 = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    match owner.split_once('/') {
        Some((dir, leaf)) => sha1(dir) && sha1(leaf),
        None => sha1(owner),
    }
}

pub(super) fn key_file(key: &str) -> String {
    format!("{STATE_PREFIX}/refs/{key}.json")
}

/// Whether `key`'s reference record (`_symdex/refs/<key>.json`) stays within S3's 1,024-byte
/// keys: with a long layout prefix it could outgrow them, and such a key is never published.
pub(crate) fn record_fits(key: &str) -> bool {
    key_file(key).len() <= 1024
}

pub(super) fn source_file(source: &str) -> String {
    format!(
        "{SOURCES_DIR}{}.json",
        crate::digest::sha1_hex(source.as_bytes())
    )
}

pub(super) fn id_file(debug_id: &str) -> String {
    format!("{STATE_PREFIX}/ids/{debug_id}.json")
}

impl<'s> RefStore<'s> {
    /// How the store names its upload records: its marker says, read once. A store without
    /// one is [`UploadLayout::Flat`], unless it lays new stores out by location
    /// ([`StoreTraits::uploads_by_location`]): then it is decided now — `ByLocation` where no
    /// upload or source record is yet, else `Flat` (records written before layouts were
    /// named) — and the marker is created only where none is: a writer deciding at the same
    /// time reads the other's decision instead, so every writer follows the same.
    pub async fn layout(&self) -> io::Result<UploadLayout> {
        if let Some(layout) = self.layout.get() {
            return Ok(*layout);
        }
        let layout = self.decide_layout().await?;
        Ok(*self.layout.get_or_init(|| layout))
    }

    async fn decide_layout(&self) -> io::Result<UploadLayout> {
        for _ in 0..MAX_ATTEMPTS {
            if let Some(bytes) = self.store.read_settled(LAYOUT_FILE).await? {
                return Ok(parse::<LayoutMarker>(LAYOUT_FILE, &bytes)?.uploads);
            }
            if !self.traits.uploads_by_location {
                return Ok(UploadLayout::Flat);
            }
            let existing = self.store.any_under(UPLOADS_DIR).await?
                || self.store.any_under(SOURCES_DIR).await?;
            let uploads = if existing {
                UploadLayout::Flat
            } else {
                UploadLayout::ByLocation
            };
            let marker = serde_json::to_vec(&LayoutMarker { uploads })?;
            if self.store.create_settled(LAYOUT_FILE, &marker).await? {
                return Ok(uploads);
            }
        }
        Err(io::Error::other(format!("{LAYOUT_FILE}: unreadable")))
    }

    /// The owner an object names for `upload` (invariant 7): its record's name.
    pub async fn owner_token(&self, upload: &str) -> io::Result<String> {
        Ok(upload_name(self.layout().await?, upload))
    }

    /// Where `upload`'s record is.
    pub(crate) async fn upload_file(&self, upload: &str) -> io::Result<String> {
        Ok(upload_file(self.layout().await?, upload))
    }
}
