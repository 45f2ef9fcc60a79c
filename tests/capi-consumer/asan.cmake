# The ASan row: the loader under AddressSanitizer on every kind of input, each run expecting its exit
# status. Any sanitizer report changes the exit status (and the row's FAIL_REGULAR_EXPRESSION sees it).
# A sanitizer report exits 86, which no run expects.
set(ENV{ASAN_OPTIONS} "detect_leaks=1:abort_on_error=0:exitcode=86")
set(_runs
  "0|${GOOD}"
  "1|${BROKEN}"
  "2|--by-path|${MISSING}"
  "1|${MISSING}"
  "0|--by-path|${GOOD}"
  "0|--free-twice|${GOOD}"
  "1|--free-twice|${BROKEN}")
if(DEFINED LEAK)
  # Seen red on purpose: a report never freed must be reported as leaked.
  set(_runs "0|--leak|${GOOD}")
endif()
foreach(_run IN LISTS _runs)
  string(REPLACE "|" ";" _args "${_run}")
  list(POP_FRONT _args _expect)
  execute_process(COMMAND "${LOADER}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  message("${LOADER} ${_args}: exit ${_rc}\n${_out}")
  if(NOT _rc STREQUAL _expect)
    message(FATAL_ERROR "${LOADER} ${_args} exited ${_rc}, not ${_expect}")
  endif()
endforeach()
