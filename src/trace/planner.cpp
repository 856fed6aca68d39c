#include "trace/planner.h"

namespace jankbpf {

void TracePlanner::reset() {
  state_ = State::Idle;
  checks_ = 0;
  next_check_ = 0;
  trigger_.reset();
}

void TracePlanner::start(int64_t now_ns) {
  if (state_ == State::Checking || state_ == State::Capturing) return;
  reset();
  state_ = State::Checking;
  next_check_ = now_ns + timing_.check_interval_ns;
}

TracePlanner::Action TracePlanner::trigger(int64_t now_ns) {
  trigger_ = now_ns;
  state_ = State::Capturing;
  return Action::Triggered;
}

TracePlanner::Action TracePlanner::observe(int64_t now_ns, int64_t elapsed_ns) {
  if (state_ != State::Idle && state_ != State::Checking) return Action::None;
  if (elapsed_ns > timing_.bound_ns) return trigger(now_ns);
  return Action::None;
}

TracePlanner::Action TracePlanner::on_deadline(int64_t now_ns, int64_t elapsed_ns) {
  switch (state_) {
    case State::Checking: {
      if (now_ns < next_check_) return Action::None;  // early wakeup
      ++checks_;
      if (elapsed_ns > timing_.bound_ns) return trigger(now_ns);
      if (checks_ >= timing_.max_checks) {
        state_ = State::Done;
        return Action::GaveUp;
      }
      // Keep the 150 ms cadence; a loop that woke late does not get a burst
      // of catch-up checks, just the next one an interval from now.
      next_check_ += timing_.check_interval_ns;
      if (next_check_ <= now_ns) next_check_ = now_ns + timing_.check_interval_ns;
      return Action::None;
    }
    case State::Capturing:
      if (now_ns < *capture_end_ns()) return Action::None;
      state_ = State::Done;
      return Action::Save;
    case State::Idle:
    case State::Done:
      return Action::None;
  }
  return Action::None;
}

std::optional<int64_t> TracePlanner::deadline() const {
  switch (state_) {
    case State::Checking: return next_check_;
    case State::Capturing: return capture_end_ns();
    default: return std::nullopt;
  }
}

}  // namespace jankbpf
