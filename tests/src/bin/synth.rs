//! `synth <geometry> <dir> [seed] [--source DIR [--shards N]] [--gguf FILE]`: writes a well-formed
//! synthetic package (micro, tiny, small, padded, bolt, large, dflash2-small, dflash2-reference or
//! assistant-head) into `dir`, for fuzz seeds and for trying the gate by hand; with `--source`, also
//! the bf16 checkpoint it was quantized from (in N shards named by an index with `--shards`), for
//! trying `dflash-gate --source`; with `--gguf`, also the GGUF it was converted from.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use dflash_gate::__private::checkpoint::MAX_SHARDS;
use gate_tests::synth::gguf::{write_gguf, GgufOptions};
use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: synth <micro|tiny|small|padded|bolt|large|dflash2-small|dflash2-reference|assistant-head> <dir> [seed] [--source DIR [--shards N]] [--gguf FILE]

Writes a well-formed synthetic package into <dir> (seed: a number; default the test suite's).
--source DIR   also write the bf16 checkpoint the package's grids are quantized from. The grids are
               then drawn for the checkpoint: a package written without --source holds other grids,
               so write both in one run to compare them.
--shards N     write the checkpoint as N shards named by model.safetensors.index.json (default 1:
               model.safetensors; at most 32, the most the gate reads whole, and at most one per
               tensor)
--gguf FILE    also write the GGUF the package is converted from (llama.cpp names, architecture
               dflash, Q4_1 matrices whose blocks are the package's groups, F32 gains, BF16 fc). With
               --source too, both are sources of the same package.";

/// Takes `--name VALUE` out of `args`: `Ok(None)` when absent, `Err` when it has no value.
fn take(args: &mut Vec<String>, name: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == name) {
        Some(i) if i + 1 < args.len() => {
            let value = args.remove(i + 1);
            args.remove(i);
            Ok(Some(value))
        }
        Some(_) => Err(format!("{name} needs a value")),
        None => Ok(None),
    }
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (source, shards, gguf) = match (
        take(&mut args, "--source"),
        take(&mut args, "--shards"),
        take(&mut args, "--gguf"),
    ) {
        (Ok(source), Ok(shards), Ok(gguf)) => (source, shards, gguf),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("synth: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let shards = match shards.map(|n| n.parse::<usize>()) {
        None => 1,
        Some(Ok(n)) if (1..=MAX_SHARDS).contains(&n) && source.is_some() => n,
        Some(_) if source.is_none() => {
            eprintln!("synth: --shards is for the checkpoint: give --source too");
            return ExitCode::from(2);
        }
        Some(_) => {
            eprintln!("synth: --shards takes a number from 1 to {MAX_SHARDS} (the most the gate reads whole)");
            return ExitCode::from(2);
        }
    };
    let (Some(name), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if let Some(extra) = args.get(3) {
        eprintln!("synth: unexpected argument {extra:?}\n{USAGE}");
        return ExitCode::from(2);
    }
    let Some(geometry) = Geometry::named(name) else {
        eprintln!("synth: unknown geometry {name:?}\n{USAGE}");
        return ExitCode::from(2);
    };
    let seed = match args.get(2).map(|s| s.parse()) {
        None => gate_tests::arms::SEED,
        Some(Ok(seed)) => seed,
        Some(Err(_)) => {
            eprintln!("synth: the seed must be a number, not {:?}", args[2]);
            return ExitCode::from(2);
        }
    };
    let dir = Path::new(dir);
    let mut package = Package::generate(&geometry, Encoding::default(), seed);
    // Each file is written where it was asked for (its folder made first), and a failure names
    // the path that failed, not only the package.
    let at = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| format!("{path}: {e}")
    };
    let written = std::fs::create_dir_all(dir).map_err(at(dir));
    let written = written.and_then(|()| match &source {
        Some(source) => {
            let source = Path::new(source);
            let options = SourceOptions {
                shards,
                ..SourceOptions::default()
            };
            std::fs::create_dir_all(source)
                .and_then(|()| write_source(&mut package, source, options, seed))
                .map_err(at(source))
        }
        None => Ok(()),
    });
    let written = written.and_then(|()| match &gguf {
        Some(file) => {
            let file = Path::new(file);
            let folder = file.parent().filter(|p| !p.as_os_str().is_empty());
            folder
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| write_gguf(&mut package, file, GgufOptions::default(), seed))
                .map_err(at(file))
        }
        None => Ok(()),
    });
    let written = written.and_then(|()| package.write(dir).map_err(at(dir)));
    if let Err(e) = written {
        eprintln!("synth: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
