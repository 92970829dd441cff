//! References: which uploads need each published key (SymStore's `refs.ptr`, as JSON objects),
//! and the protocol that keeps keys published exactly while they are needed.
//!
//! - `_symdex/refs/<key>.json`: the key's content identity, the uploads referencing it, and the
//!   lease of a change to the object in progress. Where objects name their owner, only for a
//!   key two uploads share or a removal holds (invariant 7): else the object's owner, the name
//!   of an upload's record (S3 metadata `symdex-owner`, a local file's extended attribute
//!   `user.symdex.owner`), stands for it.
//! - `_symdex/uploads/<sha1 of location>/<sha1 of upload id>.json`: one upload, its state and
//!   its keys, named under the ingest location it came from, which a removal lists
//!   ([`UploadLayout::ByLocation`], new S3 stores). Stores made before, and local stores
//!   ([`UploadLayout::Flat`]), keep `_symdex/uploads/<sha1 of upload id>.json`; S3 ones a
//!   record of each location's uploads too, `_symdex/sources/<sha1 of source>.json` (a local
//!   store finds them among all upload records: `StoreTraits::source_records`). The store's
//!   layout is decided once and kept in `_symdex/layout.json` ([`RefStore::layout`]). A local
//!   store appends each new version of an upload record to its file (`storage::appended`).
//! - `_symdex/stamps/<sha1 of directory>.json`: the CLI's stamps of its input files by
//!   directory (`src/stamps.rs`), a cache of their content identities no invariant here
//!   depends on.
//! - `_symdex/ids/<debug id>.json`: PDB names recorded by PEs' CodeView records, and where a PDB
//!   with that id was published, so a PDB is reachable under the exact name its PE uses.
//! - `_symdex/dwp/<scope>.json`: binaries with skeleton units and DWARF packages of one
//!   product and build, joined by their DWO ids (`pipeline/packages.rs`).
//! - `_symdex/sourcemap/<scope>/<bucket>.json`: source files offered and source paths wanted,
//!   joined by path (sourcemap.rs).
//!
//! # Rooms
//!
//! Each file owns a type and what is done with it; a sibling names another's items by
//! explicit imports, and no two name each other (`tests/house.rs`). From the bottom up:
//!
//! - `patience.rs`: [`Wait`], `Patience` (one decision's waits) and `busy`;
//! - `swap.rs`: `Step` and the compare-and-swap every record changes by (`RefStore::update`);
//!   `prior.rs`: `Prior`, what was known of a record before it (read, guessed absent, unread);
//! - `shared_reads.rs`: `SharedReads`, one read for everyone asking at once;
//! - `lease.rs`: [`Lease`], [`LeasePolicy`], the holders and `Publisher` (invariant 1);
//!   `turn.rs`: `InTurn`, keys published at once taken in turn;
//! - `layout.rs`: where each record lives ([`UploadLayout`], the names of record files);
//!   `keys.rs`: [`KeyRecord`], a key's record as read, or as its object's owner stands for
//!   it (invariant 7);
//! - `listing.rs`: `Listing`, the upload listings that end `create` leases, and a key
//!   record's lease judged by them; `held.rs`: `Held`, the `create` leases a run leaves to
//!   its finalize (invariant 1);
//! - `publication.rs`: [`Content`], `OnDifferent`, [`KeyOutcome`], `Publication`;
//!   `owners.rs`: whose an object is (`SameBy`, invariant 7); `overwrites.rs`: whose bytes
//!   an overwrite may replace (its own product's alone); `objects.rs`: the object at a
//!   key created, shared, copied or taken back (`Creation`, `Found`, `Sharing`; invariants 2
//!   and 7); `decide.rs`: `Deciding` and the `PublishPlan` each swap of a publish makes;
//!   `publish.rs`: publishing a key for an upload (`Publishing`, what it goes by; `Learned`,
//!   what it learns between swaps), the loop that swaps until a plan stands and carries it
//!   out;
//! - `remove.rs`: [`RemoveOutcome`], references removed, and objects with their last one
//!   (invariant 3);
//! - `sources.rs`: `SourceRecord` and [`FileStamp`], a flat store's uploads by location;
//!   `uploads.rs`: [`UploadRecord`] (with [`IndexedAs`], [`PriorRead`], [`Run`]), planned,
//!   finalized and removed (invariant 4); `inventory.rs`: store-wide reads of every key and
//!   upload; `ids.rs`: [`IdRecord`], debug-id records (invariant 5); `waiting.rs`:
//!   `Waiting`, hand-overs (invariant 8); `packages.rs`: the join records of split-DWARF
//!   binaries and their packages ([`PackageJoin`]); `source_maps.rs`: the join records of sources and
//!   debug files ([`DeferredWrites`]);
//! - `mod.rs`: [`RefStore`] itself, what it keeps, and these invariants. It re-exports what
//!   the front ends and the crate's other modules name (the rest stays inside `refs/`).
//!
//! # Invariants
//!
//! Every record changes only by compare-and-swap on the version that was read
//! ([`Storage::put_if`], [`Storage::delete_if`]), so concurrent writers never lose each
//! other's updates. On top of that:
//!
//! 1. **Objects change under a lease.** The object at a key is written or deleted only by the
//!    holder of the lease in the key's record, taken by compare-and-swap. Nobody else writes it,
//!    removes a reference that would empty it, or takes the lease while it is live. A holder acts
//!    only while its lease runs (`until`, longer than any run of the function that took it); a
//!    lease past its time, or any lease but one's own while holding the local store's writer lock,
//!    was left by a dead process and is taken over. The holder is the operation and the upload
//!    (`index:<upload>`, `remove:<upload>`): a retried message takes its own earlier attempt's
//!    lease over at once, which is safe because both attempts mean the same bytes (or the same
//!    removal) for the same upload. A removal handing a key on to another upload (invariant 5)
//!    holds that upload's lease and says so ([`Lease::acting`]): it takes over at once only its own
//!    removal's earlier attempt's, and waits for a live lease any other run holds for that upload —
//!    its retry may never meet the key again (the offer it withdraws may be dropped meanwhile), so
//!    a lease it took over and then left would stay, listed by nobody, until it ran out. Taken
//!    over, a lease is written anew with the taker's run (`Lease::run`, one per [`RefStore`]): the
//!    earlier attempt may be alive (a message delivered twice at once), and the two must not end
//!    each other's lease — a release ends a lease only as its run took it, and a listing only the
//!    `create` leases of the runs it names (`UploadRecord::runs`), so a removal waits for a run
//!    still copying instead of deleting what that run then writes again. A key without a record
//!    gets a `create` lease: no symdex object is there (its objects always have a record), so its
//!    holder, or whoever takes it over, writes only where nothing is (`Storage::copy_new`) and
//!    leaves anything found there alone unless it holds the same bytes (adopted) or the upload
//!    overwrites; otherwise the record goes and the key is a conflict. A `create` lease whose
//!    holder wrote the object (or found its own earlier attempt's) is not released by a write: the
//!    record was created saying what the object will hold, and the lease ends when the holder's
//!    upload record lists the key among its `keys` for the lease's run (its finalize, after every
//!    copy of the run) — one write per key saved on S3. The same goes for a `create` lease on a
//!    record written as sharing another upload's object (invariant 7). Whoever meets such a lease reads the
//!    holder's upload record first (`RefStore::settle`); a run that takes its references back, or
//!    fails, never lists them, and releases them by a write each ([`RefStore::release_created`]) —
//!    else its retry takes them over, or they run out.
//! 2. **A record without a lease describes its object**: the object exists and holds the
//!    recorded content. So a key with references and no lease is published (and so is a key
//!    without a record whose object names an upload, invariant 7). Sole-writer form
//!    (the local store's writer lock, `LeasePolicy::exclusive`) where objects name no owner
//!    (invariant 7 otherwise): a key with neither record nor object is created record first,
//!    without a lease, then the object. Until the copy is
//!    done (or after a crash in between) the record names an object that is not there, which
//!    is safe because nothing else runs: a re-run finds its own reference to a missing object
//!    and copies it again (the `Check` path), a removal deletes the record and finds no
//!    object, and `verify` reports the key as missing. Only absent objects are created this
//!    way, so a record never claims content another object holds.
//! 3. **Only an empty record is removed.** The object is deleted only after the record was
//!    swapped to an empty tombstone holding the remover's lease; an indexer meeting a live
//!    tombstone waits, one meeting a dead one takes it over.
//! 4. **No reference outlives its upload.** An upload's keys are listed in its upload record
//!    (`planned`) before any reference to them is added; whoever adds a reference for upload U
//!    then re-reads U's record (finalize) and takes the reference back if U is being removed;
//!    the remover marks U `removing` before it removes the references of every listed key.
//!    Either the remover's list holds the key, or the adder sees the mark.
//! 5. **A key is held by the uploads whose bytes it serves**: an alias copy of a PDB made
//!    when its PE arrives is referenced by the PDB's uploads, not the PE's, so the outcome
//!    does not depend on which arrived first. A copy of a PDB uploaded under another name
//!    than the copy recorded (and live) serves that copy's name too, for the same reason: a
//!    PE naming it may have arrived before or after it (`Indexer::remember_pdb`). A first
//!    delivery of either creates the debug id's record unread ([`RefStore::create_id`], a
//!    write only where none is): created, there was nothing to see (no name, no copy);
//!    refused, it reads and swaps as if the guess had not been made. A PE reads the PDB
//!    copy's holders after its swap records its name; a copy that published under names
//!    it found (another live copy's among them, joining that copy's key) reads the record
//!    again: one of the two sees the other, so no name is lost with the kept copy.
//! 6. **An alias never outlives its target.** Where the store writes a copy from another key
//!    as an alias that holds no bytes (S3 redirect objects, `StoreTraits::key_copies_are_aliases`),
//!    the key's record names its target (`alias_of`), and every upload referencing the alias
//!    references the target too: the writer of an alias copies from a key it references
//!    itself, and an upload that finds an alias already there adds a reference to its target
//!    (publishing it from its own bytes if it is gone) before it is done — so does a key
//!    published on another upload's behalf (a PE's alias of its PDB, a source's hand-over:
//!    `Indexer::hold_for`), for that upload. A target is removed
//!    only without references (invariant 3), so not while an alias's referrer lives.
//! 7. **A key one upload alone references needs no record** where objects name their owner
//!    ([`StoreTraits::names_owners`]: S3 metadata, a local file's extended attribute), whether
//!    writers run at once or one holds the writer lock (which then only takes every other
//!    lease over at once). Its object, created only where nothing is (`Storage::copy_new`,
//!    where the store decides that atomically: [`Storage::creates_only_new`]), names the upload
//!    ([`RefStore::owner_token`]), and stands for the record `{refs: [upload], by: upload}`
//!    (of the content its writer named with it, where the store keeps that apart from the
//!    bytes: `Owned::written`): a fresh key costs one request, and a local one no record
//!    file. Everything else goes through a record, and a record, once there, decides (an
//!    object's owner is then only read to tell whose bytes are there):
//!    - a second upload finding the same content creates the key's record (only where no
//!      record is) naming both uploads, the owner as `by`, under a `create` lease, and then
//!      looks at the object again: the owner's removal, meeting the lease, waits instead of
//!      deleting the object the sharer is about to reference, and one that deleted it
//!      before the record was there is seen by that look (the record then goes back to
//!      naming the sharer alone, who creates the object). Found still there, the record
//!      says what is there, and the lease ends with the sharer's finalize (invariant 1);
//!    - a removal finding no record creates a tombstone naming the upload, only where no
//!      record is (so a sharer's record and the tombstone exclude each other), then deletes
//!      the object only if it names that upload;
//!    - every removal deletes only the object its tombstone is for: one naming the record's
//!      `by`, or nobody (written before owners were named, or adopted). A writer that found
//!      the key free after the object went (it needs no record to create one) named itself,
//!      so a retried removal still holding its tombstone leaves that object alone — the race
//!      that made a record per key necessary before objects named their owner;
//!    - the writers of a record's object (a lease's copy, a repair, an overwrite) name the
//!      record's `by`; an object of the same content found under a `create` lease whose owner
//!      is another upload makes the record name that upload too (and as `by`), one whose
//!      owner's upload is gone is replaced by ours;
//!    - a writer that neither overwrites nor adopts and finds other content at a key, not
//!      its own, reports a conflict on what it found, without a record: it takes no
//!      reference, so nothing is left to keep. What the record protocol could still change
//!      is a change already in progress — a removal about to delete the object, an
//!      overwriting writer about to replace it (with this very content, even) — and the
//!      conflict is then the outcome of the serial order in which it came first.
//! 8. **A key another upload's bytes hold is handed over when they go.** An upload that
//!    finds other content at one of its keys (a conflict) records that it waits for the key
//!    (`_symdex/waiting/<sha1 of key>/<sha1 of upload>.json`, [`RefStore::wait_for`]), then
//!    looks at the key again. A removal that deleted a key's object (now, or in an earlier
//!    attempt: the keys its record notes `removed`) lists the key's waiters, and re-indexes
//!    each live one from its ingest object ([`crate::pipeline::HandOver`]) before it
//!    forgets its own upload. Of the waiter's write and the removal's delete, whichever came
//!    second is seen by the other's later look: the waiter finds the key free (or holding
//!    its own content) and publishes it after all, or the removal finds the waiter.
//!    An overwrite (`--overwrite`) replaces only bytes its own product's uploads alone hold
//!    (overwrites.rs: another product's, or an upload's without a record, stay a conflict),
//!    and makes the uploads whose bytes it replaces such waiters:
//!    it marks them before the replacement (`RefStore::overwritten`), and their references
//!    go with it, so the overwriter's removal hands the key back (kept, they would have
//!    held its bytes after it went; where the object stood for the record, the key was lost
//!    with it). Their upload records still list the key: `verify` takes the marker as the
//!    reason, and the hand-back's re-index, referencing the key again, ends the wait (it is
//!    told which keys it was handed: `Config::handed`). A removal that dies before it is
//!    done hands over on its retry: its record stays
//!    `removing`, and a marker stays until its upload references the key (the re-index
//!    deletes it), its upload's removal deletes it (with the keys that upload planned and
//!    did not reference), or a listing finds its upload gone or removing (a marker a crash
//!    left costs a re-index that changes nothing). Without this, deleting an unstripped binary unpublished the `debuginfo` of
//!    the separate debug file that lives on, whose bytes were nowhere in the store.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use crate::storage::{Storage, StoreTraits};

