// Catch2 entry point for the unit tests: each tests/unit/*.cpp adds cases.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
