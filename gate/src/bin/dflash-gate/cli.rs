//! The command line's conventions, as ripgrep and cargo keep them: `--help`/`-h` and `--version`/`-V`
//! answer on stdout with exit 0; `--` ends options (a directory may be named `-x`); `--name=value` and
//! `--name value` are the same; an unknown option is answered with the nearest known one; a
//! single-valued option given twice is refused rather than silently overridden. Errors quote the
//! command line as given: the caller escapes them where it prints them.
//!
//! Hand-written on purpose: a dozen options do not pay for an argument-parser crate in a tool that sits
//! in front of a loader (every dependency is one more thing to audit), and this table is both the
//! parser's input and the help text, so the two cannot drift.

use std::ffi::{OsStr, OsString};

/// How an option takes its value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A switch: no value; repeating it changes nothing.
    Nothing,
    /// One value; given twice is an error.
    One(&'static str),
    /// A value each time it is given; all are kept, in order.
    Many(&'static str),
}

/// One option: its long name, an optional short alias, what it takes, and its help line.
pub struct Opt {
    pub long: &'static str,
    pub short: Option<&'static str>,
    pub takes: Takes,
    pub help: &'static str,
}

/// Every option the binary knows. Adding one is one row here and one arm in `Args::from_parsed`.
pub const OPTIONS: &[Opt] = &[
    Opt {
        long: "--json",
        short: None,
        takes: Takes::Nothing,
        help: "print JSON: one object for one named package, an array with --all or several",
    },
    Opt {
        long: "--format",
        short: None,
        takes: Takes::One("FORMAT"),
        help: "text (the default), json (as --json) or github: the text, and after each package a GitHub workflow annotation (::error for a failed check, ::warning for an undecided one) that the Actions run shows on its summary",
    },
    Opt {
        long: "--census",
        short: None,
        takes: Takes::Nothing,
        help: "list every tensor in the human report",
    },
    Opt {
        long: "--target",
        short: None,
        takes: Takes::Many("DIR"),
        help: "also check the draft against this target model (target.* checks): a folder, a GGUF, a hub cache repository or ORG/NAME; given several times, or naming a folder of targets or a hub cache, a fit report: for each target, whether the draft fits it and the first reason (exit 0 when it fits one)",
    },
    Opt {
        long: "--source",
        short: None,
        takes: Takes::One("PATH"),
        help:
            "also compare every weight with what it was converted from: a checkpoint directory, a .gguf file, a directory holding one, or a hub cache repository or ORG/NAME (source.* checks)",
    },
    Opt {
        long: "--revision",
        short: None,
        takes: Takes::One("REV"),
        help: "for a Hugging Face cache repository (a models--ORG--NAME directory, or ORG/NAME looked up offline in HF_HUB_CACHE): gate this branch, tag or commit's snapshot instead of main's",
    },
    Opt {
        long: "--loader",
        short: None,
        takes: Takes::Many("NAME[,NAME]"),
        help: "also answer for these engines (vllm, sglang, llama.cpp, transformers, mlx, dflash-mlx): what each refuses, crashes on, serves wrong or does not read fails its loader.NAME check",
    },
    Opt {
        long: "--manifest",
        short: None,
        takes: Takes::Nothing,
        help: "also verify MANIFEST.sha256 (manifest.sha256)",
    },
    Opt {
        long: "--all",
        short: None,
        takes: Takes::Many("DIR"),
        help: "gate every package directory directly under DIR, one level deep (one holding config.json, a *.q4nx or *.gguf; a hub cache's repositories at refs/main; checkpoints, other models, the --source/--target directories and what is no package are skipped and counted)",
    },
    Opt {
        long: "--full",
        short: None,
        takes: Takes::Nothing,
        help: "with several packages, print every report instead of one line each",
    },
    Opt {
        long: "--quiet",
        short: Some("-q"),
        takes: Takes::Nothing,
        help: "print the package with its verdict on one line, then each failing or undecided check once (several packages: all but the passing lines)",
    },
    Opt {
        long: "--color",
        short: None,
        takes: Takes::One("WHEN"),
        help: "colour the outcomes: auto (a terminal, unless NO_COLOR is set), always or never; never in JSON",
    },
    Opt {
        long: "--help",
        short: Some("-h"),
        takes: Takes::Nothing,
        help: "print this help and exit 0",
    },
    Opt {
        long: "--version",
        short: Some("-V"),
        takes: Takes::Nothing,
        help: "print the version and exit 0",
    },
];

/// The command line split into options (by long name, in order) and operands.
#[derive(Default)]
pub struct Parsed {
    pub options: Vec<(&'static str, Option<OsString>)>,
    pub operands: Vec<OsString>,
}

impl Parsed {
    pub fn has(&self, long: &str) -> bool {
        self.options.iter().any(|(name, _)| *name == long)
    }

    /// The value of a single-valued option (the parser already refused a second one).
    pub fn value<'p>(&'p self, long: &'p str) -> Option<&'p OsString> {
        self.values(long).next()
    }

    /// Every value of an option, in the order given.
    pub fn values<'p>(&'p self, long: &'p str) -> impl Iterator<Item = &'p OsString> + 'p {
        self.options
            .iter()
            .filter(move |(name, _)| *name == long)
            .filter_map(|(_, value)| value.as_ref())
    }
}

/// Splits `raw` (without the program name) by `table`. Errors are one line, lowercase, naming the
/// option.
pub fn parse(raw: Vec<OsString>, table: &'static [Opt]) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut raw = raw.into_iter();
    while let Some(arg) = raw.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            parsed.operands.extend(raw.by_ref());
            break;
        }
        if !text.starts_with('-') || text == "-" {
            parsed.operands.push(arg);
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, _)) if name.starts_with("--") => (name.to_owned(), Some(after_eq(&arg))),
            _ => (text.clone().into_owned(), None),
        };
        let Some(opt) = table
            .iter()
            .find(|o| o.long == name || o.short == Some(name.as_str()))
        else {
            return Err(unknown(&name, table));
        };
        let value = match opt.takes {
            Takes::Nothing => {
                if inline.is_some() {
                    return Err(format!("{} takes no value", opt.long));
                }
                None
            }
            Takes::One(what) | Takes::Many(what) => {
                let value = match inline {
                    Some(v) => v,
                    None => raw.next().ok_or_else(|| {
                        format!("{} needs a value: {} {what}", opt.long, opt.long)
                    })?,
                };
                if value.is_empty() {
                    return Err(format!("{} needs a value: {} {what}", opt.long, opt.long));
                }
                Some(value)
            }
        };
        if matches!(opt.takes, Takes::One(_)) && parsed.has(opt.long) {
            return Err(format!(
                "{} given twice; it takes one value (\"{}\", then \"{}\")",
                opt.long,
                parsed
                    .value(opt.long)
                    .map(|v| v.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                value
                    .as_deref()
                    .map(OsStr::to_string_lossy)
                    .unwrap_or_default()
            ));
        }
        parsed.options.push((opt.long, value));
    }
    Ok(parsed)
}

