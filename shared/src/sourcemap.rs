//! Sources for debuggers: which uploaded source file serves which path a debug file's DWARF
//! names, whichever of the two arrived first.
//!
//! A debug file *wants* absolute paths (`/home/ci/work/src/hello.c`); a source upload (a loose
//! file, or an entry of a source archive) *offers* the path it was uploaded under
//! (`src/hello.c`, or `/build/dir/src/hello.c` under a source root). Both are written into
//! the same join record, chosen by the file's base name, so whoever swaps the record second
//! sees the other (the swap is a compare-and-swap, refs/), and publishes
//! `buildid/<build id>/source/<path>` holding the source's bytes.
//!
//! - A want is matched to the offers sharing the **longest path suffix** with it (whole
//!   components, the base name at least); an offer under a source root matches its exact
//!   absolute path only, and wins over suffixes. Offers that tie with different content are
//!   **ambiguous**: nothing is published for that path, and the debug file's report says why.
//!   A path already served when a tying offer comes (the debug file asked between the two)
//!   stays served by the first: an offer takes no other upload's key (that would be a
//!   withdrawal of a live upload's reference, which the protocol has no step for). The tying
//!   source's manifest record says so in its `reason` (`Indexer::left_to_others`), so the
//!   order-dependent outcome is told, not silent.
//! - A want whose DWARF records the file's MD5 (DWARF 5 `DW_LNCT_MD5`; clang writes it) is
//!   matched by content first: an offer of other bytes (another MD5) never serves it, an
//!   offer of those bytes beats one whose MD5 is unknown (an offer written before offers
//!   carried one), and offers of the same bytes never tie. Where every debug file records
//!   MD5s, what a path is served by no longer depends on the order uploads came in, nor on
//!   a `build` scope: the next version of `main.c` serves the debug files built from it. A
//!   path only other bytes match is not served, and the debug file's report says so.
//! - Joins are scoped by the uploads' product and `build` metadata ([`Scope`]; THREATS.md,
//!   tenancy): a debug file of product A never meets an offer or a note of product B, whatever
//!   build string or paths either chose, and a `main.c` of one build never serves another
//!   build that said which one it is. Build ids are global, though: a `source/` key another
//!   product's upload holds with other bytes is the debug file's conflict, naming that
//!   product (`Indexer::want_sources`, `Indexer::report_claimed`).
//! - The published key is held by the source upload (refs/, invariant 5: a key is held by
//!   the uploads whose bytes it serves): removing the sources unpublishes it, removing the
//!   debug file does not (its build's sources stay served until they are removed).
//! - A removed source's offer is withdrawn by its removal, which then serves the paths it
//!   served or made ambiguous from the offers matching them now (`Indexer::withdraw_offer`):
//!   no offer outlives its upload (the scenarios check it), so none makes a path ambiguous
//!   for debug files to come. The paths are served before the offer goes, so that a retry
//!   after a crash, finding the offer still there, serves them again and reports them
//!   again.
//! - An offer whose upload is gone or going is dead (its removal has not withdrawn it yet,
//!   or an upload record written before records named their join record left it): a debug
//!   file, or a withdrawal handing a path on, meeting it as the best match takes the next
//!   best (`Indexer::serve_path`; a debug file also drops it from the record). A removal's
//!   withdrawal may find its offer dropped already and decide nothing for that path, so the
//!   one meeting it must. Offers tying for a path are asked the same (a read of each one's
//!   upload record, only where sources tie), so a dead one never keeps a path ambiguous.
//! - **Sources without flags.** A file no format claims (not asked to be a source) is a
//!   source when a debug file of its scope names it: the want records its MD5 and the file
//!   has it, or their paths share [`UNFLAGGED_SUFFIX`] components ([`unflagged_may_serve`]); a
//!   secret-shaped name ([`secret_shaped`]) never is, nor is it noted. Whichever of
//!   the two comes first, the second sees the other in the same join record: the file swaps
//!   in a note of itself ([`Unclaimed`]) unless a want there names it already (then it is
//!   indexed as a source at once), and the debug file, after swapping in its wants, has the
//!   noted files its paths match indexed again (`pipeline::HandOver`), now named. Unrelated
//!   files publish nothing: a note is state under `_symdex/`, not a key. A note is dropped
//!   by a claimer once its file's upload is indexed; one whose file is gone, changed, or not
//!   the content the DWARF records costs each debug file naming it a re-read, until newer
//!   notes push it out ([`MAX_UNCLAIMED`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::formats::dwarf::normalize;
use crate::storage::STATE_PREFIX;
use crate::upload_meta::UploadMeta;

