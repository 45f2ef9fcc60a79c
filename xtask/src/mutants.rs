//! `cargo xtask mutants`: breaks each check on purpose and requires the suite to go red.
//!
//! Every row of the table below is one deliberate bug: a line of the gate replaced by a broken one,
//! and the suite filter whose arm must then fail. A row whose mutant survives (the suite stays
//! green), or that no longer applies (the line moved), fails the task: a check no test can fail is a
//! defect.
//!
//! Mutants are made in a copy of the tree (`target/mutants/tree`, refreshed from the working tree at
//! every run, built in a target directory of its own), never in the working tree: however the task
//! ends (a failure, Ctrl-C, a kill), the sources a developer builds are untouched. Each suite run has
//! a wall-clock limit: a mutant that makes the gate hang is killed and counted red, by name.
//!
//! A row builds the gate crate unoptimised first (its dependencies and the generator stay optimised):
//! after a one-line change that rebuild takes about a third of the optimised one, and a row's arm
//! still runs in about a second. Before any row, each filter is run on the unmutated copy built that
//! way: a filter that is red there, or slower than [`QUICK_BASELINE`], has its rows built as
//! `cargo test` builds them, and a row that outlasts [`QUICK_LIMIT`] is run again optimised, so
//! a slow arm is never counted a hang for being unoptimised. A copy is built optimised only when a
//! run first needs it (few filters do, and that build is a large part of a copy's first build):
//! unmutated, outside any time limit, as the quick build is before any row.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The longest one mutant's build and suite run may take (a warm build and one arm take seconds).
const RUN_LIMIT: Duration = Duration::from_secs(900);

/// The longest an unmutated filter may run in the quick build for its rows to use that build.
const QUICK_BASELINE: Duration = Duration::from_secs(30);

/// The longest a row's quick build and run may take before the row is run again optimised.
const QUICK_LIMIT: Duration = Duration::from_secs(90);

/// How a copy builds the gate for a suite run. Both builds share the copy's target directory: cargo
/// keeps the two apart by their profile, so each stays incremental and the dependencies are built once.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Build {
    /// The gate crate (the library, its CLI and its suite) at opt-level 0, everything else as `dev`.
    Quick,
    /// The `dev` profile, as `cargo test` builds the suite.
    Optimised,
}

impl Build {
    fn config(self) -> &'static [&'static str] {
        match self {
            Build::Quick => &["--config", "profile.dev.package.dflash-gate.opt-level=0"],
            Build::Optimised => &[],
        }
    }
}

struct Mutant {
    check: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
    /// The suite filter that must then report a failure.
    filter: &'static str,
}

