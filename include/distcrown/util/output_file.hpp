#pragma once
// Result files that are either written whole or not at all, with every failure reported.
#include <string>

namespace distcrown {

/// Writes `text` to `path`: a regular file (or a new one) through a temporary file in the same
/// folder, flushed to disk and renamed over `path`, so a reader never sees half a result; any
/// other existing file (a pipe, /dev/stdout) directly. Every step is checked (open, each write,
/// fsync, close, rename); a failure throws distcrown::Error naming the path and the reason, and
/// leaves no temporary file behind. An empty path is an InvalidArgument.
void write_output_file(const std::string& path, const std::string& text);

}  // namespace distcrown