mod decide;
mod held;
mod ids;
mod inventory;
mod keys;
mod layout;
mod lease;
mod listing;
mod objects;
mod overwrites;
mod owners;
mod packages;
mod patience;
mod prior;
mod publication;
mod publish;
mod remove;
mod shared_reads;
mod source_maps;
mod sources;
mod swap;
#[cfg(test)]
mod tests;
mod turn;
mod uploads;
mod waiting;

use held::Held;
use lease::new_run_id;
use listing::Listed;
use shared_reads::SharedReads;
use source_maps::ParsedSourceMap;

pub use ids::IdRecord;
pub use keys::KeyRecord;
pub use layout::{UploadLayout, LAYOUT_FILE};
pub use lease::{Lease, LeasePolicy};
pub use packages::{
    package_join_file, IdSet, PackageJoin, PackageNote, SplitBinary, KEPT_IDS, PACKAGES_PREFIX,
};
pub use patience::Wait;
pub use publication::{Content, KeyOutcome};
pub use remove::RemoveOutcome;
pub use source_maps::DeferredWrites;
pub use sources::FileStamp;
pub use uploads::{IndexedAs, PriorRead, Run, UnparsedUpload, UploadRecord, UploadState};

// Only the crate's own (pipeline/, audit.rs, testing/) reach these.
pub(crate) use layout::record_fits;
pub(crate) use lease::Publisher;
pub(crate) use listing::{released_by_finalize, Listing};
pub(crate) use patience::busy;
pub(crate) use publication::{OnDifferent, Publication};
pub(crate) use turn::InTurn;
pub(crate) use waiting::Waiting;

