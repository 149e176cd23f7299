#pragma once
// Reads the table `distcrown bounds` prints: a header line naming output, lower and upper, then one
// row "Y_j lower upper" per output in order (j = 0, 1, …). Used by the CLI tests of several
// methods.
#include <cstdio>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace distcrown::testing {

struct BoundsTable {
  size_t rows = 0;      // consecutive rows Y_0, Y_1, … found
  bool header = false;  // the "output lower upper" line was there
};

/// Parses `out`; every row's lower <= upper is checked (a gtest failure names the line).
inline BoundsTable read_bounds_table(const std::string& out) {
  BoundsTable t;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    char name[16];
    double lo = 0;
    double hi = 0;
    if (std::sscanf(line.c_str(), " %15s %lf %lf", name, &lo, &hi) == 3 &&
        std::string(name) == "Y_" + std::to_string(t.rows)) {
      EXPECT_LE(lo, hi) << line;
      ++t.rows;
    } else if (line.find("output") != std::string::npos &&
               line.find("lower") != std::string::npos && line.find("upper") != std::string::npos) {
      t.header = true;
    }
  }
  return t;
}

}  // namespace distcrown::testing