const MUTANTS: &[Mutant] = &[
    Mutant { check: "config.is_dflash", file: "gate/src/config.rs", from: "if architectures.contains(&DRAFT_ARCHITECTURE) {", to: "if true {", filter: "arms::control::not_a_dflash_config" },
    Mutant { check: "config.geometry", file: "gate/src/config.rs", from: "if tap <= prev {", to: "if false {", filter: "arms::control::taps_not_increasing" },
    Mutant { check: "container.parses", file: "gate/src/container.rs", from: "if entry.begin < cursor {", to: "if false {", filter: "arms::control::overlapping_offsets" },
    Mutant { check: "projections.present", file: "gate/src/checks/projections.rs", from: "if absent.is_empty() {", to: "if true {", filter: "arms::control::projection_absent" },
    Mutant { check: "projections.tile_grid", file: "gate/src/tile/grid.rs", from: "[tiles, _] if *tiles == want => {}", to: "[_, _] => {}", filter: "arms::control::projection_one_tile_short" },
    Mutant { check: "tiles.headers_sane", file: "gate/src/tile/scan.rs", from: "} else if d < 0.0 {", to: "} else if d < -1e30 {", filter: "arms::control::negative_scale" },
    Mutant { check: "tiles.padding_zero", file: "gate/src/tile/scan.rs", from: "if scan.first_bad_padding.is_none()", to: "if false && scan.first_bad_padding.is_none()", filter: "arms::control::padding_not_zero" },
    Mutant { check: "tiles.q4_1_signature", file: "gate/src/checks/projections.rs", from: "_ if scan.zero_minimum_plane =>", to: "_ if false =>", filter: "arms::control::q4_0_zero_minimum_plane" },
    Mutant { check: "scalars.*", file: "gate/src/checks/scalars.rs", from: "if equal {", to: "if true {", filter: "arms::control::block_size_mismatch" },
    Mutant { check: "scalars.* negatives", file: "gate/src/checks/scalars.rs", from: "got.iter().find(|&&g| g < 0)", to: "got.iter().find(|_| false)", filter: "arms::control::container_mask_token_i64_negative" },
    Mutant { check: "config fields stated twice differently (one reading)", file: "gate/src/config.rs", from: "if let Some(what) = self.canonical.conflicted.get(key) {", to: "if let Some(what) = None::<&String> {", filter: "arms::control::rope_theta_in_two_homes_disagrees" },
    Mutant { check: "config integer bounds", file: "gate/src/config.rs", from: "if i > i128::from(max) {", to: "if false {", filter: "arms::control::config_vocab_size_beyond_limit" },
    Mutant { check: "embedding_scale as f32", file: "gate/src/config.rs", from: "f > 0.0 && as_f32.is_finite() && as_f32 > 0.0", to: "f > 0.0", filter: "arms::control::embedding_scale_overflows_f32" },
    Mutant { check: "fc.shape", file: "gate/src/checks/gains.rs", from: "if !shape_ok {", to: "if false {", filter: "arms::control::fc_missing_a_tap" },
    Mutant { check: "norms.sizes", file: "gate/src/checks/gains.rs", from: "if !absent.is_empty() || !off.is_empty() {", to: "if false {", filter: "arms::control::gain_off_size" },
    Mutant { check: "norms.bf16", file: "gate/src/checks/gains.rs", from: "} else if inside(fm) {", to: "} else if false {", filter: "arms::control::f16_gain_labelled_bf16" },
    Mutant { check: "inventory.explained", file: "gate/src/checks/inventory.rs", from: "if unexplained_total > 0 {", to: "if false {", filter: "arms::control::second_family_tensor" },
    Mutant { check: "manifest.sha256", file: "gate/src/manifest.rs", from: "if hex != want {", to: "if false {", filter: "arms::control::manifest_flipped_byte" },
    Mutant { check: "target.hidden_size", file: "gate/src/target/checks.rs", from: "if d != t {", to: "if false {", filter: "arms::control::target_hidden_differs" },
    Mutant { check: "target.hidden_size table width", file: "gate/src/target/checks.rs", from: "Width::Columns(w) if w == *t => compared.push(name),", to: "Width::Columns(_) => compared.push(name),", filter: "arms::control::target_embedding_wider_than_its_hidden_size" },
    Mutant { check: "target.tokenizer", file: "gate/src/target/tokenizer.rs", from: "match &target.tokenizer {", to: "match &Tokenizer::Present {", filter: "arms::control::target_without_tokenizer" },
    Mutant { check: "dflash2.conv", file: "gate/src/checks/dflash2.rs", from: "if !absent.is_empty() || !refused.is_empty() {", to: "if false {", filter: "arms::control::dflash2_mlp_conv_missing" },
    Mutant { check: "dflash2.selector", file: "gate/src/checks/dflash2.rs", from: "Some(form) if info.dtype == Dtype::Bf16 && info.shape == shape => {", to: "Some(form) if info.dtype == Dtype::Bf16 => {", filter: "arms::control::dflash2_codebook_one_row_short" },
    Mutant { check: "tiles.* on DFlash2 grids", file: "gate/src/checks/mod.rs", from: "projections::run(&inputs, &mut forms, &grids)", to: "projections::run(&inputs, &mut forms, &[])", filter: "arms::control::dflash2_nan_scale_in_gridded_kernel_projection" },
    Mutant { check: "config.geometry (DFlash2)", file: "gate/src/checks/geometry.rs", from: "if c.family().is_second() && matches!((&c.conv, &c.selector), (Ok(None), Ok(None))) {", to: "if false {", filter: "arms::control::dflash2_neither_feature" },
    Mutant { check: "config.geometry (DFlash2)", file: "gate/src/checks/geometry.rs", from: "if hidden % group != 0 {", to: "if false {", filter: "arms::control::dflash2_group_size_does_not_divide_hidden" },
    Mutant { check: "config.geometry (DFlash2)", file: "gate/src/checks/geometry.rs", from: "Ok(Some(vocab)) if top_k > *vocab =>", to: "Ok(Some(vocab)) if top_k > *vocab && false =>", filter: "arms::control::dflash2_top_k_above_vocab" },
    Mutant { check: "config.geometry (layer_types)", file: "gate/src/checks/geometry.rs", from: "if types.len() as u64 != *layers {", to: "if false {", filter: "arms::control::layer_types_wrong_length" },
    Mutant { check: "inventory.explained (DFlash2)", file: "gate/src/checks/inventory.rs", from: "Ok(false) => off(loader, f, \"tensor\"),", to: "Ok(false) => Verdict::Explained,", filter: "arms::control::dflash2_selector_tensors_without_fields" },
    Mutant { check: "inventory.explained (DFlash2)", file: "gate/src/checks/inventory.rs", from: "return second(format!(\"{role} tensor\"));", to: "return Verdict::Explained;", filter: "arms::control::conv_tensors_in_first_family" },
    Mutant { check: "inventory.explained (DFlash2)", file: "gate/src/checks/inventory.rs", from: "Some((f, Ok(false))) => off(loader, f, \"scalar\"),", to: "Some((_, Ok(false))) => Verdict::Explained,", filter: "arms::control::dflash2_feature_scalar_without_fields" },
    Mutant { check: "tiles.* on an own embedding grid", file: "gate/src/checks/mod.rs", from: "grids.extend(embedding_grid(&inputs));", to: "grids.extend(None::<(String, TileGrid<'_>)>);", filter: "arms::control::own_embedding_grid_nan_scale" },
    Mutant { check: "assistant-head aliases", file: "gate/src/family/names.rs", from: "if let Some(a) = self.aliases.iter().find(|a| a.name == rest) {", to: "if let Some(a) = self.aliases.iter().find(|a| a.name == rest && false) {", filter: "arms::pass::assistant_head" },
    Mutant { check: "source.q4_1", file: "gate/src/source/kernels.rs", from: "let ok = (e <= d) & is_finite_bits(s);", to: "let ok = (e <= 16.0 * d) & is_finite_bits(s);", filter: "arms::control::source_one_code_flipped" },
    Mutant { check: "source.q4_1 RMS ceiling", file: "gate/src/source.rs", from: "pub const RMS_CEILING: f64 = 0.25;", to: "pub const RMS_CEILING: f64 = 1e9;", filter: "arms::control::source_ranges_clipped" },
    Mutant { check: "source.bf16", file: "gate/src/source.rs", from: "Form::Bf16(bf16::Layout::RowBlocked),", to: "Form::Bf16(bf16::Layout::Plain),", filter: "arms::control::source_fc_unblocked" },
    Mutant { check: "source.inventory", file: "gate/src/source.rs", from: "if problems.is_empty() {", to: "if true {", filter: "arms::control::source_tensor_missing_from_source" },
    Mutant { check: "source.q4_1 (whole-tile path)", file: "gate/src/source/kernels/wide.rs", from: "const NEAR_BOUND: f32 = 0.999;", to: "const NEAR_BOUND: f32 = 1000.0;", filter: "arms::control::source_one_code_flipped" },
    Mutant { check: "source.bf16 (block path)", file: "gate/src/source/bf16.rs", from: "_mm_movemask_epi8(_mm_cmpeq_epi8(differ, _mm_setzero_si128())) == 0xffff", to: "true", filter: "arms::control::source_fc_unblocked" },
    Mutant { check: "source.q4_1 tile order", file: "gate/src/source/q4_1.rs", from: "(t / g.col_blocks) * TILE_ROWS,", to: "(t % g.row_blocks) * TILE_ROWS,", filter: "arms::control::source_tiles_column_block_major" },
    Mutant { check: "allocation bound", file: "gate/src/container.rs", from: "    if n > MAX_HEADER_BYTES {", to: "    std::hint::black_box(Vec::<u8>::with_capacity(n.min(1 << 31) as usize));\n    if n > MAX_HEADER_BYTES {", filter: "campaign::mutations_seed_1" },
    Mutant { check: "sigbus guard", file: "gate/src/files/sigbus.rs", from: "if is_ours(&current) {", to: "if true {", filter: "hostile::weight_file_truncated_while_read" },
    Mutant { check: "header streamed", file: "gate/src/container.rs", from: "        let header::Parsed {", to: "        let _tree = std::hint::black_box(crate::strict_json::parse(text.as_bytes()));\n        let header::Parsed {", filter: "campaign::mutations_seed_1" },
    Mutant { check: "census listed up to a limit", file: "gate/src/limits.rs", from: "pub const MAX_CENSUS_TENSORS: usize = 4096;", to: "pub const MAX_CENSUS_TENSORS: usize = usize::MAX;", filter: "hostile::a_million_one_byte_tensors_are_reported_in_bounded_memory" },
    Mutant { check: "empty tensors bound", file: "gate/src/container/header.rs", from: "if empty > MAX_EMPTY_TENSORS {", to: "if false {", filter: "hostile::a_million_empty_tensors" },
    Mutant { check: "zero planes sampled", file: "gate/src/tile/scan.rs", from: "if let Some(refused) = self.sampled_planes_zero() {", to: "if let Some(refused) = None::<GridScan> {", filter: "arms::control::large_grid_all_zero" },
    Mutant { check: "zero planes refused", file: "gate/src/checks/projections.rs", from: "_ if scan.zero_planes.is_some() =>", to: "_ if false =>", filter: "arms::control::grid_all_zero" },
    Mutant { check: "report escaping", file: "gate/src/report.rs", from: "out.push_str(&crate::escape::line(&text));", to: "out.push_str(&text);", filter: "hostile::names_from_the_file" },
    Mutant { check: "manifest symlink out", file: "gate/src/files.rs", from: "if self.roots.iter().any(|root| target.starts_with(root)) {", to: "if true {", filter: "arms::control::manifest_lists_a_symlink_out" },
    Mutant { check: "manifest names as bytes", file: "gate/src/manifest.rs", from: ".filter(|f| !wanted.contains(f.as_encoded_bytes()))", to: ".filter(|f| !wanted.contains(f.to_string_lossy().as_bytes()))", filter: "arms::control::manifest_look_alike" },
    Mutant { check: "--all counts the unreadable", file: "gate/src/bin/dflash-gate/tree.rs", from: "let config = dir.join(CONFIG_FILE).symlink_metadata().is_ok();", to: "let config = dir.join(CONFIG_FILE).is_file();", filter: "cli::all_gates_or_counts_every_directory" },
    Mutant { check: "capi verdict", file: "capi/src/lib.rs", from: "Outcome::Fail => DFLASH_GATE_FAIL,", to: "Outcome::Fail => DFLASH_GATE_PASS,", filter: "capi::a_mapping_cut_short_is_refused_at_its_parse" },
    Mutant { check: "capi first objection", file: "capi/src/lib.rs", from: "let check = first(Outcome::Fail)", to: "let check = first(Outcome::Undecided)", filter: "capi::a_mapping_cut_short_is_refused_at_its_parse" },
    Mutant { check: "capi config present by flag", file: "capi/src/lib.rs", from: "let config = match has_config {", to: "let config = match !config.is_null() {", filter: "capi::an_empty_config_handed_over" },
    Mutant { check: "capi double free", file: "capi/src/lib.rs", from: "        live.remove(&key(ptr));", to: "", filter: "capi::a_report_freed_twice_is_refused" },
    Mutant { check: "--all not-gated count", file: "gate/src/bin/dflash-gate.rs", from: "gated.count(2);", to: "();", filter: "cli::all_gates_or_counts_every_directory" },
    Mutant { check: "--all checkpoint skipped", file: "gate/src/bin/dflash-gate/tree.rs", from: "(true, false) if checkpoint => match another_model(&dir) {", to: "(true, false) if false => match another_model(&dir) {", filter: "cli::all_gates_or_counts_every_directory" },
    Mutant { check: "gguf contiguity", file: "gate/src/gguf.rs", from: "if info.offset > expected {", to: "if false {", filter: "gguf::rules_on_a_real_file" },
    Mutant { check: "gguf duplicate key", file: "gate/src/gguf.rs", from: "if !keys.insert(key) {", to: "if !keys.insert(key) && false {", filter: "gguf::rules_on_a_real_file" },
    Mutant { check: "gguf strings in an array", file: "gate/src/gguf.rs", from: "if let Some(text) = text.filter(|t| t.is_ascii()) {", to: "if let Some(text) = text {", filter: "gguf::rules_on_a_real_file" },
    Mutant { check: "gguf empty key", file: "gate/src/gguf.rs", from: "if len == 0 {", to: "if false {", filter: "arms::gguf::refused::an_empty_key" },
    Mutant { check: "gguf data section padded", file: "gate/src/gguf.rs", from: "if padded_end > file_len {", to: "if false {", filter: "arms::gguf::refused::data_short_of_its_padding" },
    Mutant { check: "package path escaping", file: "gate/src/package.rs", from: "let package = crate::escape::name(dir.as_os_str());", to: "let package = dir.to_string_lossy().into_owned();", filter: "cli::two_packages_whose_names_differ_in_bytes_that_are_not_utf8_print_apart" },
    Mutant { check: "manifest listed twice", file: "gate/src/manifest.rs", from: "if let Some(first) = out.iter().position(|(_, f)| f == file) {", to: "if let Some(first) = out.iter().position(|(_, f)| f == file && false) {", filter: "arms::control::manifest_lists_a_file_twice" },
    Mutant { check: "gguf trailing bytes", file: "gate/src/gguf.rs", from: "if file_len > limit {", to: "if false {", filter: "gguf::rules_on_a_real_file" },
    Mutant { check: "gguf f16 dequant", file: "gate/src/gguf/dequant.rs", from: "f16::from_bits(u16::from_le_bytes(bytes)).to_f32()", to: "f16::from_bits(u16::from_be_bytes(bytes)).to_f32()", filter: "gguf::round_trip_f16_gains" },
    Mutant { check: "gguf block scales finite", file: "gate/src/gguf/blocks.rs", from: "if let Some((bits, what)) = scale_fault(x, scale) {", to: "if let Some((bits, what)) = scale_fault(x, scale).filter(|_| false) {", filter: "gguf::non_finite_values_and_block_scales_named" },
    Mutant { check: "gguf q4_K/q5_K packed scales", file: "gate/src/gguf/kquant.rs", from: "sc[4 + j] = (s[8 + j] & 0x0f) | ((s[j] >> 6) << 4);", to: "sc[4 + j] = s[8 + j] & 0x0f;", filter: "gguf::k_quants_dequantize_as_gguf_py" },
    Mutant { check: "gguf q6_K high pairs", file: "gate/src/gguf/kquant.rs", from: "let q = ((l >> low_shift) & 0x0f) | (((h >> high_shift) & 3) << 4);", to: "let q = ((l >> low_shift) & 0x0f) | (((h >> (high_shift ^ 2)) & 3) << 4);", filter: "gguf::k_quants_dequantize_as_gguf_py" },
    Mutant { check: "container.parses beside another *.q4nx", file: "gate/src/package.rs", from: "if let (Ok(read), false) = (&weight, unread.is_empty()) {", to: "if let (Ok(read), false) = (&weight, true) {", filter: "arms::control::another_weight_file_beside_model_q4nx" },
    Mutant { check: "--all skips another model", file: "gate/src/bin/dflash-gate/tree.rs", from: "Some(why) => skip(dir, \"another_model\", why),", to: "Some(_) => Item::gate(dir),", filter: "cli::all_skips_another_models_directory" },
    Mutant { check: "--all gates a draft under another name", file: "gate/src/bin/dflash-gate/tree.rs", from: "if config::DRAFT_FIELDS.iter().any(|f| top.contains_key(*f)) {", to: "if false {", filter: "cli::all_skips_another_models_directory" },
    Mutant { check: "usage error escaping", file: "gate/src/bin/dflash-gate.rs", from: "let why = dflash_gate::__private::escape::line(&why);", to: "let why = why;", filter: "cli::usage_errors_escape" },
    Mutant { check: "files read are still named", file: "gate/src/files.rs", from: "if (named.dev(), named.ino()) != (self.identity.dev, self.identity.ino) {", to: "if false {", filter: "hostile::a_file_renamed_into_place" },
    Mutant { check: "files read are still named", file: "gate/src/files.rs", from: "        self.seen().unchanged()?;", to: "        // the name is not consulted", filter: "hostile::a_file_renamed_into_place" },
    Mutant { check: "manifest link rule (hub)", file: "gate/src/files.rs", from: "roots.push(blobs);", to: "drop(blobs);", filter: "hostile::a_hub_cache_snapshot" },
    Mutant { check: "manifest link rule (itself)", file: "gate/src/manifest.rs", from: "let inside = files::Inside::package(dir)?;", to: "let inside = files::Inside::package(Path::new(\"/\"))?;", filter: "hostile::a_manifest_is_never_quoted" },
    Mutant { check: "manifest never quoted", file: "gate/src/manifest.rs", from: "\"line {}, byte {at} (byte {} of the file): {why}\",", to: "\"line {}, byte {at} (byte {} of the file): {why}: {line:?}\",", filter: "hostile::a_manifest_is_never_quoted" },
    Mutant { check: "bf16.finite", file: "gate/src/checks/finite.rs", from: "if flagged & 0x8000 == 0 {", to: "if flagged & 0x4000 == 0 {", filter: "arms::control::nan_in_fc" },
    Mutant { check: "bf16.finite runs", file: "gate/src/checks/mod.rs", from: "checks.push(finite::run(container)?);", to: "", filter: "arms::control::dflash2_nan_in_codebook" },
    Mutant { check: "source.bf16 NaN never equal", file: "gate/src/source/bf16.rs", from: "(Some(p), Some(s)) if p == s && !is_nan(s) => {}", to: "(Some(p), Some(s)) if p == s => {}", filter: "arms::control::source_nan_copied_into_package" },
    Mutant { check: "source.bf16 NaN never equal (block path)", file: "gate/src/source/bf16.rs", from: "let finite = _mm_movemask_epi8(non_finite) & 0xaaaa == 0;", to: "let finite = true;", filter: "arms::control::source_nan_copied_into_package" },
    Mutant { check: "source.bf16 NaN never equal (row path)", file: "gate/src/source/bf16.rs", from: "p.len() == s.len() && differ == 0 && nan & 0x8000 == 0", to: "p.len() == s.len() && differ == 0", filter: "arms::control::source_nan_copied_into_plain_fc" },
    Mutant { check: "worker panic", file: "gate/src/parallel.rs", from: "Err(message) => return (done_first, Err(WorkerPanic { step, message })),", to: "Err(_) => {}", filter: "hostile::a_worker_panic_in_" },
    Mutant { check: "worker panic (tiles.*)", file: "gate/src/checks/projections.rs", from: "let scans = scan_all(&grids)?;", to: "let scans = scan_all(&grids).unwrap_or_default();", filter: "hostile::a_worker_panic_in_tile_header_scan" },
    Mutant { check: "worker panic (source.bf16)", file: "gate/src/source/bf16.rs", from: "|_, &(j, from, to)| (j, rows(&jobs[j], from, to)),\n    )?;", to: "|_, &(j, from, to)| (j, rows(&jobs[j], from, to)),\n    ).unwrap_or_default();", filter: "hostile::a_worker_panic_in_source_bf16" },
    Mutant { check: "worker panic (bf16.finite)", file: "gate/src/checks/finite.rs", from: "|_, c| read(tensors, c))?;", to: "|_, c| read(tensors, c)).unwrap_or_default();", filter: "hostile::a_worker_panic_in_bf16_finite" },
    Mutant { check: "loaders (vLLM's own names)", file: "gate/src/loaders/vllm_names.rs", from: "differs(fc, \"model.fc\", \"ReplicatedLinear\");", to: "differs(fc, fc, \"ReplicatedLinear\");", filter: "loaders::vllm::ignore_on_vllms_names::meets" },
    Mutant { check: "loaders (vLLM matches fp8's list exactly)", file: "gate/src/quant/runtime.rs", from: "keys.names.contains(layer) || keys.patterns.iter().any(|(k, _)| k == layer)\n", to: "keys.patterns.iter().any(|(k, _)| layer.ends_with(k.as_str()))\n", filter: "loaders::vllm::fp8_over_a_dense_weight::meets" },
    Mutant { check: "loaders (vLLM's names matter when a list names a module)", file: "gate/src/quant/runtime.rs", from: "!ignore.names.is_empty()\n", to: "false\n", filter: "loaders::vllm::ignore_on_vllms_names::meets" },
    Mutant { check: "loaders (SGLang: a layer stored dense)", file: "gate/src/loaders/sglang_names.rs", from: "Expect::Dense(_) => false,", to: "Expect::Dense(_) => true,", filter: "loaders::sglang::layer_lists_on_bare_names::meets" },
    Mutant { check: "loaders (SGLang: a layer no target matches)", file: "gate/src/loaders/sglang_names.rs", from: "if built == Built::Untargeted {", to: "if false {", filter: "loaders::sglang::targets_on_bare_names::meets" },
    Mutant { check: "loaders (engines' names past the census)", file: "gate/src/loaders/when.rs", from: "(census.tensors_not_listed == 0).then(|| {", to: "true.then(|| {", filter: "loaders::engines_names_not_known_past_the_census" },
    Mutant { check: "escape (plain ASCII read as it is)", file: "gate/src/escape.rs", from: "let plain = |b: &u8| (b' '..=b'~').contains(b) && *b != b'\\\\';", to: "let plain = |b: &u8| (b'\\0'..=b'~').contains(b);", filter: "hostile::names_from_the_file_cannot_forge_report_lines" },
    Mutant { check: "worker panic (a folder's scans)", file: "gate/src/draft/folder.rs", from: "    let found = found?;", to: "    let found = found.unwrap_or_default();", filter: "hostile::a_worker_panic_in_a_folders_scans" },
    Mutant { check: "worker panic (source.q4_1)", file: "gate/src/source/q4_1.rs", from: "|worker, &(j, from, to)| (j, worker.tiles(&jobs[j], from, to, scalar)),\n    )?;", to: "|worker, &(j, from, to)| (j, worker.tiles(&jobs[j], from, to, scalar)),\n    ).unwrap_or_default();", filter: "hostile::a_worker_panic_in_source_q4_1" },
    Mutant { check: "worker panic (manifest.sha256)", file: "gate/src/manifest.rs", from: ".map_err(|p| PackageError::internal(dir, p))", to: ".or_else(|_| Ok::<_, PackageError>(Vec::new()))", filter: "hostile::a_worker_panic_in_manifest_hashing" },
    Mutant { check: "source.q4_1 sums trusted", file: "gate/src/source/kernels.rs", from: "sq_err.is_finite() && sq_src.is_finite() && sq_src >= TRUSTED_SQUARES", to: "true", filter: "arms::control::source_huge_value_fails_the_ceiling" },
    Mutant { check: "source.q4_1 sums in f64", file: "gate/src/source/q4_1.rs", from: "if !scalar && !kernels::sums_trusted(sums.sq_err, sums.sq_src) {", to: "if false {", filter: "arms::control::source_huge_value_fails_the_ceiling" },
    Mutant { check: "source.q4_1 squares in f64", file: "gate/src/source/kernels.rs", from: "        sq_src += f64::from(s) * f64::from(s);\n    }\n    (sq_err, sq_src)", to: "        sq_src += f64::from(s * s);\n    }\n    (sq_err, sq_src)", filter: "arms::control::source_huge_value_fails_the_ceiling" },
    Mutant { check: "source.q4_1 NaN ceiling", file: "gate/src/source.rs", from: "    relative_rms <= RMS_CEILING\n", to: "    !(relative_rms > RMS_CEILING)\n", filter: "hostile::source_bounds_fail_on_nan" },
    Mutant { check: "source.q4_1 broken header bound", file: "gate/src/source/kernels.rs", from: "plain_header(d, m) && s.is_finite() && (w - clamp(s, m, m + 15.0 * d)).abs() <= d", to: "s.is_finite() && (w - s.clamp(m, m + 15.0 * d)).abs() <= d", filter: "hostile::source_bounds_fail_on_nan" },
    Mutant { check: "source.q4_1 broken groups skipped", file: "gate/src/source/q4_1.rs", from: "if read && !kernels::plain_header(d, m) && !constant {", to: "if false {", filter: "arms::control::source_nan_scale_grid_not_compared" },
    Mutant { check: "source.q4_1 broken grids blocked", file: "gate/src/source.rs", from: ".filter(|(_, o)| o.broken_groups > 0)", to: ".filter(|_| false)", filter: "arms::control::source_negative_scale_grid_not_compared" },
    Mutant { check: "not_checked answered", file: "gate/src/package.rs", from: "        report.not_checked.remove(item);", to: "        let _ = item;", filter: "arms::pass::target_matches" },
    Mutant { check: "not_checked answered (manifest.sha256)", file: "gate/src/manifest.rs", from: "        ANSWERS.to_vec()", to: "        Vec::new()", filter: "arms::pass::manifest_matches" },
    Mutant { check: "not_checked answered (source.*)", file: "gate/src/source.rs", from: "        answered.push(NotChecked::Content);", to: "        answered.push(NotChecked::Provenance);", filter: "arms::pass::source_min_max_quantizer" },
    Mutant { check: "not_checked kept (absent manifest)", file: "gate/src/manifest.rs", from: "let answered = if check.outcome == Outcome::Undecided {", to: "let answered = if false {", filter: "hostile::an_absent_manifest_leaves_provenance" },
    Mutant { check: "weight file link rule", file: "gate/src/package.rs", from: "inside.admits(&file)?;\n            Ok((escape::name(name), file.into_bytes()?))", to: "Ok((escape::name(name), file.into_bytes()?))", filter: "hostile::a_config_or_weight_file_linking_out" },
    Mutant { check: "config.json link rule", file: "gate/src/package.rs", from: "inside.admits(&file)?;\n        Ok((file.read_all(MAX_CONFIG_BYTES)?, file))", to: "Ok((file.read_all(MAX_CONFIG_BYTES)?, file))", filter: "hostile::a_config_or_weight_file_linking_out" },
    Mutant { check: "source.q4_1 (whole-tile regrouping)", file: "gate/src/source/kernels/wide.rs", from: "((half * 16 + w) * 8 + 4 * parity + (pair & 3)) * 32 + 16 * (pair >> 2)", to: "((half * 16 + w) * 8 + 4 * parity + (pair & 3)) * 32", filter: "kernels::wide::codes_are_regrouped_where_the_main_loop_reads_them" },
    Mutant { check: "header length (checkpoint)", file: "gate/src/checkpoint.rs", from: "let n = match container::header_length(prefix, file_len) {", to: "let n = match Ok::<u64, container::ContainerError>(u64::from_le_bytes(prefix)) {", filter: "hostile::a_target_header_length_past_its_file_or_the_limit_is_refused_unread" },
    Mutant { check: "header length (shared)", file: "gate/src/container.rs", from: "    if 8 + n > file_len {", to: "    if false {", filter: "hostile::a_target_header_length_past_its_file_or_the_limit_is_refused_unread" },
    Mutant { check: "container.parses names a foreign file", file: "gate/src/container/recognise.rs", from: "if head.starts_with(LFS) {", to: "if false {", filter: "hostile::a_weight_file_that_is_another_kind_of_file" },
    Mutant { check: "container.parses evidence", file: "gate/src/evaluation.rs", from: ".with_evidence(e),", to: ",", filter: "hostile::a_refused_container_names_its_refusal" },
    Mutant { check: "source.q4_1 exact codes (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "} else if mask & (1 << c) != 0 {", to: "} else if false {", filter: "arms::control::gguf_one_code_one_step_off" },
    Mutant { check: "source.q4_1 exact codes, whole tiles (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "let differ = region_differs(&pairs, held);", to: "let differ = 0u64;", filter: "arms::control::gguf_one_code_one_step_off" },
    Mutant { check: "source.q4_1 exact codes, part-filled tiles (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "*mask |= u8::from(differs) << c;", to: "*mask |= 0;", filter: "arms::control::gguf_padded_code_flipped" },
    Mutant { check: "source.q4_1 exact scales (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "} else if pd != wd {", to: "} else if false {", filter: "arms::control::gguf_planes_row_major" },
    Mutant { check: "source.q4_1 exact scales, whole tiles (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "differ |= (held(pd) ^ wd) | (held(pm) ^ wm) | u32::from(ud | um);", to: "differ |= u32::from(ud | um);", filter: "arms::control::gguf_scales_truncated" },
    Mutant { check: "source.q4_1 computed nearest-even widening (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "let rounded = (f32_bits + 0x7fff + ((f32_bits >> 16) & 1)) >> 16;", to: "let rounded = f32_bits >> 16;", filter: "arms::control::gguf_scales_truncated" },
    Mutant { check: "source.q4_1 nearest-even widening (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "    f32_to_bf16(f16(f16_bits))\n", to: "    (f16(f16_bits).to_bits() >> 16) as u16\n", filter: "arms::control::gguf_scales_truncated" },
    Mutant { check: "not_checked kept (undecided target)", file: "gate/src/target/mod.rs", from: "        .any(|c| c.outcome == crate::report::Outcome::Undecided)\n    {\n        &[]", to: "        .any(|c| c.outcome == crate::report::Outcome::Undecided && false)\n    {\n        &[]", filter: "target_read::no_embedding_table_is_undecided" },
    Mutant { check: "not_checked kept (undecided source)", file: "gate/src/source.rs", from: "            .any(|c| c.id == id && c.outcome != crate::report::Outcome::Undecided)", to: "            .any(|c| c.id == id)", filter: "hostile::a_source_comparison_that_could_not_decide" },
    Mutant { check: "source.bf16 every element compared", file: "gate/src/source/bf16.rs", from: "    for row in from..to {\n        outcome.compared += cols;", to: "    for row in from..to.min(from + 1) {\n        outcome.compared += cols;", filter: "arms::pass::source_f32" },
    Mutant { check: "source.q4_1 every element compared", file: "gate/src/source/q4_1.rs", from: "        for t in from..to {\n            let rows = if wide", to: "        for t in from..to.min(from + 1) {\n            let rows = if wide", filter: "arms::pass::source_min_max_quantizer" },
    Mutant { check: "source.q4_1 dequantized batches (GGUF)", file: "gate/src/source/gguf.rs", from: "compared.extend(super::compare_grid_pairs(&made, scalar)?);", to: "compared = super::compare_grid_pairs(&made, scalar)?;", filter: "arms::pass::gguf_q8_0" },
    Mutant { check: "source.q4_1 every group compared (GGUF)", file: "gate/src/source/gguf/exact.rs", from: "        for t in t..end {\n            tile(job, t, &mut outcome, wide, &mut ahead);", to: "        for t in t..end.min(t + 1) {\n            tile(job, t, &mut outcome, wide, &mut ahead);", filter: "arms::pass::gguf_q4_1" },
    Mutant { check: "bf16.finite after --source (a tensor proven finite)", file: "gate/src/source/bf16.rs", from: "job.package.len().is_multiple_of(2) && self.finite == (job.package.len() / 2) as u64", to: "true", filter: "arms::control::source_infinity_copied_into_package" },
    Mutant { check: "bf16.finite after --source (the others read)", file: "gate/src/checks/finite.rs", from: "if proven.contains(&e.name) {", to: "if true {", filter: "arms::control::source_nan_in_a_gain_beside_a_proven_fc" },
    Mutant { check: "bf16.finite after --source (in the report)", file: "gate/src/package.rs", from: "evaluation.report.checks.insert(at, finite);", to: "let _ = (at, finite);", filter: "arms::pass::source_f32" },
    Mutant { check: "worker panic (bf16.finite after --source)", file: "gate/src/package.rs", from: "run_except(container, &proven_finite)\n            .map_err(|p| PackageError::internal(dir, p))?;", to: "run_except(container, &proven_finite)\n            .unwrap_or_else(|_| crate::report::Check::pass(\"bf16.finite\", \"swallowed\"));", filter: "hostile::a_worker_panic_in_bf16_finite_after_the_source" },
    Mutant { check: "source.bf16 whole block finite", file: "gate/src/source/bf16.rs", from: "let finite = _mm_movemask_epi8(non_finite) & 0xaaaa == 0;", to: "let finite = true;", filter: "arms::control::source_infinity_copied_into_package" },
    Mutant { check: "tiles.q4_1_signature median (the sink packs the keys it keeps)", file: "gate/src/tile/sink.rs", from: "_mm256_permutevar8x32_epi32(keys, PACK[mask]);", to: "_mm256_permutevar8x32_epi32(keys, PACK[0xff]);", filter: "arms::pass::bolt_reference_geometry" },
    Mutant { check: "source.q4_1 whole-tile kernel (GGUF)", file: "gate/src/source/gguf/exact/whole_tile.rs", from: "_mm256_testz_si256(differ, differ) == 1", to: "true", filter: "arms::control::gguf_one_code_one_step_off" },
    Mutant { check: "source.q4_1 whole-tile kernel codes (GGUF)", file: "gate/src/source/gguf/exact/whole_tile.rs", from: "differ = _mm256_or_si256(differ, _mm256_xor_si256(*v, want));", to: "differ = _mm256_or_si256(differ, _mm256_and_si256(*v, _mm256_setzero_si256()));", filter: "arms::control::gguf_one_code_one_step_off" },
    Mutant { check: "source.q4_1 whole-tile kernel scales (GGUF)", file: "gate/src/source/gguf/exact/whole_tile.rs", from: "_mm256_or_si256(_mm256_xor_si256(widened, want), uncovered),", to: "uncovered,", filter: "arms::control::gguf_scales_truncated" },
    Mutant { check: "source.q4_1 whole-tile kernel, subnormal f16 (GGUF)", file: "gate/src/source/gguf/exact/whole_tile.rs", from: "_mm256_or_si256(_mm256_xor_si256(widened, want), uncovered),", to: "_mm256_xor_si256(widened, want),", filter: "arms::control::gguf_subnormal_scale_rebiased" },
    Mutant { check: "source.q4_1 non-finite GGUF block", file: "gate/src/source/gguf/exact.rs", from: "if not_finite(d) || not_finite(m) {", to: "if false {", filter: "arms::control::gguf_non_finite_scale" },
    Mutant { check: "worker panic (source.q4_1 exact)", file: "gate/src/source/gguf/exact.rs", from: "|_, &(j, from, to)| (j, tiles(&jobs[j], from, to)),\n    )?;", to: "|_, &(j, from, to)| (j, tiles(&jobs[j], from, to)),\n    ).unwrap_or_default();", filter: "hostile::a_worker_panic_in_source_q4_1_against_a_gguf" },
    Mutant { check: "worker panic (opening --source)", file: "gate/src/package.rs", from: ".map_err(|p| PackageError::internal(dir, p))?\n            .map_err(|e| e.under_option(\"--source\"))?;", to: ".unwrap_or_else(|_| crate::source::Source::open(options.source.as_deref().unwrap_or(dir)))\n            .map_err(|e| e.under_option(\"--source\"))?;", filter: "hostile::a_worker_panic_in_opening_the_source" },
    Mutant { check: "source.q4_1 undecided type (GGUF)", file: "gate/src/source/gguf.rs", from: "} else if !undecided.is_empty() {", to: "} else if false {", filter: "arms::control::gguf_k_quant_tensor" },
    Mutant { check: "source.config", file: "gate/src/source/config.rs", from: "    if same(&a.value, &b.value) {", to: "    if true {", filter: "arms::control::source_config_field_differs" },
    Mutant { check: "source.config numbers by value", file: "gate/src/config/canonical.rs", from: "(Value::Number(x), Value::Number(y)) => same_number(x, y),", to: "(Value::Number(x), Value::Number(y)) => x == y,", filter: "arms::pass::source_config_numbers_respelled" },
    Mutant { check: "source.config one-sided field", file: "gate/src/source/config.rs", from: "} else if !found.one_sided.is_empty() {", to: "} else if false {", filter: "arms::control::source_config_field_absent" },
    Mutant { check: "source.config RoPE scaling fields", file: "gate/src/config/canonical.rs", from: "            self.state(&name, v.clone(), format!(\"{prefix}{home}.{key}\"));", to: "", filter: "arms::control::source_config_rope_scaling_factor_differs" },
    Mutant { check: "source.config not-compared fields named", file: "gate/src/config/canonical.rs", from: "                    c.not_compared.insert(key.clone());", to: "", filter: "arms::pass::source_config_writer_fields_differ" },
    Mutant { check: "source.config RoPE base", file: "gate/src/config/canonical.rs", from: "        self.first_of(\"rope_theta\", base);", to: "", filter: "arms::control::source_config_rope_theta_differs" },
    Mutant { check: "source.config family", file: "gate/src/source/config.rs", from: "(Some(Ok(a)), Some(Ok(b))) if a == b => found.compared.push(\"family\".to_owned()),", to: "(Some(Ok(_)), Some(Ok(_))) => found.compared.push(\"family\".to_owned()),", filter: "arms::control::source_config_other_family" },
    Mutant { check: "source.config two homes", file: "gate/src/config/canonical.rs", from: "if let Some((other_at, other)) = found.iter().find(|(_, v)| !same(v, value)) {", to: "if let Some((other_at, other)) = found.iter().find(|_| false) {", filter: "arms::control::source_config_two_homes_disagree" },
    Mutant { check: "source.config identity not compared", file: "gate/src/config/canonical.rs", from: "const TOP: [&str; 12] = [\n    \"hidden_size\",", to: "const TOP: [&str; 13] = [\n    \"model_type\",\n    \"hidden_size\",", filter: "arms::pass::source_min_max_quantizer" },
    Mutant { check: "source.inventory trailing ones", file: "gate/src/source.rs", from: ".rposition(|&d| d != 1)", to: ".rposition(|_| true)", filter: "arms::pass::source_shapes_with_trailing_ones" },
    Mutant { check: "source.inventory trailing ones (GGUF)", file: "gate/src/source/gguf.rs", from: "    super::squeezed(&info.dims).iter().rev().copied().collect()", to: "    info.dims.iter().rev().copied().collect()", filter: "arms::pass::gguf_shapes_padded_with_ones" },
    Mutant { check: "source.config the package's own conflicts (GGUF)", file: "gate/src/source/gguf/config.rs", from: ".map(|c| format!(\"the {name}: {c}\")),", to: ".filter(|_| false).map(|c| format!(\"the {name}: {c}\")),", filter: "arms::control::gguf_package_config_states_two_rope_bases" },
    Mutant { check: "source.config target_layers plus one (GGUF)", file: "gate/src/source/gguf/config.rs", from: "    if same(1) {", to: "    if same(1) || same(0) {", filter: "arms::control::gguf_target_layers_raw_ids" },
    Mutant { check: "source.config target_layers plus one is agreement (GGUF)", file: "gate/src/source/gguf/config.rs", from: "    if same(1) {", to: "    if same(0) {", filter: "arms::pass::gguf_q4_1" },
    Mutant { check: "source.config mask key (GGUF)", file: "gate/src/source/gguf/config.rs", from: "        (Some(_), _) => Some(current),", to: "        (Some(_), _) => None,", filter: "arms::control::gguf_mask_token_id_differs" },
    Mutant { check: "source.config two mask ids (GGUF)", file: "gate/src/source/gguf/config.rs", from: "(Some(a), Some(b)) if a.value != b.value => {", to: "(Some(a), Some(b)) if a.value != b.value && false => {", filter: "arms::control::gguf_two_mask_ids" },
    Mutant { check: "source.config required key (GGUF)", file: "gate/src/source/gguf/config.rs", from: "            if required {", to: "            if false {", filter: "arms::gguf::config::dflash.block_count_absent" },
    Mutant { check: "source.inventory names (GGUF)", file: "gate/src/family/gguf_names.rs", from: "(\"ffn_norm.weight\", \"post_attention_layernorm.weight\"),", to: "(\"ffn_norm.weight\", \"input_layernorm.weight\"),", filter: "arms::pass::gguf_q4_1" },
    Mutant { check: "source.inventory names llama.cpp's name of a tensor the GGUF lacks", file: "gate/src/source/gguf.rs", from: "format!(\" (llama.cpp's name: {llama})\")", to: "String::new()", filter: "arms::gguf::control::dflash2_package_against_a_first_family_gguf" },
    Mutant { check: "source.bf16 (a GGUF draft's F32 tensor against its folder: DFlash2's base kernels)", file: "gate/src/draft/gguf_source.rs", from: "(s, x, false)", to: "(s, s, false)", filter: "gguf_source::control::dflash2_conv_base_changed" },
    Mutant { check: "source.* DFlash2 base kernels paired by llama.cpp's name", file: "gate/src/family/gguf_names.rs", from: "    (\"attn_conv_base\", \"attention_conv.base_kernel\"),", to: "    (\"attn_conv_base_\", \"attention_conv.base_kernel\"),", filter: "gguf_source::pass::dflash2_f16" },
    Mutant { check: "source.* DFlash2 codebooks paired by llama.cpp's name", file: "gate/src/family/gguf_names.rs", from: "        \"selector_predecessor.weight\",\n        \"candidate_selector.predecessor_codebook\",", to: "        \"selector_predecessor.weight\",\n        \"candidate_selector.successor_codebook\",", filter: "arms::gguf::pass::dflash2_package_against_its_gguf" },
    Mutant { check: "checks a refused config stopped are listed", file: "gate/src/evaluation.rs", from: "report.checks.extend(checks::refused_config_checks().into_iter().map(|id| {", to: "report.checks.extend(checks::refused_config_checks().into_iter().take(0).map(|id| {", filter: "options::a_family_counts_the_same_checks" },
    Mutant { check: "scalars listed when the container was not read", file: "gate/src/checks/mod.rs", from: "ids.extend(family.scalars().filter(|s| stated(*s)).filter_map(|s| {", to: "ids.extend(family.scalars().filter(|_| false).filter_map(|s| {", filter: "arms::control::no_weight_file" },
    Mutant { check: "--target given on a refused config is listed", file: "gate/src/target/mod.rs", from: "        Err(_) => crate::evaluation::refused_step(&CHECKS, \"--target\"),", to: "        Err(_) => Vec::new(),", filter: "options::a_refused_config_says_each_option" },
    Mutant { check: "an option given is never asked for", file: "gate/src/package.rs", from: "    report.given(option, &why);", to: "    let _ = why;", filter: "options::manifest_given_on_a_package_without_one" },
    Mutant { check: "--source refuses both kinds", file: "gate/src/source/origin.rs", from: ".filter(|n| has_extension(n, \"safetensors\") || crate::checkpoint::is_index(n))", to: ".filter(|_| false)", filter: "arms::gguf::refused::both_a_gguf_and_a_checkpoint" },
    Mutant { check: "inventory.complete (missing)", file: "gate/src/checks/inventory.rs", from: "} else if !e.optional {", to: "} else if false {", filter: "arms::folder::control::tensor_missing" },
    Mutant { check: "inventory.complete (shape)", file: "gate/src/checks/inventory.rs", from: "(Ok(shape), _) if *shape == t.shape => continue,", to: "(Ok(_), _) => continue,", filter: "arms::folder::control::tensor_misshapen" },
    Mutant { check: "inventory.complete (dtype)", file: "gate/src/draft/folder.rs", from: "_ if checks::finite::is_float(t.dtype) => Ok(()),", to: "_ => Ok(()),", filter: "arms::folder::control::tensor_of_integers" },
    Mutant { check: "inventory.complete (codebook)", file: "gate/src/checks/inventory.rs", from: "if let (true, Some(t)) = (e.codebook, by_name.get(suffixed.as_str())) {", to: "if let (true, Some(t)) = (false, by_name.get(suffixed.as_str())) {", filter: "arms::folder::control::dflash2_codebook_with_weight_suffix" },
    Mutant { check: "inventory.explained (folder)", file: "gate/src/checks/inventory.rs", from: "} else if known.contains_key(t.name) || codebook_suffixed {", to: "} else if true {", filter: "arms::folder::control::tensor_extra" },
    Mutant { check: "bf16.finite (F16)", file: "gate/src/checks/finite.rs", from: "Dtype::F16 => chunk_16(bytes, 0x7c00),", to: "Dtype::F16 => None,", filter: "arms::folder::control::f16_overflowed_to_inf" },
    Mutant { check: "config.geometry (ids required)", file: "gate/src/checks/geometry.rs", from: "ProblemKind::Missing if config_only => invalid(", to: "ProblemKind::Missing if false => invalid(", filter: "arms::folder::control::target_layer_ids_absent" },
    Mutant { check: "config.geometry (mask required)", file: "gate/src/checks/geometry.rs", from: "if let Ok(None) = c.mask_token_id {", to: "if false {", filter: "arms::folder::control::mask_token_id_absent" },
    Mutant { check: "config.geometry (block above 64)", file: "gate/src/checks/geometry.rs", from: "if b > MAX_KNOWN_BLOCK {", to: "if false {", filter: "arms::folder::control::block_size_above_64" },
    Mutant { check: "container.parses (stray shard)", file: "gate/src/draft/folder.rs", from: ".filter(|n| n.ends_with(\".safetensors\") && !read.contains(n))", to: ".filter(|_| false)", filter: "arms::folder::control::shard_no_index_names" },
    Mutant { check: "config.geometry (speculators raw ids)", file: "gate/src/config/canonical.rs", from: "if ids.contains(&0) {", to: "if false {", filter: "arms::folder::control::speculators_raw_ids" },
    Mutant { check: "config.geometry (speculators mask null)", file: "gate/src/config/canonical.rs", from: "if config.get(\"mask_token_id\") == Some(&Value::Null) {", to: "if false {", filter: "arms::folder::control::speculators_mask_null" },
    Mutant { check: "config.geometry (speculators mask absent)", file: "gate/src/checks/geometry.rs", from: "let why = if c.speculators.is_some() {", to: "let why = if false {", filter: "arms::folder::control::speculators_mask_absent" },
    Mutant { check: "config.geometry (speculators verifier)", file: "gate/src/checks/geometry.rs", from: "s.verifier_name.clone().map(drop),", to: "Ok(()),", filter: "arms::folder::control::speculators_verifier_name_missing" },
    Mutant { check: "config.geometry (speculators DFlash2 tokens)", file: "gate/src/checks/geometry.rs", from: "if tokens.checked_add(1) != Some(*block) {", to: "if false {", filter: "arms::folder::control::speculators_dflash2_tokens_off_by_one" },
    Mutant { check: "inventory.complete (speculators reduced vocabulary)", file: "gate/src/config.rs", from: "(draft < verifier).then_some((draft, verifier))", to: "None", filter: "arms::folder::pass::speculators_reduced_vocabulary" },
    Mutant { check: "inventory.complete (speculators d2t increasing)", file: "gate/src/checks/inventory.rs", from: "if target <= i128::from(previous) {", to: "if false {", filter: "arms::folder::control::speculators_d2t_not_increasing" },
    Mutant { check: "inventory.complete (speculators t2d exactly the targets)", file: "gate/src/checks/inventory.rs", from: "(0, false) | (1, true) => None,", to: "(0 | 1, _) => None,", filter: "arms::folder::control::speculators_t2d_count_wrong" },
    Mutant { check: "config.geometry (speculators draft vocabulary above)", file: "gate/src/checks/geometry.rs", from: "if draft > vocab {", to: "if false {", filter: "arms::folder::control::speculators_draft_vocab_above_the_verifiers" },
    Mutant { check: "config.geometry (speculators DFlash2 draft vocabulary)", file: "gate/src/checks/geometry.rs", from: "} else if draft != vocab && c.architecture == crate::config::Architecture::Dflash2 {", to: "} else if false {", filter: "arms::folder::control::speculators_dflash2_draft_vocab_reduced" },
    Mutant { check: "config.is_dflash (speculators format)", file: "gate/src/config.rs", from: "if let Some(family) = canonical::speculators_family(top) {", to: "if let Some(family) = None::<canonical::Family> {", filter: "arms::folder::pass::speculators_dflash" },
    Mutant { check: "container.parses (one file and its index, mlx-lm)", file: "gate/src/checkpoint.rs", from: "(true, Some(index)) => one_file_indexed(dir, index, how, max_tensors, inside),", to: "(true, Some(_)) => Err(malformed(dir, String::new())),", filter: "arms::folder::pass::mlx_one_file_indexed" },
    Mutant { check: "container.parses (index of one file names another)", file: "gate/src/checkpoint.rs", from: "    if others.is_empty() {\n        return Ok(layout);", to: "    if true {\n        return Ok(layout);", filter: "arms::folder::control::mlx_index_names_another_file" },
    Mutant { check: "inventory.complete (quantized: never quantized)", file: "gate/src/draft/quantized.rs", from: "_ if !quantizable(naming, &name, mlx) => Err(", to: "_ if false => Err(", filter: "arms::folder::control::pack_quantized_norm" },
    Mutant { check: "inventory.complete (quantized: left dense by the config yet quantized)", file: "gate/src/draft/quantized.rs", from: "Expect::Dense(why) => (scheme.storage.clone(), Err(why)),", to: "Expect::Dense(_) => (scheme.storage.clone(), Ok(String::new())),", filter: "arms::folder::control::pack_quantized_but_ignored" },
    Mutant { check: "inventory.complete (quantized: MLX override false yet quantized)", file: "gate/src/draft/quantized.rs", from: "Expect::Dense(why) => (scheme.storage.clone(), Err(why)),", to: "Expect::Dense(_) => (scheme.storage.clone(), Ok(String::new())),", filter: "arms::folder::control::mlx_override_false_yet_quantized" },
    Mutant { check: "inventory.complete (quantized: quantized by the config yet dense)", file: "gate/src/draft/quantized.rs", from: "if let Expect::Quantized(storage, entry) = scheme.expect(module) {", to: "if let Some((storage, entry)) = None::<(Storage, String)> {", filter: "arms::folder::control::pack_quantized_dense_but_quantized_by_config" },
    Mutant { check: "inventory.complete (quantized: MLX override yet dense)", file: "gate/src/draft/quantized.rs", from: "if let Expect::Quantized(storage, entry) = scheme.expect(module) {", to: "if let Some((storage, entry)) = None::<(Storage, String)> {", filter: "arms::folder::control::mlx_override_yet_stored_dense" },
    Mutant { check: "inventory.complete (pack-quantized: packed width)", file: "gate/src/draft/quantized/sets.rs", from: "if sn != n || words != width {", to: "if sn != n {", filter: "arms::folder::control::pack_quantized_packed_width_one_short" },
    Mutant { check: "inventory.complete (pack-quantized: weight_shape)", file: "gate/src/draft/quantized/sets.rs", from: "if sn != n || words != width {", to: "if false {", filter: "arms::folder::control::pack_quantized_weight_shape_disagrees" },
    Mutant { check: "inventory.complete (pack-quantized: weight_shape bounds)", file: "gate/src/draft/quantized/sets.rs", from: ".filter(|d| 1 <= *d && *d <= MAX_DIMENSION)", to: ".filter(|_| true)", filter: "arms::folder::control::pack_quantized_weight_shape_of_2_63" },
    Mutant { check: "inventory.complete (pack-quantized: group divides K)", file: "gate/src/draft/quantized/sets.rs", from: "Some(g) if sk % g != 0 => {", to: "Some(g) if false => {", filter: "arms::folder::control::pack_quantized_group_not_dividing_k" },
    Mutant { check: "inventory.complete (pack-quantized: zero point missing)", file: "gate/src/draft/quantized/sets.rs", from: "(None, false) => {", to: "(None, false) => if true {} else {", filter: "arms::folder::control::pack_quantized_zero_point_missing" },
    Mutant { check: "inventory.complete (pack-quantized: zero point when symmetric)", file: "gate/src/draft/quantized/sets.rs", from: "(Some(_), true) => {", to: "(Some(_), true) => if true {} else {", filter: "arms::folder::control::pack_quantized_zero_point_when_symmetric" },
    Mutant { check: "inventory.complete (FP8: block scale shape)", file: "gate/src/draft/quantized/sets.rs", from: "Fp8Scale::Block([r, c]) => {\n                self.shaped(s, suffix, float, \"a float\", &[n.div_ceil(r), k.div_ceil(c)])?", to: "Fp8Scale::Block(_) => {\n                self.shaped(s, suffix, float, \"a float\", &s.shape.clone())?", filter: "arms::folder::control::fp8_block_scale_misshapen" },
    Mutant { check: "inventory.complete (FP8: static input scale)", file: "gate/src/draft/quantized/sets.rs", from: "true => self.scalar(input, true)?,", to: "true => self.scalar(input, false)?,", filter: "arms::folder::control::fp8_static_input_scale_missing" },
    Mutant { check: "inventory.complete (NVFP4: group of 16 divides K)", file: "gate/src/draft/quantized/sets.rs", from: "if k % 16 != 0 {", to: "if false {", filter: "arms::folder::control::nvfp4_packed_width_one_short" },
    Mutant { check: "inventory.complete (NVFP4: ModelOpt second scale)", file: "gate/src/draft/quantized/sets.rs", from: "self.scalar(\".weight_scale_2\", true)?;", to: "self.scalar(\".weight_scale_2\", false)?;", filter: "arms::folder::control::nvfp4_modelopt_second_scale_missing" },
    Mutant { check: "inventory.complete (MLX: bits against packed width)", file: "gate/src/draft/quantized/sets.rs", from: "if width * 32 != k * bits {", to: "if false {", filter: "arms::folder::control::mlx_bits_disagree_with_the_packed_width" },
    Mutant { check: "inventory.complete (MLX: affine biases)", file: "gate/src/draft/quantized/sets.rs", from: "let biases = self.required(\".biases\")?;", to: "let Some(biases) = (self.part)(\".biases\") else { return Ok(vec![n, k]) };", filter: "arms::folder::control::mlx_biases_missing" },
    Mutant { check: "quant.scales (NVFP4 global scale read)", file: "gate/src/draft/quantized/sets.rs", from: "        \".weight_global_scale\",\n", to: "", filter: "arms::folder::control::nvfp4_global_scale_zero" },
    Mutant { check: "inventory.complete (compressed-tensors: format named)", file: "gate/src/quant/compressed_tensors.rs", from: "Some(\"nvfp4-pack-quantized\") => nvfp4(w, &field)?,", to: "Some(\"nvfp4-pack-quantized\") => nvfp4(w, &field)?,\n        Some(_) => pack_quantized(w, &field)?,", filter: "arms::folder::control::pack_quantized_unknown_format" },
    Mutant { check: "inventory.complete (compressed-tensors: FP8 symmetric)", file: "gate/src/quant/compressed_tensors.rs", from: "let (_, symmetric) = expect_args(w, field, \"float\", &[8])?;", to: "let (_, _s) = expect_args(w, field, \"float\", &[8])?;\n    let symmetric = true;", filter: "arms::folder::control::fp8_asymmetric_undecided" },
    Mutant { check: "inventory.complete (pattern count)", file: "gate/src/quant.rs", from: "if *budget == 0 {", to: "if false {", filter: "arms::folder::control::pack_quantized_too_many_patterns" },
    Mutant { check: "quantization (MLX's key)", file: "gate/src/quant.rs", from: "let stated = top.get(\"quantization\");", to: "let stated = None::<&Value>;", filter: "arms::folder::pass::mlx_affine_4_group_64" },
    Mutant { check: "quantization (mlx-lm's quantization_config copy)", file: "gate/src/quant.rs", from: ".is_none_or(|q| q.get(\"quant_method\").is_none());", to: ".is_none();", filter: "arms::folder::pass::mlx_affine_4_group_64" },
    Mutant { check: "quantization (a copy needs MLX's key)", file: "gate/src/quant.rs", from: "let stated = top.get(\"quantization\");", to: "let stated = top.get(\"quantization\").or(top.get(\"quantization_config\"));", filter: "arms::folder::control::quantization_config_without_quant_method" },
    Mutant { check: "quantization (ModelOpt hf_quant_config.json)", file: "gate/src/draft/folder.rs", from: "config.quantization = modelopt_file(dir, inside, report);", to: "config.quantization = None;", filter: "arms::folder::pass::nvfp4_modelopt_stated_in_hf_quant_config" },
    Mutant { check: "quantization (ModelOpt's exporter's own object)", file: "gate/src/quant.rs", from: "        && q.get(\"quantization\").is_some_and(Value::is_object)", to: "        && false", filter: "arms::folder::pass::nvfp4_modelopt_dflash_exporter" },
    Mutant { check: "loaders (ModelOpt's own object is not Transformers' form)", file: "gate/src/loaders/when.rs", from: "Some(q) if q.own_object_algo.is_some() => Met::Yes(", to: "Some(q) if q.own_object_algo.is_none() => Met::Yes(", filter: "loaders::transformers::modelopt_object::meets" },
    Mutant { check: "loaders (vLLM names no method for ModelOpt's own object's algorithm)", file: "gate/src/loaders/when.rs", from: "Some(algo) if !NAMED.contains(&algo.to_uppercase().as_str()) => Met::Yes(format!(", to: "Some(algo) if algo.is_empty() => Met::Yes(format!(", filter: "loaders::vllm::modelopt_object_algo::meets" },
    Mutant { check: "quantization (ModelOpt's nested object: exclude_modules only)", file: "gate/src/quant/vendors.rs", from: "    if !nested {", to: "    if true {", filter: "arms::folder::pass::modelopt_object_ignore_not_read" },
    Mutant { check: "quantization (Transformers' modules_to_convert is not read)", file: "gate/src/quant/vendors.rs", from: ".is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))", to: ".is_some_and(|_| false)", filter: "arms::folder::control::fp8_hugging_face_modules_to_convert_undecided" },
    Mutant { check: "inventory.complete (ModelOpt: config.json's ignore)", file: "gate/src/quant/vendors.rs", from: "listed.extend(strings(q.get(\"ignore\"), \"ignore\")?);", to: "listed.extend(Vec::<&str>::new());", filter: "arms::folder::control::nvfp4_modelopt_ignored_yet_quantized" },
    Mutant { check: "inventory.complete (Hugging Face fp8: scale_fmt)", file: "gate/src/quant/vendors.rs", from: "match text(q.get(\"scale_fmt\")).as_deref() {", to: "match None::<&str> {", filter: "arms::folder::control::fp8_hugging_face_ue8m0_scales_undecided" },
    Mutant { check: "inventory.complete (ModelOpt: exclude_modules globs)", file: "gate/src/quant/vendors.rs", from: "globs.push_pattern(glob, &glob_pattern(glob), \"exclude_modules\", &mut budget)?;", to: "globs.names.insert(glob.to_owned());", filter: "arms::folder::control::nvfp4_modelopt_excluded_yet_quantized" },
    Mutant { check: "inventory.complete (MLX: override false)", file: "gate/src/quant/mlx.rs", from: "Value::Bool(false) => None,", to: "Value::Bool(false) => Some(default),", filter: "arms::folder::control::mlx_override_false_yet_quantized" },
    Mutant { check: "inventory.complete (MLX: unknown mode)", file: "gate/src/quant/mlx.rs", from: "\"mxfp8\" => MlxMode::Mxfp8,\n", to: "\"mxfp8\" => MlxMode::Mxfp8,\n            _ if true => MlxMode::Affine,\n", filter: "arms::folder::control::mlx_unknown_mode_undecided" },
    Mutant { check: "inventory.complete (MLX: override count bound)", file: "gate/src/quant/mlx.rs", from: "if i == MAX_NAMES {", to: "if i == 1000 {", filter: "arms::folder::pass::mlx_hostile_override_count" },
    Mutant { check: "source.q4_1 (quantized folder: the one-step bound)", file: "gate/src/draft/quantized/source.rs", from: "let within = err <= allowed;", to: "let within = true;", filter: "arms::quantized_source::control::pack_quantized_from_another_tensor" },
    Mutant { check: "source.q4_1 (quantized folder: compressed-tensors zero point)", file: "gate/src/draft/quantized/source.rs", from: "                    (\n                        scale * (q - zero) as f32,", to: "                    (\n                        scale * q as f32,", filter: "arms::quantized_source::pass::pack_quantized_w4_asymmetric" },
    Mutant { check: "source.q4_1 (quantized folder: FP8 scale)", file: "gate/src/draft/quantized/source.rs", from: "let v = x * scale;", to: "let v = x;", filter: "arms::quantized_source::pass::fp8_block_compressed_tensors" },
    Mutant { check: "source.q4_1 (quantized folder: NVFP4 scales)", file: "gate/src/draft/quantized/source.rs", from: "(x * eff, -6.0 * eff.abs(), 6.0 * eff.abs(), step, 0.0)", to: "(x * block, -6.0 * eff.abs(), 6.0 * eff.abs(), step, 0.0)", filter: "arms::quantized_source::pass::nvfp4_modelopt" },
    Mutant { check: "source.q4_1 (quantized folder: MLX affine bias)", file: "gate/src/draft/quantized/source.rs", from: "                                scale * q as f32 + bias,", to: "                                scale * q as f32,", filter: "arms::quantized_source::pass::mlx_affine_4" },
    Mutant { check: "source.inventory (quantized folder: a role without its source)", file: "gate/src/draft/quantized/source.rs", from: "missing.push(role);", to: "drop(role);", filter: "arms::quantized_source::control::source_lacks_a_tensor" },
    Mutant { check: "source.bf16 (quantized folder: dense tensors bit for bit)", file: "gate/src/draft/quantized/source.rs", from: ".filter(|(a, b)| a.to_bits() != round(**b).to_bits())", to: ".filter(|_| false)", filter: "arms::quantized_source::control::dense_norm_differs" },
    Mutant { check: "NOT CHECKED (a quantized folder asks for its bf16 source)", file: "gate/src/draft/folder.rs", from: "        report.not_checked.insert(NotChecked::QuantizedContent);", to: "        let _ = ();", filter: "arms::quantized_source::pass::pack_quantized_w4_group" },
    Mutant { check: "NOT CHECKED (--source answers a quantized folder's content)", file: "gate/src/package.rs", from: "        true => &[NotChecked::QuantizedContent][..],", to: "        true => &[][..],", filter: "arms::quantized_source::pass::mlx_affine_4" },
    Mutant { check: "quant.scales (zero or negative)", file: "gate/src/checks/scales.rs", from: "bits.wrapping_sub(1).saturating_sub(largest - 1)", to: "(bits & !(1 << (<$bits>::BITS - 1))).saturating_sub(exponent - 1)", filter: "arms::folder::control::pack_quantized_scale_zero" },
    Mutant { check: "quant.scales (NaN)", file: "gate/src/checks/scales.rs", from: "(bits & !(1 << (<$bits>::BITS - 1))).saturating_sub(exponent - 1)", to: "bits & 0", filter: "arms::folder::control::mlx_scale_nan" },
    Mutant { check: "quant.scales (FP8 NaN codes)", file: "gate/src/checks/scales.rs", from: "Rule::Fp8Codes => Some(", to: "Rule::Fp8Codes if false => Some(", filter: "arms::folder::control::fp8_weight_nan_byte" },
    Mutant { check: "quant.scales (a packed FP8 code's word)", file: "gate/src/checks/scales.rs", from: "(Rule::Fp8Codes, word @ 2..) => (", to: "(Rule::Fp8Codes, word @ 200..) => (", filter: "arms::folder::control::mlx_mxfp8_code_nan" },
    Mutant { check: "quant.scales (E4M3 scales)", file: "gate/src/checks/scales.rs", from: "b.wrapping_sub(1).saturating_sub(0x7d)", to: "u8::from(b == 0)", filter: "arms::folder::control::nvfp4_scale_nan_byte" },
    Mutant { check: "quant.scales (E8M0 scales)", file: "gate/src/checks/scales.rs", from: "|[b]| b.saturating_sub(0xfe)", to: "|[b]| b & 0", filter: "arms::folder::control::mlx_e8m0_scale_nan" },
    Mutant { check: "quant.scales (FP8 scales > 0)", file: "gate/src/checks/scales.rs", from: "bits.wrapping_sub(1).saturating_sub(largest - 1)", to: "(bits & !(1 << (<$bits>::BITS - 1))).saturating_sub(exponent - 1)", filter: "arms::folder::control::fp8_scale_zero" },
    Mutant { check: "quant.scales (scales are read)", file: "gate/src/draft/folder.rs", from: "match sets.as_ref().and_then(|s| s.rule(&t.name)) {", to: "match None::<checks::scales::Rule> {", filter: "arms::folder::control::pack_quantized_scale_negative" },
    Mutant { check: "census (quantized scheme)", file: "gate/src/draft/folder.rs", from: "form = format!(\"{form}, {described}\");", to: "form = format!(\"{form}, {}\", described.len());", filter: "arms::folder::pass::pack_quantized_census_names_the_scheme" },
    Mutant { check: "census (FP8 scheme)", file: "gate/src/draft/folder.rs", from: "form = format!(\"{form}, {described}\");", to: "form = format!(\"{form}, {}\", described.len());", filter: "arms::folder::pass::fp8_census_names_the_scheme" },
    Mutant { check: "quantization_config", file: "gate/src/draft/folder.rs", from: "        None | Some((Ok(_), Architecture::Dflash)) => None,", to: "        _ => None,", filter: "arms::folder::control::quantization_config_named" },
    Mutant { check: "scalars.mask_token_id (mask_embedding.pt id)", file: "gate/src/draft/mask_embedding.rs", from: "if i64::try_from(stated) != Ok(read.mask_token_id) {", to: "if false {", filter: "arms::folder::control::mask_embedding_wrong_id" },
    Mutant { check: "scalars.mask_token_id (mask_embedding.pt length)", file: "gate/src/draft/mask_embedding.rs", from: "if read.shape != [hidden] {", to: "if false {", filter: "arms::folder::control::mask_embedding_wrong_length" },
    Mutant { check: "scalars.mask_token_id (mask_embedding.pt finite)", file: "gate/src/draft/mask_embedding.rs", from: ".position(|v| !v.is_finite())", to: ".position(|_| false)", filter: "arms::folder::control::mask_embedding_nan" },
    Mutant { check: "scalars.mask_token_id (pickle global allow-list)", file: "gate/src/pickle.rs", from: "match allowed(module, name) {", to: "match allowed(module, name).or(Some(Global::OrderedDict)) {", filter: "arms::folder::control::mask_embedding_malicious_global" },
    Mutant { check: "scalars.mask_token_id (legacy torch file)", file: "gate/src/torch_archive.rs", from: "if bytes.first() == Some(&0x80) {", to: "if false {", filter: "arms::folder::control::mask_embedding_legacy" },
    Mutant { check: "scalars.mask_token_id (compressed zip entry)", file: "gate/src/torch_archive.rs", from: "if method != 0 {", to: "if false {", filter: "arms::folder::control::mask_embedding_compressed" },
    Mutant { check: "two forms in one folder", file: "gate/src/package.rs", from: "if !q4nx.is_empty() {", to: "if false {", filter: "arms::folder::control::q4nx_and_safetensors_both" },
    Mutant { check: "config.is_dflash (GGUF architecture)", file: "gate/src/draft/gguf.rs", from: "Some(ARCHITECTURE) => Check::pass(", to: "Some(_) => Check::pass(", filter: "arms::gguf_draft::control::not_a_draft" },
    Mutant { check: "config.is_dflash (GGUF fork dialect)", file: "gate/src/draft/gguf.rs", from: "Some(fork) if FORK_DIALECTS.contains(&fork) => Check::undecided(", to: "Some(fork) if false => Check::undecided(", filter: "arms::gguf_draft::control::fork_dialect" },
    Mutant { check: "config.geometry (GGUF target_layers)", file: "gate/src/draft/gguf.rs", from: "} else if values.windows(2).any(|w| w[0] >= w[1]) {", to: "} else if false {", filter: "arms::gguf_draft::control::target_layers_not_increasing" },
    Mutant { check: "config.geometry (GGUF value head)", file: "gate/src/draft/gguf.rs", from: "        if k != v {", to: "        if false {", filter: "arms::gguf_draft::control::value_head_differs_from_key_head" },
    Mutant { check: "config.geometry (GGUF value head default)", file: "gate/src/draft/gguf.rs", from: "None => hidden.zip(heads).map(|(h, n)| (h / n, false)),", to: "None => head_dim.map(|k| (k, false)),", filter: "arms::gguf_draft::control::value_length_absent_and_key_head_not_the_split" },
    Mutant { check: "container.parses (GGUF of another architecture)", file: "gate/src/draft/folder.rs", from: "    report.checks.push(parses);", to: "    report.checks.push(Check::blocked(PARSES, IS_DFLASH, why));", filter: "arms::gguf_draft::control::not_a_draft" },
    Mutant { check: "census (types of a GGUF)", file: "gate/src/report.rs", from: "                types.join(\", \"),", to: "                String::new(),", filter: "arms::gguf_draft::pass::faithful_q8_0" },
    Mutant { check: "census (metadata of a GGUF)", file: "gate/src/draft/gguf.rs", from: "        .map(|k| (escape(&k.key).into_owned(), metadata_text(k)))", to: "        .filter(|_| false).map(|k| (escape(&k.key).into_owned(), metadata_text(k)))", filter: "arms::gguf_draft::pass::faithful_q8_0" },
    Mutant { check: "config.geometry (GGUF block_size)", file: "gate/src/draft/gguf.rs", from: "if block_size == Some(1) {", to: "if false {", filter: "arms::gguf_draft::control::block_size_one" },
    Mutant { check: "inventory.complete (GGUF missing)", file: "gate/src/checks/inventory.rs", from: "} else if !e.optional {", to: "} else if false {", filter: "arms::gguf_draft::control::tensor_missing" },
    Mutant { check: "inventory.complete (GGUF ne shape)", file: "gate/src/checks/inventory.rs", from: "(Ok(shape), _) if *shape == t.shape => continue,", to: "(Ok(_), _) => continue,", filter: "arms::gguf_draft::control::tensor_misshapen" },
    Mutant { check: "inventory.explained (GGUF)", file: "gate/src/checks/inventory.rs", from: "} else if known.contains_key(t.name) || codebook_suffixed {", to: "} else if true {", filter: "arms::gguf_draft::control::tensor_extra" },
    Mutant { check: "inventory GGUF ne read as the logical shape", file: "gate/src/draft/gguf.rs", from: "shape: t.dims.iter().rev().copied().collect(),", to: "shape: t.dims.clone(),", filter: "arms::gguf_draft::pass::faithful" },
    Mutant { check: "inventory.complete GGUF embedding of the target's vocabulary", file: "gate/src/checks/inventory.rs", from: "Ok(h) if t.shape.len() == 2 && t.shape[1] == h => continue,", to: "Ok(_) => continue,", filter: "arms::gguf_draft::control::own_embedding_with_no_vocabulary_stated_another_hidden_size" },
    Mutant { check: "inventory.complete GGUF embedding of the stated vocabulary", file: "gate/src/draft/gguf.rs", from: "top.insert(\"vocab_size\".into(), vocab.into());", to: "let _ = vocab;", filter: "arms::gguf_draft::control::own_embedding_of_another_vocabulary" },
    Mutant { check: "config.geometry (mask is the draft's own live id)", file: "gate/src/checks/geometry.rs", from: "if let Some(l) = own.live.iter().find(|l| l.id == mask) {", to: "if let Some(l) = own.live.iter().find(|l| l.id == mask && false) {", filter: "arms::folder::control::mask_is_the_drafts_own_eos" },
    Mutant { check: "config.geometry (Q4NX config's own live ids)", file: "gate/src/config.rs", from: "Some(((*k).to_owned(), home.get(*k)?.clone()))", to: "None::<(String, Value)>", filter: "arms::control::mask_is_the_drafts_own_eos" },
    Mutant { check: "config.geometry (GGUF token types of another type)", file: "gate/src/gguf.rs", from: "Some(ValueType::I32) if count >= tokens => None,", to: "Some(_) if count >= tokens => None,", filter: "arms::gguf_draft::control::token_types_of_f32" },
    Mutant { check: "config.geometry (GGUF token types shorter)", file: "gate/src/gguf.rs", from: "Some(ValueType::I32) if count >= tokens => None,", to: "Some(ValueType::I32) => None,", filter: "arms::gguf_draft::control::token_types_shorter_than_tokens" },
    Mutant { check: "config.geometry (GGUF token types read)", file: "gate/src/draft/gguf.rs", from: ".or_else(|| gguf.token_types_fault())", to: ".or_else(|| None)", filter: "arms::gguf_draft::control::token_types_shorter_than_tokens" },
    Mutant { check: "target.tokenizer (GGUF token types)", file: "gate/src/target/gguf.rs", from: "if let Some(fault) = gguf.token_types_fault() {", to: "if let Some(fault) = gguf.token_types_fault().filter(|_| false) {", filter: "target_forms::gguf_target_token_types_shorter" },
    Mutant { check: "target.depth (a speculators draft's verifier is the target)", file: "gate/src/target/checks.rs", from: "if set(v) == set(t) {", to: "if true {", filter: "target_forms::speculators_verifier_is_another_model" },
    Mutant { check: "target.depth (another verifier FAILs whatever the counts)", file: "gate/src/target/checks.rs", from: "if let Some(v) = verifier.as_ref().filter(|v| v.differs) {", to: "if let Some(v) = verifier.as_ref().filter(|_| false) {", filter: "target_forms::speculators_verifier_another_model_beside_a_shallow_target" },
    Mutant { check: "target.depth (the target's architectures read)", file: "gate/src/target/folder.rs", from: "architectures: architectures(&config),", to: "architectures: Err(String::new()),", filter: "target_forms::speculators_verifier_is_the_target" },
    Mutant { check: "target.depth (verifier not compared is not compared)", file: "gate/src/target/checks.rs", from: "compared: stated.is_ok() && target.architectures.is_ok(),", to: "compared: true,", filter: "target_forms::speculators_target_states_no_architectures" },
    Mutant { check: "a repository's draft gated in its dflash/ folder", file: "gate/src/package.rs", from: "    if !keeps_its_draft_in_a_folder(dir, &names, &inside) {", to: "    if true {", filter: "folder::pass::readme_beside_a_dflash_folder" },
    Mutant { check: "the report names the folder the draft was found in", file: "gate/src/package.rs", from: "report.against.draft_in = Some(DRAFT_FOLDER.to_owned());", to: "report.against.draft_in = None;", filter: "folder::pass::mimo_repository_keeping_its_draft_in_dflash" },
    Mutant { check: "no descent past a root whose config is a draft's", file: "gate/src/package.rs", from: ") && !crate::config::reads_as_a_draft(&bytes)", to: ") && true", filter: "folder::control::dflash_folder_beside_a_draft_at_the_root" },
    Mutant { check: "no descent past a root config not read", file: "gate/src/package.rs", from: "Ok(serde_json::Value::Object(_))", to: "Ok(_) | Err(_)", filter: "folder::control::dflash_folder_beside_an_unreadable_root_config" },
    Mutant { check: "no descent past weights at the root", file: "gate/src/package.rs", from: "        || names.iter().any(|n| files::is_weight_file(n) || is_gguf(n))", to: "        || false", filter: "folder::control::dflash_folder_beside_a_gguf_at_the_root" },
    Mutant { check: "no descent beside another draft folder", file: "gate/src/package.rs", from: "            && holds_a_draft(&dir.join(n), inside)", to: "            && false", filter: "folder::control::dflash_folder_beside_another_draft_folder" },
    Mutant { check: "a dflash/ folder linked out of the repository is not read", file: "gate/src/package.rs", from: "    if !inside.holds(&folder) {", to: "    if false {", filter: "folder::control::dflash_folder_leaves_the_repository" },
    Mutant { check: "--all gates a repository keeping its draft in dflash/", file: "gate/src/bin/dflash-gate/tree.rs", from: "if dflash_gate::__private::package::keeps_its_draft_in_a_folder_at(&dir) {", to: "if false {", filter: "cli::all_gates_a_repository_keeping_its_draft_in_dflash" },
    Mutant { check: "--all row names the folder the draft was found in", file: "gate/src/bin/dflash-gate.rs", from: "(other, Some(folder)) => format!(\"[{}, draft in {folder}/] \", other.token()),", to: "(other, Some(_)) => format!(\"[{}] \", other.token()),", filter: "cli::all_gates_a_repository_keeping_its_draft_in_dflash" },
    Mutant { check: "container.parses (draft weights named by their own index)", file: "gate/src/checkpoint.rs", from: "[INDEX_FILE, DRAFT_INDEX_FILE]", to: "[INDEX_FILE, INDEX_FILE]", filter: "folder::pass::draft_weights_named_by_their_own_index" },
    Mutant { check: "container.parses (two indexes)", file: "gate/src/checkpoint.rs", from: "    if indexes.len() > 1 {", to: "    if false {", filter: "folder::control::draft_weights_named_by_two_indexes" },
    Mutant { check: "container.parses (draft weights no index names)", file: "gate/src/checkpoint.rs", from: ".filter(|n| is_draft_weights(n))", to: ".filter(|_| false)", filter: "folder::control::draft_weights_no_index_names" },
    Mutant { check: "a folder of draft weights is a Hugging Face folder", file: "gate/src/draft/folder.rs", from: "n == SINGLE_FILE || crate::checkpoint::is_index(n) || crate::checkpoint::is_draft_weights(n)", to: "n == SINGLE_FILE || crate::checkpoint::is_index(n)", filter: "folder::control::draft_weights_no_index_names" },
    Mutant { check: "NOT CHECKED (GGUF right weights and ids)", file: "gate/src/draft/gguf.rs", from: "    NotChecked::ConvertedContent,", to: "    NotChecked::ForwardPass,", filter: "arms::gguf_draft::pass::faithful_q8_0" },
    Mutant { check: "NOT CHECKED (GGUF --source answers)", file: "gate/src/package.rs", from: "true if decided => &[NotChecked::ConvertedContent][..],", to: "true if decided => &[][..],", filter: "arms::gguf_source::pass::faithful_f16" },
    Mutant { check: "config.geometry (GGUF DSpark parts UNDECIDED)", file: "gate/src/draft/gguf.rs", from: "    if !dspark.is_empty() {", to: "    if false {", filter: "arms::gguf_draft::control::dspark_keys_only" },
    Mutant { check: "inventory (GGUF DSpark heads not held to the dflash graph)", file: "gate/src/draft/gguf.rs", from: "Ok(_) if !dspark.is_empty() => {", to: "Ok(_) if false => {", filter: "arms::gguf_draft::control::dspark_heads" },
    Mutant { check: "config.geometry (GGUF DSpark tensors named)", file: "gate/src/draft/gguf.rs", from: ".filter(|t| header.tensor(t).is_some())", to: ".filter(|_| false)", filter: "arms::gguf_draft::control::dspark_markov_head_without_its_keys" },
    Mutant { check: "config.geometry (GGUF DSpark keys kept)", file: "gate/src/gguf.rs", from: ".is_some_and(|(_, rest)| COMPARED_KEYS.contains(&rest) || DSPARK_KEYS.contains(&rest))", to: ".is_some_and(|(_, rest)| COMPARED_KEYS.contains(&rest))", filter: "arms::gguf_draft::control::dspark_keys_only" },
    Mutant { check: "config.geometry (GGUF DSpark over DeepSeek-V4's backbone)", file: "gate/src/draft/gguf.rs", from: "Err(problems) if !backbone => {", to: "Err(problems) if true => {", filter: "arms::gguf_draft::control::dspark_deepseek4_backbone" },
    Mutant { check: "source.* (GGUF DSpark heads not compared)", file: "gate/src/package.rs", from: "Some(g) if !crate::draft::gguf::dspark_parts(&g.header).is_empty() => {", to: "Some(g) if false => {", filter: "arms::gguf_source::control::dspark_heads_not_compared" },
    Mutant { check: "config.mask_token (GGUF mask token type)", file: "gate/src/draft/gguf.rs", from: "CONTROL | USER_DEFINED | UNUSED => Check::pass(", to: "_ => Check::pass(", filter: "arms::gguf_draft::control::mask_is_a_normal_token" },
    Mutant { check: "config.mask_token (GGUF type unstated)", file: "gate/src/draft/gguf.rs", from: "let Some((_, Some(ty))) = gguf.token_type(mask) else {", to: "let Some((_, Some(ty))) = gguf.token_type(mask).or(Some((0, Some(3)))) else {", filter: "arms::gguf_draft::control::mask_type_unstated" },
    Mutant { check: "bf16.finite (GGUF block scales)", file: "gate/src/draft/gguf.rs", from: "Some(data) => blocks::scan_tensor(t, data).err(),", to: "Some(_) => None,", filter: "arms::gguf_draft::control::nan_block_scale_in_q4_1" },
    Mutant { check: "a directory holding one GGUF", file: "gate/src/package.rs", from: "if let Some(name) = gguf_in(dir, &names, inside)? {", to: "if let Some(name) = None::<OsString> {", filter: "arms::gguf_draft::pass::directory_holding_one" },
    Mutant { check: "several GGUFs in one directory", file: "gate/src/package.rs", from: "(1, true) => Ok(names.iter().find(|n| is_gguf(n)).cloned()),", to: "(_, true) => Ok(names.iter().find(|n| is_gguf(n)).cloned()),", filter: "arms::gguf_draft::control::directory_holding_two" },
    Mutant { check: "hub repository resolved", file: "gate/src/hub.rs", from: "return snapshot(path, revision.unwrap_or(DEFAULT_REVISION));", to: "return Ok(path.to_owned());", filter: "arms::folder::pass::cache_repository" },
    Mutant { check: "source.bf16 (GGUF draft against its folder)", file: "gate/src/draft/gguf_source.rs", from: "if stored.to_bits() == rounded.to_bits() && !stored.is_nan() && !overflow {", to: "if true {", filter: "arms::gguf_source::control::f16_element_changed" },
    Mutant { check: "source.bf16 (GGUF draft f16 overflow)", file: "gate/src/draft/gguf_source.rs", from: "(s, r, x.is_finite() && r.is_infinite())", to: "(s, r, false)", filter: "arms::gguf_source::control::f16_overflow" },
    Mutant { check: "source.q4_1 (GGUF draft bound)", file: "gate/src/draft/gguf_source/bound.rs", from: "fn within(err: f32, step: f32) -> bool {\n    err <= step", to: "fn within(err: f32, step: f32) -> bool {\n    err <= step || true", filter: "arms::gguf_source::scalar::control::tensor_changed" },
    Mutant { check: "source.q4_1 (GGUF draft K-quant sub-block range)", file: "gate/src/draft/gguf_source.rs", from: "*sub = span(dj, mj, 0.0, top);", to: "*sub = span(dj, 0.0, 0.0, top);", filter: "arms::gguf_source::pass::faithful_q4_k" },
    Mutant { check: "source.inventory (GGUF draft source tensor unpaired)", file: "gate/src/draft/gguf_source.rs", from: ".filter(|e| !claimed.contains(&e.name))", to: ".filter(|_| false)", filter: "arms::gguf_source::control::tensor_dropped" },
    Mutant { check: "source.config (GGUF draft metadata against the folder's config)", file: "gate/src/draft/gguf_source.rs", from: "Ok(config) => compare(&config, &gguf.header, \"source folder's config\"),", to: "Ok(_) => Check::pass(CONFIG, \"mutant\"),", filter: "arms::gguf_source::control::target_layers_raw_ids" },
    Mutant { check: "--source refused (GGUF draft against a GGUF)", file: "gate/src/package.rs", from: "if let Some(why) = crate::draft::gguf_source::refused_source(dir) {", to: "if let Some(why) = None::<String> {", filter: "arms::gguf_source::control::source_is_a_gguf" },
    Mutant { check: "split refused (GGUF draft split.count)", file: "gate/src/draft/gguf.rs", from: "if *count > 1 {", to: "if false {", filter: "arms::gguf_draft::control::split_by_metadata" },
    Mutant { check: "split: one shard of one is whole", file: "gate/src/source/origin.rs", from: "        && count.parse::<u64>().map_or(true, |n| n > 1)\n", to: "", filter: "arms::gguf_draft::pass::named_one_shard_of_one" },
    Mutant { check: "--all gates a GGUF draft file", file: "gate/src/bin/dflash-gate/tree.rs", from: "Ok(_) if is_gguf(path.as_os_str()) => items.push(gguf_item(path, beside)),", to: "Ok(_) if false => items.push(gguf_item(path, beside)),", filter: "cli::all_gates_a_gguf_draft_file_and_skips_a_target_gguf" },
    Mutant { check: "--all gates a draft mislabelled as another class", file: "gate/src/bin/dflash-gate/tree.rs", from: "if model_type == Some(\"dflash\") || architectures.iter().any(|a| draft_classes.contains(a)) {", to: "if false {", filter: "cli::all_skips_another_models_directory_and_gates_a_draft_under_another_name" },
    Mutant { check: "--all skips a target GGUF", file: "gate/src/bin/dflash-gate/tree.rs", from: "let architecture = gguf.header.architecture()?;", to: "let architecture = gguf.header.architecture().filter(|_| false)?;", filter: "cli::all_gates_a_gguf_draft_file_and_skips_a_target_gguf" },
    Mutant { check: "split refused (GGUF draft shard name)", file: "gate/src/package.rs", from: "if crate::source::is_shard(&name) {", to: "if false {", filter: "arms::gguf_draft::control::split_by_name" },
    Mutant { check: "target GGUF reader layers", file: "gate/src/target/gguf.rs", from: "num_hidden_layers: count(header, &format!(\"{arch}.block_count\")),", to: "num_hidden_layers: count(header, &format!(\"{arch}.context_length\")),", filter: "target_forms::gguf_target_fewer_layers" },
    Mutant { check: "target GGUF reader vocab", file: "gate/src/target/gguf.rs", from: "Some(t) if t.dims.len() == 2 => Ok(t.dims[1]),", to: "Some(t) if t.dims.len() == 2 => Ok(t.dims[0]),", filter: "target_forms::gguf_target_matches" },
    Mutant { check: "target text_config strict", file: "gate/src/target/folder.rs", from: "None | Some(Value::Null) | Some(Value::Object(_)) => {}", to: "_ => {}", filter: "target_forms::text_config_of_the_wrong_type" },
    Mutant { check: "target.mask_token live id", file: "gate/src/tokenizer.rs", from: ".filter(|l| l.id == mask)", to: ".filter(|l| l.id == mask && false)", filter: "target_tokenizer::mask_is_eos_in_config" },
    Mutant { check: "target.mask_token padded row", file: "gate/src/tokenizer.rs", from: "if mask >= vocabulary.count {", to: "if true {", filter: "target_tokenizer::mask_is_a_regular_token" },
    Mutant { check: "target.mask_token added special", file: "gate/src/tokenizer.rs", from: "return if a.special {", to: "return if !a.special {", filter: "target_tokenizer::mask_is_an_added_special_token" },
    Mutant { check: "target.tokenizer token count", file: "gate/src/tokenizer.rs", from: "Ok(rows) if v.count <= rows => Check::pass(", to: "Ok(rows) if true => Check::pass(", filter: "target_tokenizer::tokenizer_larger_than_the_rows" },
    Mutant { check: "target.tokenizer size limit", file: "gate/src/tokenizer.rs", from: "let bytes = file.read_all(cap)?;", to: "let bytes = file.read_all(u64::MAX)?;", filter: "target_tokenizer::hostile::over_the_size_limit" },
    Mutant { check: "target.tokenizer duplicate key", file: "gate/src/tokenizer.rs", from: "if !seen.insert(k.clone()) {", to: "if !seen.insert(k.clone()) && false {", filter: "target_tokenizer::hostile::duplicate_keys" },
    Mutant { check: "target.mask_token regular token", file: "gate/src/tokenizer.rs", from: "Some(text) => Check::fail(", to: "Some(text) => Check::pass(", filter: "target_tokenizer::mask_is_a_regular_token" },
    Mutant { check: "target.tokenizer token id", file: "gate/src/tokenizer.rs", from: "v.as_u64().ok_or_else(", to: "v.as_u64().or(Some(0)).ok_or_else(", filter: "target_tokenizer::hostile::negative_id" },
    Mutant { check: "target.tokenizer link rule", file: "gate/src/tokenizer.rs", from: "Err(e @ (FileError::Outside { .. } | FileError::Changed { .. })) => Err(e.into()),", to: "Err(e @ FileError::Changed { .. }) => Err(e.into()),", filter: "target_tokenizer::hostile::link_out_of_the_target" },
    Mutant { check: "target.tokenizer vocab id twice", file: "gate/src/tokenizer.rs", from: "let twice = ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);", to: "let twice = ids.windows(2).find(|w| w[0] == w[1] && false).map(|w| w[0]);", filter: "target_tokenizer::hostile::vocab_id_twice" },
    Mutant { check: "target.tokenizer added text differs", file: "gate/src/tokenizer.rs", from: "(*text != a.content).then(|| {", to: "(*text != a.content && false).then(|| {", filter: "target_tokenizer::hostile::id_in_vocab_and_added_with_another_text" },
    Mutant { check: "target.mask_token generation_config", file: "gate/src/tokenizer.rs", from: "live_ids(&generation, GENERATION_CONFIG, &mut tokens);", to: "let _ = &generation;", filter: "target_tokenizer::mask_is_eos_in_generation_config" },
    Mutant { check: "target.mask_token tokenizer_config", file: "gate/src/tokenizer.rs", from: "ids[i] = Some(a.id);", to: "ids[i] = None;", filter: "target_tokenizer::mask_is_eos_in_tokenizer_config" },
    Mutant { check: "target.depth GGUF draft ids minus one", file: "gate/src/target/mod.rs", from: "target_layer_ids: Ok(m.target_layers.iter().map(|v| v - 1).collect()),", to: "target_layer_ids: Ok(m.target_layers.clone()),", filter: "target_gguf_draft::deepest_tap_is_the_last_layer" },
    Mutant { check: "target.rope base compared", file: "gate/src/target/rope.rs", from: "(Some(x), Some(y)) => (x as f32) == (y as f32),", to: "(Some(_), Some(_)) => true,", filter: "target_forms::rope_base_differs" },
    Mutant { check: "target.rope GGUF freq_base read", file: "gate/src/target/rope.rs", from: "let base = format!(\"{arch}.rope.freq_base\");", to: "let base = format!(\"{arch}.rope.freq_base_unread\");", filter: "target_forms::gguf_target_rope_base_differs" },
    Mutant { check: "target.vocab config-only folder", file: "gate/src/target/checks.rs", from: "if rows_read.is_empty() && compared && target.weights_absent {", to: "if false {", filter: "target_read::no_weight_file_compares_the_configs" },
    Mutant { check: "target.mask_token GGUF target token types", file: "gate/src/target/gguf.rs", from: "gguf.token_type_list().as_deref(),", to: "None,", filter: "target_forms::gguf_target_mask_is_a_normal_token" },
    Mutant { check: "source.q4_1 Q5_0 fifth bit", file: "gate/src/gguf/dequant.rs", from: "y[j] = (i32::from((q & 0x0f) | h0) - 16) as f32 * d;", to: "y[j] = (i32::from(q & 0x0f) - 16) as f32 * d;", filter: "gguf_source::pass::faithful_q5_0" },
    Mutant { check: "source.q4_1 Q6_K code offset", file: "gate/src/gguf/kquant.rs", from: "*v = ds * f32::from(q as i8 - 32);", to: "*v = ds * f32::from(q as i8 - 16);", filter: "gguf_source::pass::faithful_q6_k" },
    Mutant { check: "source.q4_1 GGUF draft RMS ceiling", file: "gate/src/draft/gguf_source.rs", from: "} else if !under(rms, ceiling) {", to: "} else if false {", filter: "gguf_source::control::rms_above_the_ceiling_every_element_in_bound" },
    Mutant { check: "source.q4_1 GGUF draft lost worker", file: "gate/src/draft/gguf_source.rs", from: "parallel::map(Q4_1, &quantized, || (), |_, p| compare_quantized(p, wide))?;", to: "parallel::map(Q4_1, &quantized, || (), |_, p| compare_quantized(p, wide)).unwrap_or_default();", filter: "gguf_source::hostile::a_worker_panic_in_source_q4_1" },
    Mutant { check: "config.geometry GGUF block_count beyond the tensors", file: "gate/src/draft/gguf.rs", from: "Some(n) if n.saturating_mul(LAYER_TENSORS) > header.tensors.len() as u64 => {", to: "Some(n) if false => {", filter: "gguf_draft::control::block_count_one_layer_beyond_the_tensors" },
    Mutant { check: "config.geometry GGUF block above any known", file: "gate/src/draft/gguf.rs", from: "Ok(m) if m.block_size > MAX_KNOWN_BLOCK => Check::undecided(", to: "Ok(m) if false => Check::undecided(", filter: "gguf_draft::control::block_size_above_any_known" },
    Mutant { check: "config.geometry GGUF u32 keys", file: "gate/src/draft/gguf.rs", from: "Some((ValueType::U32, Value::Integer(i))) if *i >= 1 => Some(*i as u64),\n            Some((ValueType::U32, Value::Integer(i))) => {", to: "Some((_, Value::Integer(i))) if *i >= 1 => Some(*i as u64),\n            Some((ValueType::U32, Value::Integer(i))) => {", filter: "gguf_draft::control::block_count_stored_as_i32" },
    Mutant { check: "config.geometry GGUF RoPE base required", file: "gate/src/draft/gguf.rs", from: "None => problems.push(format!(\"{} is absent (required)\", escape(&key))),", to: "None => {}", filter: "gguf_draft::control::rope_freq_base_absent" },
    Mutant { check: "config.geometry GGUF RoPE base and epsilon finite positive", file: "gate/src/draft/gguf.rs", from: "Some((ValueType::F32, Value::Float(f))) if f.is_finite() && *f > 0.0 => {}", to: "Some((ValueType::F32, Value::Float(_))) => {}", filter: "gguf_draft::control::rms_epsilon_nan" },
    Mutant { check: "config.geometry GGUF vocab_size limit", file: "gate/src/draft/gguf.rs", from: "Some((ValueType::U32, Value::Integer(i))) if *i > i128::from(MAX_VOCAB) => {", to: "Some((ValueType::U32, Value::Integer(i))) if false => {", filter: "gguf_draft::control::vocab_size_beyond_the_limit" },
    Mutant { check: "config.geometry GGUF token count against vocab_size", file: "gate/src/draft/gguf.rs", from: "(count > vocab).then(|| {", to: "(count > vocab && false).then(|| {", filter: "gguf_draft::control::more_tokens_than_vocab_size" },
    Mutant { check: "config.is_dflash another class named", file: "gate/src/config.rs", from: "if !others.is_empty() && (!declared.is_empty() || model_type == Some(\"dflash\")) {", to: "if false {", filter: "arms::control::model_type_dflash_over_another_class" },
    Mutant { check: "config.is_dflash architectures of the wrong type", file: "gate/src/config.rs", from: "        None | Some(Value::Null) => Vec::new(),", to: "        None | Some(Value::Null) | Some(Value::String(_)) => Vec::new(),", filter: "arms::control::architectures_a_string" },
    Mutant { check: "config.is_dflash dflash_config of the wrong type", file: "gate/src/config.rs", from: ".filter(|v| !v.is_object() && !v.is_null())", to: ".filter(|v| !v.is_object() && !v.is_null() && !v.is_array())", filter: "arms::control::dflash_config_an_array" },
    Mutant { check: "config.geometry rms_norm_eps positive", file: "gate/src/config.rs", from: "rms_norm_eps: optional(at.top(\"rms_norm_eps\"), positive_f32),", to: "rms_norm_eps: Ok(None),", filter: "arms::control::rms_norm_eps_zero" },
    Mutant { check: "config.geometry rope_theta where Transformers reads it", file: "gate/src/config/canonical.rs", from: "if let Some(v) = parameters.and_then(|p| p.get(\"rope_theta\")) {", to: "if let Some(v) = parameters.and_then(|p| p.get(\"rope_theta\")).filter(|_| false) {", filter: "arms::control::rope_theta_negative_in_rope_parameters" },
    Mutant { check: "GGUF RoPE scaling keys kept", file: "gate/src/gguf.rs", from: "    \"rope.scaling.type\",\n", to: "    \"rope.scaling.kind\",\n", filter: "target_forms::gguf_target_scales_rope" },
    Mutant { check: "source.config GGUF RoPE scaling type", file: "gate/src/source/gguf/config.rs", from: "    if gguf_type != package_type {", to: "    if false {", filter: "arms::control::gguf_scales_rope_the_package_does_not" },
    Mutant { check: "source.config GGUF fields no key holds named", file: "gate/src/source/gguf/config.rs", from: ".filter(|f| canonical.fields.contains_key(**f))", to: ".filter(|_| false)", filter: "gguf_source::pass::fields_no_key_holds_are_named_not_compared" },
    Mutant { check: "projections.present attention biases", file: "gate/src/checks/projections.rs", from: "    if inputs.config.attention_bias != Ok(Some(true)) {", to: "    if true {", filter: "arms::control::attention_bias_without_biases" },
    Mutant { check: "config.geometry GGUF two mask ids", file: "gate/src/draft/gguf.rs", from: "if key != &older && !matches!(", to: "if false && !matches!(", filter: "gguf_draft::control::two_mask_ids_disagree" },
    Mutant { check: "config.geometry GGUF target_layers array type", file: "gate/src/draft/gguf.rs", from: "}) if !values.is_empty() && matches!(element, ValueType::I32 | ValueType::U32) => {", to: "}) if !values.is_empty() => {", filter: "gguf_draft::control::target_layers_a_u8_array" },
    Mutant { check: "source.q4_1 GGUF draft element bound", file: "gate/src/draft/gguf_source/bound.rs", from: "    u64::from(!within(err, span.step))", to: "    0", filter: "gguf_source::scalar::control::q6_k_scale_negated" },
    Mutant { check: "source.q4_1 GGUF draft element bound (AVX2)", file: "gate/src/draft/gguf_source/bound.rs", from: "beyond = _mm_sub_epi32(beyond, _mm_castps_si128(_mm_cmpnle_ps(err, step4)));", to: "beyond = _mm_sub_epi32(beyond, _mm_setzero_si128());", filter: "gguf_source::control::q6_k_scale_negated" },
    Mutant { check: "source.q4_1 GGUF draft NaN source value", file: "gate/src/draft/gguf_source/bound.rs", from: "let clamped = if x.is_nan() { x } else { x.max(lo).min(hi) };", to: "let clamped = x.max(lo).min(hi);", filter: "gguf_source::scalar::control::nan_in_the_source" },
    Mutant { check: "source.q4_1 GGUF draft NaN source value (AVX2)", file: "gate/src/draft/gguf_source/bound.rs", from: "let clamped = _mm_blendv_ps(x, lo4, _mm_cmplt_ps(x, lo4));\n                let clamped = _mm_blendv_ps(clamped, hi4, _mm_cmpgt_ps(clamped, hi4));", to: "let clamped = _mm_min_ps(_mm_max_ps(x, lo4), hi4);", filter: "gguf_source::control::nan_in_the_source" },
    Mutant { check: "source.bf16 GGUF draft equal bytes with a NaN", file: "gate/src/draft/gguf_source.rs", from: "if stored == source && no_nan(stored, nan) {", to: "if stored == source {", filter: "gguf_source::control::nan_in_a_bf16_tensor_and_its_source" },
    Mutant { check: "--target a draft GGUF named as a draft", file: "gate/src/target/gguf.rs", from: "    if arch == crate::draft::gguf::ARCHITECTURE", to: "    if false && arch == crate::draft::gguf::ARCHITECTURE", filter: "target_read::a_draft_gguf_given_as_the_target" },
    Mutant { check: "--target a draft folder named as a draft", file: "gate/src/target/folder.rs", from: "if let Ok(draft) = crate::config::DraftConfig::from_json(&bytes) {", to: "if let Some(draft) = None::<crate::config::DraftConfig> {", filter: "target_read::a_draft_folder_given_as_the_target" },
    Mutant { check: "--target a directory holding one GGUF", file: "gate/src/target/mod.rs", from: "if let Some(file) = one_gguf_without_config(path)? {", to: "if let Some(file) = None::<std::path::PathBuf> {", filter: "target_read::a_directory_holding_one_gguf_is_read_as_it" },
    Mutant { check: "source.config GGUF a DFlash field the converter dropped", file: "gate/src/source/gguf/config.rs", from: "        lost(config, \"target_layer_ids\", &key, found, name);", to: "", filter: "gguf_source::control::target_layers_dropped_by_the_converter" },
    Mutant { check: "source.config GGUF the mask id the converter dropped", file: "gate/src/source/gguf/config.rs", from: "    if mask.is_none() {", to: "    if false {", filter: "gguf_source::control::mask_token_id_dropped_by_the_converter" },
    Mutant { check: "inventory.complete has_embed_tokens requires the table", file: "gate/src/checks/inventory.rs", from: "                && !(role == Role::EmbedTokens && config.has_embed_tokens == Ok(Some(true))),", to: "                && true,", filter: "folder::control::has_embed_tokens_without_the_tensor" },
    Mutant { check: "inventory.complete has_own_lm_head requires the head", file: "gate/src/checks/inventory.rs", from: "        optional: !own_head && reduced.is_none(),", to: "        optional: reduced.is_none(),", filter: "folder::control::has_own_lm_head_without_the_tensor" },
    Mutant { check: "config.geometry EAGLE ids are the ids plus one", file: "gate/src/checks/geometry.rs", from: "    if eagle == plus_one {", to: "    if true {", filter: "folder::control::eagle_ids_not_the_ids_plus_one" },
    Mutant { check: "inventory.complete MiMo's attention sinks", file: "gate/src/checks/inventory.rs", from: "    if let Ok(Some(true)) = config.attention_sink_bias {", to: "    if let Ok(Some(false)) = config.attention_sink_bias {", filter: "folder::control::attention_sink_missing" },
    Mutant { check: "inventory.explained an attention sink without the flag", file: "gate/src/checks/inventory.rs", from: "            && config.attention_sink_bias != Ok(Some(true))", to: "            && false", filter: "folder::control::attention_sinks_without_the_flag" },
    Mutant { check: "config.geometry GGUF DFlash2 keys all or none", file: "gate/src/draft/gguf.rs", from: "    if stated.len() < keys.len() {", to: "    if false {", filter: "gguf_draft::control::dflash2_key_missing" },
    Mutant { check: "config.geometry GGUF DFlash2 selector top k", file: "gate/src/draft/gguf.rs", from: "    if top_k > bound {", to: "    if false {", filter: "gguf_draft::control::dflash2_selector_top_k_beyond_the_vocabulary" },
    Mutant { check: "config.geometry GGUF DFlash2 group divides hidden", file: "gate/src/draft/gguf.rs", from: "    if let Some(h) = hidden.filter(|h| h % group != 0) {", to: "    if let Some(h) = hidden.filter(|_| false) {", filter: "gguf_draft::control::dflash2_group_not_dividing_hidden" },
    Mutant { check: "inventory GGUF DFlash2 read as the second family", file: "gate/src/draft/gguf.rs", from: "            dflash2,\n        })", to: "            dflash2: dflash2.and(None),\n        })", filter: "gguf_draft::pass::dflash2_f16" },
    Mutant { check: "inventory GGUF DFlash2 llama.cpp names", file: "gate/src/family/gguf_names.rs", from: "    (\"attn_conv_base\", \"attention_conv.base_kernel\"),", to: "    (\"attn_conv_base_\", \"attention_conv.base_kernel\"),", filter: "gguf_draft::pass::dflash2_f16" },
    Mutant { check: "source.config GGUF DFlash2 keys the converter dropped", file: "gate/src/source/gguf/config.rs", from: "            lost(config, field, &escape(&key), &mut found, name);", to: "            let _ = (field, &key);", filter: "arms::gguf::control::dflash2_package_against_a_first_family_gguf" },
    Mutant { check: "loaders: the gate stays stricter than every engine (a table row made a refusal of a faithful draft)", file: "gate/src/loaders/tables/vllm.rs", from: "            when: When::ModelPrefixed,\n            outcome: NotItsForm,", to: "            when: When::ModelPrefixed,\n            outcome: Refuses,", filter: "arms::folder::pass::model_prefix" },
    Mutant { check: "loaders: a fact (fc stored as a quantized set)", file: "gate/src/loaders/when.rs", from: "                        .is_some_and(|rest| rest != \"weight\" && rest != \"bias\")", to: "                        .is_some_and(|rest| rest == \"weight\")", filter: "loaders::sglang::packed_fc_skipped" },
    Mutant { check: "loaders: an MLX folder is not vLLM's form (were it a refusal, the gate would pass what vLLM refuses)", file: "gate/src/loaders/tables/vllm.rs", from: "            when: When::QuantizedMlx,\n            outcome: NotItsForm,", to: "            when: When::QuantizedMlx,\n            outcome: Refuses,", filter: "arms::folder::pass::mlx_affine_4_group_64" },
    Mutant { check: "loaders: a fact (fc.weight stored packed)", file: "gate/src/loaders/when.rs", from: "name == \"fc.weight\" && dtype.starts_with(['U', 'I'])", to: "name == \"fc.weight\" && dtype.starts_with('X')", filter: "loaders::sglang::packed_fc_shape" },
    Mutant { check: "loaders: the first rule that stops the engine is its outcome", file: "gate/src/loaders/mod.rs", from: "            (Some(first), _, _) => first.outcome,", to: "            (Some(_), _, _) => LoaderOutcome::LoadsWrongly,", filter: "loaders::vllm::mask_token_id_required::meets" },
    Mutant { check: "loaders: a fact not decided is never loads", file: "gate/src/loaders/mod.rs", from: "            (None, false, _) => LoaderOutcome::Undecided,", to: "            (None, false, _) => LoaderOutcome::Loads,", filter: "loaders::asked::cannot_tell_is_undecided" },
    Mutant { check: "loaders: a form the engine does not read", file: "gate/src/loaders/mod.rs", from: "        if !self.reads.contains(&shape) {", to: "        if false {", filter: "loaders::faithful_gguf_loads_in_llama_cpp_alone" },
    Mutant { check: "loaders: a pairing fact with --target", file: "gate/src/loaders/when.rs", from: "            Some(_) => self.failed(id, found),", to: "            Some(_) => Met::No,", filter: "loaders::vllm::taps_beyond_the_target::meets" },
    Mutant { check: "loader.NAME fails what the engine does not serve right", file: "gate/src/loaders/mod.rs", from: "                outcome => Check::fail(id, format!(\"{who} {outcome}: {}{more}\", said(2))),", to: "                outcome => Check::pass(id, format!(\"{who} {outcome}: {}{more}\", said(2))),", filter: "loaders::asked::loads_wrongly_fails" },
    Mutant { check: "config.mask_token GGUF mask under the older key only", file: "gate/src/draft/gguf.rs", from: "    if at != crate::gguf::MASK_KEY {", to: "    if false {", filter: "arms::gguf_draft::control::mask_under_the_older_key_only" },
    Mutant { check: "config.geometry GGUF DFlash2 selector lattice within the embedding", file: "gate/src/draft/gguf.rs", from: "    if let Some(h) = hidden.filter(|h| *h < lattice) {", to: "    if let Some(h) = hidden.filter(|_| false) {", filter: "arms::gguf_draft::control::dflash2_selector_lattice_wider_than_the_embedding" },
    Mutant { check: "inventory GGUF own embedding held to the token count", file: "gate/src/draft/gguf.rs", from: "                vocab: meta.vocab.or_else(|| gguf.token_count()),", to: "                vocab: meta.vocab,", filter: "arms::gguf_draft::control::own_embedding_beside_fewer_tokens" },
    Mutant { check: "loaders: a fact held to one form (the taps absent from a speculators config)", file: "gate/src/loaders/when.rs", from: "            When::TargetLayerIdsAbsentIn(shape) if self.shape() != shape => Met::No,", to: "            When::TargetLayerIdsAbsentIn(shape) if self.shape() == shape => Met::No,", filter: "loaders::vllm::aux_hidden_state_layer_ids_required::meets" },
    Mutant { check: "loaders: a fact (a GGUF selector without the DFlash2 keys)", file: "gate/src/loaders/when.rs", from: "            When::SelectorWithoutKeys => self.unexplained(|name| name == \"selector_hidden.weight\"),", to: "            When::SelectorWithoutKeys => self.unexplained(|name| name == \"selector_hidden\"),", filter: "loaders::llama.cpp::second_family_metadata::meets" },
    Mutant { check: "hub cache blobs a link out of the repository", file: "gate/src/files.rs", from: "        stays_in(&home, &blobs)?;\n", to: "", filter: "folder::control::cache_blobs_leave_the_repository" },
    Mutant { check: "hub cache snapshots a link out of the repository", file: "gate/src/files.rs", from: "        stays_in(&home, &repo.join(\"snapshots\"))?;\n", to: "", filter: "folder::control::cache_snapshots_leave_the_repository" },
    Mutant { check: "hub cache snapshot a link out of the repository", file: "gate/src/files.rs", from: "        stays_in(&home, dir)?;\n", to: "", filter: "folder::control::cache_snapshot_leaves_the_repository" },
    Mutant { check: "hub cache refs a link out of the repository", file: "gate/src/hub.rs", from: "    files::stays_in(&home, &repo.join(\"refs\"))?;\n", to: "", filter: "folder::control::cache_refs_leave_the_repository" },
    Mutant { check: "hub cache ref a link out of the repository", file: "gate/src/hub.rs", from: "    files::stays_in(&home, &reference)?;\n", to: "", filter: "folder::control::cache_ref_leaves_the_repository" },
    Mutant { check: "--all reads a config under the link rule", file: "gate/src/bin/dflash-gate/tree.rs", from: "    let inside = dflash_gate::__private::files::Inside::package(dir).ok()?;\n    let file = inside.open(&dir.join(CONFIG_FILE)).ok()?;", to: "    let file = dflash_gate::__private::files::open(&dir.join(CONFIG_FILE)).ok()?;", filter: "cli::all_reads_nothing_a_cache_repositorys_link_out_reaches" },
    Mutant { check: "container.parses a release's config without weights is a folder", file: "gate/src/package.rs", from: "    if unweighted && folder::released_as_a_folder(dir, &config) {", to: "    if unweighted && false {", filter: "folder::control::cache_download_interrupted" },
    Mutant { check: "container.parses an unfinished hub download named", file: "gate/src/hub.rs", from: ".filter(|n| n.as_encoded_bytes().ends_with(INCOMPLETE.as_bytes()))", to: ".filter(|_| false)", filter: "folder::control::cache_download_interrupted" },
    Mutant { check: "container.parses a Transformers config without weights", file: "gate/src/draft/folder.rs", from: "            if top.contains_key(\"transformers_version\") || top.contains_key(\"auto_map\")", to: "            if false", filter: "folder::control::weights_missing_beside_a_transformers_config" },
    Mutant { check: "container.parses a folder with no weights FAILs", file: "gate/src/draft/folder.rs", from: "            | PackageError::Missing { .. }),", to: "),", filter: "folder::control::weights_missing_beside_a_transformers_config" },
    Mutant { check: "target.vocab a converted GGUF's token count", file: "gate/src/target/mod.rs", from: "match (m.vocab, gguf.token_count()) {", to: "match (m.vocab, gguf.token_count().filter(|_| false)) {", filter: "target_gguf_draft::config_only_target_of_another_vocabulary" },
    Mutant { check: "a folder holding a draft directory refused", file: "gate/src/package.rs", from: "    drafts_under(dir, &names, inside)?;\n", to: "", filter: "gguf_draft::control::directory_holding_a_draft_folder_too" },
    Mutant { check: "a folder holding another model's directory gated", file: "gate/src/package.rs", from: ".is_ok_and(|bytes| !crate::config::reads_as_a_draft(&bytes));", to: ".is_ok_and(|_| false);", filter: "gguf_draft::pass::directory_holding_one_beside_another_models_folder" },
    Mutant { check: "several GGUFs named for what each is", file: "gate/src/package.rs", from: "        Some(a) if a == ARCHITECTURE => (Some(true), \"a DFlash draft\".to_owned()),", to: "        Some(a) if a.is_empty() => (Some(true), \"a DFlash draft\".to_owned()),", filter: "gguf_draft::control::directory_holding_a_draft_and_its_target" },
    Mutant { check: "manifest.sha256 (hub cache digests)", file: "gate/src/manifest/cache.rs", from: "if &hex != want {", to: "if false {", filter: "hostile::a_hub_cache_blob_changed_in_place" },
    Mutant { check: "manifest.sha256 (git blob hash)", file: "gate/src/manifest/cache.rs", from: "hasher.update(format!(\"blob {}\\0\", file.len()).as_bytes());", to: "hasher.update(format!(\"blob {}\", file.len()).as_bytes());", filter: "hostile::a_hub_cache_download_passes" },
    Mutant { check: "manifest.sha256 (hub cache unvouched file)", file: "gate/src/manifest/cache.rs", from: "Named::Neither(\"a file of its own, not a link to a blob\")", to: "Named::Sha256(String::new())", filter: "hostile::a_hub_cache_file_no_digest_names" },
    Mutant { check: "manifest.sha256 (GGUF)", file: "gate/src/package.rs", from: "let check = crate::manifest::check(package, &read)?;", to: "let check = Check::pass(crate::manifest::MANIFEST, \"\");", filter: "cli::manifest_on_a_gguf" },
    Mutant { check: "fix: config.geometry ids missing", file: "gate/src/checks/geometry.rs", from: "return match missing_ids_fix(c, config_only) {", to: "return match None::<String> {", filter: "folder::control::target_layer_ids_absent" },
    Mutant { check: "fix: source.config raw ids", file: "gate/src/source/gguf/config.rs", from: "        found.fix = Some(", to: "        let _unused = Some::<String>(", filter: "arms::control::gguf_target_layers_raw_ids" },
    Mutant { check: "fix: a draft given as --target", file: "gate/src/error.rs", from: "            PackageError::DraftAsTarget { .. } => Some(DRAFT_AS_TARGET_FIX),", to: "            PackageError::DraftAsTarget { .. } => None,", filter: "target_read::a_draft_folder_given_as_the_target" },
    Mutant { check: "fix: a download not finished", file: "gate/src/draft/folder.rs", from: "Some((_, fix)) => Check::fail(PARSES, why).with_fix(fix),", to: "Some(_) => Check::fail(PARSES, why),", filter: "folder::control::cache_download_interrupted" },
    Mutant { check: "target.depth GGUF tap at the target's last layer", file: "gate/src/target/checks.rs", from: "    if !taps.contains(&(layers - 1)) {", to: "    if true {", filter: "target_gguf_draft::deepest_tap_is_the_last_layer" },
    Mutant { check: "target.depth GGUF target's architecture records the last layer", file: "gate/src/target/mod.rs", from: "Architecture::Gguf(a) => Some(RECORDS_LAST_LAYER_GGUF.contains(&a.as_str())),", to: "Architecture::Gguf(_) => Some(true),", filter: "target_gguf_draft::deepest_tap_is_the_last_layer" },
    Mutant { check: "target.depth config target's architecture records the last layer", file: "gate/src/target/mod.rs", from: "Some(RECORDS_LAST_LAYER_HF.contains(&name.as_str()))", to: "Some(!RECORDS_LAST_LAYER_HF.contains(&name.as_str()))", filter: "target_gguf_draft::deepest_tap_is_the_last_layer_of_a" },
    Mutant { check: "target.depth config target's text_config architectures", file: "gate/src/target/folder.rs", from: "        .and_then(|t| t.get(\"architectures\"));", to: "        .and_then(|t| t.get(\"architectures_unread\"));", filter: "target_gguf_draft::deepest_tap_is_the_last_layer_of_a_nested_mimo2" },
    Mutant { check: "loaders: a fact (a GGUF tap at a target's unrecorded last layer)", file: "gate/src/loaders/when.rs", from: "                    if e.records_last_layer == Some(false)", to: "                    if e.records_last_layer == Some(true)", filter: "loaders::llama.cpp::tap_at_the_targets_last_layer::meets" },
];
/// `cargo xtask mutants [--jobs N] [--changed-since REV [--sample N] [--seed S]] [WORD...]`: every
/// row, or only the rows whose check or filter contains one of the words (to see one check go red
/// without breaking all the others). With `--jobs N`, N copies of the tree each take the next row as
/// they finish one: a row's rebuild is a chain of crates that keeps a second core only partly busy.
///
/// With `--changed-since REV` (CI's run of a submission), only the rows whose line sits in a
/// function (an item, as git's function context finds one) that changed since REV, or whose own
/// line of the table did, and `--sample N` rows of the others drawn by `--seed S`: every
/// row costs a rebuild, and all of them take a quarter of an hour, which a scheduled run spends
/// instead. Before any choice, every row of the table is held to its file: a row gone stale fails
/// the task, chosen or not, so a sample cannot hide it.
pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let options = Options::parse(args)?;
    let root = crate::root();
    let stale = stale_rows(MUTANTS, |file| {
        std::fs::read_to_string(root.join(file)).ok()
    });
    if !stale.is_empty() {
        for m in &stale {
            println!(
                "STALE     {:<24} {}: the line to break is not there exactly once: {:?}",
                m.check, m.file, m.from
            );
        }
        return Err(format!(
            "{} stale mutant row(s): each names a line its file no longer holds exactly once; update the row in xtask/src/mutants.rs",
            stale.len()
        ));
    }
    let worded: Vec<usize> = (0..MUTANTS.len())
        .filter(|&i| {
            let m = &MUTANTS[i];
            options.words.is_empty()
                || options
                    .words
                    .iter()
                    .any(|w| m.check.contains(w.as_str()) || m.filter.contains(w.as_str()))
        })
        .collect();
    let chosen: Vec<&Mutant> = match &options.changed_since {
        None => worded.iter().map(|&i| &MUTANTS[i]).collect(),
        Some(base) => {
            let changed = changed_files(&root, base)?
                .into_iter()
                .map(|file| touched(&root, base, file))
                .collect::<Result<Vec<_>, _>>()?;
            let new_rows = if changed.iter().any(|c| c.file == TABLE_FILE) {
                match table_at(&root, base) {
                    Some(before) => rows_not_in(include_str!("mutants.rs"), &before)?,
                    // No table at the base: every row is new.
                    None => (0..MUTANTS.len()).collect(),
                }
            } else {
                Vec::new()
            };
            let selection = select(
                options.rows,
                MUTANTS,
                &worded,
                &changed,
                &new_rows,
                options.sample,
                options.seed,
            );
            print!("{}", selection.describe(MUTANTS, base, options.seed));
            selection.rows().map(|i| &MUTANTS[i]).collect()
        }
    };
    let cargo = crate::cargo();
    if chosen.is_empty() {
        println!("0 rows chosen: nothing to build");
        return Ok(ExitCode::SUCCESS);
    }
    let trees = (0..options.jobs)
        .map(|j| copy_tree(&root, j).map(TreeCopy::new))
        .collect::<Result<Vec<_>, _>>()?;
    // Each copy is built unmutated first, outside any row's time limit: a cold build that outlasted
    // the limit would otherwise be counted a hang, and so red, whatever the mutant did.
    std::thread::scope(|scope| {
        let builds: Vec<_> = trees
            .iter()
            .map(|tree| scope.spawn(|| warm_one(&cargo, &tree.path, Build::Quick)))
            .collect();
        builds.into_iter().try_for_each(|b| {
            b.join()
                .unwrap_or_else(|_| Err("a warm-up build panicked".into()))
        })
    })?;
    let mut filters: Vec<&str> = chosen.iter().map(|m| m.filter).collect();
    filters.sort_unstable();
    filters.dedup();
    let quick: std::collections::HashSet<&str> = share(&trees, &filters, |tree, f| {
        Ok(baseline(&cargo, tree, f)?.then_some(*f))
    })?
    .into_iter()
    .flatten()
    .collect();
    let red = share(&trees, &chosen, |tree, m| {
        row(&cargo, tree, m, quick.contains(m.filter))
    })?;
    let killed = red.iter().filter(|&&r| r).count();
    let survived = red.len() - killed;
    println!("{killed} passed, {survived} failed");
    Ok(if survived == 0 && killed == chosen.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The table's own file, as git names it: a row whose line here changed is chosen like a row whose
/// file did (a row added for an unchanged line must be seen KILLED too).
const TABLE_FILE: &str = "xtask/src/mutants.rs";

/// The task's options: `--jobs N`, `--changed-since REV`, `--sample N`, `--seed S`, and the words left.
#[derive(Debug, PartialEq)]
struct Options {
    jobs: usize,
    changed_since: Option<String>,
    sample: usize,
    /// `--rows N`: the sample shrinks so the run takes at most N rows (never fewer than the changed).
    rows: usize,
    seed: u64,
    words: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            jobs: 1,
            changed_since: None,
            sample: 0,
            rows: usize::MAX,
            seed: 0,
            words: Vec::new(),
        };
        let (mut sample, mut seed) = (None, None);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or(format!("{a} needs a value"));
            match a.as_str() {
                "--jobs" => {
                    let n = value()?;
                    options.jobs = n
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=8).contains(n))
                        .ok_or(format!("--jobs {n}: not a whole number from 1 to 8"))?;
                }
                "--changed-since" => options.changed_since = Some(value()?.clone()),
                "--sample" => {
                    let n = value()?;
                    sample = Some(
                        n.parse::<usize>()
                            .map_err(|_| format!("--sample {n}: not a whole number"))?,
                    );
                }
                "--rows" => {
                    let n = value()?;
                    options.rows = n
                        .parse::<usize>()
                        .map_err(|_| format!("--rows {n}: not a whole number"))?;
                }
                "--seed" => {
                    let s = value()?;
                    seed = Some(
                        s.parse::<u64>()
                            .map_err(|_| format!("--seed {s}: not a whole number below 2^64"))?,
                    );
                }
                _ => options.words.push(a.clone()),
            }
        }
        // A sample is drawn only beside the changed rows: alone it would be a silent partial run.
        if options.changed_since.is_none() && (sample.is_some() || seed.is_some()) {
            return Err("--sample and --seed draw from the rows --changed-since REV leaves out; give it too".to_owned());
        }
        options.sample = sample.unwrap_or(0);
        options.seed = seed.unwrap_or(0);
        Ok(options)
    }
}

/// The files that differ between `base` and the working tree, as git names them (a rename as both
/// names), or an error naming `base`.
fn changed_files(root: &Path, base: &str) -> Result<Vec<String>, String> {
    let names = git_diff(root, base, &["--name-only", "-z", base, "--"])?;
    Ok(names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect())
}

/// A file that differs from the base, and the text, as the working tree holds it, of each item the
/// change touches: a row is chosen when its line sits in one. A file's rows were all chosen once,
/// and a one-line change to a large file re-ran thirty rows far from it, a quarter of CI's time.
#[derive(Debug)]
struct Changed {
    file: String,
    touched: Vec<String>,
}

impl Changed {
    fn touches(&self, line: &str) -> bool {
        self.touched.iter().any(|t| t.contains(line))
    }
}

/// `file`'s changes since `base`, each hunk widened to the whole items around it
/// (`--function-context`: from the item line before the change to the next one; an indented method
/// widens to its `impl` or `mod`), so a row in a changed function is chosen wherever in it the change
/// was, and a new file is touched whole.
fn touched(root: &Path, base: &str, file: String) -> Result<Changed, String> {
    let args = [
        "--no-color",
        "--no-ext-diff",
        "--function-context",
        base,
        "--",
        &file,
    ];
    let diff = git_diff(root, base, &args)?;
    Ok(Changed {
        touched: hunks_after(&String::from_utf8_lossy(&diff)),
        file,
    })
}

/// `git diff --no-renames ARGS`' output, or an error naming `base` and what git said.
fn git_diff(root: &Path, base: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .args(["diff", "--no-renames"])
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("git diff {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "--changed-since {base}: git diff {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Each hunk of a unified diff of one file, as the file holds it after the change (its context and
/// added lines, without their markers).
fn hunks_after(diff: &str) -> Vec<String> {
    let mut hunks: Vec<String> = Vec::new();
    let mut in_hunk = false;
    for line in diff.lines() {
        if line.starts_with("@@") {
            hunks.push(String::new());
            in_hunk = true;
            continue;
        }
        let (Some(hunk), true) = (hunks.last_mut(), in_hunk) else {
            continue;
        };
        if let Some(kept) = line.strip_prefix(' ').or_else(|| line.strip_prefix('+')) {
            hunk.push_str(kept);
            hunk.push('\n');
        } else if line.starts_with("diff ") {
            in_hunk = false;
        }
    }
    hunks
}

/// The table's file at `base`, if it was there.
fn table_at(root: &Path, base: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["show", &format!("{base}:{TABLE_FILE}")])
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The table's rows, one source line each, in order: `source` is this file's text.
fn row_lines(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter(|l| l.starts_with("    Mutant {"))
        .collect()
}

/// The indices of the rows of `source` (this file's text) whose line `before` (the file at the
/// base) does not hold: the rows added or edited since.
fn rows_not_in(source: &str, before: &str) -> Result<Vec<usize>, String> {
    let lines = row_lines(source);
    if lines.len() != MUTANTS.len() {
        return Err(format!(
            "{TABLE_FILE} has {} row lines for {} rows: a row spans lines, and its change could not be told",
            lines.len(),
            MUTANTS.len()
        ));
    }
    let old: std::collections::HashSet<&str> = row_lines(before).into_iter().collect();
    Ok((0..lines.len())
        .filter(|&i| !old.contains(lines[i]))
        .collect())
}

/// The rows a `--changed-since` run takes, by index into the table.
#[derive(Debug, PartialEq)]
struct Selection {
    /// Every row (of those the words leave) whose line a change touched or whose line of the table
    /// is new.
    changed: Vec<usize>,
    /// The seeded sample of the rest, in table order.
    sampled: Vec<usize>,
    /// How many rows the sample was drawn from.
    drawn_from: usize,
}

impl Selection {
    fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.changed.iter().chain(&self.sampled).copied()
    }

    /// What was chosen and why, a row a line, so a run can be read and repeated.
    fn describe(&self, table: &[Mutant], base: &str, seed: u64) -> String {
        let mut out = format!(
            "{} row(s) whose function or row changed since {base}; {} sampled by seed {seed} from the {} other(s)\n",
            self.changed.len(),
            self.sampled.len(),
            self.drawn_from
        );
        for (why, rows) in [("CHANGED", &self.changed), ("SAMPLED", &self.sampled)] {
            for &i in rows {
                let m = &table[i];
                out.push_str(&format!("{why}   #{i:<4} {} ({})\n", m.check, m.file));
            }
        }
        out
    }
}

/// Chooses among `candidates` (indices into `table`): every row whose line a change in `changed`
/// touched or whose index is in `new_rows`, and `sample` of the others drawn by `seed` (all of them
/// when fewer), cut so that at most `rows` are chosen in all: a large submission's own rows already
/// take CI's time, and the sample's purpose (the table covered over many runs) is served by the
/// small ones and the scheduled run of every row. The changed rows are never cut. A changed file
/// that no row names chooses nothing, and no change still draws the sample.
fn select(
    rows: usize,
    table: &[Mutant],
    candidates: &[usize],
    changed: &[Changed],
    new_rows: &[usize],
    sample: usize,
    seed: u64,
) -> Selection {
    let (changed_rows, mut others): (Vec<usize>, Vec<usize>) = candidates.iter().partition(|&&i| {
        let m = &table[i];
        changed
            .iter()
            .any(|c| c.file == m.file && c.touches(m.from))
            || new_rows.contains(&i)
    });
    let drawn_from = others.len();
    // A partial Fisher-Yates shuffle: the first `take` places hold a uniform draw.
    let take = sample
        .min(others.len())
        .min(rows.saturating_sub(changed_rows.len()));
    let mut state = seed;
    for k in 0..take {
        let j = k + (splitmix64(&mut state) % (others.len() - k) as u64) as usize;
        others.swap(k, j);
    }
    others.truncate(take);
    others.sort_unstable();
    Selection {
        changed: changed_rows,
        sampled: others,
        drawn_from,
    }
}

/// SplitMix64: a small generator whose stream is fixed by its seed on every platform and toolchain,
/// so a seed printed by one run chooses the same rows in another.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The rows of `table` whose line is not in their file's code (before its unit tests) exactly once;
/// `read` gives a file's text by its path from the root, `None` when it cannot be read.
fn stale_rows(table: &[Mutant], read: impl Fn(&str) -> Option<String>) -> Vec<&Mutant> {
    let mut texts = std::collections::HashMap::new();
    table
        .iter()
        .filter(|m| {
            let text = texts.entry(m.file).or_insert_with(|| read(m.file));
            text.as_deref()
                .is_none_or(|t| code_of(t).matches(m.from).count() != 1)
        })
        .collect()
}

/// A file's code under test: its text before its unit tests, whose own copies of a line are never
/// mutated.
fn code_of(text: &str) -> &str {
    &text[..text.find(TESTS_START).unwrap_or(text.len())]
}

/// Where a file's unit tests begin.
const TESTS_START: &str = "\n#[cfg(test)]\nmod tests";

/// `f` over every item, the copies each taking the next item as they finish one; the results in no
/// particular order, or the first error.
fn share<T: Sync, R: Send>(
    trees: &[TreeCopy],
    items: &[T],
    f: impl Fn(&TreeCopy, &T) -> Result<R, String> + Sync,
) -> Result<Vec<R>, String> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = trees
            .iter()
            .map(|tree| {
                let (f, next) = (&f, &next);
                scope.spawn(move || -> Result<Vec<R>, String> {
                    let mut out = Vec::new();
                    while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                        out.push(f(tree, item)?);
                    }
                    Ok(out)
                })
            })
            .collect();
        let mut all = Vec::new();
        for w in workers {
            all.extend(
                w.join()
                    .unwrap_or_else(|_| Err("a mutant worker panicked".into()))?,
            );
        }
        Ok(all)
    })
}

/// Whether `filter`'s rows may use the quick build: the unmutated copy passes it there within
/// [`QUICK_BASELINE`]. A filter red in both builds is an error: no row of it could prove anything.
fn baseline(cargo: &str, tree: &TreeCopy, filter: &str) -> Result<bool, String> {
    let (quick, said) = baseline_decision(filter, |build, limit| {
        if build == Build::Optimised {
            tree.warm_optimised(cargo)?;
        }
        run_suite(cargo, &tree.path, filter, build, limit)
    })?;
    if let Some(said) = said {
        println!("{said}");
    }
    Ok(quick)
}

/// [`baseline`]'s decision over the suite runs `run` reports (a build and its time limit in, how
/// the run ended out), with the line it prints when a filter moves to the optimised build.
fn baseline_decision(
    filter: &str,
    mut run: impl FnMut(Build, Duration) -> Result<Suite, String>,
) -> Result<(bool, Option<String>), String> {
    match run(Build::Quick, QUICK_BASELINE)? {
        Suite::Green => Ok((true, None)),
        Suite::Hung => Ok((
            false,
            Some(format!(
                "OPTIMISED {filter}: slower than {QUICK_BASELINE:?} unoptimised"
            )),
        )),
        Suite::Red => match run(Build::Optimised, RUN_LIMIT)? {
            Suite::Green => Ok((
                false,
                Some(format!(
                    "OPTIMISED {filter}: red unoptimised, green optimised"
                )),
            )),
            _ => Err(format!(
                "the unmutated suite is not green on {filter}: no row of it proves anything"
            )),
        },
    }
}

/// How a mutated row's suite run ends: in the quick build when its filter may use it, run again
/// optimised when that outlasts [`QUICK_LIMIT`] (a slow quick build is no verdict on the mutant);
/// else optimised.
fn row_outcome(
    quick: bool,
    mut run: impl FnMut(Build, Duration) -> Result<Suite, String>,
) -> Result<Suite, String> {
    if quick {
        match run(Build::Quick, QUICK_LIMIT)? {
            Suite::Hung => run(Build::Optimised, RUN_LIMIT),
            other => Ok(other),
        }
    } else {
        run(Build::Optimised, RUN_LIMIT)
    }
}

/// Kills `child` and, on Unix, every process of the group it leads.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.kill();
}

/// One copy of the tree, and its optimised build's outcome once a run has needed it.
struct TreeCopy {
    path: PathBuf,
    optimised: std::sync::OnceLock<Result<(), String>>,
}

impl TreeCopy {
    fn new(path: PathBuf) -> TreeCopy {
        TreeCopy {
            path,
            optimised: std::sync::OnceLock::new(),
        }
    }

    /// Builds the copy optimised the first time it is asked (the copy must be unmutated then); the
    /// same outcome every later time.
    fn warm_optimised(&self, cargo: &str) -> Result<(), String> {
        self.optimised_once(|| warm_one(cargo, &self.path, Build::Optimised))
    }

    /// [`TreeCopy::warm_optimised`] with the build given: `build` runs at the first call only.
    fn optimised_once(&self, build: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        self.optimised.get_or_init(build).clone()
    }
}

/// Builds the unmutated suite in `tree` as `build` builds it; a tree that does not build is an
/// error, not a row.
fn warm_one(cargo: &str, tree: &Path, build: Build) -> Result<(), String> {
    let out = Command::new(cargo)
        .args(build.config())
        .args([
            "test",
            "--quiet",
            "--no-run",
            "--package",
            "dflash-gate",
            "--test",
            "suite",
        ])
        .current_dir(tree)
        .env("CARGO_TARGET_DIR", tree.join("target"))
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cargo} test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the unmutated copy {} does not build ({build:?}):\n{}",
            tree.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// One row in `tree`: the line broken, the suite run, the line restored. Whether the suite went red.
fn row(cargo: &str, tree: &TreeCopy, m: &Mutant, quick: bool) -> Result<bool, String> {
    let path = tree.path.join(m.file);
    let original = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", m.file))?;
    // Only the code under test is mutated, never a test's own reference copy of a line.
    let (code, tests) = original.split_at(code_of(&original).len());
    if code.matches(m.from).count() != 1 {
        println!(
            "STALE     {:<24} {}: the line to break is not there exactly once",
            m.check, m.file
        );
        return Ok(false);
    }
    let mutated = format!("{}{tests}", code.replacen(m.from, m.to, 1));
    if !quick {
        tree.warm_optimised(cargo)?;
    }
    std::fs::write(&path, &mutated).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let outcome = row_outcome(quick, |build, limit| {
        if build == Build::Optimised && tree.optimised.get().is_none() {
            // A quick row past its limit, in a copy not yet built optimised: built so unmutated
            // first, outside the limit, as every build a row is timed on.
            std::fs::write(&path, &original).map_err(|e| format!("restoring {}: {e}", m.file))?;
            tree.warm_optimised(cargo)?;
            std::fs::write(&path, &mutated).map_err(|e| e.to_string())?;
        }
        run_suite(cargo, &tree.path, m.filter, build, limit)
    });
    std::fs::write(&path, &original).map_err(|e| format!("restoring {}: {e}", m.file))?;
    let took = started.elapsed().as_secs_f64();
    Ok(match outcome? {
        Suite::Red => {
            println!("KILLED    {:<24} {} red ({took:.0} s)", m.check, m.filter);
            true
        }
        Suite::Hung => {
            println!(
                "KILLED    {:<24} {} hung past {RUN_LIMIT:?}: killed (a hang is red)",
                m.check, m.filter
            );
            true
        }
        Suite::Green => {
            println!(
                "SURVIVED  {:<24} {} stayed green (or did not build) ({took:.0} s)",
                m.check, m.filter
            );
            false
        }
    })
}

/// How one mutant's suite run ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Suite {
    /// The suite ran and failed, or died by a signal (a crash is red too).
    Red,
    /// Killed at the wall-clock limit.
    Hung,
    /// Passed, or never ran (a mutant that does not build proves nothing).
    Green,
}

