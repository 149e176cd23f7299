#pragma once
// Subcommands of the distcrown executable. Each registers its options on the CLI11 app and
// returns the action to run once parsing succeeded.
#include <functional>

#include <CLI/CLI.hpp>

namespace distcrown::cli {

using Action = std::function<int()>;

/// `distcrown bounds --model M.onnx --vnnlib S.vnnlib --method {ibp,crown} [--json OUT.json]`
Action add_bounds_command(CLI::App& app);

/// `distcrown verify --model M.onnx --vnnlib S.vnnlib [--timeout S] [--result OUT.txt]`
Action add_verify_command(CLI::App& app);

}  // namespace distcrown::cli
