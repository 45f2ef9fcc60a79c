//! The binary as users run it, one test binary of modules (`cargo test -p dflash-gate --test it`),
//! so the tests link once and each module path says what it holds: `cli` (exit statuses, the JSON
//! document, several packages, file-system cases), `cli_conventions` (help, version, `--`, typo
//! suggestions, a report that cannot be written), `hostile_files` (FIFOs, devices, links and names a
//! hostile package directory can hold), `json_schema` (real documents against the published schema,
//! and drift refused). The named-trial suite is the other test target (`--test suite`).

mod cli;
mod cli_conventions;
mod hostile_files;
mod json_schema;
