//! Compressed copies checked from the outside (`symdex verify`, crate::audit): every copy
//! encodes what its key holds now — its key is there, with the content the copy names, and
//! (in depth) the copy decodes to that many bytes, with that SHA-1 where the store names
//! content by one.

use std::io::{self, Write};

use super::coded::FrontCoder;
use super::Depth;
use crate::encoded::{raw_key_of, EncodedMeta, Encoding, ENCODED_PREFIX};
use crate::storage::{CopySource, Storage};

/// A copy that breaks the invariant: `(kind, copy key, detail)`, kinds `copy` (names no
/// content, decodes to other bytes) and `orphan` (its key is gone).
pub type CopyProblem = (&'static str, String, String);

/// Every copy's problems (in key order), and how many copies were checked.
///
/// The copies' keys are held front coded, in the order listed ([`super::coded::FrontCoded`]: a key shares
/// its directory with the one walked before it), and checked in that order, the problems
/// sorted after: at 50,000 debug files, 400,000 copies whose keys, held as a sorted list of
/// strings, took 55 MiB, the larger part of `verify`'s peak.
pub async fn check_copies(
    store: &dyn Storage,
    depth: Depth,
) -> io::Result<(usize, Vec<CopyProblem>)> {
    let mut coder = FrontCoder::default();
    let mut full = None;
    store
        .list_each(ENCODED_PREFIX, &mut |key| {
            if let Err(error) = coder.push(&key) {
                full.get_or_insert(error);
            }
        })
        .await?;
    if let Some(error) = full {
        return Err(io::Error::other(error));
    }
    let copies = coder.finish();
    let mut problems = Vec::new();
    for copy in copies.iter() {
        if let Some(problem) = check_copy(store, &copy, depth).await? {
            problems.push(problem);
        }
    }
    // One problem a copy at most: sorted by key, they read as a walk in key order found them.
    problems.sort_by(|a, b| a.1.cmp(&b.1));
    Ok((copies.len(), problems))
}

async fn check_copy(
    store: &dyn Storage,
    copy: &str,
    depth: Depth,
) -> io::Result<Option<CopyProblem>> {
    let fault = |kind, detail: &str| Ok(Some((kind, copy.to_string(), detail.to_string())));
    let Some((_, raw_key)) = raw_key_of(copy) else {
        return fault(
            "copy",
            "not a copy's key (_symdex/encoded/<zstd|gzip>/<key>)",
        );
    };
    let Some((_, meta)) = store.encoded(copy).await? else {
        return fault("copy", "names no content it encodes");
    };
    let Some(found) = store.owned(raw_key).await? else {
        return fault("orphan", "a copy of a key that is not published");
    };
    let holds = found.written.clone().unwrap_or(found.info.clone());
    if holds != meta.raw {
        return fault(
            "copy",
            &format!(
                "encodes {} bytes ({}), its key holds {} ({})",
                meta.raw.size, meta.raw.etag, holds.size, holds.etag
            ),
        );
    }
    if depth == Depth::Deep {
        let (size, sha1) = decoded(store, copy, &meta).await?;
        let named_by_sha1 = meta.raw.etag.len() == 40;
        if size != meta.raw.size || (named_by_sha1 && sha1 != meta.raw.etag) {
            return fault(
                "copy",
                &format!("decodes to {size} bytes ({sha1}), not what its key holds"),
            );
        }
    }
    Ok(None)
}

/// The size and SHA-1 the copy decodes to (a copy that does not decode: an error's size 0).
async fn decoded(store: &dyn Storage, copy: &str, meta: &EncodedMeta) -> io::Result<(u64, String)> {
    let mut counted = Counted::default();
    let source = CopySource::Key(copy);
    let result = match meta.encoding {
        Encoding::Zstd => {
            let mut decoder = zstd::stream::write::Decoder::new(&mut counted)?;
            let read = store.read_source(&source, &mut decoder).await;
            read.and_then(|_| Ok(decoder.flush()?))
        }
        Encoding::Gzip => {
            let mut decoder = flate2::write::GzDecoder::new(&mut counted);
            let read = store.read_source(&source, &mut decoder).await;
            read.and_then(|_| Ok(decoder.try_finish()?))
        }
    };
    if result.is_err() {
        return Ok((0, "undecodable".to_string()));
    }
    Ok((counted.size, counted.sha1.hex()))
}

#[derive(Default)]
struct Counted {
    size: u64,
    sha1: crate::digest::Sha1,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.size += buf.len() as u64;
        self.sha1.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
