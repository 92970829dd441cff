//! [`FrontCoded`]: a list of strings, each stored as the length of what it shares with the
//! one before it and the rest of it, what an audit holds of every upload's keys and of every
//! compressed copy's.

use std::cmp::Ordering;

/// How many names a block holds: its first is stored whole, so a name is decoded from at most
/// this many steps. Eight: an upload record lists about a dozen keys (every layout), which
/// share their build id's directories in runs of two to five, so a block of eight loses
/// little of the sharing, and a lookup (a binary search, each step decoding a name) replays
/// four names on average.
const BLOCK: usize = 8;

/// Strings in the order pushed, front coded: each as a varint of the bytes it shares with the
/// one before it (none at a block's start), a varint of its remaining length, then those
/// bytes. Keys of one upload share long prefixes (`buildid/<id>/…`, `unified/<xx>/<id>/…`),
/// and walked copies share their directory: held so, they take about half the room of their
/// text (at 50,000 debug files, 45 MiB of upload keys held by `verify`).
///
/// What is shared is cut to a character boundary, so every stored rest is itself UTF-8 and a
/// decoded name is the string pushed.
#[derive(Debug, Default)]
pub(super) struct FrontCoded {
    bytes: Box<[u8]>,
    /// Where each block starts in `bytes`.
    blocks: Box<[u32]>,
    len: u32,
}

/// A [`FrontCoded`] being written: the name pushed last is kept whole, to share with.
#[derive(Debug, Default)]
pub(super) struct FrontCoder {
    bytes: Vec<u8>,
    blocks: Vec<u32>,
    len: u32,
    last: String,
}

impl FrontCoder {
    /// Appends `name` (in any order: only what it shares with the last one is saved).
    pub(super) fn push(&mut self, name: &str) -> Result<(), String> {
        let too_big = || "names taking over 4 GiB, or over 4 billion names".to_string();
        let at = self.len as usize;
        let mut shared = 0;
        if at.is_multiple_of(BLOCK) {
            self.blocks
                .push(u32::try_from(self.bytes.len()).map_err(|_| too_big())?);
        } else {
            shared = common_prefix(&self.last, name);
        }
        self.len = self.len.checked_add(1).ok_or_else(too_big)?;
        let rest = &name.as_bytes()[shared..];
        put_varint(&mut self.bytes, shared);
        put_varint(&mut self.bytes, rest.len());
        self.bytes.extend_from_slice(rest);
        self.last.truncate(shared);
        self.last.push_str(&name[shared..]);
        Ok(())
    }

    /// The name pushed last.
    pub(super) fn last(&self) -> Option<&str> {
        (self.len > 0).then_some(self.last.as_str())
    }

    /// The names pushed, each allocation as long as what it holds: copied, not shrunk in
    /// place (mimalloc, the CLI's allocator, keeps a block shrunk by under half whole, and a
    /// buffer grown by doubling is up to twice what it holds).
    pub(super) fn finish(self) -> FrontCoded {
        FrontCoded {
            bytes: self.bytes.as_slice().into(),
            blocks: self.blocks.as_slice().into(),
            len: self.len,
        }
    }
}

impl FrontCoded {
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// The `index`th name, decoded into `name` (its bytes: a `str`'s, compared as one is).
    /// Panics where `index` is out of bounds, as a slice's index does.
    pub(super) fn name_into(&self, index: usize, name: &mut Vec<u8>) {
        assert!(index < self.len(), "name {index} of {}", self.len);
        let mut at = self.blocks[index / BLOCK] as usize;
        name.clear();
        for _ in 0..=index % BLOCK {
            at = self.step(at, name);
        }
    }

    /// How the `index`th name compares with `key` (as `str`s do: by their bytes), replaying
    /// its block without copying a name: a lookup's binary search compares twenty names.
    pub(super) fn compare(&self, index: usize, key: &str) -> Ordering {
        assert!(index < self.len(), "name {index} of {}", self.len);
        let key = key.as_bytes();
        let mut at = self.blocks[index / BLOCK] as usize;
        // Of the name decoded so far: how many bytes it starts with alike with `key`, and its
        // byte after those (`None`: it ends there).
        let (mut alike, mut next) = (0, None);
        for _ in 0..=index % BLOCK {
            let (shared, start) = get_varint(&self.bytes, at);
            let (len, start) = get_varint(&self.bytes, start);
            let rest = &self.bytes[start..start + len];
            at = start + len;
            // Sharing more than is alike, it keeps the byte where the one before differs.
            if shared <= alike {
                let more = rest.iter().zip(&key[shared..]);
                let more = more.take_while(|(x, y)| x == y).count();
                alike = shared + more;
                next = rest.get(more).copied();
            }
        }
        match (next, key.get(alike)) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(byte), Some(other)) => byte.cmp(other),
        }
    }

    /// Every name, in order, each decoded from the one before.
    pub(super) fn iter(&self) -> impl Iterator<Item = String> + '_ {
        let (mut at, mut name) = (0, Vec::new());
        (0..self.len()).map(move |_| {
            at = self.step(at, &mut name);
            owned(name.clone())
        })
    }

    /// Decodes the name stored at `at` over the one before it in `name`: where the next is.
    fn step(&self, at: usize, name: &mut Vec<u8>) -> usize {
        let (shared, at) = get_varint(&self.bytes, at);
        let (rest, at) = get_varint(&self.bytes, at);
        name.truncate(shared);
        name.extend_from_slice(&self.bytes[at..at + rest]);
        at + rest
    }
}

