/* A C program that gates the package directory it is given, in process, through dflash-gate's C
 * library (the imported target dflash_gate::dflash_gate), and exits with the status the command-line
 * gate would give. With -DWITH_C_LOADER=ON, `cargo xtask cmake-smoke archive` links it against the
 * release archive's library and runs it on a good and a broken package. */
#include "dflash_gate.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <package-dir>\n", argv[0]);
    return 2;
  }
  dflash_gate_report *report = NULL;
  if (dflash_gate_gate(argv[1], strlen(argv[1]), NULL, &report) != DFLASH_GATE_OK) {
    fprintf(stderr, "dflash_gate_gate failed\n");
    return 2;
  }
  dflash_gate_check objection;
  if (dflash_gate_report_first_objection(report, &objection) == DFLASH_GATE_OK)
    fprintf(stderr, "refused: %.*s: %.*s\n", (int)objection.id.len, objection.id.ptr,
            (int)objection.message.len, objection.message.ptr);
  int status = dflash_gate_report_exit_status(report);
  dflash_gate_report_free(report);
  return status;
}
