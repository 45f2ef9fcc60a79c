//! `cargo xtask <task>`: the project's commands, so that CI and a person at a terminal run the same
//! thing. Each task is a small module; the table below is the dispatch, `cargo xtask help`, and each
//! task's `--help` at once, so they cannot drift.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod capi;
mod cmake;
mod cmake_files;
mod dist;
mod docs;
mod fuzz;
mod gate;
mod mutants;
mod selftest;

/// The `dflash-gate` binary's own option table and parser: `cargo xtask gate` validates its
/// arguments and prints its help from them, without building the binary.
#[allow(dead_code)]
#[path = "../../gate/src/bin/dflash-gate/cli.rs"]
mod gate_cli;

/// The gate's escaping of untrusted text, for the arguments `cargo xtask gate` quotes back.
#[allow(dead_code)]
#[path = "../../gate/src/escape.rs"]
mod escape;

use std::path::PathBuf;
use std::process::ExitCode;

type Run = fn(&[String]) -> Result<ExitCode, String>;

/// One task: its name, what it runs, its arguments, what it does, and its options (`(option, help)`).
struct Task {
    name: &'static str,
    run: Run,
    usage: &'static str,
    about: &'static str,
    options: &'static [(&'static str, &'static str)],
}

const TASKS: &[Task] = &[
    Task {
        name: "gate",
        run: gate::run,
        usage: "gate [options] [<package-dir>...]",
        about: "build dflash-gate optimised (once; cargo says where) and run it; no directory: fixtures/tiny",
        options: &[("(the options of dflash-gate)", "listed by `cargo xtask gate --help`")],
    },
    Task {
        name: "selftest",
        run: selftest::run,
        usage: "selftest [<filter>] [libtest options]",
        about: "run every trial of the suite; PASS/FAIL per trial and a count; exit 0 only if all hold",
        options: &[("<filter>", "only the trials whose name contains it (as `cargo test`)")],
    },
    Task {
        name: "cmake",
        run: cmake::run,
        usage: "cmake [--out FILE | --install-dir DIR | --check [FILE...]]",
        about: "print the CMake module that registers the gate's ctest rows from a checkout",
        options: &[
            ("--out FILE", "write it to FILE (it works wherever it is put)"),
            (
                "--install-dir DIR",
                "write the package config for find_package(DFlashGate) into DIR (<prefix>/lib/cmake/DFlashGate)",
            ),
            (
                "--check [FILE...]",
                "exit 1 if a FILE (default the committed module) is not what would be written",
            ),
            ("--check --install-dir DIR", "the same for DIR's package config"),
        ],
    },
    Task {
        name: "cmake-smoke",
        run: cmake::smoke,
        usage: cmake::SMOKE_USAGE,
        about: "throwaway consumer projects, from a checkout and with find_package: rows pass and fail as they must",
        options: &[
            ("checkout", "only the module included from the checkout"),
            ("installed", "only find_package after cargo install"),
            (
                "archive",
                "only find_package on the release archive unpacked alone (no cargo on the PATH)",
            ),
            (
                "--archive FILE",
                "that archive (say, the one `cargo xtask dist` wrote) instead of one made here",
            ),
        ],
    },
    Task {
        name: "capi-smoke",
        run: capi::smoke,
        usage: "capi-smoke",
        about: "a throwaway C++ loader project on the C library: ctest rows, the header, AddressSanitizer",
        options: &[],
    },
    Task {
        name: "dist",
        run: dist::run,
        usage: dist::USAGE,
        about: "the release archive of dflash-gate for one platform and its .sha256, as the release job makes them",
        options: &[
            ("--target TRIPLE", "the platform (default the host's)"),
            ("--out DIR", "where to write them (default <target-dir>/dist)"),
        ],
    },
    Task {
        name: "bench",
        run: bench::run,
        usage: "bench [--runs N] [--only source | gguf | finite | capi | folder | quantized | target | tokenizer]",
        about: "time the gate against the floor: the reference, a 1.4 GB package, the DFlash2 reference, and --source (bf16 and GGUF)",
        options: &[
            ("--runs N", "timed runs per row (default 7)"),
            ("--only source", "only the --source table (bf16 checkpoint)"),
            (
                "--only gguf",
                "only the --source FILE.gguf table, beside the bf16 comparison of the same package",
            ),
            ("--only finite", "only the BF16 finiteness pass"),
            (
                "--only capi",
                "only the gate in process through the C ABI against the CLI, on the reference",
            ),
            (
                "--only folder",
                "only a Hugging Face folder of the reference geometry against reading it",
            ),
            (
                "--only quantized",
                "only W4A16 and MLX 4-bit folders of the reference geometry against what their rules read",
            ),
            ("--only target", "only --target on a 27B-size target read by header only"),
            ("--only tokenizer", "only the CLI with a Qwen-size target tokenizer"),
        ],
    },
    Task {
        name: "fuzz",
        run: fuzz::run,
        usage: "fuzz <container|package|checkpoint|gguf|torch> [seconds]",
        about: "seed a corpus from synthetic packages (torch: the fixture archive) and run cargo fuzz (default 60 s)",
        options: &[],
    },
    Task {
        name: "mutants",
        run: mutants::run,
        usage: "mutants [--jobs N] [--changed-since REV [--sample N] [--seed S]] [WORD...]",
        about: "break each check on purpose; every mutant must turn an arm red",
        options: &[
            ("--jobs N", "N copies of the tree, each taking the next row (default 1)"),
            (
                "--changed-since REV",
                "only the rows whose function, or own line of the table, changed since REV (CI)",
            ),
            (
                "--sample N",
                "with --changed-since, also N of the other rows, drawn by the seed",
            ),
            (
                "--rows N",
                "with --sample, draw fewer so that at most N rows run (the changed ones always)",
            ),
            ("--seed S", "the sample's seed (default 0); the rows drawn are printed"),
            ("WORD...", "only the rows whose check or filter contains a word"),
        ],
    },
    Task {
        name: "bless",
        run: selftest::bless,
        usage: "bless",
        about: "rewrite fixtures/tiny, its golden report and the README's sample report from the generator",
        options: &[],
    },
    Task {
        name: "links",
        run: docs::links_task,
        usage: "links",
        about: "every relative link of README.md, CONTRIBUTING.md and docs/*.md names a file and heading that exist",
        options: &[],
    },
    Task {
        name: "readme-commands",
        run: docs::readme_commands,
        usage: "readme-commands [--all]",
        about: "run every command of the README's sh blocks (cargo install into a temporary root)",
        options: &[(
            "--all",
            "also those .ci/run runs as written (cargo test), which are otherwise not run twice",
        )],
    },
    Task {
        name: "help",
        run: help_task,
        usage: "help [<task>]",
        about: "list every task with its options, or one task's help",
        options: &[],
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match try_main(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(2)
        }
    }
}

