#include "app/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace jankbpf {

bool Launcher::spawn(const std::vector<std::string>& argv, bool stdout_to_stderr, std::string* error) {
  int gate[2], err[2];
  if (pipe2(gate, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
    *error = std::string("pipe: ") + strerror(errno);
    return false;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + strerror(errno);
    return false;
  }
  if (pid == 0) {
    // Child: restore what jankbpf changed, wait at the gate, exec.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    close(gate[1]);
    close(err[0]);
    if (stdout_to_stderr) dup2(STDERR_FILENO, STDOUT_FILENO);
    char go;
    if (read(gate[0], &go, 1) != 1) _exit(127);  // jankbpf gave up
    execvp(args[0], args.data());
    int e = errno;
    (void)!write(err[1], &e, sizeof e);
    _exit(127);
  }
  close(gate[0]);
  close(err[1]);
  gate_.reset(gate[1]);
  exec_err_.reset(err[0]);
  pid_ = pid;
  return true;
}

bool Launcher::release(std::string* error) {
  char go = 1;
  if (write(gate_.get(), &go, 1) != 1) {
    *error = std::string("cannot start the command: ") + strerror(errno);
    return false;
  }
  gate_.reset();
  int e = 0;
  ssize_t n;
  do n = read(exec_err_.get(), &e, sizeof e);
  while (n < 0 && errno == EINTR);
  exec_err_.reset();
  if (n == sizeof e) {
    *error = std::string("cannot run the command: ") + strerror(e);
    return false;
  }
  return true;
}

bool Launcher::reap(int* status) {
  if (pid_ <= 0) return false;
  int ws = 0;
  pid_t r = waitpid(pid_, &ws, WNOHANG);
  if (r != pid_) return false;
  *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
  pid_ = -1;
  return true;
}

void Launcher::abandon() {
  if (pid_ <= 0) return;
  gate_.reset();  // EOF at the gate: the child exits 127 without exec
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace jankbpf
