#include "distcrown/util/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "distcrown/util/error.hpp"

namespace distcrown {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw Error("cannot write " + path + ": " + what + ": " + std::strerror(err));
}

// Writes every byte of `text` to fd; returns 0 or the errno of the failed write.
int write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += size_t(n);
  }
  return 0;
}

}  // namespace

void write_output_file(const std::string& path, const std::string& text) {
  if (path.empty()) throw InvalidArgument("an output file path is empty");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail(path, "it is a directory", EISDIR);
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or pipe: no rename over it; write in place and check the writes and the close.
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) fail(path, "open", errno);
    const int err = write_all(fd, text);
    if (err != 0) {
      ::close(fd);
      fail(path, "write", err);
    }
    if (::close(fd) != 0) fail(path, "close", errno);
    return;
  }
  std::vector<char> tmp(path.begin(), path.end());
  const std::string suffix = ".tmp.XXXXXX";
  tmp.insert(tmp.end(), suffix.begin(), suffix.end());
  tmp.push_back('\0');
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, "creating a temporary file beside it", errno);
  const auto abandon = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.data());
    fail(path, what, err);
  };
  if (const int err = write_all(fd, text); err != 0) abandon("write", err);
  if (::fchmod(fd, 0644) != 0) abandon("chmod", errno);
  if (::fsync(fd) != 0) abandon("fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.data());
    fail(path, "close", err);
  }
  if (::rename(tmp.data(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.data());
    fail(path, "rename", err);
  }
}

}  // namespace distcrown
