//! The global allocator: mimalloc, asked through its plain entry points for the blocks nearly
//! every allocation wants. The `mimalloc` crate's allocator asks for every block through
//! `mi_malloc_aligned`, whose checks of the alignment cost about 20 instructions a block (an
//! upload's rows cost 2.9% fewer instructions without them); a block aligned to a word, which
//! is what most Rust types ask for, is what `mi_malloc` gives anyway. So is a block of 16 bytes
//! or more aligned to 16 (a hash table's, for one), which the aligned calls would give only by
//! allocating more than asked and freeing it more slowly. Blocks of a larger alignment, or
//! smaller blocks aligned past a word, go through the aligned calls, as the crate's allocator
//! sends them.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every block of mimalloc has: its smallest block is a word, and every size
/// it hands out is a multiple of one.
const WORD: usize = std::mem::size_of::<usize>();

/// The alignment of every mimalloc block of this size or more (its `MI_MAX_ALIGN_SIZE`: what C's
/// `malloc` must give for `max_align_t`; mimalloc's blocks of 16 bytes or more are sized in
/// steps of 16 from a page start aligned to 16).
const MAX_ALIGN: usize = 16;

/// Whether a block of `size` bytes aligned to `align` comes aligned from the plain calls.
#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= WORD || (align <= MAX_ALIGN && size >= MAX_ALIGN)
}

/// mimalloc as the global allocator (`#[global_allocator]`), for the server and the
/// benchmarks that compare with it.
pub struct MiMalloc;

// SAFETY: every call is handed to mimalloc, which returns a block of at least the size asked,
// or null when it has none. The plain calls are taken only when the alignment asked is one
// every mimalloc block of that size has (see `plain`); any other goes to the `_aligned` call
// that takes the alignment. Every block, however made, is freed by `mi_free`, and resized by
// `mi_realloc` only when both its old and its new size have their alignment from the plain
// calls (the block is kept or a new one is made by them).
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl; the layout's size is not zero (the caller's promise).
        unsafe {
            if plain(layout.size(), layout.align()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if plain(layout.size(), layout.align()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the new size is not zero.
        unsafe {
            if plain(layout.size(), layout.align()) && plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size class a 16-aligned block of up to 64 KiB can fall in, many blocks of each,
    /// comes aligned from the plain calls, new and resized.
    #[test]
    fn blocks_of_16_bytes_or_more_aligned_to_16_come_aligned() {
        let a = MiMalloc;
        for size in (16..=1024).step_by(8).chain((1024..=65536).step_by(1000)) {
            let layout = Layout::from_size_align(size, 16).expect("a layout");
            assert!(plain(size, 16));
            // SAFETY: layouts of non-zero size; each block is freed once with its layout.
            unsafe {
                let blocks: Vec<*mut u8> = (0..64).map(|_| a.alloc(layout)).collect();
                for &p in &blocks {
                    assert!(!p.is_null());
                    assert_eq!(p as usize % 16, 0, "size {size}");
                }
                for p in blocks {
                    let q = a.realloc(p, layout, size + 24);
                    assert_eq!(q as usize % 16, 0, "resized from {size}");
                    a.dealloc(q, Layout::from_size_align(size + 24, 16).expect("a layout"));
                }
            }
        }
        assert!(!plain(8, 16) && !plain(64, 32));
    }

    #[test]
    fn blocks_have_the_alignment_and_size_asked_and_keep_their_bytes() {
        let a = MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 24, 100, 4096, 100_000] {
                let layout = Layout::from_size_align(size, align).expect("a layout");
                // SAFETY: a layout of non-zero size; each block is written within its size,
                // resized with its own layout and freed once.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size}, align {align}");
                    p.write_bytes(0xAB, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "resized: size {size}, align {align}");
                    assert!(
                        std::slice::from_raw_parts(q, size)
                            .iter()
                            .all(|&b| b == 0xAB)
                    );
                    a.dealloc(
                        q,
                        Layout::from_size_align(size * 3, align).expect("a layout"),
                    );
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
