#include "app/irq_text_loader.h"

#include <unistd.h>

#include <string>
#include <thread>

#include "bpf/detector.h"
#include "cause/irq_text.h"
#include "util/log.h"

namespace jankbpf {

void IrqTextLoader::begin() {
  if (job_) return;
  job_ = std::make_shared<Job>();
  std::thread([job = job_] {
    // At jankbpf's own priority, beside the BPF load (~40 ms of CPU, done
    // before the attach on a 2-CPU machine with three spinners). At nice 19
    // it came 3.5 s after the attach there, and until it comes no waker is
    // blamed (causes.bpf.h, waker_flags).
    // Read a block at a time: held whole, the ~5 MB of text was most of an
    // idle jankbpf's peak RSS.
    std::vector<std::pair<uint64_t, uint32_t>> chunks;
    const bool read = !job->cancelled && cause::irq_text_chunks_of_file("/proc/kallsyms", 4096, &chunks);
    std::unique_lock lk(job->mu);
    job->cv.wait(lk, [&] { return job->given || job->cancelled; });
    if (job->cancelled || !job->detector || !job->detector->causes_enabled()) return;
    if (!read) {
      log::warn("causes: /proc/kallsyms unreadable: wakeups from interrupts are told only on idle CPUs");
      return;
    }
    std::string error;
    if (!job->detector->set_irq_text(chunks, &error, &job->cancelled)) {
      if (!job->cancelled) log::warn("causes: %s", error.c_str());
      return;
    }
    log::debug("causes: %zu chunks of interrupt text", chunks.size());
  }).detach();
}

void IrqTextLoader::attach(Detector* detector) {
  if (!job_) return;
  {
    std::lock_guard lk(job_->mu);
    if (job_->given) return;
    job_->detector = detector;
    job_->given = true;
  }
  job_->cv.notify_all();
}

void IrqTextLoader::cancel() {
  if (!job_) return;
  job_->cancelled = true;  // a fill under way stops at its next map update
  {
    std::lock_guard lk(job_->mu);  // and is out of the detector once this is held
    job_->detector = nullptr;
  }
  job_->cv.notify_all();
  job_.reset();
}

}  // namespace jankbpf
