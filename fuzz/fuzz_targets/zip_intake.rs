//! An uploaded ZIP bundle, checked and read in memory as the uploader does before extracting:
//! the central directory rules (names, links, encryption, methods, entry count, total size,
//! ratio), then every kept entry decompressed with its declared size enforced. Errors are
//! expected; a panic, a crash, a hang or an allocation beyond libFuzzer's limits is a finding.
#![no_main]

use entiserve::uploader::bundle::{ZipLimits, inspect_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = ZipLimits {
        max_entries: 1000,
        max_bytes: 64 << 20,
        max_ratio: 200,
    };
    let _ = inspect_bytes(data, &limits);
});
