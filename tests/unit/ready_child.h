// A child process for the live runtime tests: runs argv and is waited for
// until it writes its first byte to stdout (it is ready: in the code the
// test reads); killed and reaped when the test ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace jankbpf::test {

struct ReadyChild {
  pid_t pid = -1;
  explicit ReadyChild(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    char c;
    REQUIRE(::read(fds[0], &c, 1) == 1);  // ready
    close(fds[0]);
  }
  ~ReadyChild() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  ReadyChild(const ReadyChild&) = delete;
  ReadyChild& operator=(const ReadyChild&) = delete;
};

}  // namespace jankbpf::test
