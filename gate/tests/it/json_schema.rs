//! The `--json` document against the published schema (`schema/report.schema.json`): real reports
//! from the binary (pass, fail, undecided, unreadable, several packages) validate, and a document that
//! drifts from the schema (a field added, a field removed, a kind changed) does not. Every arm of the
//! suite validates its report too (`gate_tests::arms::run`).

use gate_tests::fixture::{copy, edit_config, tiny as fixture};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the binary with `--json`; returns the document and the exit status.
fn json(args: &[&std::ffi::OsStr]) -> (Value, i32) {
    let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg("--json")
        .args(args)
        .output()
        .expect("runs");
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    (doc, o.status.code().unwrap_or(-1))
}

/// `key` of every document in the array `doc`.
fn each<'d>(doc: &'d Value, key: &str) -> Vec<&'d str> {
    let docs = doc.as_array().expect("an array of documents");
    docs.iter().map(|d| d[key].as_str().unwrap()).collect()
}

fn valid(doc: &Value) {
    if let Err(e) = gate_tests::schema::validate(doc) {
        panic!("{e}\n{}", serde_json::to_string_pretty(doc).unwrap());
    }
}

/// A folder of packages: good, failing (a scalar disagrees), undecided (a field missing).
fn models(root: &Path) -> PathBuf {
    let models = root.join("models");
    copy(&models, "a-good");
    let fail = copy(&models, "b-fail");
    edit_config(&fail, |c| {
        c.insert("block_size".into(), 4.into());
    });
    let undecided = copy(&models, "c-undecided");
    edit_config(&undecided, |c| {
        c.remove("intermediate_size");
    });
    models
}

#[test]
fn pass_fail_and_undecided_reports_validate() {
    let root = tempfile::tempdir().unwrap();
    let models = models(root.path());
    for (name, verdict, code) in [
        ("a-good", "PASS", 0),
        ("b-fail", "FAIL", 1),
        ("c-undecided", "UNDECIDED", 3),
    ] {
        let (doc, status) = json(&[models.join(name).as_os_str()]);
        valid(&doc);
        assert_eq!((doc["kind"].as_str(), status), (Some("report"), code));
        assert_eq!(doc["verdict"], verdict);
        assert_eq!(
            doc["tool"],
            json!({"name": "dflash-gate", "version": env!("CARGO_PKG_VERSION")})
        );
        let counts: u64 = ["checks_passed", "checks_failed", "checks_undecided"]
            .iter()
            .map(|k| doc[k].as_u64().unwrap())
            .sum();
        assert_eq!(counts, doc["checks_total"].as_u64().unwrap());
    }
}

