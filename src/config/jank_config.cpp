#include "config/jank_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "util/fd.h"

namespace jankbpf {
namespace {

// A config file is a handful of short keys; anything much bigger is the
// wrong file, and reading it whole would let a mistaken --config eat memory.
constexpr size_t kMaxFileBytes = 64 * 1024;

struct KeySpec {
  std::string_view name;
  int64_t min;
  int64_t max;           // for sample_count: the widest bound (interval 50)
  std::string_view what; // shown after the range
};

// The seed's table. ignore_startup_time has no maximum there; one day is
// ours, since quotas are counted per day and a larger wait means "never".
constexpr KeySpec kSpecs[] = {
    {"log_type", 0, 2, "(0 stacks and trace, 1 stacks only, 2 trace only)"},
    {"sample_interval", 50, 500, "(ms)"},
    {"ignore_startup_time", 3, 86400, "(s)"},
    {"sample_count", 1, 2500 / 50 - 4, "(samples)"},
    {"report_times_per_app", 1, 3, "(reports per process per day, per hour with --dev)"},
};

const KeySpec* find_spec(std::string_view key) {
  for (const auto& s : kSpecs)
    if (s.name == key) return &s;
  return nullptr;
}

std::string prefix(const std::string& origin) {
  return origin.empty() ? "config: " : "config: " + origin + ": ";
}

std::string allowed_keys() {
  std::string out;
  for (const auto& s : kSpecs) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

std::string range_text(int64_t min, int64_t max, std::string_view what) {
  return "allowed " + std::to_string(min) + ".." + std::to_string(max) + " " + std::string(what);
}

std::string sample_count_what(int interval) {
  return "(samples: 2500/sample_interval - 4, with sample_interval " + std::to_string(interval) +
         " ms)";
}

[[noreturn]] void out_of_range(const std::string& origin, std::string_view key,
                               std::string_view text, int64_t min, int64_t max,
                               std::string_view what) {
  throw ConfigError(prefix(origin) + std::string(key) + " \"" + std::string(text) +
                    "\" out of range: " + range_text(min, max, what));
}

// Strict decimal: optional '-', digits, nothing else. setEventConfig's
// values are plain integers in strings; " 100", "1e2", "100ms", "0x64" and
// "" are refused rather than guessed at. Overflow saturates so the range
// check reports it as out of range with the text as given.
bool parse_whole(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ptr != last) return false;
  if (ec == std::errc::result_out_of_range) {
    out = text[0] == '-' ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    return true;
  }
  return ec == std::errc();
}

const char* json_type(const nlohmann::json& v) { return v.type_name(); }

}  // namespace

const std::vector<std::string_view>& ConfigBuilder::keys() {
  static const std::vector<std::string_view> k = [] {
    std::vector<std::string_view> v;
    for (const auto& s : kSpecs) v.push_back(s.name);
    return v;
  }();
  return k;
}

namespace {

// Validates one value on its own; returns it. sample_count gets only its
// lower bound and number check here: its upper bound waits for build().
int64_t check_value(const std::string& origin, std::string_view key, std::string_view text) {
  const KeySpec* spec = find_spec(key);
  if (!spec)
    throw ConfigError(prefix(origin) + "unknown key \"" + std::string(key) +
                      "\": allowed keys " + allowed_keys());
  int64_t n = 0;
  const bool is_count = key == "sample_count";
  if (!parse_whole(text, n))
    throw ConfigError(prefix(origin) + std::string(key) + " \"" + std::string(text) +
                      "\" is not a whole number: " +
                      (is_count ? "allowed 1..2500/sample_interval - 4 (samples)"
                                : range_text(spec->min, spec->max, spec->what)));
  if (!is_count && (n < spec->min || n > spec->max))
    out_of_range(origin, key, text, spec->min, spec->max, spec->what);
  return n;
}

}  // namespace

void ConfigBuilder::apply(std::string_view key, std::string_view value, Source source) {
  // Flags carry no origin for messages; load_file validates with its path.
  int64_t n = check_value("", key, value);
  auto& layer = source == Source::File ? file_ : flags_;
  layer.insert_or_assign(std::string(key),
                         Value{static_cast<int>(std::clamp<int64_t>(
                                   n, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())),
                               std::string(value), ""});
}

void ConfigBuilder::load_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw ConfigError("config: cannot read " + path + ": " + strerror(errno));
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) throw ConfigError("config: cannot read " + path + ": " + strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError("config: cannot read " + path + ": " + strerror(EISDIR));
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw ConfigError("config: cannot read " + path + ": " + strerror(errno));
    }
    if (r == 0) break;
    text.append(buf, static_cast<size_t>(r));
    if (text.size() > kMaxFileBytes)
      throw ConfigError("config: " + path + ": larger than " + std::to_string(kMaxFileBytes) +
                        " bytes, not a MAIN_THREAD_JANK config");
  }

  // nlohmann keeps the last of duplicate keys silently; a key given twice in
  // a hand-written file is a mistake worth naming, so watch the top level.
  std::set<std::string> seen;
  std::string duplicate;
  auto watch = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string()) {
      auto k = parsed.get<std::string>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, watch);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("config: " + path + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object())
    throw ConfigError("config: " + path +
                      ": expected a JSON object of string values such as {\"log_type\": \"0\"}, got " +
                      json_type(doc));
  if (!duplicate.empty())
    throw ConfigError("config: " + path + ": key \"" + duplicate + "\" given twice");

  // Validate everything before taking anything, so a bad file leaves the
  // builder as it was.
  std::map<std::string, Value, std::less<>> staged;
  for (const auto& [key, v] : doc.items()) {
    const KeySpec* spec = find_spec(key);
    if (!spec)
      throw ConfigError("config: " + path + ": unknown key \"" + key + "\": allowed keys " +
                        allowed_keys());
    if (!v.is_string()) {
      std::string range = key == "sample_count"
                              ? std::string("allowed \"1\"..\"2500/sample_interval - 4\" (samples)")
                              : "allowed \"" + std::to_string(spec->min) + "\"..\"" +
                                    std::to_string(spec->max) + "\" " + std::string(spec->what);
      // An array or object is named, not printed: dump() recurses once per
      // level, and 64 KB of '[' is deep enough to overflow the stack.
      const std::string shown = v.is_array() ? "[...]" : v.is_object() ? "{...}" : v.dump();
      throw ConfigError("config: " + path + ": " + key + " " + shown + " is a JSON " +
                        json_type(v) + ", not a string as setEventConfig takes it: " + range);
    }
    const std::string s = v.get<std::string>();
    int64_t n = check_value(path, key, s);
    staged.insert_or_assign(
        key, Value{static_cast<int>(std::clamp<int64_t>(n, std::numeric_limits<int>::min(),
                                                         std::numeric_limits<int>::max())),
                   s, path});
  }
  for (auto& [k, v] : staged) file_.insert_or_assign(k, std::move(v));
}

