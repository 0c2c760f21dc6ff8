// Sanitizer defaults compiled into every fuzz target, so that a target run by hand on a saved
// input reports exactly what the fuzzing run did: a UBSan report is a finding, not a warning to
// scroll past, so the first one stops the run (and libFuzzer saves the input).
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }
