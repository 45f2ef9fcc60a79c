//! Which engine will serve the draft, and how (spec 19): each engine's rules, read from its own
//! code, as a table of rows (the fact a rule reads, what the engine then does, in its own words, and
//! where in its code), walked over what the gate already found. A new engine version is a new table;
//! a new kind of fact is a [`When`] and the line that decides it.
//!
//! The tables say what an engine does, not what the gate thinks of the draft: an engine may load,
//! silently and wrongly, a draft the gate refuses. The reverse must never happen: whatever an engine
//! refuses or crashes on, the gate does not pass (the suite holds every arm to that).

mod sglang_names;
mod tables;
mod vllm_names;
mod when;

pub use tables::TABLES;
pub use when::{Facts, Kept, Met, Shape, When};

use crate::check_id::CheckId;
use crate::config::DraftConfig;
use crate::engine::{Engine, LoaderOutcome, LoaderReason, LoaderVerdict};
use crate::report::{Check, Outcome, Report};

/// One rule of an engine: when `when` holds, the engine does `outcome`.
#[derive(Debug)]
pub struct Rule {
    /// The rule's id, unique in its table.
    pub id: &'static str,
    /// The config field or tensor the engine reads.
    pub reads: &'static str,
    pub when: When,
    /// `Refuses` or `Crashes` (a defect the engine meets), `LoadsWrongly`, or `NotItsForm` (a schema,
    /// scheme or variant the engine does not serve), or `Undecided` (a path of the engine's code not
    /// traced, so the line says it cannot tell): a rule whose outcome is `loads` is no rule.
    pub outcome: LoaderOutcome,
    /// The engine's own message, or why what it does is wrong.
    pub words: &'static str,
    /// The engine's source file and function the rule was read from.
    pub source: &'static str,
}

/// One engine at one version: the forms it reads and its rules, in the order its load meets them.
#[derive(Debug)]
pub struct Table {
    pub engine: Engine,
    pub version: &'static str,
    /// The shapes of draft it reads at all.
    pub reads: &'static [Shape],
    /// What it does with any other shape, in its own words where it has any, and where.
    pub other_forms: (&'static str, &'static str),
    pub rules: &'static [Rule],
}

impl Table {
    /// This engine's verdict on the draft `facts` describe.
    pub fn verdict(&self, facts: &Facts<'_>) -> LoaderVerdict {
        let shape = facts.shape();
        let verdict = |outcome, reasons| LoaderVerdict {
            engine: self.engine,
            version: self.version,
            outcome,
            reasons,
        };
        if !self.reads.contains(&shape) {
            let (words, source) = self.other_forms;
            let reason = LoaderReason {
                rule: "form",
                reads: "the draft's form",
                outcome: LoaderOutcome::NotItsForm,
                words,
                source,
                found: shape.words().to_owned(),
            };
            return verdict(LoaderOutcome::NotItsForm, vec![reason]);
        }
        let (mut stops, mut wrongs, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
        for rule in self.rules {
            let reason = |outcome, found| LoaderReason {
                rule: rule.id,
                reads: rule.reads,
                outcome,
                words: rule.words,
                source: rule.source,
                found,
            };
            match facts.test(rule.when) {
                Met::No => {}
                // A behaviour the engine's code was not traced through: said, never guessed.
                Met::Yes(found) if rule.outcome == LoaderOutcome::Undecided => {
                    unknown.push(reason(rule.outcome, found))
                }
                Met::Yes(found) if rule.outcome.stops() => stops.push(reason(rule.outcome, found)),
                Met::Yes(found) => wrongs.push(reason(rule.outcome, found)),
                Met::Unknown(why) => unknown.push(reason(LoaderOutcome::Undecided, why)),
            }
        }
        // The first rule that stops the engine is what the user meets; a fact not decided keeps
        // `loads` (and `loads, wrongly`) from being said, never a refusal already found.
        let outcome = match (stops.first(), unknown.is_empty(), wrongs.is_empty()) {
            (Some(first), _, _) => first.outcome,
            (None, false, _) => LoaderOutcome::Undecided,
            (None, true, false) => LoaderOutcome::LoadsWrongly,
            (None, true, true) => LoaderOutcome::Loads,
        };
        stops.extend(wrongs);
        stops.extend(unknown);
        verdict(outcome, stops)
    }
}

/// Every engine's verdict on the draft, in [`Engine::ALL`]'s order; none for a draft whose config
/// the gate refused (no engine's rules can be read against a draft that is not one).
pub fn verdicts(report: &Report, config: Option<&DraftConfig>) -> Vec<LoaderVerdict> {
    if report.check(CheckId::CONFIG_IS_DFLASH).map(|c| c.outcome()) != Some(Outcome::Pass) {
        return Vec::new();
    }
    let facts = Facts::new(report, config);
    TABLES.iter().map(|t| t.verdict(&facts)).collect()
}

/// The `loader.NAME` check of each engine `--loader` asked for: FAIL when the engine refuses,
/// crashes, serves the draft wrong or does not read its form; UNDECIDED when the gate could not
/// tell; PASS only when the engine loads it.
pub fn checks(verdicts: &[LoaderVerdict], asked: &[Engine]) -> Vec<Check> {
    asked
        .iter()
        .map(|engine| {
            let id = engine.check_id();
            let Some(v) = verdicts.iter().find(|v| v.engine == *engine) else {
                return Check::blocked(
                    id,
                    CheckId::CONFIG_IS_DFLASH,
                    format!("--loader {engine} given: not judged, the config was refused"),
                );
            };
            let said = |n: usize| {
                v.reasons
                    .iter()
                    .take(n)
                    .map(|r| format!("{}: {}", r.found, r.words))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let more = match v.reasons.len() {
                0..=2 => String::new(),
                n => format!(" (and {} more)", n - 2),
            };
            let who = format!("{engine} {}", v.version);
            let check = match v.outcome {
                LoaderOutcome::Loads => Check::pass(
                    id,
                    format!("{who} loads it: none of its rules meets this draft"),
                ),
                LoaderOutcome::Undecided => Check::undecided(
                    id,
                    format!(
                        "{who}: the gate cannot tell whether it loads it: {}{more}",
                        said(2)
                    ),
                ),
                outcome => Check::fail(id, format!("{who} {outcome}: {}{more}", said(2))),
            };
            check.with_evidence(v.clone())
        })
        .collect()
}

/// The report's `loaders` section, and the `loader.NAME` checks `asked` adds, for a report whose
/// own checks have all run.
pub fn judge(report: &mut Report, config: Option<&DraftConfig>, asked: &[Engine]) {
    let verdicts = verdicts(report, config);
    let checks = checks(&verdicts, asked);
    report.checks.extend(checks);
    report.loaders = verdicts;
}
