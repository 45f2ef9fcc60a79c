/* The header on its own, twice in one unit: it has its own include guard and needs nothing before it. */
#include "dflash_gate.h"
#include "dflash_gate.h"

/* Every type is complete where it should be and usable from C. */
size_t dflash_gate_header_check(void);
size_t dflash_gate_header_check(void) {
  dflash_gate_check check;
  dflash_gate_tensor tensor;
  dflash_gate_status status = DFLASH_GATE_OK;
  dflash_gate_verdict verdict = DFLASH_GATE_UNDECIDED;
  check.outcome = verdict;
  tensor.rank = 0;
  return sizeof check + sizeof tensor + (size_t)status + (size_t)check.outcome + tensor.rank;
}
