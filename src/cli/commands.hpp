#pragma once
// Subcommands of the distcrown executable. Each registers its options on the CLI11 app and
// returns the action to run once parsing succeeded.
#include <functional>

#include <CLI/CLI.hpp>

namespace distcrown::cli {

using Action = std::function<int()>;

// Both register every option of the one table (cli/options.hpp); the action first refuses an
// option that does not apply to its command.

/// `distcrown bounds --model M.onnx --vnnlib S.vnnlib --method {ibp,crown,alpha-crown}
/// [--result OUT.json]`
Action add_bounds_command(CLI::App& app);

/// `distcrown verify --model M.onnx --vnnlib S.vnnlib [--timeout S] [--result OUT.txt]`
Action add_verify_command(CLI::App& app);

}  // namespace distcrown::cli