/// The bytes after the first `=` of `--name=value`, kept as an OsString (the value may be a path that
/// is not UTF-8).
fn after_eq(arg: &OsStr) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let bytes = arg.as_bytes();
        let at = bytes
            .iter()
            .position(|&b| b == b'=')
            .map_or(bytes.len(), |i| i + 1);
        OsString::from_vec(bytes[at..].to_vec())
    }
    #[cfg(not(unix))]
    {
        let text = arg.to_string_lossy();
        OsString::from(text.split_once('=').map_or("", |(_, v)| v))
    }
}

/// `unknown option --jsn (did you mean --json?)`, or without the suggestion when nothing is close.
fn unknown(name: &str, table: &[Opt]) -> String {
    let nearest = table
        .iter()
        .map(|o| (distance(name, o.long), o.long))
        .min()
        .filter(|(d, long)| *d <= 2.max(long.len() / 3));
    match nearest {
        Some((_, long)) => format!("unknown option {name} (did you mean {long}?)"),
        None => format!("unknown option {name}"),
    }
}

/// Levenshtein distance, by characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The options part of `--help`, from the table.
pub fn options_help(table: &[Opt]) -> String {
    let mut out = String::new();
    for opt in table {
        let mut name = match opt.short {
            Some(short) => format!("{short}, {}", opt.long),
            None => opt.long.to_owned(),
        };
        if let Takes::One(what) | Takes::Many(what) = opt.takes {
            name = format!("{name} {what}");
        }
        out.push_str(&format!("  {name:<18} {}\n", opt.help));
    }
    out
}
