#include "model/zds.h"

namespace ad {

std::string_view ProcessRoleName(ProcessRole role) {
  switch (role) {
    case ProcessRole::kIstioCni:
      return "istio-cni";
    case ProcessRole::kZtunnel:
      return "ztunnel";
    case ProcessRole::kOther:
      return "other";
  }
  return "other";
}

}  // namespace ad