/// A decoded name as the string it was pushed as. Every stored rest starts at a character
/// boundary of a `str`, so the bytes are UTF-8 (lossy only were that broken: never replaced).
fn owned(name: Vec<u8>) -> String {
    String::from_utf8(name).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The bytes `a` and `b` start with alike, cut to a character boundary of both.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !b.is_char_boundary(shared) {
        shared -= 1;
    }
    shared
}

/// LEB128: seven bits a byte, low first (a name's lengths take one byte up to 127).
fn put_varint(bytes: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        bytes.push((value as u8) | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

/// The varint at `at`, and where what follows it starts.
fn get_varint(bytes: &[u8], mut at: usize) -> (usize, usize) {
    let (mut value, mut shift) = (0, 0);
    loop {
        let byte = bytes[at];
        at += 1;
        value |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return (value, at);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::{FrontCoded, FrontCoder, BLOCK};

    fn coded(names: &[&str]) -> FrontCoded {
        let mut coder = FrontCoder::default();
        for name in names {
            coder.push(name).unwrap();
            assert_eq!(coder.last(), Some(*name));
        }
        coder.finish()
    }

    fn round_trip(names: &[&str]) {
        let coded = coded(names);
        assert_eq!(coded.len(), names.len());
        assert_eq!(coded.iter().collect::<Vec<_>>(), names);
        for (index, name) in names.iter().enumerate() {
            let mut buf = b"left over".to_vec();
            coded.name_into(index, &mut buf);
            assert_eq!(buf, name.as_bytes(), "name {index}");
            assert!(coded.compare(index, name).is_eq());
        }
    }

    #[test]
    fn names_come_back_as_pushed() {
        round_trip(&[]);
        round_trip(&[""]);
        round_trip(&["", "", "a", "", "a"]);
        round_trip(&["buildid/ab/debuginfo", "buildid/ab/executable", "gdb/ab"]);
        // Out of order, a name a prefix of the next and the next a prefix of it.
        round_trip(&["b", "a", "ab", "a", "abc", "ab", "zzz"]);
    }

    #[test]
    fn long_names_and_many_blocks() {
        let long = "x".repeat(100_000);
        let longer = format!("{long}/y");
        let mut names: Vec<String> = (0..5 * BLOCK + 3).map(|i| format!("k/{i:04}")).collect();
        names.insert(3, long.clone());
        names.insert(4, longer);
        names.insert(BLOCK, long);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        round_trip(&names);
    }

    #[test]
    fn shared_bytes_end_at_a_character() {
        // "é" and "è" share their first byte; "日本" and "日付" their first character.
        round_trip(&[
            "caf\u{e9}",
            "caf\u{e8}",
            "\u{65e5}\u{672c}",
            "\u{65e5}\u{4ed8}",
            "\u{65e5}",
        ]);
        round_trip(&["a\u{1f600}b", "a\u{1f601}", "a\u{1f600}"]);
    }

    #[test]
    fn compares_as_strings_do() {
        let names = ["a", "a/b", "b", "b\u{e9}", "c"];
        let coded = coded(&names);
        for (index, name) in names.iter().enumerate() {
            for key in ["", "a", "a/", "a/b", "b", "b\u{e8}", "b\u{e9}", "c", "d"] {
                assert_eq!(coded.compare(index, key), (*name).cmp(key), "{name} {key}");
            }
        }
    }

    #[test]
    fn compares_every_short_name_with_every_short_key() {
        // Every string of up to three of `a`, `b`, `c`, sorted (the order an upload's keys
        // come in) and also reversed: a name sharing more with the one before than it has
        // alike with the key, or less, or as much.
        let mut all = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = all
                .iter()
                .flat_map(|s| ["a", "b", "c"].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(longer);
        }
        all.sort();
        all.dedup();
        let mut reversed = all.clone();
        reversed.reverse();
        for names in [&all, &reversed] {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let coded = coded(&names);
            for (index, name) in names.iter().enumerate() {
                for key in &all {
                    assert_eq!(coded.compare(index, key), (*name).cmp(key.as_str()));
                }
            }
        }
    }

    #[test]
    fn sharing_takes_less_room() {
        let names: Vec<String> = (0..100)
            .map(|i| format!("buildid/75abd509ac8041846187148ea7b4047bc78d37bd/section/{i}"))
            .collect();
        let mut coder = FrontCoder::default();
        for name in &names {
            coder.push(name).unwrap();
        }
        let coded = coder.finish();
        let text: usize = names.iter().map(String::len).sum();
        assert!(
            coded.bytes.len() < text / 3,
            "{} of {text}",
            coded.bytes.len()
        );
    }
}
