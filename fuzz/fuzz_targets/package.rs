//! The whole gate on an in-memory package: the first two bytes give config.json's length, the config
//! follows, the rest is the weight file. The only property is that it returns a report.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return };
    let len = (u16::from_le_bytes(*len) as usize).min(rest.len());
    let (config, weights) = rest.split_at(len);
    let report = gate::evaluate("fuzz", Ok(config.to_vec()), Ok(("model.q4nx", weights)), Vec::new());
    let _ = report.to_json();
    let _ = report.to_text(true);
});
