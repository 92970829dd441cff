//! Split DWARF: a DWARF package (`.dwp`) by the DWO ids its index lists, and the DWO ids of
//! the skeleton units a binary or debug file keeps.
//!
//! `-gsplit-dwarf` (and `rustc -C split-debuginfo=packed`) leaves one small *skeleton* unit
//! per compilation unit in the binary and moves the rest of its debug information to a `.dwo`
//! file; `dwp`, `llvm-dwp` or thorin pack a binary's `.dwo` files into one `.dwp`. The package
//! has no build id: what ties it to its binary is the DWO id each skeleton carries (a DWARF 5
//! `DW_UT_skeleton` header's `dwo_id`, DWARF 4's `DW_AT_GNU_dwo_id` on the unit's root
//! entry) and the package's `.debug_cu_index` lists (version 2, the GNU extension for DWARF 4,
//! or 5). Both are read with gimli through [`Ranged`] readers, so only the index's header and
//! hash table are fetched, and of `.debug_info` each unit's header (for DWARF 4 also its root
//! entry and that entry's abbreviation): a few bytes per unit, within a byte budget, however
//! large the file.

use std::collections::{BTreeMap, BTreeSet};

use gimli::{DebugAbbrevOffset, Reader, RunTimeEndian, UnitHeader, UnitType};

use super::dwarf::ranged::{Budget, Ranged, Section};
use super::dwarf::read_compressed;
use super::{Format, FormatError};
use crate::identity::{DwarfLayout, DwarfPackage, DwoId, SectionRef, SplitDwarf};
use crate::reader::{MemReader, RangeReader};

/// Most DWO ids read from one file: a package listing more is refused, a binary's walk stops
/// there (a large C++ program has tens of thousands of units).
pub const MAX_DWO_IDS: usize = 1_000_000;
/// The name of a package's unit index: the section that makes an ELF file a `.dwp`.
pub const CU_INDEX: &str = ".debug_cu_index";
/// The index's fixed header: version (2 as 32 bits, or 5 and 16 bits of padding), then the
/// section, unit and slot counts.
const INDEX_HEADER: u64 = 16;
/// Hash-table slots an index may have: writers take the power of two above 1.5 times the
/// units (16 at least), so more than this many per unit, past a floor, is a lie that would
/// cost reads.
const SLOTS_PER_UNIT: u64 = 4;
const MIN_SLOTS: u64 = 1024;
/// What reading an index may fetch: its header and the largest hash table allowed (an id and
/// a row per slot), with room for blocks read at its edges.
const INDEX_BUDGET: u64 = INDEX_HEADER + 12 * SLOTS_PER_UNIT * MAX_DWO_IDS as u64 + (64 << 10);
/// What walking a file's units may fetch: a few hundred bytes per unit, so tens of thousands
/// of units fit many times over; a walk past it stops, and says so.
const WALK_BUDGET: u64 = 64 << 20;
/// Abbreviation declarations passed over looking for a unit's root entry's (compilers write
/// it first in the unit's table).
const MAX_DECLARATIONS: usize = 4096;
/// Attributes one abbreviation declaration may have (real ones have tens).
const MAX_ATTRIBUTES: usize = 1024;
/// Distinct reasons [`SplitDwarf::unread`] lists (each counted).
const MAX_REASONS: usize = 16;

