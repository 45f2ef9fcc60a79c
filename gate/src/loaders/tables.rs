//! One table per engine and version, each read from that release's own code (its files are named
//! row by row). docs/loaders.md prints them and says how a new version's rules are read.

mod dflash_mlx;
mod llama_cpp;
mod mlx;
mod sglang;
mod transformers;
mod vllm;

use super::Table;

/// Every engine's table, in [`crate::engine::Engine::ALL`]'s order.
pub static TABLES: [&Table; 6] = [
    &vllm::TABLE,
    &sglang::TABLE,
    &llama_cpp::TABLE,
    &transformers::TABLE,
    &mlx::TABLE,
    &dflash_mlx::TABLE,
];

#[cfg(test)]
mod tests {
    use super::TABLES;
    use crate::engine::{Engine, LoaderOutcome};
    use std::collections::HashSet;

    #[test]
    fn one_table_per_engine_in_order() {
        let engines: Vec<Engine> = TABLES.iter().map(|t| t.engine).collect();
        assert_eq!(engines, Engine::ALL.to_vec());
    }

    #[test]
    fn rules_are_rules() {
        for t in TABLES {
            let mut ids = HashSet::new();
            assert!(!t.reads.is_empty(), "{} reads no form", t.engine);
            for r in t.rules {
                assert!(ids.insert(r.id), "{} lists {} twice", t.engine, r.id);
                assert!(
                    matches!(
                        r.outcome,
                        LoaderOutcome::Refuses
                            | LoaderOutcome::Crashes
                            | LoaderOutcome::LoadsWrongly
                            | LoaderOutcome::NotItsForm
                            | LoaderOutcome::Undecided
                    ),
                    "{}::{} is no rule",
                    t.engine,
                    r.id
                );
                assert!(!r.words.is_empty() && !r.source.is_empty() && !r.reads.is_empty());
            }
        }
    }
}

#[cfg(test)]
mod docs {
    use super::TABLES;

    /// docs/loaders.md prints every table: each row's id stands in its engine's section, so a row
    /// added or renamed without the docs fails here.
    #[test]
    fn every_row_is_in_the_docs_under_its_engine() {
        let docs = include_str!("../../../docs/loaders.md");
        for t in TABLES {
            let heading = format!("(`--loader {}`)", t.engine);
            let start = docs
                .find(&heading)
                .unwrap_or_else(|| panic!("docs/loaders.md has no section {heading}"));
            let section = &docs[start..];
            let section = &section[..section[1..].find("\n### ").map_or(section.len(), |e| e + 1)];
            for r in t.rules {
                assert!(
                    section.contains(&format!("| `{}` |", r.id)),
                    "docs/loaders.md's {} section lacks {}",
                    t.engine,
                    r.id
                );
            }
        }
    }
}
