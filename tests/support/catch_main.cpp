// Catch2 main for every crescent test binary: Catch2's implementation is compiled
// here once (it is the slowest file of the build), not in each test.
//
// A test that needs something the machine may lack (root, a tool) defines
// crescent_test_skip_reason(); a non-null reason is printed as "SKIP: <reason>" and
// the binary exits 77, meson's skip code, before any test case runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "tests/support/skip.hpp"

int main(int argc, char** argv) {
    if (crescent_test_skip_reason != nullptr) {
        if (const char* why = crescent_test_skip_reason()) {
            std::printf("SKIP: %s\n", why);
            return 77;
        }
    }
    return Catch::Session().run(argc, argv);
}