fn run_suite(
    cargo: &str,
    tree: &Path,
    filter: &str,
    build: Build,
    limit: Duration,
) -> Result<Suite, String> {
    let mut command = Command::new(cargo);
    // Cargo and the suite binary it starts in a process group of their own, so that a run past its
    // limit is killed whole: killing cargo alone left the suite running, and the pipe open until it
    // ended.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .args(build.config())
        .args([
            "test",
            "--quiet",
            "--package",
            "dflash-gate",
            "--test",
            "suite",
            "--",
            filter,
        ])
        .current_dir(tree)
        .env("CARGO_TARGET_DIR", tree.join("target"))
        // No debug info in the copy's builds: nothing reads it there, and emitting it is a quarter
        // of each row's rebuild (measured in one run against rows built with it).
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{cargo} test: {e}"))?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
        }
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if start.elapsed() > limit {
            kill_group(&mut child);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = reader.join().unwrap_or_default();
    Ok(match status {
        None => Suite::Hung,
        Some(_) if text.contains("test result: FAILED") => Suite::Red,
        // The suite binary died by a signal (cargo reports it and exits 101): the mutant crashed it.
        Some(s) if !s.success() && text.contains("running ") => Suite::Red,
        Some(_) => Suite::Green,
    })
}

/// Refreshes `target/mutants/tree` (or `tree-N`, the N-th job's copy) from the working tree (every file git tracks or would track),
/// rewriting only files whose contents differ so the copy's builds stay incremental.
fn copy_tree(root: &Path, index: usize) -> Result<PathBuf, String> {
    let tree = match index {
        0 => root.join("target/mutants/tree"),
        j => root.join(format!("target/mutants/tree-{j}")),
    };
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    if !listed.status.success() {
        return Err("git ls-files failed: the tree to copy is not a git checkout".to_owned());
    }
    let mut kept = std::collections::HashSet::new();
    for name in listed.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).map_err(|e| e.to_string())?;
        let from = root.join(name);
        let Ok(bytes) = std::fs::read(&from) else {
            continue; // listed but deleted in the working tree
        };
        kept.insert(PathBuf::from(name));
        let to = tree.join(name);
        if std::fs::read(&to).is_ok_and(|old| old == bytes) {
            continue;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&to, &bytes).map_err(|e| format!("{}: {e}", to.display()))?;
    }
    // A file the working tree no longer has goes from the copy too: a module moved into a folder
    // left behind would make the copy ambiguous, and no row of it would build.
    remove_unlisted(&tree, Path::new(""), &kept)?;
    Ok(tree)
}

