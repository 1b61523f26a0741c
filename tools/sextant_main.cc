// The `sextant` command line: plan, simulate and validate parallel LLM training.
//
// Exit codes (DESIGN.md): 0 success, 2 bad input (each problem on its own line
// as file:line:col: key: message), 1 anything else.
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "sim/core/config_error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  using namespace sextant;
  CLI::App app{
      "sextant: plans, simulates and runs the parallel training of large language models.\n"
      "Presets are names under the configs folder (models, clusters, gpus, profiles) or paths.",
      "sextant"};
  app.require_subcommand(1);
  app.fallthrough();  // --configs may also follow the subcommand
  tools::CommonOptions common;
  common.configs_dir = SEXTANT_DEFAULT_CONFIG_DIR;
  app.add_option("--configs", common.configs_dir, "folder holding the presets")
      ->capture_default_str();

  tools::CommandRunner simulate = tools::add_simulate_command(app, common);
  tools::CommandRunner validate = tools::add_validate_command(app, common);
  tools::CommandRunner search = tools::add_search_command(app, common);
  tools::CommandRunner preprocess = tools::add_preprocess_command(app, common);
  tools::CommandRunner run = tools::add_run_command(app, common);
  tools::CommandRunner fit_profile = tools::add_fit_profile_command(app, common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  // Results go to a buffer first so a failure leaves nothing half-written on
  // stdout; `run` reports progress as it trains, so it writes straight through.
  std::ostringstream out;
  try {
    int code = 0;
    if (app.got_subcommand("run")) return run(std::cout);
    if (app.got_subcommand("simulate")) code = simulate(out);
    else if (app.got_subcommand("validate")) code = validate(out);
    else if (app.got_subcommand("search")) code = search(out);
    else if (app.got_subcommand("preprocess")) code = preprocess(out);
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
