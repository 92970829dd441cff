//! The page's string table: every text a record carries is written once and named by its
//! position, so 100,000 records of a few products, builds and channels pack small.

use std::collections::HashMap;

use serde::{Serialize, Serializer};

/// Interned strings; position 0 is the empty string, which the page shows as absent.
#[derive(Debug)]
pub struct Strings {
    list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut strings = Strings {
            list: Vec::new(),
            index: HashMap::new(),
        };
        strings.id("");
        strings
    }
}

impl Strings {
    /// The position of `text`, added when new.
    pub fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        // More than 4 billion distinct strings would not fit any page: saturate rather than
        // wrap (a wrong name shown, never a panic on the manifest's contents).
        let id = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(text.to_string());
        self.index.insert(text.to_string(), id);
        id
    }

    /// [`Self::id`] of an optional text (absent: 0).
    pub fn opt(&mut self, text: Option<&str>) -> u32 {
        text.map_or(0, |t| self.id(t))
    }

    /// A key as the positions of its `/`-separated parts: keys are mostly unique, their
    /// parts (layout prefixes, file names, ids shared by a record's keys) are not.
    pub fn key(&mut self, key: &str) -> Vec<u32> {
        key.split('/').map(|part| self.id(part)).collect()
    }

    /// The string at `id` (empty when out of range).
    pub fn get(&self, id: u32) -> &str {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.list.get(i))
            .map_or("", String::as_str)
    }
}

impl Serialize for Strings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.list.serialize(serializer)
    }
}