mod digest;
mod scope;
mod secrets;

pub use digest::ContentDigest;
pub use scope::Scope;
pub use secrets::secret_shaped;

/// A source file an upload offers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Offer {
    /// The path it was uploaded under (`/`-separated, relative or absolute).
    pub path: String,
    /// The build's source root, when the upload named one: the offer then serves exactly
    /// `<root>/<path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    pub upload: String,
    /// A key holding its bytes (copied from there), and their identity.
    pub key: String,
    pub etag: String,
    pub size: u64,
    /// MD5 of its bytes (lowercase hex): what a want recording one matches. Absent in offers
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// SHA-1 and SHA-256 of its bytes: what a PDB document recording one of those matches.
    /// Absent in offers written before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A source path a debug file names, or a document a PDB or Portable PDB names.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Want {
    pub build_id: String,
    /// Absolute, normalised (formats::dwarf::normalize).
    pub path: String,
    pub upload: String,
    /// The MD5 its DWARF (or PDB) records of the file (lowercase hex), when it records one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// The SHA-1 or SHA-256 a PDB or Portable PDB records of the document instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The key serving it when it is not its debuginfod `source/` key: a PDB document's
    /// `src/<product>/<build>/<path>` (sourcelink.rs, the URL its Source Link map gives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Want {
    /// The strongest digest recorded of the wanted file, if any.
    pub fn digest(&self) -> Option<ContentDigest<'_>> {
        ContentDigest::strongest(
            self.md5.as_deref(),
            self.sha1.as_deref(),
            self.sha256.as_deref(),
        )
    }

    /// The unprefixed key serving it: [`Want::key`], or its debuginfod `source/` key.
    pub fn store_key(&self) -> String {
        self.key
            .clone()
            .unwrap_or_else(|| source_key(&self.build_id, &self.path))
    }
}

/// A file no format claimed and nobody asked to be a source, noted in the join record of its
/// base name, so that a debug file of its scope naming it later has it indexed again: then
/// as that debug file's source (sourcemap.rs, "sources without flags"). What it keeps is what
/// re-reading the file takes (`pipeline::HandOver`, as for an upload waiting for a key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unclaimed {
    /// The path it would offer (as [`Offer::path`]), under the build's source root if any.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    pub upload: String,
    /// Where its bytes are: a local path or `s3://bucket/key` (an archive entry's archive).
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its content identity (an archive entry's archive's).
    pub ingest_etag: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    pub meta: UploadMeta,
}

impl Unclaimed {
    /// The offer it would make, its content unknown (what a want's path is matched against).
    fn as_offer(&self) -> Offer {
        Offer {
            path: self.path.clone(),
            root: self.root.clone(),
            upload: self.upload.clone(),
            key: String::new(),
            etag: String::new(),
            size: 0,
            md5: None,
            sha1: None,
            sha256: None,
        }
    }
}

/// One join record: the offers and wants of one scope whose base names hash alike, oldest
/// first, and the unclaimed files noted there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMapRecord {
    #[serde(default)]
    pub offers: Vec<Offer>,
    #[serde(default)]
    pub wants: Vec<Want>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclaimed: Vec<Unclaimed>,
}

impl SourceMapRecord {
    /// Whether it holds nothing (then it is deleted rather than written).
    pub fn is_empty(&self) -> bool {
        self.offers.is_empty() && self.wants.is_empty() && self.unclaimed.is_empty()
    }

    /// Adds an offer not there yet (the oldest goes beyond [`MAX_RECORD_ENTRIES`]); `true`
    /// when the record changed.
    pub fn offer(&mut self, offer: &Offer) -> bool {
        // An offer of the same upload, path and bytes written before offers carried every
        // digest is brought up to date in place, not kept beside its newer self.
        let older = self.offers.iter_mut().find(|o| {
            (&o.upload, &o.path, &o.etag) == (&offer.upload, &offer.path, &offer.etag)
                && *o != offer
        });
        if let Some(older) = older {
            *older = offer.clone();
            return true;
        }
        push_bounded(&mut self.offers, offer)
    }

