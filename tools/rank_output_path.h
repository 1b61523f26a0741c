// Output files of a run of several ranks: each rank writes its own
// (`--timing-file`), named so that a person and a program can tell them apart
// and none overwrites another's.
#pragma once

#include <string>

namespace sextant::tools {

/// `path` itself with one rank; with several, the rank before the extension:
/// "timing.csv" -> "timing.rank03.csv" (rank 3 of 4..100; zero-padded to the
/// width of the largest rank, so the files sort in rank order), "out/t" ->
/// "out/t.rank3". Only the file name's extension counts, not a dot in a folder.
std::string rank_output_path(const std::string& path, int rank, int world_size);

}  // namespace sextant::tools
