// crescent tests — death tests for Catch2: run a callable in a forked child and
// check that it aborted, and what it printed on stderr first.
//
//   CHECK(crescent::test::aborts([&] { zbuf::unref(p); }, "refcount is already 0"));
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "tests/support/child_output.hpp"

namespace crescent::test {

// Runs fn in a forked child; true if the child died of SIGABRT. With
// `expect`, also CHECKs that the child wrote it to stderr.
template <class F>
bool aborts(F fn, const char* expect = nullptr) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        std::signal(SIGABRT, SIG_DFL); // not Catch's handler
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    int status;
    std::string err = child_output(fds[0], pid, &status);
    INFO("child stderr: " << err);
    if (expect) {
        CHECK(err.find(expect) != std::string::npos);
    }
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

} // namespace crescent::test
