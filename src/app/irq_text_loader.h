// The interrupt text for the causes' BPF side (cause/irq_text.h): read
// from /proc/kallsyms on a thread of its own at the lowest priority,
// beside the BPF load, and handed to the detector once it is attached.
//
// Why not on the start's path or after it: under emulation the read is a
// second of system time, and run after the attach it took the CPU from the
// first tasks watched (CI's arm64 lane: a first task queued half its
// length, and unsampled). Why the stop never waits for it: at nice 19 on a
// busy machine it can take seconds, and the service's unit cannot raise it
// again (no CAP_SYS_NICE); once cancelled it never touches the detector,
// and the process's exit ends it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace jankbpf {

class Detector;

class IrqTextLoader {
 public:
  IrqTextLoader() = default;
  IrqTextLoader(const IrqTextLoader&) = delete;
  IrqTextLoader& operator=(const IrqTextLoader&) = delete;
  ~IrqTextLoader() { cancel(); }

  // Starts the read; once only.
  void begin();
  // The detector to fill, attached (a null one: nothing to fill).
  void attach(Detector* detector);
  // After this returns the thread never touches the detector.
  void cancel();

 private:
  struct Job {
    std::mutex mu;  // held while the map is filled; cancel() takes it
    std::condition_variable cv;
    Detector* detector = nullptr;
    bool given = false;
    std::atomic<bool> cancelled{false};
  };
  std::shared_ptr<Job> job_;
};

}  // namespace jankbpf
