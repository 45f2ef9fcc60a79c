//! The whole gate on an in-memory package: the first two bytes give config.json's length, the config
//! follows, the rest is the weight file. It must return a report whose human form keeps every
//! untrusted string on its line: no control character but the line ends, no line past the cap, and
//! exactly one `VERDICT` line, the real one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return };
    let len = (u16::from_le_bytes(*len) as usize).min(rest.len());
    let (config, weights) = rest.split_at(len);
    // `Err` is a worker's panic, caught and said: as much a finding as a panic on this thread.
    let report = dflash_gate::evaluate("fuzz", Ok(config.to_vec()), Ok(("model.q4nx", weights)), Vec::new())
        .expect("no step of the gate panics");
    let _ = report.to_json();
    for census in [false, true] {
        let text = report.to_text(census);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        let verdicts: Vec<&str> = text.lines().filter(|l| l.starts_with("VERDICT")).collect();
        assert_eq!(verdicts, [format!("VERDICT      {}", report.verdict())], "{text}");
        assert!(text
            .lines()
            .all(|l| l.chars().count() <= dflash_gate::__private::escape::MAX_LINE_CHARS + 64));
    }
});