/// Removes every file under `tree/dir` not in `kept` (paths relative to `tree`), skipping the copy's
/// own cargo `target` directory.
fn remove_unlisted(
    tree: &Path,
    dir: &Path,
    kept: &std::collections::HashSet<PathBuf>,
) -> Result<(), String> {
    let here = tree.join(dir);
    let entries = std::fs::read_dir(&here).map_err(|e| format!("{}: {e}", here.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", here.display()))?;
        let relative = dir.join(entry.file_name());
        if relative == Path::new("target") {
            continue;
        }
        let kind = entry
            .file_type()
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        if kind.is_dir() {
            remove_unlisted(tree, &relative, kept)?;
        } else if !kept.contains(&relative) {
            std::fs::remove_file(entry.path())
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a scripted runner was asked to run, in order.
    type Asked = std::rc::Rc<std::cell::RefCell<Vec<(Build, Duration)>>>;

    /// A runner that answers each run from `script` in turn and records what it was asked to run.
    fn scripted(
        script: Vec<Suite>,
    ) -> (impl FnMut(Build, Duration) -> Result<Suite, String>, Asked) {
        let asked = Asked::default();
        let log = asked.clone();
        let mut answers = script.into_iter();
        let run = move |build, limit| {
            log.borrow_mut().push((build, limit));
            answers
                .next()
                .ok_or_else(|| "asked for one run too many".to_owned())
        };
        (run, asked)
    }

    /// Every row's line is in its file's code exactly once, as a row requires: a line changed by
    /// an edit is found here, by `cargo test`, not minutes into the task as a STALE row.
    #[test]
    fn every_rows_line_is_in_its_file_exactly_once() {
        let root = crate::root();
        let stale: Vec<String> = stale_rows(MUTANTS, |file| {
            std::fs::read_to_string(root.join(file)).ok()
        })
        .iter()
        .map(|m| format!("{} ({})", m.check, m.file))
        .collect();
        assert!(stale.is_empty(), "stale rows: {stale:?}");
    }

    /// A row of the tests' tables: its check, file and line (the rest never read here).
    const fn test_row(check: &'static str, file: &'static str, from: &'static str) -> Mutant {
        Mutant {
            check,
            file,
            from,
            to: "",
            filter: "f",
        }
    }

    /// A table of rows in three files, for the selection's tests.
    const TABLE: &[Mutant] = &[
        test_row("a0", "a.rs", "one"),
        test_row("b0", "b.rs", "one"),
        test_row("a1", "a.rs", "two"),
        test_row("c0", "c.rs", "one"),
        test_row("b1", "b.rs", "two"),
        test_row("c1", "c.rs", "two"),
        test_row("c2", "c.rs", "three"),
        test_row("b2", "b.rs", "three"),
    ];

    fn all() -> Vec<usize> {
        (0..TABLE.len()).collect()
    }

    /// Files changed throughout: every row's line in each is touched.
    fn files(names: &[&str]) -> Vec<Changed> {
        names
            .iter()
            .map(|n| Changed {
                file: (*n).to_owned(),
                touched: vec!["one two three".to_owned()],
            })
            .collect()
    }

    #[test]
    fn only_the_rows_whose_line_a_change_touched_are_chosen_from_a_file() {
        let changed = |touched: &[&str]| Changed {
            file: "c.rs".to_owned(),
            touched: touched.iter().map(|t| (*t).to_owned()).collect(),
        };
        let chosen = select(
            usize::MAX,
            TABLE,
            &all(),
            &[changed(&["fn f() {\n    two\n}\n"])],
            &[],
            0,
            1,
        );
        assert_eq!(chosen.changed, [5]);
        let chosen = select(
            usize::MAX,
            TABLE,
            &all(),
            &[changed(&["one", "three"])],
            &[],
            0,
            1,
        );
        assert_eq!(chosen.changed, [3, 6]);
        assert!(
            select(usize::MAX, TABLE, &all(), &[changed(&[])], &[], 0, 1)
                .changed
                .is_empty()
        );
    }

    #[test]
    fn the_sample_shrinks_to_keep_the_run_within_its_rows_and_the_changed_are_never_cut() {
        let within = |rows| select(rows, TABLE, &all(), &files(&["b.rs"]), &[], 4, 7);
        assert_eq!(within(usize::MAX).sampled.len(), 4);
        assert_eq!(within(5).sampled.len(), 2);
        assert_eq!(within(5).changed, [1, 4, 7]);
        let cut = within(2);
        assert_eq!(
            (cut.changed.as_slice(), cut.sampled.len()),
            (&[1, 4, 7][..], 0)
        );
    }

    #[test]
    fn a_hunk_is_read_as_the_file_holds_it_after_the_change() {
        let diff = "diff --git a/c.rs b/c.rs\n--- a/c.rs\n+++ b/c.rs\n@@ -1,3 +1,3 @@ fn f\n fn f() {\n-    old\n+    new\n }\n@@ -9,2 +9,3 @@\n fn g() {\n+    added\n }\n\\ No newline at end of file\n";
        assert_eq!(
            hunks_after(diff),
            ["fn f() {\n    new\n}\n", "fn g() {\n    added\n}\n"]
        );
        assert!(hunks_after("Binary files a/x and b/x differ\n").is_empty());
    }

    #[test]
    fn every_row_of_a_changed_file_is_chosen_and_the_sample_is_drawn_from_the_others() {
        let chosen = select(usize::MAX, TABLE, &all(), &files(&["b.rs"]), &[], 2, 7);
        assert_eq!(chosen.changed, [1, 4, 7]);
        assert_eq!(chosen.sampled.len(), 2);
        assert_eq!(chosen.drawn_from, 5);
        assert!(
            chosen.sampled.iter().all(|i| TABLE[*i].file != "b.rs"),
            "{chosen:?}"
        );
        assert!(chosen.sampled.windows(2).all(|w| w[0] < w[1]), "{chosen:?}");
    }

    #[test]
    fn a_seed_draws_the_same_sample_every_time_and_seeds_differ() {
        let draw = |seed| select(usize::MAX, TABLE, &all(), &[], &[], 3, seed).sampled;
        assert_eq!(draw(42), draw(42));
        let distinct: std::collections::HashSet<Vec<usize>> = (0..20).map(draw).collect();
        assert!(distinct.len() > 1, "every seed drew {distinct:?}");
    }

    /// SplitMix64's published first output for the seed 0: a seed printed by one run chooses the same
    /// rows on any machine and in any later build.
    #[test]
    fn the_generator_is_splitmix64() {
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn no_change_still_draws_the_sample() {
        let chosen = select(usize::MAX, TABLE, &all(), &[], &[], 3, 1);
        assert!(chosen.changed.is_empty());
        assert_eq!(chosen.sampled.len(), 3);
        assert_eq!(chosen.rows().count(), 3);
    }

    #[test]
    fn a_changed_file_that_no_row_names_chooses_nothing_by_itself() {
        let changed = |names| select(usize::MAX, TABLE, &all(), &files(names), &[], 0, 1);
        let chosen = changed(&["README.md", "gate/src/new.rs"]);
        assert_eq!(chosen.rows().count(), 0, "{chosen:?}");
        assert_eq!(changed(&["README.md", "c.rs"]).changed, [3, 5, 6]);
    }

    #[test]
    fn a_sample_past_the_rest_takes_all_of_them_once() {
        let chosen = select(usize::MAX, TABLE, &all(), &files(&["a.rs"]), &[], 100, 3);
        assert_eq!(chosen.changed, [0, 2]);
        assert_eq!(chosen.sampled, [1, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn a_new_row_is_chosen_though_its_file_did_not_change() {
        let chosen = select(usize::MAX, TABLE, &all(), &files(&[TABLE_FILE]), &[5], 0, 1);
        assert_eq!(chosen.changed, [5]);
    }

    #[test]
    fn only_the_candidates_the_words_leave_are_chosen() {
        let chosen = select(
            usize::MAX,
            TABLE,
            &[0, 1, 3],
            &files(&["a.rs", "b.rs"]),
            &[2],
            8,
            1,
        );
        assert_eq!(chosen.changed, [0, 1]);
        assert_eq!(chosen.sampled, [3]);
    }

    /// Each row is one line of this file, so a row added or edited is told from the table at the
    /// base; a row spread over lines would make that an error, seen here first.
    #[test]
    fn a_row_added_or_edited_since_the_base_is_told_by_its_line() {
        let now = include_str!("mutants.rs");
        assert_eq!(row_lines(now).len(), MUTANTS.len());
        assert_eq!(rows_not_in(now, now), Ok(vec![]));
        let lines = row_lines(now);
        let before = now.replacen(lines[5], "", 1).replacen(
            lines[9],
            &lines[9].replacen("filter: \"", "filter: \"x", 1),
            1,
        );
        assert_eq!(rows_not_in(now, &before), Ok(vec![5, 9]));
    }

    #[test]
    fn a_row_whose_line_is_not_in_its_code_exactly_once_is_stale() {
        let read = |file: &str| match file {
            "a.rs" => Some("one two two\n#[cfg(test)]\nmod tests { three }".to_owned()),
            "b.rs" => Some("one two three".to_owned()),
            _ => None,
        };
        let stale: Vec<&str> = stale_rows(TABLE, read).iter().map(|m| m.check).collect();
        // a1's line is there twice, and c.rs cannot be read.
        assert_eq!(stale, ["a1", "c0", "c1", "c2"]);
        // A line found only in the file's unit tests is not in its code.
        let tests_only = [test_row("t", "a.rs", "three")];
        assert_eq!(stale_rows(&tests_only, read).len(), 1);
    }

    #[test]
    fn no_option_runs_every_row_and_a_sample_needs_a_base() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let none = Options::parse(&[]).expect("no options");
        assert_eq!((none.jobs, none.changed_since, none.sample), (1, None, 0));
        let ci = Options::parse(&args(&[
            "--changed-since",
            "HEAD~3",
            "--sample",
            "20",
            "--seed",
            "9",
            "--jobs",
            "2",
            "--rows",
            "60",
            "gguf",
        ]))
        .expect("CI's options");
        assert_eq!(
            ci,
            Options {
                jobs: 2,
                changed_since: Some("HEAD~3".to_owned()),
                sample: 20,
                rows: 60,
                seed: 9,
                words: args(&["gguf"]),
            }
        );
        for alone in [&["--sample", "3"][..], &["--seed", "3"]] {
            let error = Options::parse(&args(alone)).expect_err("a sample without a base");
            assert!(error.contains("--changed-since"), "{error}");
        }
        let error = Options::parse(&args(&["--changed-since", "r", "--sample", "x"])).unwrap_err();
        assert!(error.contains("--sample x"), "{error}");
        let error = Options::parse(&args(&["--changed-since", "r", "--rows", "-1"])).unwrap_err();
        assert!(error.contains("--rows -1"), "{error}");
        let error = Options::parse(&args(&["--changed-since"])).unwrap_err();
        assert!(error.contains("--changed-since needs a value"), "{error}");
    }

    /// A copy is built optimised once, at the first run that needs it, and a build that failed
    /// stays an error (no row is run on a copy that does not build).
    #[test]
    fn a_copy_is_built_optimised_once_and_a_failed_build_stays_an_error() {
        let builds = std::cell::Cell::new(0);
        let tree = TreeCopy::new(PathBuf::from("copy"));
        assert!(tree.optimised.get().is_none());
        for _ in 0..3 {
            let result = tree.optimised_once(|| {
                builds.set(builds.get() + 1);
                Ok(())
            });
            assert_eq!(result, Ok(()));
        }
        assert_eq!(builds.get(), 1);
        let broken = TreeCopy::new(PathBuf::from("broken"));
        for _ in 0..2 {
            let result = broken.optimised_once(|| Err("the copy does not build".to_owned()));
            assert_eq!(result, Err("the copy does not build".to_owned()));
        }
    }

    #[test]
    fn a_filter_green_unoptimised_in_time_keeps_the_quick_build() {
        let (run, asked) = scripted(vec![Suite::Green]);
        assert_eq!(baseline_decision("f", run), Ok((true, None)));
        assert_eq!(*asked.borrow(), [(Build::Quick, QUICK_BASELINE)]);
    }

    #[test]
    fn a_filter_slow_unoptimised_moves_to_the_optimised_build() {
        let (run, asked) = scripted(vec![Suite::Hung]);
        let (quick, said) = baseline_decision("slow::arm", run).expect("a decision");
        assert!(!quick);
        assert!(said.is_some_and(|s| s.starts_with("OPTIMISED slow::arm: slower than")));
        assert_eq!(asked.borrow().len(), 1);
    }

    #[test]
    fn a_filter_red_unoptimised_and_green_optimised_moves_to_the_optimised_build() {
        let (run, asked) = scripted(vec![Suite::Red, Suite::Green]);
        let (quick, said) = baseline_decision("f", run).expect("a decision");
        assert!(!quick);
        assert_eq!(
            said.as_deref(),
            Some("OPTIMISED f: red unoptimised, green optimised")
        );
        assert_eq!(
            *asked.borrow(),
            [
                (Build::Quick, QUICK_BASELINE),
                (Build::Optimised, RUN_LIMIT)
            ]
        );
    }

    #[test]
    fn a_filter_not_green_in_either_build_is_an_error_naming_it() {
        for second in [Suite::Red, Suite::Hung] {
            let (run, _) = scripted(vec![Suite::Red, second]);
            let error = baseline_decision("broken::arm", run).expect_err("no row proves anything");
            assert!(error.contains("not green on broken::arm"), "{error}");
        }
    }

    #[test]
    fn a_quick_row_past_its_limit_is_run_again_optimised_and_that_run_decides() {
        for decided in [Suite::Red, Suite::Green, Suite::Hung] {
            let (run, asked) = scripted(vec![Suite::Hung, decided]);
            assert_eq!(row_outcome(true, run), Ok(decided));
            assert_eq!(
                *asked.borrow(),
                [(Build::Quick, QUICK_LIMIT), (Build::Optimised, RUN_LIMIT)]
            );
        }
    }

    #[test]
    fn a_quick_row_that_ends_in_time_is_decided_by_that_run_alone() {
        for decided in [Suite::Red, Suite::Green] {
            let (run, asked) = scripted(vec![decided]);
            assert_eq!(row_outcome(true, run), Ok(decided));
            assert_eq!(*asked.borrow(), [(Build::Quick, QUICK_LIMIT)]);
        }
        let (run, asked) = scripted(vec![Suite::Red]);
        assert_eq!(row_outcome(false, run), Ok(Suite::Red));
        assert_eq!(*asked.borrow(), [(Build::Optimised, RUN_LIMIT)]);
    }
}
