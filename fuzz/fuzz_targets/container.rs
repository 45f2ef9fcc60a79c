//! The container parser on arbitrary bytes: the only property is that it returns.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = dflash_gate::__private::container::Container::parse(data) {
        for e in &c.table.entries {
            let _ = c.data(e);
        }
    }
    let _ = dflash_gate::__private::container::parse_header_only(data, data.len() as u64 + 64);
});
