//! [`Names`]: a sorted set of short strings in one allocation, what an audit holds of every
//! upload record's keys.

use serde::{Deserialize, Deserializer};

/// A set of names (a record's keys, or runs) held as one string in sorted order, each name
/// ending where `ends` says: a `BTreeSet<String>` costs about 60 bytes per name beside its
/// text, and an audit holds every upload's keys at once. Written here because the one thing
/// it does (a sorted set of short strings in one allocation) is not worth a dependency.
#[derive(Debug, Default)]
pub(super) struct Names {
    text: String,
    ends: Vec<u32>,
}

impl Names {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `index`th name: from where the one before ends (or the start) to its own end.
    pub(super) fn name(&self, index: usize) -> &str {
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.text[start as usize..self.ends[index] as usize]
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|index| self.name(index))
    }

    /// The name just appended to `text`, ending where it ends now.
    fn push_end(&mut self) -> Result<(), String> {
        let end = u32::try_from(self.text.len())
            .map_err(|_| "an upload record's names take over 4 GiB".to_string())?;
        self.ends.push(end);
        Ok(())
    }

    fn last(&self) -> Option<&str> {
        Some(self.name(self.len().checked_sub(1)?))
    }

    /// The same names, each allocation as long as what it holds: grown by doubling, then
    /// shrunk in place (mimalloc, the CLI's allocator, keeps a block shrunk by under half),
    /// the text of an upload's keys took its next power of two.
    fn exact(self) -> Self {
        Names {
            text: self.text.as_str().to_owned(),
            ends: self.ends.as_slice().to_vec(),
        }
    }

    /// Sorted and without repeats, as the record's set was (a record written from a set
    /// lists its names so already: read in order, they are taken as they are).
    fn sorted(self) -> Result<Self, String> {
        let mut names: Vec<&str> = self.iter().collect();
        names.sort_unstable();
        names.dedup();
        let mut sorted = Names {
            text: String::with_capacity(self.text.len()),
            ends: Vec::with_capacity(names.len()),
        };
        for name in names {
            sorted.text.push_str(name);
            sorted.push_end()?;
        }
        Ok(sorted)
    }
}

/// Read straight into one [`Names`]: no string per name is made and dropped (with mimalloc,
/// the CLI's allocator, those freed pages stayed resident beside the names kept).
impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, Error, SeqAccess, Visitor};

        struct ListVisitor;
        /// One name, appended where it is read; `false` in the second once a name came out
        /// of order.
        struct Append<'n>(&'n mut Names, &'n mut bool);

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = Names;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
                let mut names = Names::default();
                let mut in_order = true;
                while seq
                    .next_element_seed(Append(&mut names, &mut in_order))?
                    .is_some()
                {}
                if !in_order {
                    return names.sorted().map_err(A::Error::custom);
                }
                Ok(names.exact())
            }
        }
        impl<'de> DeserializeSeed<'de> for Append<'_> {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
                deserializer.deserialize_str(self)
            }
        }
        impl<'de> Visitor<'de> for Append<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a name")
            }
            fn visit_str<E: Error>(self, name: &str) -> Result<(), E> {
                if self.0.last().is_some_and(|last| last >= name) {
                    *self.1 = false;
                }
                self.0.text.push_str(name);
                self.0.push_end().map_err(E::custom)
            }
        }
        deserializer.deserialize_seq(ListVisitor)
    }
}
