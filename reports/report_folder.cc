#include "reports/report_folder.h"

#include <filesystem>
#include <fstream>

#include "sim/core/config_error.h"

namespace sextant::reports {

void prepare_report_folder(const std::string& folder, const std::string& option) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error || !std::filesystem::is_directory(folder)) {
    throw sim::ConfigError({{option, 0, 0, "",
                             "cannot create the folder '" + folder + "'" +
                                 (error ? ": " + error.message() : "")}});
  }
}

void write_report_file(const std::string& folder, const std::string& name,
                       const std::string& text) {
  const std::string path = (std::filesystem::path(folder) / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw sim::ConfigError({{path, 0, 0, "", "cannot write the report file"}});
}

}  // namespace sextant::reports