#[test]
fn the_census_validates() {
    let (doc, _) = json(&[fixture().as_os_str(), "--census".as_ref()]);
    valid(&doc);
    assert_eq!(doc["census"]["kind"], "census");
    let tensors = doc["census"]["tensors"].as_array().unwrap();
    assert!(tensors.iter().all(|t| t["kind"] == "tensor"));
    // Machine fields are tokens; the prose has fields of its own.
    let mut roles: Vec<&str> = tensors.iter().filter_map(|t| t["role"].as_str()).collect();
    roles.sort_unstable();
    roles.dedup();
    assert_eq!(roles, ["fc", "gain", "projection", "scalar"]);
    let q = tensors
        .iter()
        .find(|t| t["name"] == "model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    assert_eq!((&q["role"], &q["layer"]), (&json!("projection"), &json!(0)));
    assert_eq!(q["role_text"], "projection q_proj");
    let uses: Vec<&str> = doc["census"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["use"].as_str().unwrap())
        .collect();
    assert!(uses.iter().all(|u| !u.contains(' ')), "{uses:?}");
}

#[test]
fn unreadable_packages_are_a_documented_error_shape() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("a-file");
    std::fs::write(&file, b"not a package").unwrap();
    let no_config = root.path().join("no-config");
    std::fs::create_dir(&no_config).unwrap();
    for (dir, reason) in [
        (root.path().join("absent"), "no_such_directory"),
        (file, "not_a_directory"),
        (no_config, "no_config"),
    ] {
        let (doc, status) = json(&[dir.as_os_str()]);
        valid(&doc);
        assert_eq!(status, 2);
        assert_eq!(doc["kind"], "error");
        assert_eq!(doc["reason"], reason, "{doc}");
        assert_eq!(doc["tool"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(doc["schema_version"], dflash_gate::SCHEMA_VERSION);
    }
}

#[test]
fn several_packages_are_an_array_even_when_all_holds_one() {
    let root = tempfile::tempdir().unwrap();
    let models = models(root.path());
    let (doc, status) = json(&["--all".as_ref(), models.as_os_str()]);
    valid(&doc);
    assert_eq!(status, 1);
    let verdicts = each(&doc, "verdict");
    assert_eq!(verdicts, ["PASS", "FAIL", "UNDECIDED"]);
    // A report and an error side by side.
    let absent = root.path().join("absent");
    let (doc, status) = json(&[fixture().as_os_str(), absent.as_os_str()]);
    valid(&doc);
    assert_eq!(status, 2);
    let kinds = each(&doc, "kind");
    assert_eq!(kinds, ["report", "error"]);
    // --all over a folder that holds one package: still the array the README documents.
    let one = root.path().join("one");
    copy(&one, "only");
    let (doc, status) = json(&["--all".as_ref(), one.as_os_str()]);
    valid(&doc);
    assert_eq!(status, 0);
    assert_eq!(doc.as_array().map(Vec::len), Some(1), "{doc}");
}

/// What a drift is, and how to make it.
type Drift = (&'static str, fn(&mut Value));

/// The strict copy is closed: a report that gained, lost or renamed a field is refused, so the schema
/// and the report types cannot drift apart unnoticed.
#[test]
fn drift_from_the_schema_is_refused() {
    let (good, _) = json(&[fixture().as_os_str()]);
    valid(&good);
    let schema = gate_tests::schema::strict().unwrap();
    let drifts: [Drift; 6] = [
        ("a report field added", |d| {
            d["new_field"] = json!(1);
        }),
        ("a report field removed", |d| {
            d.as_object_mut().unwrap().remove("checks_total");
        }),
        ("a census field added", |d| {
            d["census"]["tensors"][0]["new_field"] = json!("x");
        }),
        ("an evidence field added", |d| {
            d["checks"][1]["evidence"]["new_field"] = json!(0);
        }),
        ("an unknown check id", |d| {
            d["checks"][0]["id"] = json!("made.up");
        }),
        ("a wrong kind", |d| {
            d["checks"][0]["kind"] = json!("report");
        }),
    ];
    for (what, drift) in drifts {
        let mut doc = good.clone();
        drift(&mut doc);
        assert!(
            !gate_tests::schema::errors(&schema, &doc).is_empty(),
            "{what}: the schema did not notice"
        );
    }
}

/// The published schema admits what a later gate may add within the version (a field anywhere, a
/// check id it does not list, with evidence of any shape), and still refuses what breaks it (a field
/// removed, a kind changed); the strict copy refuses the additions.
#[test]
fn the_published_schema_admits_additions() {
    let (good, _) = json(&[fixture().as_os_str()]);
    let published = gate_tests::schema::load().unwrap();
    let strict = gate_tests::schema::strict().unwrap();
    // No object of the published schema is closed: the strict copy closes them all.
    assert!(
        !published
            .to_string()
            .contains(r#""additionalProperties":false"#),
        "an object of the published schema refuses additions (additionalProperties: false)"
    );
    let mut added = good.clone();
    added["new_field"] = json!(1);
    added["census"]["tensors"][0]["new_field"] = json!("x");
    added["checks"][1]["evidence"]["new_field"] = json!(0);
    added["checks"][1]["evidence"]["problems"] =
        json!([{"field": "x", "kind": "missing", "new": 1}]);
    let mut later = good["checks"][0].clone();
    later["id"] = json!("later.check");
    later["evidence"] = json!({"anything": [1, 2]});
    added["checks"].as_array_mut().unwrap().push(later);
    let errors = gate_tests::schema::errors(&published, &added);
    assert!(
        errors.is_empty(),
        "the published schema refused additions: {errors:?}"
    );
    assert_eq!(
        gate_tests::schema::errors(&strict, &added).len(),
        5,
        "the strict copy refuses each addition: {:?}",
        gate_tests::schema::errors(&strict, &added)
    );
    let mut removed = good.clone();
    removed.as_object_mut().unwrap().remove("checks_total");
    assert!(!gate_tests::schema::errors(&published, &removed).is_empty());
    let mut kind = good.clone();
    kind["checks"][0]["kind"] = json!("report");
    assert!(!gate_tests::schema::errors(&published, &kind).is_empty());
}

/// The checker itself refuses what a schema forbids, and a keyword it does not know.
#[test]
fn the_checker_refuses_what_a_schema_forbids() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"enum": ["x"]}},
        "required": ["a"],
        "additionalProperties": false,
    });
    let errors = |v: Value| gate_tests::schema::errors(&schema, &v).len();
    assert_eq!(errors(json!({"a": 1, "b": "x"})), 0);
    assert_eq!(errors(json!({"b": "x"})), 1, "missing a");
    assert_eq!(errors(json!({"a": -1})), 1, "below minimum");
    assert_eq!(errors(json!({"a": 1.5})), 1, "not an integer");
    assert_eq!(errors(json!({"a": 1, "c": 0})), 1, "extra field");
    assert_eq!(errors(json!({"a": 1, "b": "y"})), 1, "not in enum");
    let unknown = json!({"pattern": "x"});
    assert_eq!(
        gate_tests::schema::errors(&unknown, &json!("x")).len(),
        1,
        "an unknown keyword is an error"
    );
}

/// Every evidence shape in the schema is one object for PASS, FAIL and UNDECIDED of its check (or
/// null): no check id has two different object shapes.
#[test]
fn each_check_documents_one_evidence_shape() {
    let schema = gate_tests::schema::load().unwrap();
    let defs = schema["$defs"].as_object().unwrap();
    let ids = schema["$defs"]["check_id"]["enum"].as_array().unwrap();
    for id in ids {
        let id = id.as_str().unwrap();
        let def = &defs[&format!("evidence:{id}")];
        let objects = match def.get("oneOf") {
            Some(branches) => branches
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "object")
                .count(),
            None => usize::from(def["type"] == "object"),
        };
        assert!(objects <= 1, "{id} has {objects} evidence object shapes");
    }
}

/// `--all --json` keeps the directories it passed over: each is a `skipped` document in its place,
/// with a reason token and the sentence, not a line on stderr the document loses.
#[test]
fn skipped_directories_are_documents_of_their_own() {
    use gate_tests::synth::{Geometry, TargetPackage};
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "a-draft");
    TargetPackage::matching(&Geometry::small())
        .write(&models.join("b-target"))
        .unwrap();
    let (doc, status) = json(&["--all".as_ref(), models.as_os_str()]);
    valid(&doc);
    assert_eq!(status, 0);
    assert_eq!(each(&doc, "kind"), ["report", "skipped"]);
    let skipped = &doc[1];
    assert_eq!(skipped["reason"], "another_model", "{skipped}");
    assert!(
        skipped["package"].as_str().unwrap().ends_with("b-target")
            && skipped["message"]
                .as_str()
                .unwrap()
                .contains("not a DFlash draft"),
        "{skipped}"
    );
}
