//! How the columns are written: a column that repeats itself (a manifest's days, products,
//! channels; fields no record sets) as runs, one whose rows are mostly empty (keys of a
//! kind, conflicts' holders, sources) as its non-empty rows only. 100,000 records were
//! 24 MB written plainly; the page's script expands each column once as it loads.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// A column of string positions: `{"runs": [value, count, ...]}` where that is shorter
/// (at most a third as many runs as rows), else the plain array.
pub fn runs<S: Serializer>(column: &[u32], serializer: S) -> Result<S::Ok, S::Error> {
    let mut pairs: Vec<u32> = Vec::new();
    for &value in column {
        match pairs.len() {
            n if n >= 2 && pairs[n - 2] == value => pairs[n - 1] += 1,
            _ => pairs.extend([value, 1]),
        }
        if pairs.len() > column.len() * 2 / 3 {
            return column.serialize(serializer);
        }
    }
    let mut map = serializer.serialize_map(Some(1))?;
    map.serialize_entry("runs", &pairs)?;
    map.end()
}

/// A row that is empty (no keys, no holders, no sources).
pub trait Blank {
    fn is_blank(&self) -> bool;
}

impl<T> Blank for Vec<T> {
    fn is_blank(&self) -> bool {
        self.is_empty()
    }
}

impl Blank for [usize; 3] {
    fn is_blank(&self) -> bool {
        *self == [0; 3]
    }
}

/// A column of mostly empty rows: `{"len": rows, "rows": [i, ...], "values": [...]}`, the
/// rows not named being empty; the plain array when most rows are not.
pub fn sparse<T: Serialize + Blank, S: Serializer>(
    column: &[T],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let filled: Vec<usize> = (0..column.len())
        .filter(|&i| !column[i].is_blank())
        .collect();
    if filled.len() * 2 > column.len() {
        return column.serialize(serializer);
    }
    let values: Vec<&T> = filled.iter().map(|&i| &column[i]).collect();
    let mut map = serializer.serialize_map(Some(3))?;
    map.serialize_entry("len", &column.len())?;
    map.serialize_entry("rows", &filled)?;
    map.serialize_entry("values", &values)?;
    map.end()
}
