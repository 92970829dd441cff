//! Microsoft cabinets: what `symstore /compress` and `makecab` write (`foo.pd_`, `foo.dl_`),
//! MSZIP, LZX or uncompressed folders, read with the `cab` crate.

use ::cab::Cabinet;

use super::{sequential, ExpandError, Walk, WatchedReader};

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let bad = |e: std::io::Error| reader.classify("bad cabinet", e);
    let mut cabinet = Cabinet::new(sequential(reader)).map_err(bad)?;
    let files: Vec<(String, u64)> = cabinet
        .folder_entries()
        .flat_map(|folder| folder.file_entries())
        .map(|file| (file.name().to_string(), u64::from(file.uncompressed_size())))
        .collect();
    for (name, size) in files {
        if !walk.admit(&name)? {
            break;
        }
        if let Some(reason) = walk.over_limits(size, None) {
            walk.reject(&name, reason)?;
            continue;
        }
        let mut file = match cabinet.read_file(&name) {
            Ok(file) => file,
            Err(e) => {
                walk.reject(&name, format!("unreadable cabinet entry: {e}"))?;
                continue;
            }
        };
        walk.entry(&name, &mut file, None)?;
    }
    Ok(())
}
