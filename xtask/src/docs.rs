//! The documentation's own checks.
//!
//! - Every relative link in README.md, CONTRIBUTING.md and `docs/*.md` names a file that exists, and a
//!   `#anchor` names a heading of that file (`cargo xtask links`, and a `#[test]`, so `cargo test`
//!   holds it).
//! - `cargo xtask readme-commands` runs every command of the README's ```sh blocks, so the first
//!   screen stays true on a fresh machine.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The Markdown files whose links are checked: the README, CONTRIBUTING.md, and every `docs/*.md`.
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_fence = false;
    text.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            return None;
        }
        (!in_fence).then_some((i + 1, line))
    })
}

/// The line with its inline code spans removed (a `](` inside backticks is no link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// Every inline link target `[text](target)` in the prose, with its line number.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            out.push((number, rest[..end].trim().to_owned()));
            rest = &rest[end..];
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped (but `-` and `_`), spaces as `-`.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of a Markdown text (a repeated heading gets `-1`, `-2`, as on GitHub).
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every relative link of `file` that names no existing file, or a heading its target lacks.
pub fn broken_links(root: &Path, file: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let dir = file.parent().unwrap_or(root);
    let mut out = Vec::new();
    for (line, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        if !linked.exists() {
            out.push(format!(
                "{shown}:{line}: link to {target:?}: no file {path:?}"
            ));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if linked.extension().is_none_or(|x| x != "md") {
            out.push(format!(
                "{shown}:{line}: link to {target:?}: an anchor into a file that is not Markdown"
            ));
            continue;
        }
        let linked_text =
            std::fs::read_to_string(&linked).map_err(|e| format!("{}: {e}", linked.display()))?;
        if !anchors(&linked_text).iter().any(|a| a == anchor) {
            out.push(format!(
                "{shown}:{line}: link to {target:?}: no heading with the anchor #{anchor}"
            ));
        }
    }
    Ok(out)
}

/// `cargo xtask links`: every broken relative link of the docs, one a line; exit 1 if any.
pub fn links_task(args: &[String]) -> Result<ExitCode, String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask links".to_owned());
    }
    let root = crate::root();
    let files = markdown_files(&root);
    let mut broken = Vec::new();
    for file in &files {
        broken.extend(broken_links(&root, file)?);
    }
    for line in &broken {
        eprintln!("{line}");
    }
    println!("links: {} broken in {} files", broken.len(), files.len());
    Ok(if broken.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The commands of the README's ```sh blocks, one a line, trailing `# comments` removed.
pub fn sh_commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut in_other = false;
    for line in readme.lines() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            if in_sh || in_other {
                (in_sh, in_other) = (false, false);
            } else if info.trim() == "sh" {
                in_sh = true;
            } else {
                in_other = true;
            }
            continue;
        }
        if !in_sh {
            continue;
        }
        let command = match trimmed.find(" #") {
            Some(at) => trimmed[..at].trim_end(),
            None => trimmed,
        };
        if !command.is_empty() && !command.starts_with('#') {
            out.push(command.to_owned());
        }
    }
    out
}

