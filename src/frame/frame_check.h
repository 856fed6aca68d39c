// What `--check` says of frames (issue 28): whether libwayland-client is
// here with the three sites the frame probes attach to, and whether the
// compositor's side could be seen (DRM vblank tracepoints and a DRM device).
#pragma once

#include "bpf/features.h"

namespace jankbpf::frame {

void check_frames(bool frames_on, FeatureSet& features);

}  // namespace jankbpf::frame
