//! The one way the gate uses both cores: scoped threads handing out items one at a time.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Maps `f` over `items` on every core, in order. Each worker makes its own state with `init` once
/// (a scan buffer, a read buffer) and reuses it for every item it takes, so memory follows the
/// number of workers, not of items. Items are handed out one at a time, so one large item does not
/// hold up the rest.
pub fn map<T: Sync, S, R: Send>(
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut state = init();
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            done.push((i, f(&mut state, item)));
        }
        done
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers).map(|_| s.spawn(worker)).collect();
        // A worker that panicked has lost its items; they are missing below and the caller sees a
        // short result rather than a wrong one.
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_and_reuses_state() {
        let items: Vec<u64> = (0..100).collect();
        let out = super::map(&items, Vec::<u64>::new, |seen, x| {
            seen.push(*x);
            x * 2
        });
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u8], || (), |_, x| *x).is_empty());
    }
}