/// A package's `.debug_cu_index` (`index`, a section of the ELF file `reader`): its version
/// and the DWO ids its hash table lists. A table that is not what its header says (ids or rows
/// missing, repeated, out of range), or larger than [`MAX_DWO_IDS`] units, is malformed.
pub fn read_package(
    reader: &dyn RangeReader,
    index: &SectionRef,
    layout: &DwarfLayout,
) -> Result<DwarfPackage, FormatError> {
    let malformed = |reason: String| FormatError::malformed(Format::Dwp, reason);
    let decompressed;
    let (source, offset, size): (&dyn RangeReader, u64, u64) = if index.compressed {
        let bytes = read_compressed(reader, index, layout)
            .map_err(|e| malformed(format!("{CU_INDEX}: {e}")))?;
        let size = bytes.len() as u64;
        decompressed = MemReader(bytes);
        (&decompressed, 0, size)
    } else {
        (reader, index.offset, index.size)
    };
    let budget = Budget::new(INDEX_BUDGET);
    let section = Section::new(source, offset, size, &budget);
    let failed = |e: gimli::Error| match budget.io_failure() {
        Some(io) => FormatError::Io(io),
        None => malformed(format!("{CU_INDEX}: {}", budget.explain(e))),
    };
    let endian = endian_of(layout);
    let index = gimli::DebugCuIndex::from(section.reader(endian))
        .index()
        .map_err(failed)?;
    if index.version() == 0 {
        return Err(malformed(format!("{CU_INDEX} is empty")));
    }
    let (units, slots) = (u64::from(index.unit_count()), u64::from(index.slot_count()));
    if units > MAX_DWO_IDS as u64 {
        return Err(malformed(format!(
            "{CU_INDEX} lists {units} units (symdex reads at most {MAX_DWO_IDS})"
        )));
    }
    if slots > MIN_SLOTS.max(SLOTS_PER_UNIT * units) {
        return Err(malformed(format!(
            "{CU_INDEX} has {slots} hash slots for {units} units"
        )));
    }
    let dwo_ids = hash_table(section.reader(endian), units, slots).map_err(|e| match e {
        TableError::Read(e) => failed(e),
        TableError::Lie(reason) => malformed(format!("{CU_INDEX}: {reason}")),
    })?;
    Ok(DwarfPackage {
        index_version: index.version(),
        dwo_ids,
    })
}

/// Why a hash table was refused: gimli could not read it, or it is not what its header says.
enum TableError {
    Read(gimli::Error),
    Lie(String),
}

impl From<gimli::Error> for TableError {
    fn from(e: gimli::Error) -> Self {
        TableError::Read(e)
    }
}

/// The ids of the used slots of an index's hash table (`slots` ids, then `slots` rows, after
/// the header; a used slot's row is 1 to `units`), sorted. gimli finds an id there but does
/// not list them; gimli checked the table lies within the section.
fn hash_table(mut table: Ranged<'_>, units: u64, slots: u64) -> Result<Vec<DwoId>, TableError> {
    table.skip(INDEX_HEADER as usize)?;
    let mut rows = table.clone();
    rows.skip((8 * slots) as usize)?;
    let mut seen = vec![false; units as usize + 1];
    let mut ids = Vec::with_capacity(units as usize);
    for slot in 0..slots {
        let (id, row) = (table.read_u64()?, rows.read_u32()?);
        if row == 0 {
            continue;
        }
        let Some(seen) = seen.get_mut(row as usize) else {
            return Err(TableError::Lie(format!(
                "slot {slot} names row {row} of {units}"
            )));
        };
        if std::mem::replace(seen, true) {
            return Err(TableError::Lie(format!("row {row} is in two slots")));
        }
        ids.push(DwoId(id));
    }
    if ids.len() as u64 != units {
        return Err(TableError::Lie(format!(
            "its header says {units} units, its hash table holds {}",
            ids.len()
        )));
    }
    ids.sort_unstable();
    if let Some(twice) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(TableError::Lie(format!(
            "DWO id {} is listed twice",
            twice[0]
        )));
    }
    Ok(ids)
}