fn try_main(args: &[String]) -> Result<ExitCode, String> {
    let Some((name, rest)) = args.split_first() else {
        eprint!("{}", overview());
        return Ok(ExitCode::from(2));
    };
    if matches!(name.as_str(), "-h" | "--help") {
        print!("{}", overview());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(task) = TASKS.iter().find(|t| t.name == name) else {
        let nearest = TASKS
            .iter()
            .map(|t| (gate_cli::distance(name, t.name), t.name))
            .min()
            .filter(|(d, _)| *d <= 2)
            .map(|(_, n)| format!(" (did you mean {n}?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown task {name:?}{nearest}; `cargo xtask help` lists them"
        ));
    };
    // `--help` before any `--` answers for the task, and runs nothing.
    if rest
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        print!("{}", task_help(task));
        return Ok(ExitCode::SUCCESS);
    }
    (task.run)(rest)
}

/// `cargo xtask help [<task>]`.
fn help_task(args: &[String]) -> Result<ExitCode, String> {
    match args {
        [] => print!("{}", overview()),
        [name] => match TASKS.iter().find(|t| t.name == name) {
            Some(task) => print!("{}", task_help(task)),
            None => return Err(format!("unknown task {name:?}")),
        },
        _ => return Err("usage: cargo xtask help [<task>]".to_owned()),
    }
    Ok(ExitCode::SUCCESS)
}

