#include "tests/soak/proc_stats.h"

#include <dirent.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace breakerd {

std::optional<int64_t> StatusKiB(pid_t pid, absl::string_view field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, field) ||
        !absl::ConsumePrefix(&rest, ":")) {
      continue;
    }
    rest = absl::StripAsciiWhitespace(rest);
    if (!absl::ConsumeSuffix(&rest, "kB")) return std::nullopt;
    int64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) {
      return std::nullopt;
    }
    return kib;
  }
  return std::nullopt;
}

std::optional<int64_t> ResidentKiB(pid_t pid) {
  return StatusKiB(pid, "VmRSS");
}

std::optional<int64_t> PeakResidentKiB(pid_t pid) {
  return StatusKiB(pid, "VmHWM");
}

std::optional<int> OpenFdCount(pid_t pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return std::nullopt;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;  // skip "." and ".."
  }
  closedir(dir);
  return count;
}

uint64_t ProcessCpuNanos(pid_t pid) {
  if (pid <= 0) return 0;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return 0;
  uint64_t total = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat(task_dir, "/", entry->d_name, "/schedstat"));
    uint64_t on_cpu = 0;
    if (in >> on_cpu) total += on_cpu;
  }
  closedir(dir);
  return total;
}

std::string ReadLoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

}  // namespace breakerd
