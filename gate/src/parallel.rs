//! The one way the gate uses both cores: scoped threads handing out items one at a time.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A worker panicked during `step`: the items it held have no result, so the step's answer is
/// incomplete. The caller must not draw a verdict from what the other workers returned (a grid, a
/// tile or a file missing from a result reads as "nothing wrong with it").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerPanic {
    /// The step that lost a result (a check id, or what the step computes).
    pub step: &'static str,
    /// What the panic said, when it said it as text.
    pub message: String,
}

/// Maps `f` over `items` on every core, in order. Each worker makes its own state with `init` once
/// (a scan buffer, a read buffer) and reuses it for every item it takes, so memory follows the
/// number of workers, not of items. Items are handed out one at a time, so one large item does not
/// hold up the rest. Every item has its result, or the whole step is a [`WorkerPanic`].
pub fn map<T: Sync, S, R: Send>(
    step: &'static str,
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Result<Vec<R>, WorkerPanic> {
    map_on(cores(), step, items, init, f)
}

/// Bytes a worker must have to read before starting one pays: a thread start costs about what
/// reading this much from the page cache does.
pub const BYTES_PER_WORKER: usize = 1 << 20;

/// [`map`] over items that read `bytes` in all: with as many workers as there are
/// [`BYTES_PER_WORKER`] to read, so a step reading the few norms of a quantized draft runs on this
/// thread alone rather than start one to read kilobytes.
pub fn map_reading<T: Sync, S, R: Send>(
    step: &'static str,
    items: &[T],
    bytes: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Result<Vec<R>, WorkerPanic> {
    map_on(bytes.div_ceil(BYTES_PER_WORKER), step, items, init, f)
}

/// [`map_reading`], with this thread running `first` before it takes items: the other workers
/// read meanwhile, so a step of this thread's own that waits on nothing the map finds (the census
/// of a folder's tensors, beside the scans of their bytes) fills a core that would idle while it
/// runs. Returns both; a panic in `first` ends the step as it would have alone.
pub fn map_reading_after<T: Sync, S, R: Send, A>(
    step: &'static str,
    items: &[T],
    bytes: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
    first: impl FnOnce() -> A,
) -> (A, Result<Vec<R>, WorkerPanic>) {
    map_after(
        bytes.div_ceil(BYTES_PER_WORKER),
        step,
        items,
        init,
        f,
        first,
    )
}

fn map_on<T: Sync, S, R: Send>(
    most: usize,
    step: &'static str,
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Result<Vec<R>, WorkerPanic> {
    map_after(most, step, items, init, f, || ()).1
}

/// What one worker did: its items' results, by index, or its panic's message.
type Joined<R> = Result<Vec<(usize, R)>, String>;

fn map_after<T: Sync, S, R: Send, A>(
    most: usize,
    step: &'static str,
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
    first: impl FnOnce() -> A,
) -> (A, Result<Vec<R>, WorkerPanic>) {
    let workers = cores().min(most).min(items.len()).max(1);
    let inject = fault::armed(step);
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut state = init();
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            if inject {
                panic!("injected into {step}");
            }
            done.push((i, f(&mut state, item)));
        }
        done
    };
    // This thread is one of the workers: a step costs one thread start fewer (a folder's whole gate
    // is a millisecond or two, of which each start is tens of microseconds), and a step of one item
    // starts none. Its panic is caught and answered as a spawned worker's is.
    let (done_first, joined): (A, Vec<Joined<R>>) = std::thread::scope(|s| {
        let handles: Vec<_> = (1..workers).map(|_| s.spawn(worker)).collect();
        let done_first = first();
        let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(worker))
            .map_err(|payload| panic_text(payload.as_ref()));
        let mut joined: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().map_err(|payload| panic_text(payload.as_ref())))
            .collect();
        joined.push(here);
        (done_first, joined)
    });
    // Every item was taken by a worker that returned it or panicked: with no panic, none is missing.
    let mut results = Vec::with_capacity(items.len());
    for done in joined {
        match done {
            Ok(done) => results.extend(done),
            Err(message) => return (done_first, Err(WorkerPanic { step, message })),
        }
    }
    results.sort_by_key(|(i, _)| *i);
    (
        done_first,
        Ok(results.into_iter().map(|(_, r)| r).collect()),
    )
}

/// Runs `side` on a thread of its own while `main` runs on this one, and returns both: a step
/// that waits on nothing `main` finds (opening a file named on the command line) overlaps it
/// instead of following it. A panic in `side` is a [`WorkerPanic`] of `step`, never a result.
pub fn beside<A, B: Send>(
    step: &'static str,
    side: impl FnOnce() -> B + Send,
    main: impl FnOnce() -> A,
) -> (A, Result<B, WorkerPanic>) {
    let inject = fault::armed(step);
    std::thread::scope(|s| {
        let handle = s.spawn(move || {
            if inject {
                panic!("injected into {step}");
            }
            side()
        });
        let a = main();
        let b = handle.join().map_err(|payload| WorkerPanic {
            step,
            message: panic_text(payload.as_ref()),
        });
        (a, b)
    })
}

