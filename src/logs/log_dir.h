// The log directory: where stack and trace files go, how much disk they may
// take, and how old ones age out (HarmonyOS's watchdog directory: a 10 MB
// cap, and when a write would pass it, delete up to 100 of the oldest files).
//
// jankbpf runs as root and may be pointed at a directory others can write
// to, so nothing here follows a symlink: the path is walked component by
// component with O_NOFOLLOW (missing ones created 0750), the directory is
// then held open and every later operation is relative to that fd
// (openat/unlinkat/fstatat with AT_SYMLINK_NOFOLLOW), and files are created
// O_CREAT|O_EXCL|O_NOFOLLOW, mode 0640. A name that is already taken (a
// collision, or a planted file or link) is skipped for the next free one.
//
// Only jankbpf's own files are counted against the cap and aged: regular
// files named stack-PID-TIMESTAMP[-N].txt, trace-PID-TIMESTAMP[-N].dat or
// trace-PID-TIMESTAMP[-N].txt. A --log-dir pointed at a shared directory by
// mistake must never cost anyone else's files, and theirs are not ours to
// budget. TIMESTAMP is epoch milliseconds, zero-padded to 13 digits; "oldest
// by file name" means ordered by that TIMESTAMP (then by the whole name),
// since plain name order would put every stack- file before every trace-
// file and sort by PID before time.
//
// No call throws for I/O: failures come back as an error string (ENOSPC,
// EROFS, EACCES...), so a full or read-only disk costs a record its log
// file, never the process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "util/fd.h"

namespace jankbpf {

enum class LogKind {
  Stack,      // stack-PID-TIMESTAMP.txt
  Trace,      // trace-PID-TIMESTAMP.dat (trace-cmd)
  TraceText,  // trace-PID-TIMESTAMP.txt (the tracefs text, without trace-cmd)
};

struct LogWrite {
  std::string path;               // absolute path of the new file; empty if none
  uint64_t bytes = 0;             // its size
  bool over_limit = false;        // log_over_limit: the cap could not be met
  std::string error;              // why nothing was written (I/O), empty if fine
  std::vector<std::string> aged;  // names aging deleted to make room

  bool ok() const { return !path.empty(); }
};

struct LogDirOptions {
  std::string path = "/var/log/jankbpf";
  uint64_t cap_bytes = 10ull << 20;
  unsigned max_aged_per_write = 100;
  // Epoch milliseconds for file names; CLOCK_REALTIME when empty. Tests
  // inject one to get exact names.
  std::function<int64_t()> clock_ms;
};

// Thread-safe: the reporter writes stack logs while the trace keeper, on
// the main thread, adopts traces; each public call holds the directory's
// own lock (its listing, aging and naming must not interleave).
class LogDir {
 public:
  struct Entry {
    std::string name;
    uint64_t bytes = 0;
    int64_t timestamp_ms = 0;
    unsigned seq = 0;  // the -N collision suffix, 0 without one
  };

  explicit LogDir(LogDirOptions options);

  // Creates (0750, parents too) and opens the directory. Called by the
  // first write if not before; a failure is kept in error() and retried by
  // the next write, so a directory that appears later is picked up.
  bool open();
  std::string error() const;
  const std::string& path() const { return options_.path; }
  uint64_t cap_bytes() const { return options_.cap_bytes; }

  // Writes `data` as a new file of `kind` for process `pid`, aging first if
  // the cap needs it.
  LogWrite write(LogKind kind, pid_t pid, std::string_view data);

  // Moves a finished file from elsewhere (a trace written by trace-cmd into
  // a private temp dir) into the directory under a fresh name, counted
  // against the cap like a write. Renames when on the same filesystem
  // (never replacing an existing name), else copies into an O_EXCL file;
  // the source is removed either way once adopted. The source must be a
  // regular file (opened O_NOFOLLOW).
  LogWrite adopt(LogKind kind, pid_t pid, const std::string& source_path);

  // jankbpf's files, oldest first, and their total size.
  std::vector<Entry> list();
  uint64_t used_bytes();

  // The name a file would get (without the collision suffix); exposed for
  // tests and for callers that want to show it.
  static std::string file_name(LogKind kind, pid_t pid, int64_t timestamp_ms, unsigned seq = 0);
  // Parses one of our names; false for anything else.
  static bool parse_name(std::string_view name, Entry& out);

 private:
  bool ensure_open(std::string& error);
  // Deletes oldest files until `incoming` fits or the per-write limit is
  // hit; fills result.aged / result.over_limit.
  bool make_room(uint64_t incoming, LogWrite& result);
  // Creates a fresh O_EXCL file for kind/pid; returns its fd and name.
  Fd create(LogKind kind, pid_t pid, std::string& name, std::string& error);
  int64_t now_ms() const;
  std::vector<Entry> list_locked();

  mutable std::mutex mu_;  // everything below, and the directory's contents
  LogDirOptions options_;
  Fd dir_;
  std::string error_;
};

}  // namespace jankbpf
