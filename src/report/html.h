// The HTML report: one self-contained page (inline CSS, JS, SVG; nothing
// from the network) whose data is embedded as JSON and drawn by the page
// itself on demand, so a thousand janks cost one parse, not a thousand
// flame graphs up front.
#pragma once

#include <string>
#include <string_view>

#include "report/run.h"

namespace jankbpf::report {

// `final`: written at the end of the run (else "updated" while it runs).
std::string render_html(const Run& run, bool final, int64_t generated_ms);

// JSON text made safe to sit inside a <script> element: '<', '>' and '&'
// (which JSON only has inside strings) become \u003c, \u003e, \u0026, so no
// string can close the element or open a comment.
std::string script_safe_json(std::string_view json);

}  // namespace jankbpf::report