/// Every task, its arguments, and its options.
fn overview() -> String {
    let mut out =
        "usage: cargo xtask <task> [args]   (cargo xtask <task> --help for one task)\n\ntasks:\n"
            .to_owned();
    for task in TASKS {
        out.push_str(&format!("  {:<38} {}\n", task.usage, task.about));
        for (option, help) in task.options {
            out.push_str(&format!("      {option:<34} {help}\n"));
        }
    }
    out
}

fn task_help(task: &Task) -> String {
    let mut out = format!("usage: cargo xtask {}\n\n{}\n", task.usage, task.about);
    if task.name == "gate" {
        out.push_str(&format!(
            "\noptions (those of dflash-gate, passed through):\n{}",
            gate_cli::options_help(gate_cli::OPTIONS)
        ));
    } else if !task.options.is_empty() {
        out.push_str("\noptions:\n");
        for (option, help) in task.options {
            out.push_str(&format!("  {option:<18} {help}\n"));
        }
    }
    out
}

/// The workspace root: the parent of this crate's manifest directory.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The cargo that runs us, so child builds use the same toolchain.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// A shell rooted at the workspace.
pub fn shell() -> Result<xshell::Shell, String> {
    let sh = xshell::Shell::new().map_err(|e| e.to_string())?;
    sh.change_dir(root());
    Ok(sh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_task_with_its_options() {
        let text = overview();
        for task in TASKS {
            assert!(text.contains(task.usage), "{} missing:\n{text}", task.name);
            for (option, _) in task.options {
                assert!(text.contains(option), "{option} missing:\n{text}");
            }
        }
        // A task's own help: the gate's names every option of the binary.
        let gate = TASKS.iter().find(|t| t.name == "gate").unwrap();
        let help = task_help(gate);
        for opt in gate_cli::OPTIONS {
            assert!(help.contains(opt.long), "{} missing:\n{help}", opt.long);
        }
    }

    /// A first run compiles for a minute or more before the task can say anything: cargo's own
    /// progress is what shows it is working, so neither the alias that runs the task runner nor the
    /// CMake module's build of the gate asks cargo to be quiet.
    #[test]
    fn no_long_build_runs_silently() {
        let config = std::fs::read_to_string(root().join(".cargo/config.toml")).unwrap();
        let alias = config
            .lines()
            .find(|l| l.trim_start().starts_with("xtask"))
            .expect("the xtask alias");
        assert!(!alias.contains("--quiet"), "{alias}");
        let module = std::fs::read_to_string(root().join(cmake::MODULE_PATH)).unwrap();
        for line in module.lines().filter(|l| l.contains(" build ")) {
            assert!(
                !line.contains("--quiet"),
                "the module builds quietly: {line}"
            );
        }
    }

    #[test]
    fn fuzz_help_names_every_fuzz_target() {
        let fuzz = TASKS.iter().find(|t| t.name == "fuzz").unwrap();
        let dir = root().join("fuzz/fuzz_targets");
        let mut targets = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            assert!(
                fuzz.usage.contains(&name),
                "the fuzz task's usage {:?} omits the target {name}",
                fuzz.usage
            );
            targets += 1;
        }
        assert!(targets > 0, "no fuzz target in {}", dir.display());
    }

    #[test]
    fn help_answers_without_running_the_task() {
        // `gate --help` would build the binary if it ran the task; `bless --help` would rewrite the
        // fixture. Both must answer with exit 0 at once.
        for task in ["gate", "bless", "mutants"] {
            let args = [task.to_owned(), "--help".to_owned()];
            assert_eq!(try_main(&args), Ok(ExitCode::SUCCESS), "{task}");
        }
    }

    #[test]
    fn a_mistyped_task_or_option_is_answered_with_the_nearest() {
        let err = try_main(&["gaet".to_owned()]).unwrap_err();
        assert!(err.contains("did you mean gate?"), "{err}");
        let err = try_main(&["gate".to_owned(), "--jsn".to_owned()]).unwrap_err();
        assert!(err.contains("did you mean --json?"), "{err}");
    }
}
