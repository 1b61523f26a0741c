// The folder a report is written into.
#pragma once

#include <string>

namespace sextant::reports {

/// Creates `folder` (and its parents) when missing; throws sim::ConfigError
/// naming `option` when it cannot.
void prepare_report_folder(const std::string& folder, const std::string& option);

/// Writes `text` to folder/name, replacing it; throws sim::ConfigError naming
/// the file when it cannot.
void write_report_file(const std::string& folder, const std::string& name,
                       const std::string& text);

}  // namespace sextant::reports
