/* Loads one GGUF with llama.cpp's own model loader, as llama-server loads a draft on a CPU, and says
 * what it did as one JSON line on stdout: {"loaded": true|false, "error": "..."}. `error` is the
 * last error-level log line that says why (llama.cpp ends every failure with a bare "failed to load
 * model" line, which is skipped for the one before it), or "" when nothing was logged at error
 * level. The exit status is 0 whatever the loader did; an abort inside llama.cpp (a GGML_ASSERT)
 * kills the process before the line is printed, and the caller reads that as the abort it is.
 *
 * Built by the differential trial gguf_drafts_against_llama_cpps_loader against the llama.cpp named
 * by DFLASH_GATE_LLAMA_CPP (CONTRIBUTING.md): cc llama_load.c -I$DIR/include -L$DIR/lib -lllama. */

#include "llama.h"

#include <stdio.h>
#include <string.h>

#define LINE 4096

static char last_error[LINE];
static char current[LINE];
static enum ggml_log_level current_level = GGML_LOG_LEVEL_NONE;

/* A line is done: keep it when it is an error that says why. */
static void finish_line(void) {
    size_t n = strlen(current);
    while (n > 0 && (current[n - 1] == '\n' || current[n - 1] == '\r')) {
        current[--n] = '\0';
    }
    const char * generic = ": failed to load model";
    const size_t g = strlen(generic);
    const int bare = n >= g && strcmp(current + n - g, generic) == 0;
    if (current_level == GGML_LOG_LEVEL_ERROR && n > 0 && !bare) {
        memcpy(last_error, current, n + 1);
    }
    current[0] = '\0';
}

/* llama.cpp logs a line in pieces: a level, then GGML_LOG_LEVEL_CONT for the rest of it. */
static void on_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level != GGML_LOG_LEVEL_CONT) {
        finish_line();
        current_level = level;
    }
    strncat(current, text, LINE - strlen(current) - 1);
    if (strchr(text, '\n') != NULL) {
        finish_line();
    }
}

static void print_json_string(const char * s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(on_log, NULL);
    llama_backend_init();

    struct llama_model_params params = llama_model_default_params();
    params.vocab_only = false;
    params.n_gpu_layers = 0;
    params.load_mode = LLAMA_LOAD_MODE_MMAP; /* b11434's use_mmap = true */

    struct llama_model * model = llama_model_load_from_file(argv[1], params);
    finish_line();

    printf("{\"loaded\": %s, \"error\": ", model != NULL ? "true" : "false");
    print_json_string(last_error);
    printf("}\n");
    fflush(stdout);

    if (model != NULL) {
        llama_model_free(model);
    }
    llama_backend_free();
    return 0;
}
