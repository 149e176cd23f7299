#include "distcrown/util/deadline.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

namespace distcrown {

Deadline Deadline::since_process_start(double seconds) {
  const auto age = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(process_age_seconds()));
  return {Clock::now() - age, seconds};
}

double process_age_seconds() {
#ifdef __linux__
  // Field 22 of /proc/self/stat: the start time in clock ticks after boot, on the clock that
  // CLOCK_BOOTTIME reads. The command name (field 2) is in parentheses and may hold spaces, so
  // fields are counted after its closing parenthesis.
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i < 22) continue;
    const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
    timespec now{};
    if (ticks_per_second <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
    const double started = std::strtod(field.c_str(), nullptr) / double(ticks_per_second);
    const double age = double(now.tv_sec) + 1e-9 * double(now.tv_nsec) - started;
    return age > 0 ? age : 0;
  }
#endif
  return 0;
}

int64_t peak_resident_bytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return int64_t(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace distcrown
