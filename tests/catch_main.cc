// Catch2 v2 ships no prebuilt main: it is compiled once here and linked into every test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
