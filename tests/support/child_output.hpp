// crescent tests — the output of a child process: read the read end of its
// pipe to EOF, close it, reap the child.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace crescent::test {

// Everything the child `pid` wrote into the pipe whose read end is `fd` (the
// write end already closed here); its wait status in *status.
inline std::string child_output(int fd, pid_t pid, int* status) {
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    close(fd);
    *status = 0;
    waitpid(pid, status, 0);
    return out;
}

} // namespace crescent::test
