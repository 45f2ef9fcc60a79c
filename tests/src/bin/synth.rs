//! `synth <geometry> <dir> [seed]`: writes a well-formed synthetic package (micro, tiny, small, padded,
//! bolt, large, dflash2-small, dflash2-reference or assistant-head) into `dir`, for fuzz seeds and
//! for trying the gate by hand.
#![allow(clippy::print_stderr)]

use gate_tests::synth::{Encoding, Geometry, Package};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(name), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: synth <micro|tiny|small|padded|bolt|large|dflash2-small|dflash2-reference|assistant-head> <dir> [seed]");
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
    let dir = std::path::Path::new(dir);
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| Package::generate(&geometry, Encoding::default(), seed).write(dir));
    if let Err(e) = written {
        eprintln!("synth: {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
