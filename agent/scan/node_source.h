// Node-wide sources (ZDS socket, process fd inventory, ztunnel admin, CRI) run after the per-netns
// inspection, in the order given, and add their data to the snapshot. Each is a thin read-only
// adapter; failures become SourceErrors in the snapshot, never exceptions.
#pragma once

#include <string_view>

#include "model/snapshot.h"

namespace ad {

class NodeSource {
 public:
  virtual ~NodeSource() = default;
  virtual std::string_view name() const = 0;
  // May read what earlier sources added (e.g. ztunnel PIDs found by the ZDS source).
  virtual void Collect(NodeSnapshot& snapshot) = 0;
};

}  // namespace ad
