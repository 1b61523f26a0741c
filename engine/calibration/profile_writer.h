// The measured profile as YAML text (PROFILE_SCHEMA), and a file write that
// never leaves half a profile behind.
#pragma once

#include <string>

#include "engine/calibration/measured_profile.h"

namespace sextant::engine::calibration {

/// The profile's YAML: scalars with their derivation as trailing comments,
/// provenance strings, then every measured point as one flow-sequence row
/// (times as 4 significant digits, "1.234e-04"). Attention points with
/// kv_heads = heads go to `attention:`, those with fewer (grouped-query) to
/// `attention_gqa:` [batch, heads, kv_heads, seq, head_dim, forward_s, backward_s],
/// written only when there is one. Deterministic: the same profile gives the same bytes.
std::string profile_yaml(const MeasuredProfile& profile);

/// Writes `text` to `path` through a temporary file in the same folder
/// (`path`.tmp.<pid>) renamed over `path`, so a reader (or an interrupted run)
/// sees the old file or the whole new one. Throws std::runtime_error naming the
/// path and the system's reason when the folder cannot be written.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sextant::engine::calibration
