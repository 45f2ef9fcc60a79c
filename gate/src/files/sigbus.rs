//! A file truncated while it is mapped must not kill the process.
//!
//! Touching a page of a shared file mapping past the file's current end raises `SIGBUS`, whose default
//! action ends the process (exit 135). The gate may run inside a loader's process, so it answers "the
//! file changed while it was read" instead:
//!
//! - every map the gate reads is registered here (its address range, in a fixed table of slots);
//! - a `SIGBUS` handler, installed once, looks the faulting address up: inside a registered map it
//!   maps one anonymous zero page over the faulting page (`MAP_FIXED`), marks the map as faulted and
//!   returns, so the read that faulted is retried and sees zeros;
//! - after reading, the owner asks [`Registration::faulted`] (and compares size and modification time,
//!   see `RegularFile::unchanged`) and reports the file as changed: the zeros are never judged.
//!
//! A fault anywhere else is not ours: the handler reinstates the action that was there before it
//! (Rust's own stack-overflow handler, a host's handler, or the default) and returns, so the fault
//! recurs under that action exactly as it would have without this module. A `SIGBUS` sent by `kill` is
//! passed on the same way and raised again.
//!
//! So the guard can be gone by the time the next file is mapped: put back aside by such a signal (a
//! process that survived it), or replaced by a host's own handler. Every registration therefore asks
//! the kernel what the action is now, and a map is only ever trusted under the guard: when the action
//! is the one the guard put back, the guard is installed again; when it is anything else (a host took
//! `SIGBUS` over), the guard does not fight it, and the caller reads the file instead of mapping it.
//!
//! Cost: one `sigaction` query per map (two on first use) and two atomic stores; nothing per page or
//! per read.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How many maps can be guarded at once (one per open weight file or shard).
pub(super) const SLOTS: usize = 64;

struct Slot {
    /// Held by a registration (set before `start` is published, cleared after it is withdrawn).
    busy: AtomicBool,
    /// Start address of the map; 0 when the slot guards nothing.
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    busy: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(0);
/// The action in place before ours, reinstated for faults that are not ours; null until the guard was
/// first installed. Written only under [`INSTALLING`], to a value that is never freed (the handler may
/// be reading the old one), and at most once per installation.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises installations, so two threads cannot each take the other's handler for the previous one.
static INSTALLING: Mutex<()> = Mutex::new(());

/// A map registered with the handler; withdrawn on drop, which must happen before the map is unmapped.
pub struct Registration {
    slot: usize,
}

/// Set by a host process that keeps `SIGBUS` to itself ("read, never map"): no map is registered, so
/// the guard is never installed (nor re-installed) and every file is read instead of mapped.
static NEVER_MAP: AtomicBool = AtomicBool::new(false);

/// Read, never map, from now on (process-wide): for a host whose own `SIGBUS` handling must not be
/// touched at all, not even chained. `false` goes back to mapping under the guard.
pub fn set_never_map(never: bool) {
    NEVER_MAP.store(never, Ordering::Release);
}

/// Registers `start..start + len` (a live read-only map), installing the handler on first use. `None`
/// when the host asked for no maps ([`set_never_map`]), the handler could not be installed or every
/// slot is taken: the caller must then not rely on a map (it reads the file instead).
pub fn register(start: *const u8, len: usize) -> Option<Registration> {
    if NEVER_MAP.load(Ordering::Acquire) || !install() || len == 0 {
        return None;
    }
    for (i, slot) in TABLE.iter().enumerate() {
        if slot
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            slot.faulted.store(false, Ordering::Relaxed);
            slot.len.store(len, Ordering::Relaxed);
            slot.start.store(start as usize, Ordering::Release);
            return Some(Registration { slot: i });
        }
    }
    None
}

impl Registration {
    /// Whether a read of the map faulted (the file was shorter than the map): its bytes from there on
    /// read as zeros and must not be judged.
    pub fn faulted(&self) -> bool {
        TABLE[self.slot].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let slot = &TABLE[self.slot];
        slot.start.store(0, Ordering::Release);
        slot.busy.store(false, Ordering::Release);
    }
}

/// Whether the guard is the action for `SIGBUS` now, installing it if need be; false when a map must
/// not be trusted (the action could not be read or set, or a host's handler has taken the guard's
/// place).
fn install() -> bool {
    let _installing = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a zeroed sigaction (integers, a handler address and a signal set) is a valid value
    // for the kernel to fill in.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a query only (the new action is null) into `current`, a valid sigaction we own.
    if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut current) } != 0 {
        return false;
    }
    if is_ours(&current) {
        return true;
    }
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: PREVIOUS is null or a leaked Box, never freed.
    if let Some(previous) = unsafe { previous.as_ref() } {
        // Not the action the guard put back after a signal that was not its own: a host installed its
        // handler over the guard's. It keeps `SIGBUS`; maps are read instead.
        if !same_action(previous, &current) {
            return false;
        }
    } else {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        PAGE.store(usize::try_from(page).unwrap_or(4096), Ordering::Relaxed);
    }
    // SAFETY: a zeroed sigaction is a valid value to fill in; `handler` has the SA_SIGINFO signature;
    // `displaced` receives the action replaced, which is `current` unless it changed meanwhile.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut displaced: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &action, &mut displaced) != 0 {
            return false;
        }
        if is_ours(&displaced) {
            return true;
        }
        let known = PREVIOUS.load(Ordering::Acquire);
        if known.is_null() || !same_action(&*known, &displaced) {
            PREVIOUS.store(Box::into_raw(Box::new(displaced)), Ordering::Release);
        }
    }
    true
}

fn is_ours(action: &libc::sigaction) -> bool {
    action.sa_sigaction == handler as *const () as usize && action.sa_flags & libc::SA_SIGINFO != 0
}

/// Whether two actions run the same handler the same way.
fn same_action(a: &libc::sigaction, b: &libc::sigaction) -> bool {
    a.sa_sigaction == b.sa_sigaction && a.sa_flags == b.sa_flags
}

extern "C" fn handler(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // si_code > 0: raised by the kernel for a fault at si_addr (not sent by kill or sigqueue).
    if code > 0 {
        let page = PAGE.load(Ordering::Relaxed).max(1);
        for slot in &TABLE {
            let start = slot.start.load(Ordering::Acquire);
            let len = slot.len.load(Ordering::Relaxed);
            if start != 0 && start <= addr && addr - start < len {
                let at = addr & !(page - 1);
                // SAFETY: replaces one page of a registered read-only map (ours, live until its
                // registration is withdrawn) with an anonymous zero page; mmap is a plain system call,
                // safe to make in a signal handler.
                let mapped = unsafe {
                    libc::mmap(
                        at as *mut libc::c_void,
                        page,
                        libc::PROT_READ,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    )
                };
                if mapped != libc::MAP_FAILED {
                    slot.faulted.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }
    // Not ours: put the previous action back and let the fault (or the signal) happen again under it.
    // SAFETY: reinstating the action the kernel gave us (or the default, should a fault arrive before
    // it was recorded); sigaction and raise are async-signal-safe.
    unsafe {
        match PREVIOUS.load(Ordering::Acquire).as_ref() {
            Some(previous) => libc::sigaction(signal, previous, std::ptr::null_mut()),
            None => {
                libc::signal(signal, libc::SIG_DFL);
                0
            }
        };
        if code <= 0 {
            libc::raise(signal);
        }
    }
}
