//! The modules an input lists — a minidump's module list, a core file's mapped ELF images,
//! a JSON list of modules — and the identities each stands for: what `check` asks keys for
//! when the input is a crash rather than the binaries themselves.

use std::path::Path;
use std::str::FromStr;

use anyhow::Context;
use serde::Deserialize;
use symdex_shared::formats::Format;
use symdex_shared::identity::{CodeId, DebugId};
use symdex_shared::{Identity, Kind};

use crate::inputs::file_head;

/// The modules `path` lists, if it is an input that lists modules (a minidump or core file by
/// its content, a JSON list by its name); `None` for any other input.
pub(super) fn listed_modules(path: &Path) -> Option<anyhow::Result<Vec<ModuleEntry>>> {
    if file_head(path) == Some(*b"MDMP") {
        Some(minidump_modules(path))
    } else if is_elf_core(path) {
        Some(core_modules(path))
    } else if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        Some(json_modules(path))
    } else {
        None
    }
}

/// One module from a JSON list (Sentry's and crash pipelines' field names).
#[derive(Debug, Deserialize)]
pub(super) struct ModuleEntry {
    code_file: Option<String>,
    code_id: Option<String>,
    debug_file: Option<String>,
    debug_id: Option<String>,
    /// Sentry's name; any other text reads as unknown.
    #[serde(default)]
    arch: Option<symdex_shared::Arch>,
}

/// The identities a listed module stands for: what a debugger looks up for it.
pub(super) fn module_identities(m: &ModuleEntry) -> Vec<(Identity, String)> {
    let name_of = |p: &Option<String>| {
        p.as_deref()
            .map(|p| symdex_shared::identity::file_name_of(p).to_string())
    };
    let debug_id = m
        .debug_id
        .as_deref()
        .and_then(|d| DebugId::from_str(d).ok())
        .filter(|d| !d.is_nil());
    let arch = m.arch.unwrap_or_default();
    let mut out = Vec::new();
    let debug_name = name_of(&m.debug_file);
    let code_name = name_of(&m.code_file);
    let is_pdb = debug_name
        .as_deref()
        .is_some_and(|n| n.to_ascii_lowercase().ends_with(".pdb"));
    if let (true, Some(debug_id), Some(name)) = (is_pdb, debug_id, debug_name.clone()) {
        let mut pdb = Identity::new(Format::Pdb, Kind::Debug);
        pdb.debug_id = debug_id;
        pdb.age = Some(debug_id.appendix());
        pdb.arch = arch;
        pdb.has_debug_info = true;
        out.push((pdb, name));
        if let (Some(code_id), Some(code_name)) = (&m.code_id, code_name) {
            let mut pe = Identity::new(Format::Pe, Kind::Library);
            // A PE's code id is its TimeDateStamp (8 hex digits) and SizeOfImage.
            if code_id.len() > 8 && code_id.is_ascii() {
                pe.pe_timestamp = u32::from_str_radix(&code_id[..8], 16).ok();
                pe.pe_size_of_image = u32::from_str_radix(&code_id[8..], 16).ok();
            }
            pe.code_id = Some(CodeId::new(code_id.to_ascii_lowercase()));
            pe.arch = arch;
            out.push((pe, code_name));
        }
        return out;
    }
    // Mach-O: the code id is the LC_UUID, the same UUID as the debug id (an ELF's debug id is
    // its build id byte-swapped, so the two differ for ELF).
    if let (Some(code_id), Some(debug_id)) = (m.code_id.as_deref(), debug_id) {
        let uuid = debug_id.uuid().simple().to_string();
        if debug_id.appendix() == 0 && code_id.eq_ignore_ascii_case(&uuid) {
            for kind in [Kind::Debug, Kind::Library] {
                let mut macho = Identity::new(Format::Macho, kind);
                macho.uuid = Some(uuid.clone());
                macho.debug_id = debug_id;
                macho.code_id = Some(CodeId::new(uuid.clone()));
                macho.arch = arch;
                macho.has_debug_info = kind == Kind::Debug;
                let name = code_name.clone().unwrap_or_else(|| "_".into());
                out.push((macho, name));
            }
            return out;
        }
    }
    // ELF (code id = the build id): the debug file and the binary by build id.
    if let Some(code_id) = m
        .code_id
        .as_deref()
        .filter(|c| c.len() >= 2 && c.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        let build_id = code_id.to_ascii_lowercase();
        for kind in [Kind::Debug, Kind::Library] {
            let mut elf = Identity::new(Format::Elf, kind);
            elf.build_id = Some(build_id.clone());
            elf.code_id = Some(CodeId::new(build_id.clone()));
            elf.debug_id = debug_id.unwrap_or_default();
            elf.arch = arch;
            elf.has_debug_info = kind == Kind::Debug;
            let name = code_name.clone().unwrap_or_else(|| "_".into());
            out.push((elf, name));
        }
    }
    out
}

/// An ELF file of type ET_CORE.
fn is_elf_core(path: &Path) -> bool {
    let Some(head) = file_head::<18>(path) else {
        return false;
    };
    // e_type at offset 16: ET_CORE (4), in the file's byte order (EI_DATA at 5).
    let e_type = if head[5] == 2 {
        u16::from_be_bytes([head[16], head[17]])
    } else {
        u16::from_le_bytes([head[16], head[17]])
    };
    head.starts_with(b"\x7fELF") && e_type == 4
}

/// The module list of a minidump (its code and debug files and ids), read by rust-minidump
/// from a memory map: a dump of any size costs what its module list does.
fn minidump_modules(path: &Path) -> anyhow::Result<Vec<ModuleEntry>> {
    use minidump::{Minidump, MinidumpModuleList, Module};
    let dump = Minidump::read_path(path).context("not a readable minidump")?;
    let list: MinidumpModuleList = dump
        .get_stream()
        .context("the minidump has no module list")?;
    Ok(list
        .iter()
        .map(|m| ModuleEntry {
            code_file: Some(m.code_file().into_owned()),
            code_id: m.code_identifier().map(|c| c.to_string()),
            debug_file: m.debug_file().map(|d| d.into_owned()),
            debug_id: m.debug_identifier().map(|d| d.to_string()),
            arch: None,
        })
        .collect())
}

/// A JSON list of modules, as crash pipelines carry them.
fn json_modules(path: &Path) -> anyhow::Result<Vec<ModuleEntry>> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).context("expected a JSON list of modules")
}

/// The ELF images mapped in a core file, by their build ids.
fn core_modules(path: &Path) -> anyhow::Result<Vec<ModuleEntry>> {
    Ok(crate::core_file::modules(path)?
        .into_iter()
        .map(|(code_file, build_id)| ModuleEntry {
            code_file: Some(code_file),
            code_id: build_id,
            debug_file: None,
            debug_id: None,
            arch: None,
        })
        .collect())
}