    /// Adds a want not there yet, as [`Self::offer`].
    pub fn want(&mut self, want: &Want) -> bool {
        push_bounded(&mut self.wants, want)
    }

    /// Notes an unclaimed file, unless a want here names it already (it is a source then,
    /// and indexed so at once: [`Self::naming`]) or it is noted; `true` when the record
    /// changed. At most [`MAX_UNCLAIMED`] notes, the newest.
    pub fn note(&mut self, unclaimed: &Unclaimed) -> bool {
        if self.unclaimed.contains(unclaimed) || !self.naming(unclaimed).is_empty() {
            return false;
        }
        self.unclaimed.push(unclaimed.clone());
        if self.unclaimed.len() > MAX_UNCLAIMED {
            self.unclaimed.remove(0);
        }
        true
    }

    /// Drops the notes of `upload` (indexed now); `true` when the record changed.
    pub fn claimed(&mut self, upload: &str) -> bool {
        let before = self.unclaimed.len();
        self.unclaimed.retain(|u| u.upload != upload);
        self.unclaimed.len() != before
    }

    /// The wants whose paths may name `unclaimed` (its content aside: [`NamedBy::admits`]).
    pub fn naming(&self, unclaimed: &Unclaimed) -> Vec<Want> {
        self.wants
            .iter()
            .filter(|w| names_unflagged(&w.path, w.md5.as_deref(), &unclaimed.as_offer(), None))
            .cloned()
            .collect()
    }

    /// The unclaimed files a want of `wanted` (recording `wanted_md5`) may name (their
    /// content unknown until read).
    pub fn unclaimed_for(&self, wanted: &str, wanted_md5: Option<&str>) -> Vec<&Unclaimed> {
        self.unclaimed
            .iter()
            .filter(|u| names_unflagged(wanted, wanted_md5, &u.as_offer(), None))
            .collect()
    }
}

/// The wants naming an unclaimed file by its path: whether it is their source is its
/// content's to say, where their DWARF records an MD5.
#[derive(Debug, Clone)]
pub struct NamedBy {
    pub unclaimed: Unclaimed,
    pub wants: Vec<Want>,
}

impl NamedBy {
    /// Whether a want takes the file of MD5 `md5` (a source identity's) as its source, by
    /// [`unflagged_may_serve`]'s rule.
    pub fn admits(&self, md5: Option<&str>) -> bool {
        let Some(md5) = md5 else {
            return false;
        };
        let offer = self.unclaimed.as_offer();
        self.wants
            .iter()
            .any(|w| names_unflagged(&w.path, w.md5.as_deref(), &offer, Some(md5)))
    }
}

fn push_bounded<T: Clone + PartialEq>(list: &mut Vec<T>, item: &T) -> bool {
    if list.contains(item) {
        return false;
    }
    list.push(item.clone());
    if list.len() > MAX_RECORD_ENTRIES {
        list.remove(0);
    }
    true
}

