//! `cargo xtask bench`: runs the `gate` bench target (optimised), which prints figures and ratios.
//! `cargo xtask bench --only tokenizer [--runs N]` times the CLI with a Qwen-size target tokenizer
//! against without one, here.

use std::process::ExitCode;

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    // The CLI, for the row that sets the gate in process against it on the same package.
    xshell::cmd!(
        sh,
        "{cargo} build --quiet --release --package dflash-gate --bin dflash-gate"
    )
    .quiet()
    .run()
    .map_err(|e| format!("bench: building the CLI: {e}"))?;
    if args
        .windows(2)
        .any(|w| w[0] == "--only" && w[1] == "tokenizer")
    {
        return tokenizer::run(args);
    }
    xshell::cmd!(
        sh,
        "{cargo} bench --quiet --package gate-tests --bench gate -- {args...}"
    )
    .quiet()
    .run()
    .map_err(|e| format!("bench: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The `tokenizer` row: `dflash-gate fixtures/tiny --target DIR` on a target of config.json alone and
/// on the same target with a Qwen-size tokenizer.json (151,643 vocabulary entries, 26 added tokens,
/// 151,387 merges), written compact (5.9 MB) and pretty-printed with merges as pairs, as recent
/// tokenizers write Qwen3's (14.5 MB here). Each is the fastest of N runs of the release CLI; the
/// tokenizer's cost is the difference.
mod tokenizer {
    use std::fmt::Write as _;
    use std::path::Path;
    use std::process::{Command, ExitCode};
    use std::time::{Duration, Instant};

    const VOCAB: usize = 151_643;
    const ADDED: usize = 26;
    const MERGES: usize = 151_387;

    /// A Qwen-size tokenizer.json; `pretty` writes it one entry a line, merges as `[a, b]` pairs.
    fn tokenizer_json(pretty: bool) -> String {
        let (nl, ind) = if pretty { ("\n", "    ") } else { ("", "") };
        let mut s = String::new();
        s.push_str(r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": ["#);
        for i in 0..ADDED {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                s,
                r#"{sep}{nl}{ind}{{"id": {}, "content": "<|special_{i}|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}}"#,
                VOCAB + i
            );
        }
        let _ = write!(
            s,
            r#"{nl}], "normalizer": {{"type": "NFC"}}, "model": {{"type": "BPE", "dropout": null, "vocab": {{"#
        );
        for i in 0..VOCAB {
            let sep = if i == 0 { "" } else { "," };
            // Byte-level text as it is written: raw UTF-8, and now and then an escape to decode.
            let text = match i % 97 {
                0 => format!(r#"\"q{i}"#),
                1 => format!(r"\\b{i}"),
                _ => format!("Ġtok{i}"),
            };
            let _ = write!(s, r#"{sep}{nl}{ind}{ind}"{text}": {i}"#);
        }
        let _ = write!(s, "{nl}{ind}}}, \"merges\": [");
        for i in 0..MERGES {
            let sep = if i == 0 { "" } else { "," };
            if pretty {
                let _ = write!(
                    s,
                    "{sep}\n{ind}{ind}[\n{ind}{ind}{ind}\"Ġa{i}\",\n{ind}{ind}{ind}\"b{i}\"\n{ind}{ind}]"
                );
            } else {
                let _ = write!(s, r#"{sep}"Ġa{i} b{i}""#);
            }
        }
        s.push_str("]}}");
        s
    }

    /// The fastest of `runs` runs of the CLI on the fixture against `target`, checking that the
    /// report `says` what shows the tokenizer was (or was not) read.
    fn fastest(cli: &Path, target: &Path, runs: usize, says: &str) -> Result<Duration, String> {
        let fixture = crate::root().join("fixtures/tiny");
        let mut best = Duration::MAX;
        for _ in 0..runs {
            let start = Instant::now();
            let out = Command::new(cli)
                .arg(&fixture)
                .arg("--target")
                .arg(target)
                .output()
                .map_err(|e| format!("bench: running the CLI: {e}"))?;
            best = best.min(start.elapsed());
            let report = String::from_utf8_lossy(&out.stdout);
            if !report.contains(says) {
                return Err(format!(
                    "bench: the report on {} does not say {says:?}:\n{report}",
                    target.display()
                ));
            }
        }
        Ok(best)
    }

    pub fn run(args: &[String]) -> Result<ExitCode, String> {
        let runs = args
            .windows(2)
            .find(|w| w[0] == "--runs")
            .and_then(|w| w[1].parse().ok())
            .unwrap_or(15usize)
            .max(1);
        let cli = crate::root().join("target/release/dflash-gate");
        let tmp = tempfile::tempdir().map_err(|e| format!("bench: {e}"))?;
        let config = format!(
            r#"{{"hidden_size": 256, "num_hidden_layers": 8, "vocab_size": 151936, "eos_token_id": {}}}"#,
            VOCAB + 2
        );
        let without = tmp.path().join("without");
        std::fs::create_dir_all(&without).map_err(|e| format!("bench: {e}"))?;
        std::fs::write(without.join("config.json"), &config).map_err(|e| format!("bench: {e}"))?;
        let base = fastest(&cli, &without, runs, "target has no tokenizer")?;
        println!("tokenizer: fixtures/tiny --target, fastest of {runs} runs (release CLI)");
        println!(
            "  {:<44} {:>8.1}ms",
            "without tokenizer.json",
            base.as_secs_f64() * 1e3
        );
        for (name, pretty) in [("compact", false), ("pretty, merges as pairs", true)] {
            let dir = tmp.path().join(if pretty { "pretty" } else { "compact" });
            std::fs::create_dir_all(&dir).map_err(|e| format!("bench: {e}"))?;
            std::fs::write(dir.join("config.json"), &config).map_err(|e| format!("bench: {e}"))?;
            let json = tokenizer_json(pretty);
            std::fs::write(dir.join("tokenizer.json"), &json).map_err(|e| format!("bench: {e}"))?;
            let with = fastest(&cli, &dir, runs, "holds 151669 tokens")?;
            let label = format!(
                "with tokenizer.json ({name}, {:.1} MB)",
                json.len() as f64 / 1e6
            );
            println!(
                "  {label:<44} {:>8.1}ms {:>6.2}x  (tokenizer {:.1}ms)",
                with.as_secs_f64() * 1e3,
                with.as_secs_f64() / base.as_secs_f64(),
                with.saturating_sub(base).as_secs_f64() * 1e3
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}
