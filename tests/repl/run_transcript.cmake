# Feed INPUT to TAPEDECK on stdin (a pipe: no prompt, no echo) and compare what it prints, stdout
# then stderr, with EXPECTED. ARGS_FILE, when given, holds the command-line arguments, one a line.
# The exit status must be 0, or the number in EXPECTED_RC when given.
# To regenerate an expected output after checking the new one by eye:
#   TAPEDECK_UPDATE_TRANSCRIPTS=1 ctest -R repl.NAME
set(args "")
if(ARGS_FILE)
  file(STRINGS ${ARGS_FILE} args)
endif()
execute_process(COMMAND ${TAPEDECK} ${args} INPUT_FILE ${INPUT} OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
set(actual "${out}${err}")
if(DEFINED ENV{TAPEDECK_UPDATE_TRANSCRIPTS})
  file(WRITE ${EXPECTED} "${actual}")
  message(STATUS "wrote ${EXPECTED}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  file(WRITE ${EXPECTED}.actual "${actual}")
  message(FATAL_ERROR "transcript ${INPUT} differs (diff ${EXPECTED} ${EXPECTED}.actual).\n"
                      "--- expected\n${expected}\n--- actual\n${actual}")
endif()
file(REMOVE ${EXPECTED}.actual)
if(NOT DEFINED EXPECTED_RC)
  set(EXPECTED_RC 0)
endif()
if(NOT rc EQUAL EXPECTED_RC)
  message(FATAL_ERROR "tapedeck exited with ${rc} on ${INPUT}, expected ${EXPECTED_RC}")
endif()
