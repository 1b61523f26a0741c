// The `sextant` command line: plan, simulate and validate parallel LLM training.
//
// Exit codes (DESIGN.md): 0 success, 2 bad input (each problem on its own line
// as `sextant: error: file:line:col: key: message`), 1 anything else.
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <string_view>

#include "sim/core/config_error.h"
#include "tools/commands.h"
#include "tools/git_commit.h"
#include "tools/subcommand_suggestion.h"

namespace {

// What `sextant --version` prints: the commit stamped at build time
// (tools/git_commit.h), the rest fixed by CMake at configure time (tools/CMakeLists.txt).
std::string version_text() {
  return std::string("sextant ") + SEXTANT_VERSION + "\ncommit " + sextant::git_commit() + "\nbuild type " +
         SEXTANT_BUILD_TYPE + "\n" + SEXTANT_CUDA_DESCRIPTION;
}

// The first word that is not an option (or --configs' value): the subcommand.
std::optional<std::string> first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--configs") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    return std::string(a);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sextant;
  CLI::App app{
      "sextant: plans, simulates and runs the parallel training of large language models.\n"
      "Presets are names under the configs folder (models, clusters, gpus, profiles) or paths;\n"
      "`sextant presets` lists them.",
      "sextant"};
  app.require_subcommand(1);
  app.fallthrough();  // --configs may also follow the subcommand
  app.set_version_flag("--version", version_text(), "print the version, commit, build type and "
                                                    "whether the CUDA engine was built");
  tools::CommonOptions common;
  common.configs_dir = SEXTANT_DEFAULT_CONFIG_DIR;
  app.add_option("--configs", common.configs_dir, "folder holding the presets")
      ->capture_default_str();

  tools::CommandRunner simulate = tools::add_simulate_command(app, common);
  tools::CommandRunner validate = tools::add_validate_command(app, common);
  tools::CommandRunner search = tools::add_search_command(app, common);
  tools::CommandRunner preprocess = tools::add_preprocess_command(app, common);
  tools::CommandRunner run = tools::add_run_command(app, common);
  tools::CommandRunner report = tools::add_report_command(app, common);
  tools::CommandRunner calibrate = tools::add_calibrate_command(app, common, argc, argv);
  tools::CommandRunner presets = tools::add_presets_command(app, common);
  tools::CommandRunner fit_profile = tools::add_fit_profile_command(app, common);

  if (const std::optional<std::string> word = first_word(argc, argv)) {
    std::vector<std::string> known;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known.push_back(sub->get_name());
      for (const std::string& alias : sub->get_aliases()) known.push_back(alias);
    }
    if (auto message = tools::unknown_subcommand_message(*word, known)) {
      std::cerr << "sextant: error: " << *message << "\n";
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Bad options are bad input: the same form and exit code as a bad preset.
    std::cerr << "sextant: error: " << e.what() << "\n"
              << "Run with --help for more information.\n";
    return 2;
  }

  // Results go to a buffer first so a failure leaves nothing half-written on
  // stdout; `run` reports progress as it trains, so it writes straight through.
  std::ostringstream out;
  try {
    int code = 0;
    if (app.got_subcommand("run")) return run(std::cout);
    if (app.got_subcommand("calibrate")) return calibrate(std::cout);
    if (app.got_subcommand("simulate")) code = simulate(out);
    else if (app.got_subcommand("validate")) code = validate(out);
    else if (app.got_subcommand("search")) code = search(out);
    else if (app.got_subcommand("preprocess")) code = preprocess(out);
    else if (app.got_subcommand("report")) code = report(out);
    else if (app.got_subcommand("presets")) code = presets(out);
    else if (app.got_subcommand("fit-profile")) code = fit_profile(out);
    std::cout << out.str();
    return code;
  } catch (const sim::ConfigError& e) {
    for (const sim::Diagnostic& d : e.diagnostics()) {
      std::cerr << "sextant: error: " << d.to_string() << "\n";
    }
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sextant: internal error: " << e.what() << "\n";
    return 1;
  }
}
