#include "capture/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <vector>

namespace ad::capture {
namespace {

// windowBits 15 + 16: a gzip header and trailer (CRC-32 and length) around raw deflate.
constexpr int kGzipWindowBits = 31;
constexpr size_t kChunk = size_t{64} << 10;

SourceError CaptureError(std::string message) {
  return SourceError{SourceKind::kCapture, std::move(message)};
}

struct DeflateEnd {
  void operator()(z_stream* stream) const { deflateEnd(stream); }
};
struct InflateEnd {
  void operator()(z_stream* stream) const { inflateEnd(stream); }
};

// The next piece of `data` from `offset` that fits zlib's 32-bit counters.
uInt Piece(std::string_view data, size_t offset) {
  return static_cast<uInt>(std::min<size_t>(data.size() - offset, UINT_MAX));
}

// Room for `needed` bytes in `out`: doubling, but never past `max_decoded`.
void Reserve(std::string& out, size_t needed, size_t max_decoded) {
  if (out.capacity() >= needed) return;
  out.reserve(std::min(max_decoded, std::max(needed, out.capacity() * 2)));
}

}  // namespace

std::string SizeText(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  return std::to_string(bytes) + " bytes";
}

Result<std::string> Gzip(std::string_view data) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return CaptureError("cannot start gzip compression (zlib deflateInit2)");
  }
  std::unique_ptr<z_stream, DeflateEnd> guard(&stream);
  std::string out;
  std::vector<unsigned char> chunk(kChunk);
  size_t offset = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    const uInt piece = Piece(data, offset);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + offset));
    stream.avail_in = piece;
    const bool last = offset + piece == data.size();
    do {
      stream.next_out = chunk.data();
      stream.avail_out = static_cast<uInt>(chunk.size());
      rc = deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR) return CaptureError("gzip compression failed (zlib deflate)");
      out.append(reinterpret_cast<const char*>(chunk.data()), chunk.size() - stream.avail_out);
    } while (stream.avail_out == 0);
    offset += piece - stream.avail_in;
  }
  return out;
}

Result<std::string> Gunzip(std::string_view bytes, size_t max_decoded) {
  z_stream stream{};
  if (inflateInit2(&stream, kGzipWindowBits) != Z_OK) {
    return CaptureError("cannot start gzip decompression (zlib inflateInit2)");
  }
  std::unique_ptr<z_stream, InflateEnd> guard(&stream);
  std::string out;
  Reserve(out, std::min(bytes.size() * 4, max_decoded), max_decoded);
  std::vector<unsigned char> chunk(kChunk);
  size_t offset = 0;
  while (true) {
    const uInt piece = Piece(bytes, offset);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + offset));
    stream.avail_in = piece;
    stream.next_out = chunk.data();
    stream.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&stream, Z_NO_FLUSH);
    offset += piece - stream.avail_in;
    const size_t produced = chunk.size() - stream.avail_out;
    if (produced > max_decoded - out.size()) {
      return CaptureError("larger than " + SizeText(max_decoded) + " decoded");
    }
    Reserve(out, out.size() + produced, max_decoded);
    out.append(reinterpret_cast<const char*>(chunk.data()), produced);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      // zlib's own words: "incorrect data check" (CRC-32), "invalid block type", ...
      return CaptureError(std::string("corrupted (gzip: ") +
                          (stream.msg != nullptr ? stream.msg : "invalid data") + ")");
    }
    if (rc == Z_MEM_ERROR) return CaptureError("out of memory while decompressing");
    // Z_OK or Z_BUF_ERROR: inflate wants more. With the whole input consumed and room left for
    // output, the stream ended before its end.
    // (No progress at all with input left cannot happen; treated the same, never a spin.)
    const bool stuck = produced == 0 && piece == stream.avail_in;
    if ((offset == bytes.size() && stream.avail_out != 0) || stuck) {
      return CaptureError("truncated");
    }
  }
  if (offset != bytes.size()) {
    return CaptureError("corrupted (" + std::to_string(bytes.size() - offset) +
                        " bytes after the end of the gzip stream)");
  }
  return out;
}

}  // namespace ad::capture