JankConfig ConfigBuilder::build() const {
  JankConfig c;
  auto pick = [&](std::string_view key) -> const Value* {
    if (auto it = flags_.find(key); it != flags_.end()) return &it->second;
    if (auto it = file_.find(key); it != file_.end()) return &it->second;
    return nullptr;
  };
  if (auto v = pick("log_type")) c.log_type = v->number;
  if (auto v = pick("sample_interval")) c.sample_interval_ms = v->number;
  if (auto v = pick("ignore_startup_time")) c.ignore_startup_time_s = v->number;
  if (auto v = pick("report_times_per_app")) c.report_times_per_app = v->number;

  const int max_count = JankConfig::max_sample_count(c.sample_interval_ms);
  if (auto v = pick("sample_count")) {
    // The text was parsed with saturation: compare on the wide value.
    int64_t n = 0;
    parse_whole(v->text, n);
    if (n < 1 || n > max_count)
      out_of_range(v->origin, "sample_count", v->text, 1, max_count,
                   sample_count_what(c.sample_interval_ms));
    c.sample_count = static_cast<int>(n);
  } else if (c.sample_count > max_count) {
    // The default 10 exceeds the bound past sample_interval 178 ms (at 500
    // ms only 1 sample fits). The seed's bound is a hard one, so clamp the
    // default rather than refuse a config that never named sample_count.
    c.sample_count = max_count;
  }
  return c;
}

}  // namespace jankbpf
