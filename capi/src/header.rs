//! `include/dflash_gate.h` is written by hand; this holds it to the Rust side, so the two cannot
//! drift: every exported function, `#[repr(C)]` enum and struct here must be declared there with the
//! same C types, names, values and order, and the header must declare nothing else.

use std::collections::BTreeMap;

const HEADER: &str = include_str!("../include/dflash_gate.h");
const RUST: &str = include_str!("lib.rs");

/// Declarations by name, each in one canonical spelling: tokens separated by single spaces.
type Declarations = BTreeMap<String, String>;

fn canonical(c: &str) -> String {
    c.replace('*', " * ")
        .replace(',', " , ")
        .replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The C spelling of a Rust type as this crate uses them.
fn c_type(rust: &str) -> String {
    let rust = rust.trim();
    if let Some(inner) = rust.strip_prefix("*const ") {
        return format!("const {} *", c_type(inner));
    }
    if let Some(inner) = rust.strip_prefix("*mut ") {
        return format!("{} *", c_type(inner));
    }
    match rust {
        "c_char" => "char",
        "u8" => "uint8_t",
        "u64" => "uint64_t",
        "i32" => "int32_t",
        "usize" => "size_t",
        "bool" => "bool",
        other if other.starts_with("dflash_gate_") => other,
        other => panic!("no C spelling for the Rust type {other:?}: add it here and to the header"),
    }
    .to_owned()
}

/// The Rust side read from this crate's source, in the header's spelling.
fn rust_side() -> Declarations {
    let mut out = Declarations::new();
    // Functions: `pub (unsafe) extern "C" fn name(args) (-> ret) {`.
    for piece in RUST.split("extern \"C\" fn ").skip(1) {
        let name = &piece[..piece.find('(').unwrap()];
        let close = piece.find(')').unwrap();
        let args = &piece[name.len() + 1..close];
        let rest = &piece[close + 1..piece.find('{').unwrap()];
        let ret = rest
            .trim()
            .strip_prefix("->")
            .map_or("void".to_owned(), c_type);
        let args: Vec<String> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| {
                let (n, t) = a.split_once(':').unwrap();
                format!("{} {}", c_type(t), n.trim())
            })
            .collect();
        let args = match args.is_empty() {
            true => "void".to_owned(),
            false => args.join(", "),
        };
        out.insert(name.to_owned(), canonical(&format!("{ret} {name}({args})")));
    }
    // `#[repr(C)]` items: enums as `NAME = value` lists, structs as `type field` lists.
    for piece in RUST.split("#[repr(C)]").skip(1) {
        let body_start = piece.find('{').unwrap();
        let head = &piece[..body_start];
        let body = &piece[body_start + 1..piece.find("\n}").unwrap()];
        let fields: Vec<String> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| l.trim_end_matches(','))
            .map(|l| match l.strip_prefix("pub ") {
                Some(field) => {
                    let (n, t) = field.split_once(':').unwrap();
                    format!("{} {};", c_type(t), n.trim())
                }
                None => format!("{l},"),
            })
            .collect();
        let (kind, name) = if let Some(at) = head.find("pub enum ") {
            ("enum", head[at + 9..].trim())
        } else {
            let at = head.find("pub struct ").unwrap();
            ("struct", head[at + 11..].trim())
        };
        out.insert(
            name.to_owned(),
            canonical(&format!(
                "typedef {kind} {name} {{ {} }} {name}",
                fields.join(" ").trim_end_matches(',')
            )),
        );
    }
    out
}

fn header_side() -> Declarations {
    // Comments out, then one declaration per `;` at the top level (a typedef's body kept whole).
    let mut text = String::new();
    let mut rest = HEADER;
    while let Some(at) = rest.find("/*") {
        text.push_str(&rest[..at]);
        rest = &rest[at + rest[at..].find("*/").unwrap() + 2..];
    }
    text.push_str(rest);
    let text: String = text
        .lines()
        .filter(|l| {
            !l.trim_start().starts_with('#') && !l.contains("extern \"C\"") && l.trim() != "}"
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Declarations::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ';' && depth == 0 {
            let declaration = canonical(&current);
            current.clear();
            // Opaque handles (`typedef struct x x;`) have no Rust layout to compare.
            let tokens: Vec<&str> = declaration.split(' ').collect();
            if tokens.len() == 4 && tokens[..2] == ["typedef", "struct"] {
                continue;
            }
            let name = match declaration.find(" ( ") {
                Some(at) => declaration[..at].rsplit(' ').next().unwrap(),
                None => tokens[2],
            };
            out.insert(name.to_owned(), declaration.replace(" , }", " }"));
        } else {
            current.push(c);
        }
    }
    out
}

#[test]
fn the_header_declares_what_the_library_exports() {
    let (rust, header) = (rust_side(), header_side());
    for (name, declaration) in &rust {
        match header.get(name) {
            None => panic!("include/dflash_gate.h does not declare {name}: add\n{declaration}"),
            Some(h) => assert_eq!(h, declaration, "include/dflash_gate.h differs for {name}"),
        }
    }
    for name in header.keys() {
        assert!(
            rust.contains_key(name),
            "include/dflash_gate.h declares {name}, which the library does not export"
        );
    }
    assert!(rust.len() > 20, "only {} items read: {rust:?}", rust.len());
}

#[test]
fn every_declared_name_is_prefixed() {
    for name in header_side().keys().chain(rust_side().keys()) {
        assert!(name.starts_with("dflash_gate_"), "{name}");
    }
}
