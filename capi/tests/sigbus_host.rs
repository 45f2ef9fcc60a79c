//! The `SIGBUS` guard in a host process, its own test binary because the signal's action is
//! process-wide: the library must neither silently take a host's handler over nor lose it.

use dflash_gate_capi::*;
use std::sync::atomic::{AtomicUsize, Ordering};

static HOST_SAW: AtomicUsize = AtomicUsize::new(0);

extern "C" fn host_handler(_: libc::c_int) {
    HOST_SAW.fetch_add(1, Ordering::SeqCst);
}

/// The handler address `SIGBUS` runs now.
fn action() -> usize {
    // SAFETY: a zeroed sigaction is a valid value for the kernel to fill in; a query only.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now), 0);
        now.sa_sigaction
    }
}

/// Gates the committed package (its weight file is large enough to be mapped): PASS expected.
fn gate_tiny() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/tiny");
    let mut report = std::ptr::null_mut();
    // SAFETY: a valid buffer and out-pointer; the report is freed below.
    unsafe {
        assert_eq!(
            dflash_gate_gate(
                dir.as_ptr().cast(),
                dir.len(),
                std::ptr::null(),
                &mut report
            ),
            dflash_gate_status::DFLASH_GATE_OK
        );
        assert_eq!(dflash_gate_report_exit_status(report), 0);
        assert_eq!(
            dflash_gate_report_free(report),
            dflash_gate_status::DFLASH_GATE_OK
        );
    }
}

#[test]
fn the_guard_never_takes_a_hosts_handler() {
    // Whatever was there first (Rust's own stack-overflow handler, in a Rust host).
    let default = action();

    // Read, never map: gating leaves the action as it was.
    assert_eq!(
        dflash_gate_set_never_map(true),
        dflash_gate_status::DFLASH_GATE_OK
    );
    gate_tiny();
    assert_eq!(action(), default, "never map, yet SIGBUS was taken");

    // Mapping: the guard is installed at the first map.
    assert_eq!(
        dflash_gate_set_never_map(false),
        dflash_gate_status::DFLASH_GATE_OK
    );
    gate_tiny();
    let guard = action();
    assert_ne!(guard, default, "the first map did not install the guard");

    // The host installs its own handler after the gate's first call: the gate leaves it in place
    // (it reads instead of mapping), and a SIGBUS reaches the host.
    // SAFETY: a plain handler that only bumps an atomic, installed with signal().
    let displaced = unsafe { libc::signal(libc::SIGBUS, host_handler as *const () as usize) };
    assert_eq!(displaced, guard);
    gate_tiny();
    gate_tiny();
    assert_eq!(
        action(),
        host_handler as *const () as usize,
        "the gate took SIGBUS back from the host"
    );
    // SAFETY: raising a signal whose handler is the host's, installed above.
    assert_eq!(unsafe { libc::raise(libc::SIGBUS) }, 0);
    assert_eq!(HOST_SAW.load(Ordering::SeqCst), 1);
}
