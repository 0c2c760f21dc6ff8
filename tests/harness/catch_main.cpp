// The one CATCH_CONFIG_MAIN translation unit; every test binary links it (library kiln_catch_main).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
