// A main() for a libFuzzer target without libFuzzer, so that CI (gcc, no
// clang) compiles every fuzz target and runs it on a fixed corpus:
//
//   fuzz_test                     seeds, every truncation and every byte
//                                 flip of each seed, then deterministic
//                                 random mutations (same inputs every run)
//   fuzz_test FILE|DIR...         replays those inputs instead (a crash
//                                 file from tools/fuzz.sh, a corpus dir)
//   fuzz_test --write_seeds=DIR   writes the seed corpus as files (what
//                                 tools/fuzz.sh starts libFuzzer from)
//
// The target links in LLVMFuzzerTestOneInput and TandemFuzzSeeds(). A bug
// shows as a crash, an abort or a sanitizer report, as under libFuzzer.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::vector<std::string> TandemFuzzSeeds();

namespace {

// Random mutations per target, shared out among its seeds: ~10k inputs in
// all, under a minute even under ASan (whose allocator makes each
// idx_reader input cost ~4 ms: zlib's large buffers are mapped and
// unmapped every time).
constexpr size_t kMutationBudget = 8000;

// splitmix64: a fixed mutation sequence without depending on core/rng.
struct Random {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : Next() % n; }
};

size_t g_runs = 0;

void Run(const std::string& input) {
  ++g_runs;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()),
                         input.size());
}

// One to four of: flip a bit, set an "interesting" byte, insert or delete
// bytes, overwrite 8 bytes with an interesting 64-bit value (the counts and
// sizes readers trust), duplicate a chunk.
std::string Mutate(std::string s, Random& random) {
  static const uint8_t kBytes[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, 0x08, 0x1F, 0x8B};
  static const uint64_t kWords[] = {0, 1, 0x7FFFFFFFull, 0x80000000ull,
                                    0xFFFFFFFFull, ~0ull, 1ull << 62,
                                    0x7FFFFFFFFFFFFFFFull};
  const int edits = 1 + static_cast<int>(random.Below(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = random.Below(s.size() + 1);
    switch (random.Below(6)) {
      case 0:
        if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1 << random.Below(8)));
        break;
      case 1:
        if (at < s.size()) s[at] = static_cast<char>(kBytes[random.Below(8)]);
        break;
      case 2:
        s.insert(at, 1 + random.Below(8), static_cast<char>(random.Next()));
        break;
      case 3:
        if (at < s.size()) s.erase(at, 1 + random.Below(8));
        break;
      case 4: {
        const uint64_t w = kWords[random.Below(8)];
        for (int i = 0; i < 8 && at + i < s.size(); ++i) {
          s[at + i] = static_cast<char>(w >> (8 * i));
        }
        break;
      }
      default:
        if (at < s.size()) {
          const size_t n = 1 + random.Below(std::min<size_t>(32, s.size() - at));
          s.insert(random.Below(s.size() + 1), s.substr(at, n));
        }
        break;
    }
  }
  return s;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Replay(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    DIR* dir = ::opendir(path.c_str());
    while (dirent* entry = dir ? ::readdir(dir) : nullptr) {
      if (entry->d_name[0] != '.') Replay(path + "/" + entry->d_name);
    }
    if (dir) ::closedir(dir);
    return;
  }
  Run(ReadFile(path));
}

int WriteSeeds(const std::string& dir) {
  const std::vector<std::string> seeds = TandemFuzzSeeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "/seed_%03zu", i);
    std::ofstream out(dir + name, std::ios::binary | std::ios::trunc);
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s%s\n", dir.c_str(), name);
      return 2;
    }
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  if (argc == 2 && std::strncmp(argv[1], "--write_seeds=", 14) == 0) {
    return WriteSeeds(argv[1] + 14);
  }
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) Replay(argv[i]);
  } else {
    const std::vector<std::string> seeds = TandemFuzzSeeds();
    if (seeds.empty()) {
      std::fprintf(stderr, "no seeds: a fuzz test that runs nothing fails\n");
      return 1;
    }
    Random random{12345};
    for (const std::string& seed : seeds) {
      Run(seed);
      for (size_t n = 0; n < seed.size(); ++n) Run(seed.substr(0, n));
      for (size_t i = 0; i < seed.size(); ++i) {
        std::string flipped = seed;
        flipped[i] = static_cast<char>(flipped[i] ^ 0xFF);
        Run(flipped);
      }
      for (size_t m = 0; m < kMutationBudget / seeds.size(); ++m) {
        Run(Mutate(seed, random));
      }
    }
  }
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  std::printf("ran %zu inputs in %.2f s without a crash\n", g_runs, seconds);
  return 0;
}
