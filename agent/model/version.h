// Dotted numeric versions ("1.0.6", "1.1.5.1") as package databases and nft print them.
#pragma once

#include <optional>
#include <string_view>

namespace ad {

// <0, 0 or >0 as `a` is older than, equal to or newer than `b`, component by component as
// numbers (1.0.10 is newer than 1.0.9; a missing component counts as 0: 1.1 == 1.1.0). nullopt
// when either is not a dotted number (empty, a letter, an empty component, over 8 components
// or a component over 9 digits): no order is guessed.
std::optional<int> CompareVersions(std::string_view a, std::string_view b);

}  // namespace ad