/// The DWO ids of the skeleton units in `layout`'s `.debug_info` (`reader` is the whole
/// file), or `None` where it has none (a file not built with split DWARF). A unit that cannot
/// be read, and a walk cut short (more than [`MAX_DWO_IDS`] units, or [`WALK_BUDGET`] bytes),
/// are listed as [`SplitDwarf::unread`]: the ids are then not all of them.
pub fn skeleton_dwo_ids(reader: &dyn RangeReader, layout: &DwarfLayout) -> Option<SplitDwarf> {
    let info = layout.sections.iter().find(|s| s.name == ".debug_info")?;
    let abbrev = layout.sections.iter().find(|s| s.name == ".debug_abbrev");
    let mut found = Found::default();
    let budget = Budget::new(WALK_BUDGET);
    let opened = (
        Opened::new(reader, info, layout),
        abbrev.map(|a| Opened::new(reader, a, layout)),
    );
    match opened {
        (Ok(info), Some(Ok(abbrev))) => {
            let (info, abbrev) = (info.section(&budget), abbrev.section(&budget));
            walk_units(&info, Some(&abbrev), endian_of(layout), &budget, &mut found);
        }
        (Ok(info), None) => {
            walk_units(
                &info.section(&budget),
                None,
                endian_of(layout),
                &budget,
                &mut found,
            );
        }
        (Err(e), _) | (_, Some(Err(e))) => found.unread(e),
    }
    found.into_split_dwarf()
}

/// Every unit header of `.debug_info` in turn: a DWARF 5 skeleton's id is in its header, a
/// DWARF 4 compilation unit's (when it is a skeleton) on its root entry. A header that cannot
/// be read ends the walk (the next one's place is unknown); a root entry only skips its unit.
fn walk_units(
    info: &Section<'_>,
    abbrev: Option<&Section<'_>>,
    endian: RunTimeEndian,
    budget: &Budget,
    found: &mut Found,
) {
    let mut units = gimli::DebugInfo::from(info.reader(endian)).units();
    let mut walked = 0;
    loop {
        let header = match units.next() {
            Ok(Some(header)) => header,
            Ok(None) => return,
            Err(e) => return found.unread(format!("a unit header: {}", budget.explain(e))),
        };
        walked += 1;
        if walked > MAX_DWO_IDS {
            return found.unread(format!("more than {MAX_DWO_IDS} units: the rest not read"));
        }
        let id = match header.type_() {
            UnitType::Skeleton(id) => Some(id.0),
            UnitType::Compilation if header.version() <= 4 => {
                match gnu_dwo_id(info, abbrev, &header, endian, budget) {
                    Ok(id) => id,
                    Err(e) => {
                        found.unread(format!("a unit's root entry: {}", budget.explain(e)));
                        None
                    }
                }
            }
            _ => None,
        };
        found.ids.extend(id.map(DwoId));
    }
}

/// A DWARF 4 compilation unit's `DW_AT_GNU_dwo_id` (`None`: not a skeleton). Its root
/// entry's abbreviation is looked up declaration by declaration (compilers write it first),
/// not by parsing the unit's whole table; gimli then reads the entry with a table of that one
/// declaration.
fn gnu_dwo_id(
    info: &Section<'_>,
    abbrev: Option<&Section<'_>>,
    header: &UnitHeader<Ranged<'_>>,
    endian: RunTimeEndian,
    budget: &Budget,
) -> gimli::Result<Option<u64>> {
    let Some(abbrev) = abbrev else {
        // Without abbreviations no entry can be read (and no skeleton be one).
        return Ok(None);
    };
    let mut root = info.reader(endian);
    root.skip(header.offset().0)?;
    root.skip(header.header_size())?;
    let code = root.read_uleb128()?;
    if code == 0 {
        return Ok(None); // a unit without entries
    }
    let mut table = abbrev.reader(endian);
    table.skip(header.debug_abbrev_offset().0)?;
    let Some(declaration) = root_declaration(table, code, budget)? else {
        return Ok(None);
    };
    let mut bytes = declaration.to_slice()?.into_owned();
    bytes.push(0); // the end of a table of one declaration
    let abbreviations =
        gimli::DebugAbbrev::new(&bytes, endian).abbreviations(DebugAbbrevOffset(0))?;
    let mut entries = header.entries(&abbreviations);
    let Some(entry) = entries.next_dfs()? else {
        return Ok(None);
    };
    Ok(match entry.attr_value(gimli::DW_AT_GNU_dwo_id) {
        Some(gimli::AttributeValue::DwoId(id)) => Some(id.0),
        Some(gimli::AttributeValue::Udata(id) | gimli::AttributeValue::Data8(id)) => Some(id),
        _ => None,
    })
}