// The root of symdex's bookkeeping is the storage layer's to know (never served).
pub use crate::storage::STATE_PREFIX;

/// Bookkeeping over a store.
pub struct RefStore<'s> {
    store: &'s dyn Storage,
    /// What the store is like, read once ([`Storage::traits`]).
    traits: StoreTraits,
    policy: LeasePolicy,
    /// Source-map records as last parsed, by file, with their version: the debug files of one
    /// build all read the same few records (up to 512 entries each), and parsing them again
    /// for every file dominated a re-index. Only a read of the same version is answered from
    /// here, so the cache never changes what an update sees.
    parsed_source_maps: std::sync::Mutex<HashMap<String, ParsedSourceMap>>,
    /// Source-map records changed by this process and not yet written (a sole writer's
    /// deferred writes, [`Self::defer_source_map_writes`]): file -> version read (`None`:
    /// absent), the record as it is now.
    deferred_source_maps: Option<Arc<DeferredWrites>>,
    /// `create` leases this process took and left to be released by their upload's finalize
    /// (invariant 1), until the run hands them on ([`Self::take_held`]).
    held: Held,
    /// The uploads whose bytes an overwrite replaced, by the overwriting upload, until its
    /// record reports them ([`Self::take_overwritten`]).
    overwrote: std::sync::Mutex<HashMap<String, BTreeSet<String>>>,
    /// The products upload records were read naming (`None`: none), by upload: whose bytes
    /// an overwrite may replace (overwrites.rs). A product never changes for an upload.
    products: std::sync::Mutex<HashMap<String, Option<String>>>,
    /// Listings upload records were seen with, by upload: a `create` lease of an upload
    /// listing its key for the lease's run is released (invariant 1). Only ever grows: a
    /// listing seen stays true of the lease it released (a later lease of the same run is
    /// taken only where no record says the key is referenced, see [`Self::settle`]).
    listed: std::sync::Mutex<Listed>,
    /// Reads of upload records for their listings, by upload, while in flight: keys deciding
    /// at once that meet one upload's `create` leases share one read instead of each missing
    /// `listed` and reading it ([`Self::learn_listing`]).
    listing_reads: SharedReads<Listing>,
    /// The uploads objects' owners were found to name ([`Self::same_by`]), by owner, where
    /// the upload record was there, or being read: the same bytes uploaded again share every
    /// key of one other upload, whose record is read once, not once per key (its keys are
    /// published at once). See `same_by` for why a kept answer is as good as a fresh one.
    known_owners: SharedReads<Option<String>>,
    /// The last key guessed to have no record had one naming several uploads (its bytes
    /// were shared before: this is a third upload of them, or later). The upload's other
    /// keys most likely have one too: where another upload's object is found, the record is
    /// read rather than guessed absent, and the owner's upload is not looked up
    /// (`publish_owned`). Found absent, guessed again.
    shared_before: AtomicBool,
    /// This run's id, in every lease it takes ([`Lease::run`]).
    run: String,
    /// The store's upload layout, once read ([`Self::layout`]).
    layout: OnceLock<UploadLayout>,
}

impl<'s> RefStore<'s> {
    pub fn new(store: &'s dyn Storage) -> Self {
        Self::with_policy(store, LeasePolicy::default())
    }

    pub(crate) fn with_policy(store: &'s dyn Storage, policy: LeasePolicy) -> Self {
        RefStore {
            store,
            traits: store.traits(),
            policy,
            parsed_source_maps: Default::default(),
            deferred_source_maps: None,
            held: Default::default(),
            overwrote: Default::default(),
            products: Default::default(),
            listed: Default::default(),
            listing_reads: Default::default(),
            known_owners: Default::default(),
            shared_before: Default::default(),
            run: new_run_id(),
            layout: Default::default(),
        }
    }

    /// What the store is like, as read when this was made.
    pub(crate) fn traits(&self) -> StoreTraits {
        self.traits
    }
}
