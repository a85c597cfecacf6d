//! An uploaded pages.pdf, split into one-page PDFs by the code the `entiserve pdf-pages`
//! child runs (lopdf parsing, page-tree inheritance, copying what each page references,
//! writing each page). Errors are expected; a panic, a crash, a stack overflow, a hang or an
//! allocation beyond libFuzzer's limits is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = entiserve::pdf::split(data, 50);
});