/// The bytes of the declaration of abbreviation `code` in `table` (a unit's, from its
/// start), when it has a `DW_AT_GNU_dwo_id` (`None`: it has none, or the table ends without
/// it). Past [`MAX_DECLARATIONS`] declarations or [`MAX_ATTRIBUTES`] attributes in one, the
/// table is refused.
fn root_declaration<'a>(
    mut table: Ranged<'a>,
    code: u64,
    budget: &Budget,
) -> gimli::Result<Option<Ranged<'a>>> {
    for _ in 0..MAX_DECLARATIONS {
        let start = table.clone();
        let this = table.read_uleb128()?;
        if this == 0 {
            return Ok(None);
        }
        table.read_uleb128()?; // tag
        table.read_u8()?; // children
        let mut has_dwo_id = false;
        let mut attributes = 0..=MAX_ATTRIBUTES;
        loop {
            if attributes.next().is_none() {
                let reason = format!("an abbreviation of more than {MAX_ATTRIBUTES} attributes");
                return Err(budget.refuse(reason));
            }
            let (name, form) = (table.read_uleb128()?, table.read_uleb128()?);
            if form == u64::from(gimli::DW_FORM_implicit_const.0) {
                table.read_sleb128()?;
            }
            if name == 0 && form == 0 {
                break;
            }
            has_dwo_id |= name == u64::from(gimli::DW_AT_GNU_dwo_id.0);
        }
        if this == code {
            let mut declaration = start.clone();
            declaration.truncate(table.offset_from(&start))?;
            return Ok(has_dwo_id.then_some(declaration));
        }
    }
    let reason = format!("a root abbreviation past the first {MAX_DECLARATIONS} of its table");
    Err(budget.refuse(reason))
}

/// A section to read: a range of the file, or decompressed in memory (`SHF_COMPRESSED`,
/// within [`super::dwarf::MAX_DECOMPRESSED`]).
enum Opened<'a> {
    InFile(&'a dyn RangeReader, u64, u64),
    Decompressed(MemReader<Vec<u8>>),
}

impl<'a> Opened<'a> {
    fn new(
        reader: &'a dyn RangeReader,
        section: &SectionRef,
        layout: &DwarfLayout,
    ) -> Result<Self, String> {
        if !section.compressed {
            return Ok(Opened::InFile(reader, section.offset, section.size));
        }
        read_compressed(reader, section, layout)
            .map(|bytes| Opened::Decompressed(MemReader(bytes)))
            .map_err(|e| format!("{}: {e}", section.name))
    }

    fn section<'s>(&'s self, budget: &'s Budget) -> Section<'s> {
        match self {
            Opened::InFile(reader, offset, size) => Section::new(*reader, *offset, *size, budget),
            Opened::Decompressed(bytes) => Section::new(bytes, 0, bytes.0.len() as u64, budget),
        }
    }
}

/// What the walk over the units found: the ids, and why units were not read (each reason
/// counted; at most [`MAX_REASONS`] of them).
#[derive(Default)]
struct Found {
    ids: BTreeSet<DwoId>,
    unread: BTreeMap<String, usize>,
}

impl Found {
    fn unread(&mut self, reason: String) {
        if self.unread.len() < MAX_REASONS || self.unread.contains_key(&reason) {
            *self.unread.entry(reason).or_default() += 1;
        }
    }

    /// The ids found, with the reasons; `None` where there is no skeleton (the reasons of a
    /// file with none are not about split DWARF).
    fn into_split_dwarf(self) -> Option<SplitDwarf> {
        if self.ids.is_empty() {
            return None;
        }
        let unread = self
            .unread
            .into_iter()
            .map(|(reason, n)| match n {
                1 => reason,
                n => format!("{reason} ({n} units)"),
            })
            .collect();
        Some(SplitDwarf {
            dwo_ids: self.ids.into_iter().collect(),
            unread,
        })
    }
}

fn endian_of(layout: &DwarfLayout) -> RunTimeEndian {
    if layout.little_endian {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

#[cfg(test)]
pub(crate) mod tests;
