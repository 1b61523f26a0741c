#include "tools/rank_output_path.h"

#include <filesystem>

namespace sextant::tools {

std::string rank_output_path(const std::string& path, int rank, int world_size) {
  if (world_size <= 1) return path;
  std::string number = std::to_string(rank);
  const std::size_t width = std::to_string(world_size - 1).size();
  if (number.size() < width) number.insert(0, width - number.size(), '0');
  const std::filesystem::path p(path);
  std::filesystem::path named = p;
  named.replace_filename(p.stem().string() + ".rank" + number + p.extension().string());
  return named.string();
}

}  // namespace sextant::tools
