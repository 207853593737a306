// A test binary's precondition, checked by the shared Catch2 main (catch_main.cpp).
#pragma once

// Defined by a test that cannot run everywhere: returns why this machine cannot
// run it (the binary then exits 77, meson's skip code), or nullptr to run.
// Weak, so the binaries that do not define it link.
[[gnu::weak]] const char* crescent_test_skip_reason();
