#include "bench/common/json.h"

#include <sys/utsname.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace bench {

std::string JsonString(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

std::string JsonDate(absl::Time t) {
  return JsonString(
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone()));
}

std::string JsonMachine(
    std::initializer_list<std::pair<absl::string_view, std::string>> first,
    absl::string_view loadavg_before, absl::string_view loadavg_after) {
  struct utsname un;
  uname(&un);
  std::string j = "{";
  for (const auto& [key, value] : first) {
    absl::StrAppend(&j, JsonString(key), ": ", value, ", ");
  }
  absl::StrAppend(&j, "\"cores\": ", sysconf(_SC_NPROCESSORS_ONLN),
                  ", \"kernel\": ", JsonString(un.release),
                  ", \"loadavg_before\": ", JsonString(loadavg_before),
                  ", \"loadavg_after\": ", JsonString(loadavg_after), "}");
  return j;
}

}  // namespace bench
}  // namespace breakerd
