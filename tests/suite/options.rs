//! The options a caller gave are honoured in what is printed, whatever the damage: a step that could
//! not run says so and why, never asks for the option that was given nor falls silent, and the checks
//! it and the package's own damage stopped are listed UNDECIDED, so a family's packages count the
//! same checks good or damaged.

use dflash_gate::{CheckId, NotChecked, Options, Outcome, Report};
use gate_tests::arms::{prepare_arm, source::FAITHFUL, Base, Extra};
use gate_tests::synth::{write_manifest, Encoding, TargetPackage};
use libtest_mimic::{Failed, Trial};
use std::path::Path;

pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "options::a_family_counts_the_same_checks_on_a_good_and_a_damaged_package",
            same_checks_whatever_the_damage,
        ),
        Trial::test(
            "options::a_refused_config_says_each_option_given_was_not_compared",
            refused_config_says_each_option,
        ),
        Trial::test(
            "options::manifest_given_on_a_package_without_one_is_not_asked_for",
            manifest_given_without_one,
        ),
    ]
}

/// What is done to a written package.
#[derive(Clone, Copy, Debug)]
enum Damage {
    None,
    ConfigNotJson,
    NoWeightFile,
    ContainerCut,
}

impl Damage {
    fn apply(self, dir: &Path) -> std::io::Result<()> {
        let weights = dir.join("model.q4nx");
        match self {
            Damage::None => Ok(()),
            Damage::ConfigNotJson => {
                std::fs::write(dir.join("config.json"), b"{\"architectures\": [")
            }
            Damage::NoWeightFile => std::fs::remove_file(weights),
            // A header length that runs past the file: the container does not parse.
            Damage::ContainerCut => std::fs::OpenOptions::new()
                .write(true)
                .open(weights)?
                .set_len(100),
        }
    }
}

/// The package of `base` (written with its checkpoint beside it), damaged, gated with no option or
/// (`all`) with `--target` (a matching target), `--source` (its checkpoint) and `--manifest` (written
/// before the damage).
fn gate(root: &Path, base: Base, damage: Damage, all: bool) -> Result<Report, Failed> {
    let extra = if all {
        Extra::Source(FAITHFUL)
    } else {
        Extra::None
    };
    let (dir, mut options) = prepare_arm(root, base, Encoding::default(), |_| {}, extra)?;
    if all {
        let target = root.join("target");
        TargetPackage::matching(&base.geometry()).write(&target)?;
        write_manifest(&dir)?;
        options = options.with_target(target).with_manifest(true);
    }
    damage.apply(&dir)?;
    Ok(dflash_gate::gate(&dir, &options)?)
}

