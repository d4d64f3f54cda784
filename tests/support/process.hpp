#pragma once
// Test helper: run a program with arguments, capture exit status, stdout and stderr; optionally with a
// time limit (the child is killed past it), or started now and finished later (to signal it midway).
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace qpolicy::test {

struct process_result {
  int status = -1;  // the exit status, or 128 + the signal that ended it
  bool timed_out = false;
  std::string out, err;
};

/// A started child and the read ends of its stdout and stderr.
struct running_process {
  pid_t pid = -1;
  int out = -1, err = -1;
};

/// args with meson's exe wrapper (MESON_EXE_WRAPPER, which meson sets in a cross build's test environment:
/// qemu for arm64 programs on x86-64, a machine with no binfmt entry for them) before the qpolicy
/// executable ($QPOLICY_EXE), wherever it stands in args (after /usr/bin/env's assignments too).
inline std::vector<std::string> with_exe_wrapper(std::vector<std::string> args) {
  const char* wrapper = std::getenv("MESON_EXE_WRAPPER");
  const char* exe = std::getenv("QPOLICY_EXE");
  if (!wrapper || !*wrapper || !exe) return args;
  std::vector<std::string> words;
  for (std::string_view rest = wrapper; !rest.empty();) {
    const auto end = rest.find(' ');
    if (end != 0) words.emplace_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  for (auto it = args.begin(); it != args.end(); ++it)
    if (*it == exe) {
      args.insert(it, words.begin(), words.end());
      break;
    }
  return args;
}

inline running_process start_process(const std::vector<std::string>& given) {
  const std::vector<std::string> args = with_exe_wrapper(given);
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) || pipe(err_pipe)) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);  // a wrapper by name: on PATH
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
  return {pid, out_pipe[0], err_pipe[0]};
}

/// Collects the child's output and status; past `timeout_seconds` (0: none) it is killed (SIGKILL).
inline process_result finish_process(running_process p, double timeout_seconds = 0) {
  process_result r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  pollfd fds[2] = {{p.out, POLLIN, 0}, {p.err, POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 && !r.timed_out) {
        r.timed_out = true;
        kill(p.pid, SIGKILL);
      }
      wait_ms = r.timed_out ? -1 : static_cast<int>(left);
    }
    if (poll(fds, 2, wait_ms) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(p.pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline process_result run_process(const std::vector<std::string>& args, double timeout_seconds = 0) {
  return finish_process(start_process(args), timeout_seconds);
}

/// Runs the qpolicy executable the tests are given ($QPOLICY_EXE) with `args`; std::runtime_error when
/// the variable is not set.
inline process_result run_qpolicy(std::vector<std::string> args, double timeout_seconds = 0) {
  const char* exe = std::getenv("QPOLICY_EXE");
  if (!exe) throw std::runtime_error("QPOLICY_EXE is not set: the tests run the qpolicy executable it names");
  args.insert(args.begin(), exe);
  return run_process(args, timeout_seconds);
}

}  // namespace qpolicy::test
