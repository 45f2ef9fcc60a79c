//! The torch archive and pickle readers (`mask_embedding.pt`, spec section 18.2) on arbitrary bytes:
//! the input is read as an archive, and as a bare pickle. The properties: each returns, and no
//! single allocation is larger than a small multiple of the input plus a fixed slack, so no length
//! the bytes claim sizes an allocation before it was checked against them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest allocation allowed while an input is read (`usize::MAX` outside a reading).
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

struct Capped;

// SAFETY: every call is forwarded unchanged to the system allocator; the cap only observes.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn check(size: usize) {
    if size > CAP.load(Ordering::Relaxed) {
        // Not a panic: a panic allocates, and libFuzzer counts an abort as a crash either way.
        std::process::abort();
    }
}

#[global_allocator]
static HEAP: Capped = Capped;

fuzz_target!(|data: &[u8]| {
    CAP.store(8 * data.len() + (64 << 10), Ordering::Relaxed);
    let _ = dflash_gate::__private::torch_archive::read_mask_embedding(data);
    let _ = dflash_gate::__private::pickle::read(data);
    CAP.store(usize::MAX, Ordering::Relaxed);
});