/// How one wanted path is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match<'a> {
    Found(&'a Offer),
    /// Offers with different content tie for the longest suffix (these).
    Ambiguous(Vec<&'a Offer>),
    /// Only offers of other bytes than the want's digest match its path (this many).
    OtherContent(usize),
    Missing,
}

/// Whether `offer` matches the path `wanted` at all (by its base name and a suffix, or
/// exactly under its source root), whatever its content.
pub fn matches_path(offer: &Offer, wanted: &str) -> bool {
    score(offer, wanted) > 0
}

/// The last component of a path.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The join record of `base_name` in `scope`: one of 256 per scope, so a debug file naming
/// thousands of headers touches at most 256.
pub fn record_file(scope: &Scope, base_name: &str) -> String {
    let bucket = crate::digest::sha1_hex(format!("{}\n{base_name}", scope.id()).as_bytes());
    format!("{}{}.json", scope_prefix(scope), &bucket[..2])
}

/// Where the join records of `scope` are (every [`record_file`] of it starts so).
pub fn scope_prefix(scope: &Scope) -> String {
    let scope_hash = crate::digest::sha1_hex(scope.id().as_bytes());
    format!("{STATE_PREFIX}/sourcemap/{}/", &scope_hash[..16])
}

/// The debuginfod key of a source path (`path` absolute and normalised).
pub fn source_key(build_id: &str, path: &str) -> String {
    format!("buildid/{build_id}/source{path}")
}

/// How many trailing components `offer` shares with `wanted` (which is absolute, normalised).
fn score(offer: &Offer, wanted: &str) -> usize {
    if let Some(root) = &offer.root {
        let full = format!("{}/{}", root.trim_end_matches('/'), offer.path);
        return match normalize(full.as_bytes()) {
            Ok(full) if full == wanted => usize::MAX,
            _ => 0,
        };
    }
    let offered = offer.path.split('/').filter(|c| !c.is_empty() && *c != ".");
    offered
        .rev()
        .zip(wanted.split('/').rev())
        .take_while(|(a, b)| a == b)
        .count()
}

/// Least path components a file no flag names shares with a want that records no MD5 (the
/// base name and its directory at least): a debug file naming `/x/.env` or `/y/config.h`
/// takes no unflagged file by its base name alone.
pub const UNFLAGGED_SUFFIX: usize = 2;

/// Whether a file no flag names, offered under `path` (relative, no source root), is the
/// source of the wanted path `wanted` (whose DWARF records `wanted_md5`, if any): the want
/// records its MD5 and the file has it, or the two share [`UNFLAGGED_SUFFIX`] trailing
/// components at least. `md5`: the file's, `None` while its content is unknown (then only
/// whether it may be, by its path). What the indexer decides and a client deciding locally
/// which files to send asks (`symdex push`). A secret-shaped name ([`secret_shaped`]) is
/// the caller's to refuse first.
pub fn unflagged_may_serve(
    wanted: &str,
    wanted_md5: Option<&str>,
    path: &str,
    md5: Option<&str>,
) -> bool {
    let offer = Offer {
        path: path.to_string(),
        root: None,
        upload: String::new(),
        key: String::new(),
        etag: String::new(),
        size: 0,
        md5: None,
        sha1: None,
        sha256: None,
    };
    names_unflagged(wanted, wanted_md5, &offer, md5)
}

/// [`unflagged_may_serve`] for a file offered as `offer` (under a source root, its exact
/// path only).
fn names_unflagged(
    wanted: &str,
    wanted_md5: Option<&str>,
    offer: &Offer,
    md5: Option<&str>,
) -> bool {
    if base_name(wanted) != base_name(&offer.path) {
        return false;
    }
    let shared = score(offer, wanted);
    match (wanted_md5, md5) {
        _ if shared == 0 => false,
        (Some(wanted), Some(md5)) => wanted == md5,
        (Some(_), None) => true,
        (None, _) => shared >= UNFLAGGED_SUFFIX,
    }
}

/// The offer serving `wanted` (whose file's digest is `digest`, where its DWARF or PDB records
/// one): an offer of those bytes before one whose digest is unknown, then the longest suffix,
/// unless offers of different content tie. Offers of other bytes than `digest` never serve it.
pub fn best_offer<'a>(
    wanted: &str,
    digest: Option<ContentDigest<'_>>,
    offers: impl IntoIterator<Item = &'a Offer>,
) -> Match<'a> {
    let mut best: Vec<&Offer> = Vec::new();
    let mut best_rank = (false, 0);
    let mut other_content = 0;
    for offer in offers {
        let s = score(offer, wanted);
        if s == 0 {
            continue;
        }
        let same_bytes = match digest.map(|d| (d.value(), d.of_offer(offer))) {
            Some((wanted, Some(offered))) if wanted != offered => {
                other_content += 1;
                continue;
            }
            Some((_, Some(_))) => true,
            // A SHA-1 or SHA-256 is a PDB's record of a document, served only with bytes
            // known to be it (documents.rs): an offer written before offers carried them is
            // not taken for it.
            Some(_) if !matches!(digest, Some(ContentDigest::Md5(_))) => continue,
            _ => false,
        };
        let rank = (same_bytes, s);
        if rank < best_rank {
            continue;
        }
        if rank > best_rank {
            best.clear();
            best_rank = rank;
        }
        best.push(offer);
    }
    let Some(first) = best.first() else {
        return if other_content > 0 {
            Match::OtherContent(other_content)
        } else {
            Match::Missing
        };
    };
    // Offers of the want's MD5 hold the same bytes (their ETags may differ: an S3 multipart
    // upload's is no digest of them).
    let contents: BTreeSet<&str> = best.iter().map(|o| o.etag.as_str()).collect();
    if contents.len() > 1 && !best_rank.0 {
        Match::Ambiguous(best)
    } else {
        Match::Found(first)
    }
}