/// The cores this process may use, asked once: the answer reads cgroup files, which on a folder
/// gated in a millisecond was a cost of its own at every step.
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A panic's message, when it was text (`panic!` with a literal or with arguments).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A way for tests to make a step's workers panic, so that every caller of [`map`] is seen to end
/// the run rather than return a short result. Armed per thread (the thread that calls [`map`]),
/// so tests running side by side in one process do not disturb each other; never armed otherwise.
#[doc(hidden)]
pub mod fault {
    use std::cell::Cell;

    thread_local! {
        static PANIC_IN: Cell<Option<&'static str>> = const { Cell::new(None) };
    }

    /// Until the returned guard is dropped, every [`super::map`] for `step` called from this
    /// thread has its workers panic on their first item.
    pub fn panic_in(step: &'static str) -> Armed {
        Armed(PANIC_IN.with(|p| p.replace(Some(step))))
    }

    /// Disarms on drop (restoring what was armed before).
    pub struct Armed(Option<&'static str>);

    impl Drop for Armed {
        fn drop(&mut self) {
            PANIC_IN.with(|p| p.set(self.0));
        }
    }

    pub(super) fn armed(step: &'static str) -> bool {
        PANIC_IN.with(|p| p.get() == Some(step))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_and_reuses_state() {
        let items: Vec<u64> = (0..100).collect();
        let out = super::map("test", &items, Vec::<u64>::new, |seen, x| {
            seen.push(*x);
            x * 2
        });
        assert_eq!(out, Ok(items.iter().map(|x| x * 2).collect::<Vec<_>>()));
        assert_eq!(
            super::map("test", &[] as &[u8], || (), |_, x| *x),
            Ok(vec![])
        );
    }

    /// `first` runs on the calling thread, before it takes items, while the other workers read;
    /// its answer comes back beside the map's, and a worker's panic still loses the map's.
    #[test]
    fn first_runs_here_beside_the_workers() {
        let items: Vec<u64> = (0..1000).collect();
        let here = std::thread::current().id();
        let bytes = 4 * super::BYTES_PER_WORKER;
        let (ran_here, out) = super::map_reading_after(
            "test",
            &items,
            bytes,
            || (),
            |_, x| x + 1,
            || std::thread::current().id() == here,
        );
        assert!(ran_here);
        assert_eq!(out, Ok(items.iter().map(|x| x + 1).collect::<Vec<_>>()));
        let (answer, out) = super::map_reading_after(
            "cursed",
            &items,
            bytes,
            || (),
            |_, &x| {
                assert!(x != 500, "item {x} is cursed");
                x
            },
            || 42,
        );
        assert_eq!(answer, 42);
        assert_eq!(out.expect_err("a worker panicked").step, "cursed");
    }

    #[test]
    fn a_panicking_worker_is_an_error_never_a_short_result() {
        let items: Vec<u64> = (0..100).collect();
        let out = super::map(
            "doubling",
            &items,
            || (),
            |_, &x| {
                assert!(x != 37, "item {x} is cursed");
                x * 2
            },
        );
        let err = out.expect_err("a worker panicked");
        assert_eq!(err.step, "doubling");
        assert!(err.message.contains("item 37 is cursed"), "{}", err.message);
        let _armed = super::fault::panic_in("doubling");
        assert!(super::map("doubling", &items, || (), |_, x| *x).is_err());
        assert!(super::map("other", &items, || (), |_, x| *x).is_ok());
    }

    #[test]
    fn a_step_reading_little_runs_on_this_thread_and_its_panic_is_an_error() {
        // Each worker makes its state once: the count of states is the count of workers.
        let here = std::thread::current().id();
        let items: Vec<u64> = (0..8).collect();
        let states = std::sync::atomic::AtomicUsize::new(0);
        let init = || states.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ran = super::map_reading("small", &items, 4096, init, |_, _| {
            std::thread::current().id()
        });
        assert_eq!(ran, Ok(vec![here; items.len()]));
        assert_eq!(states.swap(0, std::sync::atomic::Ordering::Relaxed), 1);
        let most = super::cores().min(items.len());
        let ran = super::map_reading(
            "small",
            &items,
            most * super::BYTES_PER_WORKER,
            init,
            |_, x| *x,
        );
        assert_eq!(ran, Ok(items.clone()));
        assert_eq!(states.load(std::sync::atomic::Ordering::Relaxed), most);
        let out = super::map_reading(
            "small",
            &items,
            4096,
            || (),
            |_, &x| {
                assert!(x != 3, "item {x} is cursed");
                x
            },
        );
        let err = out.expect_err("the worker on this thread panicked");
        assert_eq!(err.step, "small");
        assert!(err.message.contains("item 3 is cursed"), "{}", err.message);
        let _armed = super::fault::panic_in("small");
        assert!(super::map_reading("small", &items, 4096, || (), |_, x| *x).is_err());
    }

    #[test]
    fn a_step_beside_the_main_one_returns_both_and_a_panic_is_an_error() {
        let (a, b) = super::beside("side", || 2, || 1);
        assert_eq!((a, b), (1, Ok(2)));
        let (a, b) = super::beside("side", || -> u8 { panic!("lost") }, || 1);
        assert_eq!(a, 1);
        let err = b.expect_err("the side step panicked");
        assert_eq!((err.step, err.message.as_str()), ("side", "lost"));
        let _armed = super::fault::panic_in("side");
        assert!(super::beside("side", || 2, || 1).1.is_err());
    }
}
