#include "distcrown/bab/bab.hpp"

#include <cstdio>

namespace distcrown::bab {

void Progress::report(const char* what, int64_t domains_left, double worst, int64_t rounds) {
  if (!enabled_) return;
  const double t = deadline_.elapsed();
  if (last_ >= 0 && t - last_ < 1.0) return;
  last_ = t;
  std::fprintf(stderr, "%s: round %lld, domains left %lld, worst bound %.6g, time %.1f s\n", what,
               static_cast<long long>(rounds), static_cast<long long>(domains_left), worst, t);
}

}  // namespace distcrown::bab
