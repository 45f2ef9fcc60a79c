//! `cargo xtask fuzz <container|package|checkpoint|gguf|torch> [seconds]`: seeds a corpus from synthetic packages (and
//! the GGUFs they are converted from) and runs
//! `cargo fuzz` (installed with `cargo install cargo-fuzz`). The toolchain here is stable, so the
//! sanitizer flags cargo-fuzz passes are allowed with RUSTC_BOOTSTRAP=1.

use std::process::ExitCode;

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let (target, seconds) = match args {
        [t] => (t.as_str(), "60"),
        [t, s] => (t.as_str(), s.as_str()),
        _ => {
            return Err(
                "usage: cargo xtask fuzz <container|package|checkpoint|gguf|torch> [seconds]"
                    .to_owned(),
            )
        }
    };
    if !matches!(
        target,
        "container" | "package" | "checkpoint" | "gguf" | "torch"
    ) {
        return Err(format!(
            "unknown fuzz target {target:?}: container, package, checkpoint, gguf or torch"
        ));
    }
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    let root = crate::root();
    let corpus = root.join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| e.to_string())?;
    // The torch target's seed is the committed mask_embedding.pt (torch.save's layout, which the
    // generator's writer holds it to), not a package.
    if target == "torch" {
        let seed =
            std::fs::read(root.join("fixtures/mask_embedding.pt")).map_err(|e| e.to_string())?;
        std::fs::write(corpus.join("seed-mask_embedding"), seed).map_err(|e| e.to_string())?;
        return fuzz(&sh, &cargo, &root, target, seconds);
    }
    let seeds = root.join("target/fuzz-seeds");
    for geometry in ["micro", "tiny", "padded"] {
        let dir = seeds.join(geometry);
        let gguf = seeds.join(format!("{geometry}.gguf"));
        // Only the GGUF target's seeds ask for one: it redraws the package's grids from the GGUF.
        let with_gguf = match target {
            "gguf" => vec!["--gguf".to_owned(), gguf.display().to_string()],
            _ => Vec::new(),
        };
        xshell::cmd!(
            sh,
            "{cargo} run --quiet --package gate-tests --bin synth -- {geometry} {dir} {with_gguf...}"
        )
        .quiet()
        .run()
        .map_err(|e| format!("writing seed {geometry}: {e}"))?;
        let config = std::fs::read(dir.join("config.json")).map_err(|e| e.to_string())?;
        let weights = std::fs::read(dir.join("model.q4nx")).map_err(|e| e.to_string())?;
        let seed = match target {
            "container" => weights,
            "gguf" => std::fs::read(&gguf).map_err(|e| e.to_string())?,
            "checkpoint" => checkpoint_seed(&config, &weights),
            _ => {
                let mut s = (config.len() as u16).to_le_bytes().to_vec();
                s.extend_from_slice(&config);
                s.extend_from_slice(&weights);
                s
            }
        };
        std::fs::write(corpus.join(format!("seed-{geometry}")), seed).map_err(|e| e.to_string())?;
    }
    fuzz(&sh, &cargo, &root, target, seconds)
}

/// `cargo fuzz run TARGET` for `seconds`, from the fuzz directory.
fn fuzz(
    sh: &xshell::Shell,
    cargo: &str,
    root: &std::path::Path,
    target: &str,
    seconds: &str,
) -> Result<ExitCode, String> {
    let fuzz_dir = root.join("fuzz");
    let _dir = sh.push_dir(&fuzz_dir);
    let _bootstrap = sh.push_env("RUSTC_BOOTSTRAP", "1");
    let max_total = format!("-max_total_time={seconds}");
    xshell::cmd!(
        sh,
        "{cargo} fuzz run {target} -- -max_len=700000 {max_total} -print_final_stats=1"
    )
    .quiet()
    .run()
    .map_err(|e| format!("cargo fuzz: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The checkpoint target's input for one directory: layout byte 0 (config.json and
/// model.safetensors), each file as a 4-byte little-endian length and its bytes.
fn checkpoint_seed(config: &[u8], weights: &[u8]) -> Vec<u8> {
    let mut seed = vec![0u8];
    for file in [config, weights] {
        seed.extend_from_slice(&(file.len() as u32).to_le_bytes());
        seed.extend_from_slice(file);
    }
    seed
}
