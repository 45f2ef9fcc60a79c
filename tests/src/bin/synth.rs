//! `synth <geometry> <dir> [seed] [--source DIR]`: writes a well-formed synthetic package (micro, tiny,
//! small, padded, bolt, large, dflash2-small, dflash2-reference or assistant-head) into `dir`, for fuzz
//! seeds and for trying the gate by hand; with `--source`, also the bf16 checkpoint it was quantized
//! from, for trying `dflash-gate --source`.
#![allow(clippy::print_stderr)]

use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let source = match args.iter().position(|a| a == "--source") {
        Some(i) if i + 1 < args.len() => {
            let dir = args.remove(i + 1);
            args.remove(i);
            Some(dir)
        }
        Some(_) => {
            eprintln!("synth: --source needs a directory");
            return ExitCode::from(2);
        }
        None => None,
    };
    let (Some(name), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: synth <micro|tiny|small|padded|bolt|large|dflash2-small|dflash2-reference|assistant-head> <dir> [seed] [--source DIR]");
        return ExitCode::from(2);
    };
    let Some(geometry) = Geometry::named(name) else {
        eprintln!("synth: unknown geometry {name:?}");
        return ExitCode::from(2);
    };
    let seed = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(gate_tests::arms::SEED);
    let dir = Path::new(dir);
    let mut package = Package::generate(&geometry, Encoding::default(), seed);
    let written = std::fs::create_dir_all(dir).and_then(|()| match &source {
        Some(source) => {
            let source = Path::new(source);
            std::fs::create_dir_all(source)?;
            write_source(&mut package, source, SourceOptions::default(), seed)
        }
        None => Ok(()),
    });
    let written = written.and_then(|()| package.write(dir));
    if let Err(e) = written {
        eprintln!("synth: {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
