//! `config.geometry`, and the derived dimensions every later check asks for.

use super::GEOMETRY;
pub use crate::config::Geometry;
use crate::config::{DraftConfig, FieldProblem, HeadDimSource, LayerType, ProblemKind};
use crate::evidence::ConfigGeometry;
use crate::report::Check;

/// The UNDECIDED (or blocked) check for a field problem met by check `id`.
pub fn blocked_by_field(id: &str, problem: &FieldProblem) -> Check {
    Check::blocked(id, GEOMETRY, format!("cannot decide: {}", problem.needs()))
}

/// `config.geometry`: required fields present and typed, positive, taps increasing and below
/// `num_target_layers`, heads a multiple of kv heads, mask token inside the vocabulary and none of
/// the bos, eos and pad ids the config (`json`, the same config.json) states.
pub fn check_geometry(c: &DraftConfig) -> Check {
    geometry(c, false)
}

/// [`check_geometry`] for a draft whose config is its only statement of the DFlash fields (a Hugging
/// Face folder, unlike a Q4NX package whose container scalars state them too): `target_layer_ids` and
/// `mask_token_id` are then required, and their absence FAILs. Loaders guess absent ids with formulas
/// that disagree, and a draft without a mask id cannot draft: the gate never guesses either.
pub fn check_draft_geometry(c: &DraftConfig) -> Check {
    geometry(c, true)
}

/// The largest block any released draft, or any loader found, uses: above it the gate cannot say a
/// loader will run the draft as written.
pub const MAX_KNOWN_BLOCK: u64 = 64;

