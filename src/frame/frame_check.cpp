#include "frame/frame_check.h"

#include <dirent.h>

#include <cstring>
#include <string>

#include "frame/wayland_lib.h"
#include "util/tracefs.h"

namespace jankbpf::frame {
namespace {

// The first DRM card node, "" when the machine has none.
std::string drm_card() {
  DIR* d = opendir("/dev/dri");
  if (!d) return "";
  std::string card;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, "card", 4) == 0) {
      card = std::string("/dev/dri/") + e->d_name;
      break;
    }
  closedir(d);
  return card;
}

}  // namespace

void check_frames(bool frames_on, FeatureSet& features) {
  if (!frames_on) {
    features.set("wayland_frames", false, "--frames off", "no frame records");
  } else if (const Feature* f = features.find("wayland_frames"); f && !f->ok) {
    // The probe's load said so already: the frames' programs do not load.
  } else {
    std::string why;
    auto sites = find_wayland_client(&why);
    features.set("wayland_frames", sites.has_value(),
                 sites ? "uprobes on " + sites->path + " (requests, listeners, ffi_call's PLT entry)" : why,
                 sites ? "" : "no frame records");
  }
  // The compositor's own frames: page flips and vblanks of a DRM device.
  const bool tp = tracefs::has_event("drm", "drm_vblank_event");
  const std::string card = drm_card();
  std::string detail = !tp ? "no drm:drm_vblank_event tracepoint (a kernel without DRM, or tracefs missing)"
                       : card.empty() ? "no DRM device (/dev/dri/card*): a headless or virtual machine"
                                      : "drm:drm_vblank_event and " + card;
  features.set("drm_vblank", tp && !card.empty(), detail,
               "compositor-late frames from presentation feedback only (jankbpf reads no DRM events yet)");
}

}  // namespace jankbpf::frame
