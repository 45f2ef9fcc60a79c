/*
 * dflash_gate.h: the DFlash draft package gate, in process, for a C or C++ loader.
 *
 * Link the static library (libdflash_gate_capi.a, with the system libraries it needs: -lpthread
 * -ldl -lm on Linux) or the shared one. With CMake, `cargo xtask cmake`'s module gives the imported
 * target dflash_gate::dflash_gate. See docs/c-abi.md.
 *
 * Rules every function keeps:
 * - Strings going in are a pointer and a length, UTF-8, never assumed NUL-terminated (a null pointer
 *   with length 0 is the empty string). Strings coming out are a dflash_gate_str: a pointer (never
 *   null) and a length, not NUL-terminated, valid until the handle they came from is freed. Print one
 *   with printf("%.*s", (int)s.len, s.ptr). Names from a package are its own bytes: escape them
 *   before printing them to a terminal.
 * - Every function returns a dflash_gate_status (except dflash_gate_version and
 *   dflash_gate_report_exit_status, which say what they return on error). A panic inside the library
 *   never crosses this boundary: it is caught and returned as DFLASH_GATE_PANIC.
 * - Handles are opaque, allocated and freed by the library. A null, freed or foreign handle is refused
 *   with a status and never read: a report freed twice gives DFLASH_GATE_INVALID_HANDLE and frees
 *   nothing. (An address the allocator has reused for a newer handle is that handle.)
 * - Thread safety: any function may be called from any thread, at the same time, on the same or
 *   different handles; a report is never changed after it is made. The exceptions: a handle must not
 *   be freed while another thread uses it or a string borrowed from it, and options are set by one
 *   thread at a time.
 * - SIGBUS: the library reads weight files through a read-only map guarded by a SIGBUS handler (a file
 *   truncated while mapped would otherwise kill the process). The handler is installed once, at the
 *   first map; a fault outside the library's maps is handed to the handler that was there before it.
 *   Every later map checks that the guard is still installed; when a host has installed its own
 *   handler since, the library leaves it alone and reads the file instead of mapping it.
 *   dflash_gate_set_never_map(true) makes it never map (nor install anything) at all.
 *   dflash_gate_evaluate maps nothing.
 */
#ifndef DFLASH_GATE_H
#define DFLASH_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call did: zero is success. */
typedef enum dflash_gate_status {
  DFLASH_GATE_OK = 0,
  /* A pointer that must not be null was null (or a null string had a non-zero length). */
  DFLASH_GATE_NULL_ARGUMENT = 1,
  /* A string argument is not UTF-8. */
  DFLASH_GATE_INVALID_UTF8 = 2,
  /* The handle is not one the library handed out and has not yet freed (e.g. freed twice). */
  DFLASH_GATE_INVALID_HANDLE = 3,
  /* An index past the end, or a length longer than any buffer can be. */
  DFLASH_GATE_OUT_OF_RANGE = 4,
  /* Nothing to return: no check objected. */
  DFLASH_GATE_NOT_FOUND = 5,
  /* The library panicked (a bug): the call did nothing the caller can use. */
  DFLASH_GATE_PANIC = 6,
  /* A name the library does not know (an engine for --loader): nothing was set. */
  DFLASH_GATE_UNKNOWN_NAME = 7
} dflash_gate_status;

/* A verdict or a check's outcome; each value is the exit status the command-line gate gives for it. */
typedef enum dflash_gate_verdict {
  DFLASH_GATE_PASS = 0,
  DFLASH_GATE_FAIL = 1,
  /* The gate could not run: an unreadable path, no config.json, an option's directory unreadable. */
  DFLASH_GATE_COULD_NOT_RUN = 2,
  /* Nothing failed, but something could not be decided: never a pass. */
  DFLASH_GATE_UNDECIDED = 3
} dflash_gate_verdict;

/* A string coming out: len bytes of UTF-8 at ptr (never null), not NUL-terminated. */
typedef struct dflash_gate_str {
  const char *ptr;
  size_t len;
} dflash_gate_str;

/* One check's result, borrowed from its report. */
typedef struct dflash_gate_check {
  /* Stable id, e.g. "tiles.q4_1_signature" (for a gate that could not run: the reason token). */
  dflash_gate_str id;
  dflash_gate_verdict outcome;
  /* The one-line finding, naming what it objected to. */
  dflash_gate_str message;
  /* For a check that could not run: the id of the check that stopped it; empty otherwise. */
  dflash_gate_str blocked_by;
} dflash_gate_check;

/* One tensor of the weight file as the census lists it, borrowed from its report. */
typedef struct dflash_gate_tensor {
  dflash_gate_str name;
  /* The role it plays ("gain input_layernorm"); empty when unexplained. */
  dflash_gate_str role;
  /* The role's class as a token ("projection", "gain", ...); empty when unexplained. */
  dflash_gate_str role_class;
  /* What the bytes were found to be, e.g. "q4_1 tile grid 4096 x 2560, 1280 tiles". */
  dflash_gate_str form;
  dflash_gate_str dtype;
  /* rank dimensions. */
  const uint64_t *shape;
  size_t rank;
  /* Where its bytes are in the weight file, from the file's first byte. */
  uint64_t offset;
  uint64_t length;
} dflash_gate_tensor;

/* What a report was checked against, borrowed from its report; each field empty when it does not
 * apply: a report that says PASS names the target it passed against. */
typedef struct dflash_gate_against {
  /* The --target as given, and as resolved (a hub cache repository to its snapshot). */
  dflash_gate_str target;
  dflash_gate_str target_resolved;
  /* The --source as given, and as resolved. */
  dflash_gate_str source;
  dflash_gate_str source_resolved;
  /* For a draft read from a Hugging Face hub cache: its repository id (ORG/NAME) and the commit of
   * the snapshot read. */
  dflash_gate_str repository;
  dflash_gate_str revision;
} dflash_gate_against;

