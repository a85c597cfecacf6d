//! The memory limit of a runtime: QuickJS allocates through [`Counted`], which counts every
//! byte it holds against a [`Budget`] and refuses what would pass the limit, remembering
//! that it did.
//!
//! QuickJS's own limit (`JS_SetMemoryLimit`) refuses the same allocations, but does not say
//! so: when even the error object cannot be made, the exception is `null`, the same as a
//! hook's `throw null`. Counting here tells an overrun from an exception.

use rquickjs::allocator::{Allocator, RustAllocator};
use std::cell::Cell;
use std::rc::Rc;

/// The bytes a runtime may hold, what it holds, and whether an allocation was refused since
/// [`Budget::rearm`].
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    used: Cell<usize>,
    refused: Cell<bool>,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Rc<Budget> {
        Rc::new(Budget {
            limit,
            used: Cell::new(0),
            refused: Cell::new(false),
        })
    }

    /// Forgets earlier refusals.
    pub(crate) fn rearm(&self) {
        self.refused.set(false);
    }

    /// Whether an allocation was refused since the last [`Budget::rearm`].
    pub(crate) fn refused(&self) -> bool {
        self.refused.get()
    }

    /// Whether `more` bytes fit beside what is held once `less` bytes are given back; a
    /// refusal is remembered.
    fn fits(&self, less: usize, more: usize) -> bool {
        let after = self.used.get().saturating_sub(less).saturating_add(more);
        let fits = after <= self.limit;
        if !fits {
            self.refused.set(true);
        }
        fits
    }

    /// Records that `less` bytes were given back and `more` taken.
    fn record(&self, less: usize, more: usize) {
        self.used
            .set(self.used.get().saturating_sub(less).saturating_add(more));
    }
}

/// Rust's global allocator, counted against a [`Budget`].
pub(crate) struct Counted {
    pub(crate) budget: Rc<Budget>,
}

// SAFETY: every pointer comes from `RustAllocator`, which meets the trait's contract; this
// type only refuses some requests (a null pointer, which the contract allows) and counts.
unsafe impl Allocator for Counted {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.budget.fits(0, size) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.alloc(size);
        if !ptr.is_null() {
            // SAFETY: `ptr` was just allocated by `RustAllocator`.
            self.budget
                .record(0, unsafe { RustAllocator::usable_size(ptr) });
        }
        ptr
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        if !self.budget.fits(0, count.saturating_mul(size)) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.calloc(count, size);
        if !ptr.is_null() {
            // SAFETY: `ptr` was just allocated by `RustAllocator`.
            self.budget
                .record(0, unsafe { RustAllocator::usable_size(ptr) });
        }
        ptr
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller hands back a pointer this allocator made, so `RustAllocator`'s.
        unsafe {
            self.budget.record(RustAllocator::usable_size(ptr), 0);
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        // SAFETY: the caller hands in a pointer this allocator made, so `RustAllocator`'s; on
        // a refusal it keeps its old allocation, as after any failed `realloc`.
        unsafe {
            let old = RustAllocator::usable_size(ptr);
            if !self.budget.fits(old, new_size) {
                return std::ptr::null_mut();
            }
            let moved = RustAllocator.realloc(ptr, new_size);
            if !moved.is_null() {
                self.budget.record(old, RustAllocator::usable_size(moved));
            }
            moved
        }
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: as for `dealloc`.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}