/// `cargo xtask readme-commands [--all]`: runs each README ```sh command from the workspace root, in
/// order; `cargo install` gets `--root <temporary directory>` appended, and that directory's `bin`
/// leads `PATH` for the commands after it. A command that `.ci/run` runs as a line of its own, as
/// written (`cargo test`), is not run twice unless `--all` is given.
pub fn readme_commands(args: &[String]) -> Result<ExitCode, String> {
    let all = match args {
        [] => false,
        [a] if a == "--all" => true,
        _ => return Err("usage: cargo xtask readme-commands [--all]".to_owned()),
    };
    let root = crate::root();
    let readme =
        std::fs::read_to_string(root.join("README.md")).map_err(|e| format!("README.md: {e}"))?;
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap_or_default();
    let commands = sh_commands(&readme);
    if commands.is_empty() {
        return Err("README.md has no ```sh block: nothing to run".to_owned());
    }
    let install_root = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let path = std::env::join_paths(std::iter::once(install_root.path().join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .map_err(|e| format!("PATH: {e}"))?;
    let mut failed = Vec::new();
    for command in &commands {
        if !all && ci.lines().any(|line| line.trim() == command) {
            println!("readme-commands: `{command}` is run by .ci/run as written; not run again");
            continue;
        }
        let words = words(command)?;
        let mut args: Vec<String> = words[1..].to_vec();
        if words.get(1).is_some_and(|w| w == "install") && words[0] == "cargo" {
            args.push("--root".to_owned());
            args.push(install_root.path().display().to_string());
        }
        println!("readme-commands: $ {command}");
        let status = Command::new(&words[0])
            .args(&args)
            .current_dir(&root)
            .env("PATH", &path)
            .status()
            .map_err(|e| format!("running `{command}`: {e}"))?;
        if !status.success() {
            eprintln!("readme-commands: `{command}` failed ({status})");
            failed.push(command.clone());
        }
    }
    if failed.is_empty() {
        println!("readme-commands: every README command ran and exited 0");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "readme-commands: {} of {} failed: {}",
            failed.len(),
            commands.len(),
            failed.join("; ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// A README command's words. The commands are run without a shell, so a line needing one (a pipe, a
/// redirection, a quote, a variable) is refused rather than run differently from what it says.
fn words(command: &str) -> Result<Vec<String>, String> {
    if let Some(c) = command.chars().find(|c| "|&;<>()$`\\\"'*?~".contains(*c)) {
        return Err(format!(
            "README command `{command}` needs a shell ({c:?}); the README's ```sh blocks hold plain commands only"
        ));
    }
    Ok(command.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_relative_link_in_the_docs_resolves() {
        let root = crate::root();
        let mut broken = Vec::new();
        let files = markdown_files(&root);
        for file in &files {
            broken.extend(broken_links(&root, file).unwrap());
        }
        assert!(
            broken.is_empty(),
            "broken links in {} files:\n{}",
            files.len(),
            broken.join("\n")
        );
    }

    /// The docs are the repository's: a rule is written out or linked, never cited from a document a
    /// reader of the repository does not have ("the specification", "section 12.2").
    #[test]
    fn the_docs_cite_no_document_outside_the_repository() {
        let root = crate::root();
        let mut cited = Vec::new();
        for file in markdown_files(&root) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in prose_lines(&text) {
                let line = without_code_spans(line).to_lowercase();
                let section = line.split("section ").skip(1).any(|rest| {
                    let number: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == '.')
                        .collect();
                    number.contains('.') && number.starts_with(|c: char| c.is_ascii_digit())
                });
                if section || line.contains("specification") {
                    let name = file.strip_prefix(&root).unwrap_or(&file).display();
                    cited.push(format!("{name}:{n}: {}", line.trim()));
                }
            }
        }
        assert!(
            cited.is_empty(),
            "cited from outside:\n{}",
            cited.join("\n")
        );
    }

    /// No release has been published, so docs/ci.md's workflows take the gate from what exists: the
    /// repository at a commit the reader pinned (cargo install, or the release archive built there),
    /// never a release tag or a download. (Its CMake workflow once checked out the tag `v0.1.0`.)
    #[test]
    fn the_ci_doc_installs_from_a_pinned_commit_never_a_release() {
        let doc = std::fs::read_to_string(crate::root().join("docs/ci.md")).unwrap();
        let mut refs = 0;
        for line in doc.lines().map(str::trim) {
            assert!(
                !line.contains("release download") && !line.contains("releases/download"),
                "docs/ci.md downloads a release: {line}"
            );
            if let Some(rev) = line.strip_prefix("ref: ") {
                assert_eq!(
                    rev, "<40 hex digits>",
                    "docs/ci.md checks out {rev}, not a commit"
                );
                refs += 1;
            }
        }
        assert!(
            refs > 0,
            "docs/ci.md's CMake workflow checks out no pinned commit"
        );
        assert!(
            doc.contains("cargo --locked xtask dist"),
            "docs/ci.md builds no archive"
        );
    }

    #[test]
    fn a_missing_file_or_heading_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("README.md"),
            "# Top\n\n## Exit codes (`--json`)\n\n[ok](#exit-codes---json) [file](other.md) \
             [gone](missing.md) [bad](other.md#nowhere) [good](other.md#a-heading) \
             `[code](missing.md)` [web](https://example.com/x.md)\n\n```text\n[fenced](missing.md)\n```\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("other.md"), "# A heading\n").unwrap();
        let broken = broken_links(dir.path(), &dir.path().join("README.md")).unwrap();
        assert_eq!(broken.len(), 2, "{broken:#?}");
        assert!(
            broken[0].contains("no file \"missing.md\""),
            "{}",
            broken[0]
        );
        assert!(
            broken[1].contains("no heading with the anchor #nowhere"),
            "{}",
            broken[1]
        );
    }

    #[test]
    fn anchors_are_githubs() {
        let text =
            "# dflash-gate\n## Against the original checkpoint (`--source`)\n## Tests\n## Tests\n";
        assert_eq!(
            anchors(text),
            [
                "dflash-gate",
                "against-the-original-checkpoint---source",
                "tests",
                "tests-1"
            ]
        );
    }

    #[test]
    fn the_quick_start_is_its_two_commands_and_ci_runs_the_test_command_as_written() {
        let root = crate::root();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let start = readme
            .find("\n## Quick start\n")
            .expect("a Quick start section");
        let section = &readme[start + 1..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
        assert_eq!(
            sh_commands(section),
            ["cargo xtask gate fixtures/tiny", "cargo test"]
        );
        let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
        assert!(
            ci.lines().any(|line| line == "cargo test"),
            ".ci/run no longer runs `cargo test` as the README gives it"
        );
        // Every README command is one readme-commands can run.
        for command in sh_commands(&readme) {
            words(&command).unwrap();
        }
    }

    #[test]
    fn sh_blocks_give_their_commands_and_a_shell_line_is_refused() {
        let text = "```sh\ncargo a   # note\n\n# a comment\ncargo b\n```\n```text\nnot me\n```\n```sh\nc\n```\n";
        assert_eq!(sh_commands(text), ["cargo a", "cargo b", "c"]);
        assert!(words("cargo test | tee log").is_err());
        assert_eq!(words("cargo  test").unwrap(), ["cargo", "test"]);
    }

    #[test]
    fn every_markdown_file_with_rust_examples_is_compiled_as_doc_tests() {
        let root = crate::root();
        let lib = std::fs::read_to_string(root.join("gate/src/lib.rs")).unwrap();
        for file in markdown_files(&root) {
            let text = std::fs::read_to_string(&file).unwrap();
            if !text.lines().any(|l| l.trim_start().starts_with("```rust")) {
                continue;
            }
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            assert!(
                lib.contains(&format!("include_str!(\"../../{rel}\")")),
                "{rel} has Rust examples but gate/src/lib.rs does not include it under #[cfg(doctest)]"
            );
        }
    }
}
