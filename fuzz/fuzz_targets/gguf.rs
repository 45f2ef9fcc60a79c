//! The GGUF reader on arbitrary bytes, in memory and as a file: both must agree, and every tensor
//! the reader accepts is scanned for non-finite values and dequantized (or refused by type) without
//! a panic. The reader's own bounds keep the output buffers to what the file's bytes hold. The same
//! file is then gated as a draft and read as a target, the two other paths a GGUF takes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("gate-fuzz-gguf-{}.gguf", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let parsed = dflash_gate::__private::gguf::parse(data);
    let path = scratch();
    if std::fs::write(&path, data).is_ok() {
        let opened = dflash_gate::__private::gguf::Gguf::open(&path);
        assert_eq!(parsed.is_ok(), opened.is_ok(), "parse and open disagree");
        if let Ok(gguf) = opened {
            let _ = gguf.token_texts();
            let _ = gguf.token_type_list();
            let _ = dflash_gate::gate(&path, &dflash_gate::Options::default());
            let _ = dflash_gate::__private::target::read(&path);
            use dflash_gate::__private::gguf::{dequantize, dequantize_k_quant, k_quant, supported};
            for info in &gguf.header.tensors {
                let bytes = gguf.data(info).expect("an accepted tensor's bytes are in the file");
                let _ = dflash_gate::__private::gguf::scan_tensor(info, bytes);
                if !supported(info.ty) && !k_quant(info.ty) {
                    continue;
                }
                let mut out = vec![0f32; info.elements() as usize];
                let _ = if k_quant(info.ty) {
                    dequantize_k_quant(info.ty, bytes, &mut out)
                } else {
                    dequantize(info.ty, bytes, &mut out)
                };
            }
        }
    }
});
