//! What the library's unit tests share: seeded random inputs, the same on every run, and a heap
//! counter per thread, so a test can hold a cost to a count of bytes, which a loaded machine cannot
//! make fail, where a time could.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Bytes this thread has asked the heap for (reallocations count their new size).
    static ASKED: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting what each thread asks of it: threads of other tests running
/// beside one never reach its count.
struct PerThread;

fn asked(bytes: usize) {
    // `try_with`: an allocation during the thread's teardown, after its locals are gone, is not counted.
    let _ = ASKED.try_with(|n| n.set(n.get().saturating_add(bytes as u64)));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter only observes, and
// touching a const-initialised thread local allocates nothing.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        asked(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        asked(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        asked(new_size);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static HEAP: PerThread = PerThread;

/// The next 64 bits of a generator seeded with `seed`, one call at a time.
pub fn seeded(seed: u64) -> impl FnMut() -> u64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    move || rng.next_u64()
}

/// Runs `f` and says how many heap bytes it asked for on this thread (freed or not).
pub fn heap_asked_by<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ASKED.with(Cell::get);
    let out = f();
    (out, ASKED.with(Cell::get) - before)
}