/* The questions beyond the draft itself: target, source, manifest (the library's Options). */
typedef struct dflash_gate_options dflash_gate_options;

/* The answer for one package. */
typedef struct dflash_gate_report dflash_gate_report;

/* The library's version ("0.1.0"), a static string. */
dflash_gate_str dflash_gate_version(void);

/*
 * Read, never map (process-wide, from now on), for a host that keeps SIGBUS to itself: the library then
 * never maps a file and never touches the signal's action (see SIGBUS above). false goes back to
 * mapping under the guard.
 */
dflash_gate_status dflash_gate_set_never_map(bool never);

/* Makes options asking nothing beyond the draft itself; free with dflash_gate_options_free. */
dflash_gate_status dflash_gate_options_new(dflash_gate_options **out);

/* Also checks the draft against the target package in dir (--target). */
dflash_gate_status dflash_gate_options_set_target(dflash_gate_options *options, const char *dir, size_t dir_len);

/* Also compares every weight with its source (--source): path is the checkpoint's directory, or the
 * .gguf file the package was converted from. */
dflash_gate_status dflash_gate_options_set_source(dflash_gate_options *options, const char *path, size_t path_len);

/* Also verifies MANIFEST.sha256 (--manifest) when manifest is true. */
dflash_gate_status dflash_gate_options_set_manifest(dflash_gate_options *options, bool manifest);

/* Also answers for these engines (--loader): names is a comma-separated list ("vllm,sglang"), each
 * engine's verdict a loader.NAME check. An unknown name sets nothing (DFLASH_GATE_UNKNOWN_NAME). */
dflash_gate_status dflash_gate_options_set_loaders(dflash_gate_options *options, const char *names, size_t names_len);

/* Frees options; a second free of the same handle is refused (DFLASH_GATE_INVALID_HANDLE). */
dflash_gate_status dflash_gate_options_free(dflash_gate_options *options);

/*
 * Gates the package directory dir, with options (null: the draft alone). A report comes back also when
 * the gate could not run: its verdict is then DFLASH_GATE_COULD_NOT_RUN and its first objection says
 * why. *out is null whenever the status is not DFLASH_GATE_OK. Free it with dflash_gate_report_free.
 */
dflash_gate_status dflash_gate_gate(const char *dir, size_t dir_len, const dflash_gate_options *options, dflash_gate_report **out);

/*
 * Gates a package whose bytes the caller already holds: its config.json when has_config (config_len
 * bytes at config), and its weight file, named weight_name, when has_weights. Absence is the flag,
 * never a null pointer: an empty file read into a std::vector has a null data(), and a null pointer
 * with length 0 is an empty file. A loader maps the files once and gates the mapping; the bytes must
 * not change during the call, and nothing is kept after it. package names the package in the report.
 */
dflash_gate_status dflash_gate_evaluate(const char *package, size_t package_len, bool has_config, const uint8_t *config, size_t config_len, const char *weight_name, size_t weight_name_len, bool has_weights, const uint8_t *weights, size_t weights_len, dflash_gate_report **out);

/* The verdict: PASS only when every check passed. */
dflash_gate_status dflash_gate_report_verdict(const dflash_gate_report *report, dflash_gate_verdict *out);

/* The exit status the command-line gate gives: 0 pass, 1 fail, 3 undecided, 2 could not run; also 2
 * when report is not a live report (never a value that reads as a pass). */
int32_t dflash_gate_report_exit_status(const dflash_gate_report *report);

/* How many checks ran (0 for a gate that could not run). */
dflash_gate_status dflash_gate_report_check_count(const dflash_gate_report *report, size_t *out);

/* Check index (from 0, in run order). */
dflash_gate_status dflash_gate_report_check(const dflash_gate_report *report, size_t index, dflash_gate_check *out);

/* The check the verdict rests on: the first that failed, else the first undecided. DFLASH_GATE_NOT_FOUND
 * when every check passed. For a gate that could not run: its reason (id) and message, outcome
 * DFLASH_GATE_COULD_NOT_RUN. */
dflash_gate_status dflash_gate_report_first_objection(const dflash_gate_report *report, dflash_gate_check *out);

/* How many NOT CHECKED lines the report has. */
dflash_gate_status dflash_gate_report_not_checked_count(const dflash_gate_report *report, size_t *out);

/* NOT CHECKED line index: what the gate did not check, said so that silence is not approval. */
dflash_gate_status dflash_gate_report_not_checked(const dflash_gate_report *report, size_t index, dflash_gate_str *out);

/* What the report was checked against: its target, source, and hub repository and revision (each
 * empty when not given, or for a gate that could not run). */
dflash_gate_status dflash_gate_report_against(const dflash_gate_report *report, dflash_gate_against *out);

/* How many tensors the census lists (0 when the weight file did not parse). */
dflash_gate_status dflash_gate_report_tensor_count(const dflash_gate_report *report, size_t *out);

/* Tensor index of the census, in the weight file's order. */
dflash_gate_status dflash_gate_report_tensor(const dflash_gate_report *report, size_t index, dflash_gate_tensor *out);

/* The whole report as the JSON document `dflash-gate --json` prints for one package (same schema; an
 * error document when the gate could not run). */
dflash_gate_status dflash_gate_report_json(const dflash_gate_report *report, dflash_gate_str *out);

/* Frees a report and every string borrowed from it; a second free is refused
 * (DFLASH_GATE_INVALID_HANDLE) and frees nothing. */
dflash_gate_status dflash_gate_report_free(dflash_gate_report *report);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DFLASH_GATE_H */
