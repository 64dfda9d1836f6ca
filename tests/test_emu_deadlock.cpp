// The emulation's deadlock report (tests/emu/cuda_on_cpu.h): a block whose
// thread 5 never reaches the barrier the other 63 wait at must abort at
// once, naming each waiter, rather than hang. The launch runs in a child
// process; this one reads what the child printed and how it ended.
#include "cuda_on_cpu.h"

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

int main() {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    const pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 2);
        emu_launch(2, 64, [] {
            if (threadIdx.x != 5) __syncthreads();
        });
        _exit(0); // not reached: the launch aborts
    }
    close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, (size_t)n);
    int status = 0;
    waitpid(child, &status, 0);
    const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    const bool named = out.find("DEADLOCK: block 0 thread 0 waits at a barrier of 64") != std::string::npos &&
                       out.find("thread 63 waits") != std::string::npos &&
                       out.find("thread 5 waits") == std::string::npos;
    printf("%s: the child %s; it printed:\n%s", aborted && named ? "PASS" : "FAIL",
           aborted ? "aborted" : "did not abort", out.c_str());
    return aborted && named ? 0 : 1;
}
