//! `config.geometry`, and the derived dimensions every later check asks for.

use super::GEOMETRY;
use crate::config::{DraftConfig, Field, FieldProblem, HeadDimSource, ProblemKind};
use crate::report::Check;
use serde_json::json;

/// Derived dimensions, each still a `Field` so a check that needs a missing one can name it.
#[derive(Clone, Copy)]
pub struct Geometry<'c> {
    pub config: &'c DraftConfig,
}

impl<'c> Geometry<'c> {
    pub fn new(config: &'c DraftConfig) -> Geometry<'c> {
        Geometry { config }
    }

    pub fn hidden(&self) -> Field<u64> {
        self.config.hidden_size.clone()
    }

    pub fn layers(&self) -> Field<u64> {
        self.config.num_hidden_layers.clone()
    }

    pub fn head_dim(&self) -> Field<u64> {
        self.config.head_dim.clone().map(|(d, _)| d)
    }

    pub fn intermediate(&self) -> Field<u64> {
        self.config.intermediate_size.clone()
    }

    pub fn taps(&self) -> Field<Vec<u64>> {
        self.config.target_layer_ids.clone()
    }

    /// `num_attention_heads * head_dim`.
    pub fn q_dim(&self) -> Field<u64> {
        product(
            "q_dim",
            self.config.num_attention_heads.clone()?,
            self.head_dim()?,
        )
    }

    /// `num_key_value_heads * head_dim`.
    pub fn kv_dim(&self) -> Field<u64> {
        product(
            "kv_dim",
            self.config.num_key_value_heads.clone()?,
            self.head_dim()?,
        )
    }
}

fn product(name: &str, a: u64, b: u64) -> Field<u64> {
    a.checked_mul(b).ok_or_else(|| FieldProblem {
        field: name.to_owned(),
        kind: ProblemKind::Invalid(format!("overflows ({a} x {b})")),
    })
}

/// The UNDECIDED (or blocked) check for a field problem met by check `id`.
pub fn blocked_by_field(id: &str, problem: &FieldProblem) -> Check {
    Check::blocked(id, GEOMETRY, format!("cannot decide: needs {problem}"))
}

/// `config.geometry`: required fields present and typed, positive, taps increasing and below
/// `num_target_layers`, heads a multiple of kv heads, mask token inside the vocabulary.
pub fn check_geometry(c: &DraftConfig) -> Check {
    let mut problems: Vec<FieldProblem> = Vec::new();
    let mut note = |r: Result<(), FieldProblem>| {
        if let Err(p) = r {
            problems.push(p);
        }
    };
    note(c.hidden_size.clone().map(drop));
    note(c.num_hidden_layers.clone().map(drop));
    note(c.num_attention_heads.clone().map(drop));
    note(c.num_key_value_heads.clone().map(drop));
    note(c.head_dim.clone().map(drop));
    note(c.intermediate_size.clone().map(drop));
    note(c.block_size.clone().map(drop));
    note(c.target_layer_ids.clone().map(drop));
    note(c.mask_token_id.clone().map(drop));
    note(c.num_target_layers.clone().map(drop));
    note(c.sliding_window.clone().map(drop));
    note(c.embedding_scale.clone().map(drop));
    note(c.vocab_size.clone().map(drop));
    if let (Ok(h), Ok(kv)) = (&c.num_attention_heads, &c.num_key_value_heads) {
        if h % kv != 0 {
            note(Err(invalid(
                "num_attention_heads",
                format!("{h} is not a multiple of num_key_value_heads {kv}"),
            )));
        }
    }
    if let Ok(1) = c.block_size {
        note(Err(invalid(
            "block_size",
            "is 1: a block of one proposes no draft token".to_owned(),
        )));
    }
    if let (Ok(taps), Ok(Some(n))) = (&c.target_layer_ids, &c.num_target_layers) {
        if let Some(bad) = taps.iter().find(|&&t| t >= *n) {
            note(Err(invalid(
                "target_layer_ids",
                format!("holds {bad}, not below num_target_layers {n}"),
            )));
        }
    }
    if let (Ok(Some(mask)), Ok(Some(vocab))) = (&c.mask_token_id, &c.vocab_size) {
        if mask >= vocab {
            note(Err(invalid(
                "mask_token_id",
                format!("{mask} is not below vocab_size {vocab}"),
            )));
        }
    }
    let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
    if problems.iter().any(FieldProblem::is_invalid) {
        return Check::fail(
            GEOMETRY,
            format!(
                "the config's geometry is inconsistent: {}",
                listed.join("; ")
            ),
        )
        .with_evidence(json!({ "problems": listed }));
    }
    if !problems.is_empty() {
        return Check::undecided(
            GEOMETRY,
            format!("cannot decide the config's geometry: {}", listed.join("; ")),
        )
        .with_evidence(json!({ "problems": listed }));
    }
    Check::pass(GEOMETRY, summary(c)).with_evidence(json!({
        "hidden_size": c.hidden_size.clone().ok(),
        "num_hidden_layers": c.num_hidden_layers.clone().ok(),
        "num_attention_heads": c.num_attention_heads.clone().ok(),
        "num_key_value_heads": c.num_key_value_heads.clone().ok(),
        "head_dim": c.head_dim.clone().ok().map(|(d, _)| d),
        "head_dim_derived": matches!(c.head_dim, Ok((_, HeadDimSource::Derived))),
        "intermediate_size": c.intermediate_size.clone().ok(),
        "block_size": c.block_size.clone().ok(),
        "target_layer_ids": c.target_layer_ids.clone().ok(),
    }))
}

fn invalid(field: &str, why: String) -> FieldProblem {
    FieldProblem {
        field: field.to_owned(),
        kind: ProblemKind::Invalid(why),
    }
}

fn summary(c: &DraftConfig) -> String {
    let (head_dim, source) = c.head_dim.clone().unwrap_or((0, HeadDimSource::Stated));
    let source = match source {
        HeadDimSource::Stated => "stated",
        HeadDimSource::Derived => "derived",
    };
    format!(
        "the config's geometry is complete and consistent: hidden {}, layers {}, heads {} (kv {}) x head_dim {} ({source}), intermediate {}, block {}, taps {:?}",
        c.hidden_size.clone().unwrap_or(0),
        c.num_hidden_layers.clone().unwrap_or(0),
        c.num_attention_heads.clone().unwrap_or(0),
        c.num_key_value_heads.clone().unwrap_or(0),
        head_dim,
        c.intermediate_size.clone().unwrap_or(0),
        c.block_size.clone().unwrap_or(0),
        c.target_layer_ids.clone().unwrap_or_default(),
    )
}