/// The NOT CHECKED lines as the JSON document has them.
fn not_checked(report: &Report) -> Vec<String> {
    let document = report.to_json();
    let lines = document["not_checked"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    lines
        .iter()
        .filter_map(|l| l.as_str().map(str::to_owned))
        .collect()
}

fn ids(report: &Report) -> Vec<&str> {
    report.checks().iter().map(|c| c.id()).collect()
}

/// Each damage that stops the checks (a config that is not JSON, no weight file, a container that
/// does not parse) lists the checks it stopped, blocked: the same ids in the same order as the good
/// package, with and without the options (the scalars listed are those the config gives a value,
/// which the good package stores). A refused config names no family: it lists the first family's
/// checks of an unpadded geometry, as the small package's.
fn same_checks_whatever_the_damage() -> Result<(), Failed> {
    let mut wrong = Vec::new();
    for base in [
        Base::Small,
        Base::Padded,
        Base::Dflash2,
        Base::Dflash2ConvOnly,
        Base::Dflash2SelectorOnly,
        Base::AssistantHead,
    ] {
        for all in [false, true] {
            let root = tempfile::tempdir()?;
            let good = gate(root.path(), base, Damage::None, all)?;
            if good.verdict() != Outcome::Pass {
                return Err(format!("{base:?}: the good package is {}", good.verdict()).into());
            }
            let mut damages = vec![Damage::NoWeightFile, Damage::ContainerCut];
            if base == Base::Small {
                damages.push(Damage::ConfigNotJson);
            }
            for damage in damages {
                let root = tempfile::tempdir()?;
                let bad = gate(root.path(), base, damage, all)?;
                if ids(&bad) != ids(&good) {
                    wrong.push(format!(
                        "{base:?} {damage:?} (options: {all}): {} checks {:?}, the good package {} {:?}",
                        bad.checks().len(),
                        ids(&bad),
                        good.checks().len(),
                        ids(&good)
                    ));
                }
                let unexplained: Vec<&str> = bad
                    .checks()
                    .iter()
                    .filter(|c| c.outcome() == Outcome::Undecided && c.blocked_by().is_none())
                    .filter(|c| !c.id().starts_with("target."))
                    .map(|c| c.id())
                    .collect();
                if !unexplained.is_empty() {
                    wrong.push(format!(
                        "{base:?} {damage:?}: UNDECIDED without the check that stopped them: {unexplained:?}"
                    ));
                }
            }
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(wrong.join("\n").into()),
    }
}

/// A config that is not JSON, gated with `--target`, `--source` and `--manifest`: every check of
/// each step is listed UNDECIDED, blocked by `config.is_dflash`, and each item the options answer
/// says its option was given and not compared because the config was refused, never "give --X",
/// never left out.
fn refused_config_says_each_option() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let report = gate(root.path(), Base::Small, Damage::ConfigNotJson, true)?;
    let mut wrong = Vec::new();
    let steps = CheckId::ALL.into_iter().filter(|id| {
        ["target.", "source.", "manifest."]
            .iter()
            .any(|p| id.starts_with(p))
    });
    for id in steps {
        match report.check(id) {
            Some(c)
                if c.outcome() == Outcome::Undecided
                    && c.blocked_by() == Some(CheckId::CONFIG_IS_DFLASH) => {}
            Some(c) => wrong.push(format!(
                "{id}: {} blocked by {:?}: {}",
                c.outcome(),
                c.blocked_by(),
                c.message()
            )),
            None => wrong.push(format!("{id} is not listed")),
        }
    }
    let lines = not_checked(&report);
    for (item, option) in [
        (NotChecked::TargetAgreement, "--target"),
        (NotChecked::Content, "--source"),
        (NotChecked::RealGroupCodes, "--source"),
        (NotChecked::Provenance, "--manifest"),
    ] {
        if !report.not_checked().contains(&item) {
            wrong.push(format!(
                "{item:?} left the NOT CHECKED list: nothing answered it"
            ));
        }
        let said = format!("{option} given: not compared, the config was refused");
        if !lines.iter().any(|l| l.contains(&said)) {
            wrong.push(format!("no NOT CHECKED line says {said:?}"));
        }
    }
    let text = report.to_text(false);
    for asked in ["give --target", "give --source", "give --manifest"] {
        if text.contains(asked) {
            wrong.push(format!("the report asks to {asked:?}, which was given"));
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(format!("{}\n{text}", wrong.join("\n")).into()),
    }
}

/// `--manifest` on a package with no MANIFEST.sha256: UNDECIDED, provenance not checked, and its line
/// says `--manifest` was given and what did not decide, never "give --manifest".
fn manifest_given_without_one() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let (dir, _) = prepare_arm(
        root.path(),
        Base::Small,
        Encoding::default(),
        |_| {},
        Extra::None,
    )?;
    let report = dflash_gate::gate(&dir, &Options::default().with_manifest(true))?;
    let text = report.to_text(false);
    let provenance = not_checked(&report)
        .into_iter()
        .find(|l| l.contains("provenance"));
    match provenance {
        Some(line)
            if line.contains("--manifest given: not answered, manifest.sha256 UNDECIDED")
                && !text.contains("give --manifest") =>
        {
            Ok(())
        }
        _ => Err(format!("the provenance line does not say --manifest was given:\n{text}").into()),
    }
}
