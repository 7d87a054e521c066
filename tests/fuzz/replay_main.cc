// Replays a fuzz target's corpus and deterministic mutations of it (bit flips, truncations,
// splices, random bytes), so every target runs in CI without libFuzzer. Usage:
//   <target>_replay CORPUS_DIR [MUTATIONS]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

void Run(const Bytes& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }

Bytes Mutate(const std::vector<Bytes>& corpus, std::mt19937& rng) {
  Bytes out = corpus.empty() ? Bytes{} : corpus[rng() % corpus.size()];
  switch (rng() % 5) {
    case 0:  // flip bits
      for (int i = 0, n = 1 + static_cast<int>(rng() % 8); i < n && !out.empty(); ++i) {
        out[rng() % out.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      break;
    case 1:  // truncate
      if (!out.empty()) out.resize(rng() % out.size());
      break;
    case 2:  // splice with another entry
      if (!corpus.empty()) {
        const Bytes& other = corpus[rng() % corpus.size()];
        size_t cut = out.empty() ? 0 : rng() % out.size();
        out.resize(cut);
        if (!other.empty()) {
          out.insert(out.end(), other.begin() + static_cast<long>(rng() % other.size()),
                     other.end());
        }
      }
      break;
    case 3:  // overwrite a run with interesting bytes
      for (int i = 0, n = 1 + static_cast<int>(rng() % 16); i < n && !out.empty(); ++i) {
        static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '"', '{', '[', ':', ','};
        out[rng() % out.size()] = kInteresting[rng() % sizeof(kInteresting)];
      }
      break;
    default:  // random bytes
      out.resize(rng() % 512);
      for (auto& b : out) b = static_cast<uint8_t>(rng());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
    return 2;
  }
  const long mutations = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 10000;
  std::vector<Bytes> corpus;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1], ec)) {
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Run({});
  for (const auto& input : corpus) Run(input);
  std::mt19937 rng(12345);
  for (long i = 0; i < mutations; ++i) Run(Mutate(corpus, rng));
  std::printf("%zu corpus inputs, %ld mutations: no crash\n", corpus.size(), mutations);
  return 0;
}
