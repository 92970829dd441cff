//! [`Names`]: a sorted set of short strings, front coded, what an audit holds of every upload
//! record's keys.

use std::cmp::Ordering;

use serde::{Deserialize, Deserializer};

use super::coded::{FrontCoded, FrontCoder};

/// A set of names (a record's keys, or runs) held in sorted order, front coded
/// ([`FrontCoded`]): a `BTreeSet<String>` costs about 60 bytes per name beside its text, and
/// an audit holds every upload's keys at once (at 50,000 debug files, 650,000 keys whose text
/// alone took 45 MiB; coded, a key shares most of its text with the one before it). Written
/// here because the one thing it does (a sorted set of short strings in one allocation) is
/// not worth a dependency.
#[derive(Debug, Default)]
pub(super) struct Names {
    coded: FrontCoded,
}

impl Names {
    pub(super) fn len(&self) -> usize {
        self.coded.len()
    }

    /// How the `index`th name compares with `key`.
    pub(super) fn compare(&self, index: usize, key: &str) -> Ordering {
        self.coded.compare(index, key)
    }

    /// The `index`th name, decoded into `name` (its UTF-8 bytes).
    pub(super) fn name_into(&self, index: usize, name: &mut Vec<u8>) {
        self.coded.name_into(index, name)
    }

    /// Every name, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.coded.iter()
    }

    /// Sorted and without repeats, as the record's set was (a record written from a set
    /// lists its names so already: read in order, they are taken as they are).
    fn sorted(self) -> Result<Self, String> {
        let mut names: Vec<String> = self.iter().collect();
        names.sort_unstable();
        names.dedup();
        let mut sorted = FrontCoder::default();
        for name in &names {
            sorted.push(name)?;
        }
        Ok(Names {
            coded: sorted.finish(),
        })
    }
}

/// Read straight into one [`Names`]: no string per name is kept and dropped (with mimalloc,
/// the CLI's allocator, those freed pages stayed resident beside the names kept).
impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, Error, SeqAccess, Visitor};

        struct ListVisitor;
        /// One name, appended where it is read; `false` in the second once a name came out
        /// of order.
        struct Append<'n>(&'n mut FrontCoder, &'n mut bool);

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = Names;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
                let mut coder = FrontCoder::default();
                let mut in_order = true;
                while seq
                    .next_element_seed(Append(&mut coder, &mut in_order))?
                    .is_some()
                {}
                let names = Names {
                    coded: coder.finish(),
                };
                if !in_order {
                    return names.sorted().map_err(A::Error::custom);
                }
                Ok(names)
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
                self.0.push(name).map_err(E::custom)
            }
        }
        deserializer.deserialize_seq(ListVisitor)
    }
}