/// Most offers and most wants one join record keeps, the newest (each bounds a
/// compare-and-swap's size). A scope is a build; uploads without one share the store-wide
/// scope, where a base name every build names (`main.c`, `stdio.h`) would otherwise grow its
/// record with every build (measured: quadratic indexing time). A debug file whose want was
/// pushed out is served only by sources that arrived before it was, and vice versa.
pub const MAX_RECORD_ENTRIES: usize = 256;

/// Most unclaimed files one join record notes, the newest: every file no format claims notes
/// itself, sources and unrelated files alike, so the bound is what a build's unrelated files
/// cost its records. A note pushed out is claimed by no debug file that comes later; the
/// file is named again by indexing it again.
pub const MAX_UNCLAIMED: usize = 64;

/// What became of the sources one debug file names (its manifest record says it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    /// Paths its DWARF names.
    pub referenced: usize,
    /// Paths served (`buildid/<id>/source/...` published or already there).
    pub served: usize,
    /// Paths with no uploaded source (so far: sources uploaded later are published then, and
    /// their upload's record lists the keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Paths not served for another reason (ambiguous, not a valid key), with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unserved: Vec<String>,
    /// Names in the DWARF that are no source path (relative without a compilation directory,
    /// climbing above `/`, control characters, too long, unreadable tables), by reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::{
        best_offer, record_file, source_key, unflagged_may_serve, ContentDigest, Match, NamedBy,
        Offer, Scope, SourceMapRecord, Unclaimed, Want, MAX_RECORD_ENTRIES, MAX_UNCLAIMED,
    };
    use crate::upload_meta::UploadMeta;

    fn offer(path: &str, etag: &str) -> Offer {
        Offer {
            path: path.into(),
            root: None,
            upload: format!("u-{path}-{etag}"),
            key: format!("k-{etag}"),
            etag: etag.into(),
            size: 1,
            md5: None,
            sha1: None,
            sha256: None,
        }
    }

    fn with_md5(mut offer: Offer, md5: &str) -> Offer {
        offer.md5 = Some(md5.into());
        offer
    }

    #[test]
    fn the_longest_suffix_wins_and_ties_of_different_content_are_ambiguous() {
        let wanted = "/home/ci/work/src/hello.c";
        let offers = [
            offer("src/hello.c", "a"),
            offer("other/hello.c", "b"),
            offer("hello.c", "c"),
        ];
        assert_eq!(best_offer(wanted, None, &offers), Match::Found(&offers[0]));
        // A deeper match beats a shallower one.
        let deeper = offer("repo/work/src/hello.c", "d");
        let all = [offers[0].clone(), deeper.clone()];
        assert_eq!(best_offer(wanted, None, &all), Match::Found(&all[1]));
        // Two offers, same suffix length, different bytes: ambiguous.
        let tie = [offer("x/src/hello.c", "a"), offer("y/src/hello.c", "b")];
        assert_eq!(
            best_offer(wanted, None, &tie),
            Match::Ambiguous(vec![&tie[0], &tie[1]])
        );
        // Same bytes: not ambiguous.
        let same = [offer("x/src/hello.c", "a"), offer("y/src/hello.c", "a")];
        assert!(matches!(best_offer(wanted, None, &same), Match::Found(_)));
        // Another base name never matches.
        assert_eq!(
            best_offer(wanted, None, &[offer("src/hello.h", "a")]),
            Match::Missing
        );
        assert_eq!(best_offer(wanted, None, &[]), Match::Missing);
    }

    #[test]
    fn a_recorded_md5_picks_its_bytes_and_refuses_others() {
        let wanted = "/home/ci/work/src/hello.c";
        let v1 = with_md5(offer("src/hello.c", "a"), "m1");
        let v2 = with_md5(offer("x/src/hello.c", "b"), "m2");
        let deeper_v2 = with_md5(offer("work/src/hello.c", "b"), "m2");
        let unknown = offer("ci/work/src/hello.c", "c");
        // Two versions tie by path: the MD5 decides, whichever came first.
        let both = [v1.clone(), v2.clone()];
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), &both),
            Match::Found(&both[0])
        );
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m2")), &both),
            Match::Found(&both[1])
        );
        let reversed = [v2.clone(), v1.clone()];
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), &reversed),
            Match::Found(&reversed[1])
        );
        // Without a recorded MD5 they still tie.
        assert!(matches!(
            best_offer(wanted, None, &both),
            Match::Ambiguous(_)
        ));
        // Other bytes never serve it, however long the suffix they share.
        let others = [deeper_v2.clone(), v2.clone()];
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), &others),
            Match::OtherContent(2)
        );
        // An offer of its bytes beats a longer suffix whose MD5 is unknown; alone, the unknown
        // one serves (offers written before offers carried an MD5).
        let mixed = [unknown.clone(), v1.clone()];
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), &mixed),
            Match::Found(&mixed[1])
        );
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), [&unknown]),
            Match::Found(&unknown)
        );
        // Same MD5, different ETags (an S3 multipart upload's): the same bytes, no tie.
        let same = [
            v1.clone(),
            with_md5(offer("y/src/hello.c", "multipart-2"), "m1"),
        ];
        assert_eq!(
            best_offer(wanted, Some(ContentDigest::Md5("m1")), &same),
            Match::Found(&same[0])
        );
    }

    #[test]
    fn a_source_root_serves_its_exact_path_and_beats_suffixes() {
        let wanted = "/build/dir/src/hello.c";
        let mut rooted = offer("src/hello.c", "r");
        rooted.root = Some("/build/dir/".into());
        let suffix = offer("a/build/dir/src/hello.c", "s");
        let offers = [suffix, rooted.clone()];
        assert_eq!(best_offer(wanted, None, &offers), Match::Found(&rooted));
        // Under another root it serves nothing.
        assert_eq!(
            best_offer("/elsewhere/src/hello.c", None, [&rooted]),
            Match::Missing
        );
    }

    #[test]
    fn a_join_record_keeps_the_newest_entries_once() {
        let mut record = SourceMapRecord::default();
        let want = |i: usize| Want {
            build_id: format!("{i:040x}"),
            path: "/src/main.c".into(),
            upload: format!("u{i}"),
            md5: None,
            ..Want::default()
        };
        assert!(record.want(&want(0)));
        assert!(!record.want(&want(0)), "once");
        for i in 1..=MAX_RECORD_ENTRIES {
            record.want(&want(i));
        }
        assert_eq!(record.wants.len(), MAX_RECORD_ENTRIES);
        assert_eq!(record.wants[0], want(1), "the oldest went");
        assert_eq!(record.wants.last(), Some(&want(MAX_RECORD_ENTRIES)));
        assert!(record.offer(&offer("src/main.c", "a")));
        assert!(!record.offer(&offer("src/main.c", "a")));
    }

    fn unclaimed(path: &str) -> Unclaimed {
        Unclaimed {
            path: path.into(),
            root: None,
            upload: format!("u-{path}"),
            source: format!("s3://ingest/{path}"),
            version: None,
            ingest_etag: "e".into(),
            entry: None,
            meta: UploadMeta::default(),
        }
    }

    #[test]
    fn an_unclaimed_file_is_noted_unless_a_want_names_it_and_admitted_by_its_md5() {
        let mut record = SourceMapRecord::default();
        let file = unclaimed("ci/b1/src/hello.c");
        let elsewhere = unclaimed("ci/b1/test/hello.c");
        assert!(record.note(&file));
        assert!(!record.note(&file), "once");
        assert!(record.naming(&file).is_empty());
        let want = Want {
            build_id: "ab".into(),
            path: "/work/src/hello.c".into(),
            upload: "d".into(),
            md5: Some("m1".into()),
            ..Want::default()
        };
        record.want(&want);
        // The suffix rule, content aside: both share `hello.c` with the want; `src/hello.c`
        // is the longer match, but a note is matched on its own.
        assert_eq!(
            record.unclaimed_for(&want.path, want.md5.as_deref()),
            vec![&file]
        );
        assert_eq!(record.naming(&file), vec![want.clone()]);
        assert!(
            !record.note(&elsewhere),
            "named already: no note, a source at once"
        );
        assert!(record.naming(&unclaimed("ci/b1/hello.h")).is_empty());
        // The DWARF's MD5 decides: other bytes are no source, the same or unknown ones are.
        let named = NamedBy {
            unclaimed: file.clone(),
            wants: record.naming(&file),
        };
        assert!(named.admits(Some("m1")));
        assert!(!named.admits(Some("m2")));
        let without_md5 = NamedBy {
            wants: vec![Want { md5: None, ..want }],
            ..named
        };
        assert!(without_md5.admits(Some("m2")));
        assert!(record.claimed(&file.upload));
        assert!(!record.claimed(&file.upload));
        assert!(record.unclaimed.is_empty());
        // Bounded: the newest notes stay.
        for i in 0..=MAX_UNCLAIMED {
            record.note(&unclaimed(&format!("n{i}/x.c")));
        }
        assert_eq!(record.unclaimed.len(), MAX_UNCLAIMED);
        assert_eq!(record.unclaimed[0].path, "n1/x.c");
        assert!(!record.is_empty());
    }

    #[test]
    fn an_unflagged_file_serves_a_want_by_its_md5_or_two_components() {
        let may =
            |wanted, wanted_md5, path, md5| unflagged_may_serve(wanted, wanted_md5, path, md5);
        assert!(may(
            "/w/src/hello.c",
            None,
            "out/src.tar.gz!/src/hello.c",
            None
        ));
        // The base name alone is no match without the want's MD5: `/x/.env` takes no `.env`.
        assert!(!may("/w/src/hello.c", None, "hello.c", None));
        assert!(!may("/x/.env", None, ".env", None));
        assert!(!may("/y/secrets.env", None, "app/config/secrets.env", None));
        assert!(!may("/w/src/hello.c", None, "src/hello.h", None));
        // With the want's MD5 the content decides: unknown yet, then equal or not.
        assert!(may("/w/src/hello.c", Some("m1"), "hello.c", None));
        assert!(may("/w/src/hello.c", Some("m1"), "hello.c", Some("m1")));
        assert!(!may(
            "/w/src/hello.c",
            Some("m1"),
            "src/hello.c",
            Some("m2")
        ));
        // Content without a want's MD5 takes the path rule.
        assert!(!may("/w/src/hello.c", None, "hello.c", Some("m1")));
        // A noted file under a source root: its exact path only.
        let mut rooted = unclaimed("hello.c");
        rooted.root = Some("/w/src".into());
        let mut record = SourceMapRecord::default();
        record.note(&rooted);
        assert_eq!(record.unclaimed_for("/w/src/hello.c", None), vec![&rooted]);
        assert!(record.unclaimed_for("/v/src/hello.c", None).is_empty());
    }

    #[test]
    fn record_files_spread_by_scope_and_name() {
        let scope = |product: Option<&str>, build: Option<&str>| {
            Scope::of(&UploadMeta {
                product: product.map(str::to_string),
                build: build.map(str::to_string),
                ..UploadMeta::default()
            })
        };
        let a = record_file(&scope(None, None), "hello.c");
        assert!(a.starts_with("_symdex/sourcemap/") && a.ends_with(".json"));
        assert_eq!(a, record_file(&scope(None, None), "hello.c"));
        let dir = |file: String| file.rsplit_once('/').map(|x| x.0.to_string());
        // Two products, one build string: two scopes.
        assert_ne!(
            dir(record_file(&scope(Some("a"), Some("1")), "hello.c")),
            dir(record_file(&scope(Some("b"), Some("1")), "hello.c"))
        );
        assert_ne!(
            dir(record_file(&scope(Some("a"), None), "hello.c")),
            dir(a.clone())
        );
        assert_ne!(
            record_file(&scope(None, Some("build-1")), "hello.c")
                .rsplit_once('/')
                .map(|x| x.0.to_string()),
            a.rsplit_once('/').map(|x| x.0.to_string())
        );
        assert_eq!(
            source_key("ab12", "/home/ci/src/a.c"),
            "buildid/ab12/source/home/ci/src/a.c"
        );
    }
}
