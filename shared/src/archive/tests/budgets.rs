//! The decoders' shared memory budget.

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use super::{expand_all, files, gzip, sevenz_of, tar_of, xz, zstd, A, B};
use crate::archive::{compressed, expand, memory, DecoderMemory, Event, Options};
use crate::sniff::Container;
use crate::MemReader;

/// A budget the tests' walks share: leaked, as a Lambda's lives as long as its process.
fn budget(bytes: u64) -> &'static DecoderMemory {
    Box::leak(Box::new(DecoderMemory::new(bytes)))
}

/// The decoders' memory is reserved from the walks' shared budget as their stream's header
/// says (memory.rs): an xz stream its first block's dictionary, a zstd stream its first
/// frame's window, a 7z block its coders' dictionaries; a gzip stream nothing.
#[test]
fn decoders_reserve_what_their_stream_header_says() {
    let tar = tar_of(&[("a", A), ("b", B)]);
    let peak = |bytes: &[u8], name: &str| {
        let memory = budget(1 << 40);
        let options = Options {
            memory: Some(memory),
            ..Options::default()
        };
        let seen = expand_all(bytes, name, options).unwrap();
        assert_eq!(files(&seen).len(), 2, "{name}: {seen:?}");
        memory.peak()
    };
    // xz at preset 1: a 1 MiB dictionary (LZMA2 property 16), given the floor: 8 MiB (half
    // again while it grows, and the decoder's 1 MiB).
    let floor = (8 << 20) + (4 << 20) + (1 << 20);
    let xz = xz(&tar);
    assert_eq!(compressed::xz_first_block_lzma2(&xz), Some(16));
    assert_eq!(peak(&xz, "a.tar.xz"), floor);
    let zstd = zstd(&tar);
    let window = compressed::zstd_window(&zstd).expect("a frame header");
    assert!(window >= tar.len() as u64, "{window}");
    assert_eq!(peak(&zstd, "a.tar.zst"), floor);
    // Over the floor, what the header says: xz -9's 64 MiB.
    let mut options = lzma_rust2::XzOptions::with_preset(1);
    options.lzma_options.dict_size = 64 << 20;
    let mut writer = lzma_rust2::XzWriter::new(Vec::new(), options).unwrap();
    writer.write_all(&tar).unwrap();
    let xz9 = writer.finish().unwrap();
    assert_eq!(compressed::xz_first_block_lzma2(&xz9), Some(28));
    assert_eq!(peak(&xz9, "a.tar.xz"), (64 << 20) + (32 << 20) + (1 << 20));
    assert_eq!(peak(&gzip(&tar), "a.tar.gz"), 0);
    let sevenz = sevenz_of(&[("a", A), ("b", B)], true);
    let at = sevenz
        .windows(3)
        .rposition(|w| w == [0x21, 0x21, 0x01])
        .unwrap();
    let dictionary = memory::lzma2_memory(sevenz[at + 3]).unwrap();
    assert_eq!(peak(&sevenz, "a.7z"), dictionary);
}

/// zstd frame headers: a window descriptor (exponent and mantissa), or a single segment's
/// content size in each field width.
#[test]
fn zstd_windows_from_frame_headers() {
    let magic = [0x28, 0xb5, 0x2f, 0xfd];
    let header = |rest: &[u8]| [&magic[..], rest].concat();
    // Window descriptor 0x58: 2^(10 + 11) = 2 MiB; 0x5b: and 3/8 more.
    assert_eq!(
        compressed::zstd_window(&header(&[0x00, 0x58])),
        Some(2 << 20)
    );
    assert_eq!(
        compressed::zstd_window(&header(&[0x00, 0x5b])),
        Some((2 << 20) + 3 * (2 << 17))
    );
    // A single segment: its content size, 1, 2 (from 256), 4 or 8 bytes.
    assert_eq!(compressed::zstd_window(&header(&[0x20, 100])), Some(100));
    assert_eq!(compressed::zstd_window(&header(&[0x60, 1, 0])), Some(257));
    assert_eq!(
        compressed::zstd_window(&header(&[0xa0, 0, 0, 0, 1])),
        Some(1 << 24)
    );
    // With a dictionary id (1 byte) before the content size.
    assert_eq!(compressed::zstd_window(&header(&[0x21, 7, 100])), Some(100));
    // Cut short, or not a frame.
    assert_eq!(compressed::zstd_window(&header(&[0x00])), None);
    assert_eq!(compressed::zstd_window(b"\x50\x2a\x4d\x18skippable"), None);
}

/// Two walks sharing a budget that holds one decoder: the second waits for the first's
/// decoder to be dropped before it makes its own, and both finish.
#[test]
fn walks_over_a_shared_budget_decode_one_at_a_time() {
    let archive = xz(&tar_of(&[("a", A), ("b", B)]));
    let memory = budget(2 << 20);
    let options = Options {
        memory: Some(memory),
        ..Options::default()
    };
    let walk = |visit: &mut dyn FnMut(Event) -> io::Result<()>| {
        let scratch = tempfile::tempdir().unwrap();
        let reader = MemReader(archive.as_slice());
        expand(
            &reader,
            Container::Xz,
            "a.tar.xz",
            &options,
            scratch.path(),
            visit,
        )
    };
    let (holding, held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let second_done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let first = scope.spawn(move || {
            let mut first_entry = true;
            walk(&mut |_| {
                if std::mem::take(&mut first_entry) {
                    holding.send(()).unwrap();
                    released.recv().unwrap();
                }
                Ok(())
            })
        });
        held.recv().unwrap();
        let second = scope.spawn(|| {
            let walked = walk(&mut |_| Ok(()));
            second_done.store(true, Ordering::SeqCst);
            walked
        });
        while memory.waiting() == 0 {
            std::thread::yield_now();
        }
        assert!(!second_done.load(Ordering::SeqCst));
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
    });
    assert_eq!(memory.peak(), 2 << 20, "never two decoders at once");
}
