// The MAIN_THREAD_JANK configuration, with the keys, string values and
// bounds of HarmonyOS hiAppEvent.setEventConfig, so a config written for the
// seed works here unchanged and one validator serves the JSON file and the
// command-line flags alike.
//
// Precedence (lowest to highest), whatever order the calls come in:
//   built-in defaults  <  --config FILE  <  command-line flags
// A flag names an explicit wish for this run, the file a standing setup, so
// the flag wins. Within one layer the last value given for a key wins.
//
// Every key is checked as soon as it is applied (is it a key, a whole
// number, inside its own range); build() adds the one cross-key check,
// sample_count <= 2500/sample_interval - 4, once every layer is in, because
// the bound moves with sample_interval and the two may come from different
// layers. Errors are ConfigError with messages of the form
//   config: sample_interval "30" out of range: allowed 50..500 (ms)
//   config: /etc/jank.json: unknown key "foo": allowed keys log_type, ...
// which the CLI prints and turns into exit status 2.
//
// sample_count's default of 10 does not fit past sample_interval 178 ms
// (2500/200 - 4 = 8); when sample_count is not given it is lowered to the
// bound rather than refused, since the user never asked for 10.
//
// Unlike the seed, the sampling keys take effect with every log_type (the
// seed reads them only with log_type 1): a user who sets them means them.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace jankbpf {

struct JankConfig {
  // 0: stacks for tasks between the threshold and the trace bound, a trace
  //    past it; 1: stacks only; 2: trace only.
  int log_type = 0;
  int sample_interval_ms = 150;    // [50, 500]
  int ignore_startup_time_s = 10;  // [3, 86400]
  int sample_count = 10;           // [1, 2500/sample_interval - 4]
  int report_times_per_app = 1;    // [1, 3] per day, per hour with --dev

  bool stacks_enabled() const { return log_type != 2; }
  bool trace_enabled() const { return log_type != 1; }
  int64_t ignore_startup_ms() const { return int64_t{ignore_startup_time_s} * 1000; }

  // The seed's bound: 2500 ms from detection to report, less 4 intervals
  // (the first check, two second checks, the collect-and-report interval).
  static int max_sample_count(int sample_interval_ms) { return 2500 / sample_interval_ms - 4; }
};

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ConfigBuilder {
 public:
  enum class Source { File, Flag };

  // The seed's key names, in the seed's order.
  static const std::vector<std::string_view>& keys();

  // One key with its string value, exactly as setEventConfig takes it.
  // Throws ConfigError naming the key, the value and the allowed range.
  void apply(std::string_view key, std::string_view value, Source source = Source::Flag);

  // A JSON object of string values, e.g.
  //   {"log_type":"1","sample_interval":"100","sample_count":"21"}
  // Keys left out keep their lower-layer values; log_type may be left out
  // (setEventConfig requires it, but here a flag or the default supplies
  // it). Throws ConfigError for an unreadable file, bad JSON, a top level
  // that is not an object, a key given twice, an unknown key, a value that
  // is not a JSON string, or a value out of range.
  void load_file(const std::string& path);

  // Defaults, then the file layer, then the flag layer; then the
  // sample_count bound. Throws ConfigError.
  JankConfig build() const;

 private:
  struct Value {
    int number;
    std::string text;    // as given, for messages
    std::string origin;  // file path, empty for a flag
  };
  std::map<std::string, Value, std::less<>> file_;
  std::map<std::string, Value, std::less<>> flags_;
};

}  // namespace jankbpf
