// write_output_file: whole or nothing, and every failure reported (the hardening issue's
// `--json /dev/full`, `--result /proc/version`, `--json ''`).
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "distcrown/util/error.hpp"
#include "distcrown/util/output_file.hpp"
#include "onnx_builder.hpp"  // TempDir

namespace distcrown {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int entries(const std::filesystem::path& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (const dirent* e = readdir(d))
    n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
  closedir(d);
  return n;
}

TEST(OutputFile, WritesAndReplacesWholeFiles) {
  testing::TempDir dir;
  const auto path = dir / "result.txt";
  write_output_file(path.string(), "unsat\n");
  EXPECT_EQ(read(path), "unsat\n");
  write_output_file(path.string(), "sat\n((X_0 1))\n");
  EXPECT_EQ(read(path), "sat\n((X_0 1))\n");
  EXPECT_EQ(entries(dir.path()), 1) << "no temporary file left behind";
}

TEST(OutputFile, EveryFailureIsAnError) {
  EXPECT_THROW(write_output_file("", "x"), InvalidArgument);
  EXPECT_THROW(write_output_file("/dev/full", "unsat\n"), Error);  // ENOSPC
  EXPECT_THROW(write_output_file("/proc/version", "unsat\n"), Error);
  testing::TempDir dir;
  EXPECT_THROW(write_output_file(dir.path().string(), "x"), Error);  // a directory
  EXPECT_THROW(write_output_file((dir / "missing" / "r.txt").string(), "x"), Error);
  EXPECT_EQ(entries(dir.path()), 0);
  try {
    write_output_file("/dev/full", "unsat\n");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
}

TEST(OutputFile, WritesToDevicesInPlace) {
  EXPECT_NO_THROW(write_output_file("/dev/null", "unsat\n"));
}

}  // namespace
}  // namespace distcrown
