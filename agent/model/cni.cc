#include "model/cni.h"

namespace ad {

std::string_view CniDirOriginName(CniDirOrigin origin) {
  switch (origin) {
    case CniDirOrigin::kFlag:
      return "flag";
    case CniDirOrigin::kRuntime:
      return "runtime";
    case CniDirOrigin::kDefault:
      return "default";
    case CniDirOrigin::kNone:
      break;
  }
  return "none";
}

}  // namespace ad
