//! Ctrl-C during a run over several packages: the run stops after the package being gated, says how
//! far it got, and a JSON document is closed whole, instead of the process dying mid-document and
//! leaving a file a later step cannot parse. The handler is one-shot: a second Ctrl-C ends the process
//! at once, so a long package never makes the gate hard to stop.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the one-shot `SIGINT` handler.
pub fn install() {
    // SAFETY: a zeroed `sigaction` is a valid value (no flags, no handler) before its fields are set;
    // the handler only stores to an atomic, which is async-signal-safe; `SA_RESETHAND` gives `SIGINT`
    // its default action back once the handler has run.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// Whether Ctrl-C was pressed since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
