//! Split DWARF's scenarios: a binary with skeleton units and its `.dwp` pair through their
//! scope's join record (pipeline/packages.rs), whichever swaps its entry second seeing the
//! other, so any interleaving ends as a serial order does. And a PDB's documents and its
//! build's sources (pipeline/documents.rs), which meet in the sourcemap join records.

use super::{Artifacts, Op, Scenario, Survivors};

/// A binary and its package arriving together, or one arriving while the other is deleted.
pub(super) fn split_dwarf(a: &Artifacts) -> Vec<Scenario<'_>> {
    let (binary, package) = (&a.split_binary, &a.split_package);
    vec![
        Scenario {
            // Published at the binary's debuginfo key, by the package's own run or by the
            // re-index the binary asks for.
            name: "a binary and its .dwp arrive at once",
            before: vec![],
            ops: vec![Op::Index(binary, true), Op::Index(package, true)],
            survivors: Survivors::Exactly(vec![binary, package]),
        },
        Scenario {
            // Paired before the removal: the key is the package's own and stays with it;
            // after: nothing published. Never a key referencing the removed binary.
            name: "a .dwp arrives while its binary is deleted",
            before: vec![binary],
            ops: vec![Op::Index(package, true), Op::Delete(binary)],
            survivors: Survivors::AnyOrder,
        },
        Scenario {
            // The package's ingest object is gone: the binary's re-index of it finds nothing
            // to read, and its removal takes its key if it had one.
            name: "a binary arrives while its .dwp is deleted",
            before: vec![package],
            ops: vec![Op::Index(binary, true), Op::Delete(package)],
            survivors: Survivors::AnyOrder,
        },
        Scenario {
            name: "a .dwp is taken back while its binary arrives",
            before: vec![],
            ops: vec![Op::Index(package, false), Op::Index(binary, true)],
            survivors: Survivors::AnyOrder,
        },
    ]
}

/// A PDB naming a document and the sources of its build arriving together, or one arriving
/// while the other is deleted: `src/<product>/<build>/<path>` holds the right source exactly
/// when a serial order would publish it, never the edited one.
pub(super) fn pdb_documents(a: &Artifacts) -> Vec<Scenario<'_>> {
    let (pdb, source, edited) = (&a.pdb_documents, &a.doc_source, &a.doc_source_edited);
    vec![
        Scenario {
            name: "a PDB and its document's source arrive at once",
            before: vec![],
            ops: vec![Op::Index(pdb, true), Op::Index(source, true)],
            survivors: Survivors::Exactly(vec![pdb, source]),
        },
        Scenario {
            // Served by the source upload: the PDB's removal leaves it served.
            name: "a document's source arrives while its PDB is deleted",
            before: vec![pdb],
            ops: vec![Op::Index(source, true), Op::Delete(pdb)],
            survivors: Survivors::AnyOrder,
        },
        Scenario {
            name: "a PDB arrives while its document's source is deleted",
            before: vec![source],
            ops: vec![Op::Index(pdb, true), Op::Delete(source)],
            survivors: Survivors::AnyOrder,
        },
        Scenario {
            // Only the bytes the PDB records serve it, whichever is offered first.
            name: "an edited source and the right one race for a PDB's document",
            before: vec![pdb],
            ops: vec![Op::Index(edited, true), Op::Index(source, true)],
            survivors: Survivors::Exactly(vec![pdb, edited, source]),
        },
    ]
}
