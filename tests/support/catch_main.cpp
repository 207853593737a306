// Catch2 main for every crescent test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
