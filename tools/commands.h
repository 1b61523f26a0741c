// Subcommands of the `sextant` binary. Each adds itself to the CLI11 app and
// returns the function to run when it was chosen; errors are thrown
// (sim::ConfigError for bad input) and turned into exit codes by main().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <ostream>
#include <string>

namespace sextant::tools {

/// Options every command shares.
struct CommonOptions {
  std::string configs_dir;  // where presets live
};

using CommandRunner = std::function<int(std::ostream& out)>;

CommandRunner add_simulate_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_validate_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_search_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_preprocess_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_run_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_report_command(CLI::App& app, const CommonOptions& common);
/// argc/argv: recorded in the profile as the command that made it.
CommandRunner add_calibrate_command(CLI::App& app, const CommonOptions& common, int argc, char** argv);
CommandRunner add_presets_command(CLI::App& app, const CommonOptions& common);
CommandRunner add_fit_profile_command(CLI::App& app, const CommonOptions& common);

}  // namespace sextant::tools