fn geometry(c: &DraftConfig, config_only: bool) -> Check {
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
    note(c.target_layer_ids.clone().map(drop).map_err(|p| match p.kind {
        ProblemKind::Missing if config_only => invalid(
            &p.field,
            "is required and missing: loaders guess absent ids with formulas that disagree, so the gate never guesses them".to_owned(),
        ),
        _ => p,
    }));
    note(c.mask_token_id.clone().map(drop));
    note(c.num_target_layers.clone().map(drop));
    note(c.sliding_window.clone().map(drop));
    note(c.embedding_scale.clone().map(drop));
    note(c.vocab_size.clone().map(drop));
    note(c.rms_norm_eps.clone().map(drop));
    note(c.rope_theta.clone().map(drop));
    note(c.conv.clone().map(drop));
    note(c.selector.clone().map(drop));
    note(c.output_multiplier.clone().map(drop));
    note(c.final_logit_softcapping.clone().map(drop));
    note(c.is_causal.clone().map(drop));
    note(c.layer_types.clone().map(drop));
    note(c.has_embed_tokens.clone().map(drop));
    note(c.has_own_lm_head.clone().map(drop));
    note(c.attention_sink_bias.clone().map(drop));
    note(eagle_ids(c));
    for p in speculators(c) {
        note(Err(p));
    }
    for p in second_family(c) {
        note(Err(p));
    }
    if let (Ok(h), Ok(kv)) = (&c.num_attention_heads, &c.num_key_value_heads) {
        if h % kv != 0 {
            note(Err(invalid(
                "num_attention_heads",
                format!("{h} is not a multiple of num_key_value_heads {kv}"),
            )));
        }
    }
    if config_only {
        if let Ok(None) = c.mask_token_id {
            let why = if c.speculators.is_some() {
                "is required and missing: vLLM reads it as config_dict[\"mask_token_id\"] and raises a KeyError without it"
            } else {
                "is required and missing (in dflash_config or at the top level): every loader needs a mask id to draft a block"
            };
            note(Err(invalid("mask_token_id", why.to_owned())));
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
    if let Ok(Some(mask)) = c.mask_token_id {
        // As a GGUF draft's own tokenizer ids are held: the mask is a token of its own, whatever
        // form the draft is in and whether or not its target is given.
        let mut own = crate::tokenizer::Tokens::default();
        crate::tokenizer::live_ids(&c.own_token_ids, "config.json", &mut own);
        if let Some(l) = own.live.iter().find(|l| l.id == mask) {
            note(Err(invalid(
                "mask_token_id",
                format!(
                    "{mask} is the draft's own {} token ({}): the mask must be a token of its own",
                    l.role, l.from
                ),
            )));
        }
    }
    if let Ok(b) = c.block_size {
        if b > MAX_KNOWN_BLOCK {
            problems.push(FieldProblem::new(
                "block_size",
                ProblemKind::WrongType(format!("{b}: no released draft, and no loader found, uses a block above {MAX_KNOWN_BLOCK}")),
            ));
        }
    }
    let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
    // One evidence shape whatever the outcome: each field as read (null when it could not be), and
    // the problems found (none on a PASS).
    let evidence = ConfigGeometry {
        problems: problems.iter().map(FieldProblem::finding).collect(),
        hidden_size: c.hidden_size.clone().ok(),
        num_hidden_layers: c.num_hidden_layers.clone().ok(),
        num_attention_heads: c.num_attention_heads.clone().ok(),
        num_key_value_heads: c.num_key_value_heads.clone().ok(),
        head_dim: c.head_dim.clone().ok().map(|(d, _)| d),
        head_dim_derived: matches!(c.head_dim, Ok((_, HeadDimSource::Derived))),
        intermediate_size: c.intermediate_size.clone().ok(),
        block_size: c.block_size.clone().ok(),
        target_layer_ids: c.target_layer_ids.clone().ok(),
    };
    if problems.iter().any(FieldProblem::is_invalid) {
        let check = Check::fail(
            GEOMETRY,
            format!(
                "the config's geometry is inconsistent: {}",
                listed.join("; ")
            ),
        )
        .with_evidence(evidence);
        return match missing_ids_fix(c, config_only) {
            Some(fix) => check.with_fix(fix),
            None => check,
        };
    }
    if !problems.is_empty() {
        return Check::undecided(
            GEOMETRY,
            format!("cannot decide the config's geometry: {}", listed.join("; ")),
        )
        .with_evidence(evidence);
    }
    Check::pass(GEOMETRY, summary(c)).with_evidence(evidence)
}

/// The remedy for ids a draft's config must state and does not: the publisher's training config
/// names them; the gate never guesses them, and neither should the fix.
fn missing_ids_fix(c: &DraftConfig, config_only: bool) -> Option<String> {
    if !config_only {
        return None;
    }
    let ids = matches!(&c.target_layer_ids, Err(p) if p.kind == ProblemKind::Missing);
    let mask = matches!(c.mask_token_id, Ok(None));
    let home = if c.speculators.is_some() {
        "the top level"
    } else {
        "dflash_config"
    };
    let (what, field) = match (ids, mask) {
        (true, true) => ("the ids", "target_layer_ids and mask_token_id"),
        (true, false) => ("the target's layer ids", "target_layer_ids"),
        (false, true) => ("the mask id", "mask_token_id"),
        (false, false) => return None,
    };
    let field = match c.speculators.is_some() {
        true => field.replace(
            "target_layer_ids",
            "aux_hidden_state_layer_ids (each id plus one)",
        ),
        false => field.to_owned(),
    };
    Some(format!(
        "add {field} to {home}, {what} the draft was trained with (from its training config or its publisher)"
    ))
}

/// The rules of spec section 10: a DFlash2 config switches on a feature, a feature's pair fits the
/// geometry, the softcap is not negative; and `layer_types`, for any family, has one entry per layer.
fn second_family(c: &DraftConfig) -> Vec<FieldProblem> {
    let mut out = Vec::new();
    if c.family().is_second() && matches!((&c.conv, &c.selector), (Ok(None), Ok(None))) {
        out.push(invalid(
            "architectures",
            "declares DFlash2DraftModel but switches on neither feature: conv_kernel_size and \
             conv_group_size, selector_rank and selector_top_k are all absent"
                .to_owned(),
        ));
    }
    if let (Ok(Some((_, group))), Ok(hidden)) = (&c.conv, &c.hidden_size) {
        if hidden % group != 0 {
            out.push(invalid(
                "conv_group_size",
                format!("{group} does not divide hidden_size {hidden}"),
            ));
        }
    }
    if let Ok(Some((_, top_k))) = c.selector {
        match &c.vocab_size {
            Ok(Some(vocab)) if top_k > *vocab => out.push(invalid(
                "selector_top_k",
                format!("{top_k} exceeds vocab_size {vocab}"),
            )),
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => out.push(FieldProblem::new(
                "vocab_size",
                ProblemKind::WrongType(format!(
                    "missing, and selector_top_k {top_k} must be checked against it"
                )),
            )),
        }
    }
    if let Ok(Some(cap)) = c.final_logit_softcapping {
        if cap < 0.0 {
            out.push(invalid(
                "final_logit_softcapping",
                format!("is {cap}, negative"),
            ));
        }
    }
    if let (Ok(Some(types)), Ok(layers)) = (&c.layer_types, &c.num_hidden_layers) {
        if types.len() as u64 != *layers {
            out.push(invalid(
                "layer_types",
                format!("has {} entries, num_hidden_layers is {layers}", types.len()),
            ));
        }
        let window = match &c.sliding_window {
            Ok(Some(Some(w))) => Some(*w),
            _ => None,
        };
        if let (Some(i), None) = (types.iter().position(|t| *t == LayerType::Sliding), window) {
            let why = match &c.sliding_window {
                Ok(None) => "absent",
                Ok(Some(None)) => "null",
                _ => "not readable",
            };
            out.push(invalid(
                &format!("layer_types[{i}]"),
                format!("is \"sliding_attention\" but sliding_window is {why}, not positive"),
            ));
        }
    }
    out
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

/// The speculators format's own fields (spec 18.1): each required (vLLM refuses the structure
/// without it), and for DFlash2 the block vLLM builds from them equal to the one the draft was
/// trained with.
fn speculators(c: &DraftConfig) -> Vec<FieldProblem> {
    let Some(s) = &c.speculators else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let required = |p: FieldProblem| match p.kind {
        ProblemKind::Missing => invalid(
            &p.field,
            "is required and missing: vLLM refuses a speculators config without it".to_owned(),
        ),
        _ => p,
    };
    for r in [
        s.speculative_tokens.clone().map(drop),
        s.verifier_name.clone().map(drop),
        s.verifier_architectures.clone().map(drop),
        s.draft_vocab_size.clone().map(drop),
    ] {
        if let Err(p) = r {
            out.push(required(p));
        }
    }
    if let (Ok(Some(vocab)), Ok(draft)) = (&c.vocab_size, &s.draft_vocab_size) {
        let at = c
            .canonical
            .fields
            .get("vocab_size")
            .map_or("vocab_size".to_owned(), |r| r.at.clone());
        if draft > vocab {
            out.push(invalid(
                crate::config::canonical::DRAFT_VOCAB_SIZE,
                format!("{draft} is above the verifier's vocabulary ({at} {vocab}): a draft vocabulary is the verifier's or a part of it"),
            ));
        } else if draft != vocab && c.architecture == crate::config::Architecture::Dflash2 {
            out.push(invalid(
                crate::config::canonical::DRAFT_VOCAB_SIZE,
                format!("{draft} is not the verifier's vocabulary ({at} {vocab}): a DFlash2 draft's selector scores the verifier's whole vocabulary"),
            ));
        }
    }
    if c.architecture == crate::config::Architecture::Dflash2 {
        if let (Ok(tokens), Ok(block)) = (&s.speculative_tokens, &c.block_size) {
            if tokens.checked_add(1) != Some(*block) {
                out.push(invalid(
                    crate::config::canonical::SPECULATIVE_TOKENS,
                    format!("is {tokens}, not block_size {block} minus one: vLLM sizes a DFlash2 draft's convolution block as speculative_tokens + 1, so another value silently changes the kernel it was trained with"),
                ));
            }
        }
    }
    out
}

/// Nemotron 3.5's `eagle_aux_hidden_state_layer_ids`, when stated, are `target_layer_ids` plus one,
/// entry by entry (EAGLE counts the embedding output as layer 0): another list means one of the
/// two reads other layers than the draft was trained on.
fn eagle_ids(c: &DraftConfig) -> Result<(), FieldProblem> {
    let (Some(eagle), Ok(taps)) = (
        c.eagle_aux_hidden_state_layer_ids.clone()?,
        &c.target_layer_ids,
    ) else {
        return Ok(());
    };
    let plus_one: Vec<u64> = taps.iter().map(|t| t.saturating_add(1)).collect();
    if eagle == plus_one {
        return Ok(());
    }
    let at = |name: &str| {
        c.canonical
            .fields
            .get(name)
            .map_or(name.to_owned(), |r| r.at.clone())
    };
    Err(invalid(
        &at("eagle_aux_hidden_state_layer_ids"),
        format!(
            "is {eagle:?}, not {} {taps:?} plus one ({plus_one:?}): EAGLE's convention counts the embedding output as layer 0, so each entry is the id plus one",
            at("target_layer_ids")
        ),
    ))
}
