// gzip (RFC 1952) of a capture's payload with zlib, and its inverse under a bound on the decoded
// size. Errors are SourceKind::kCapture, worded for the user ("truncated", "corrupted (...)").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "model/result.h"

namespace ad::capture {

Result<std::string> Gzip(std::string_view data);

// The decoded bytes of one gzip member that spans all of `bytes`. Checked while inflating: more
// than `max_decoded` bytes is refused before anything beyond the bound is allocated.
Result<std::string> Gunzip(std::string_view bytes, size_t max_decoded);

// "512 MiB"-style size for messages.
std::string SizeText(size_t bytes);

}  // namespace ad::capture
