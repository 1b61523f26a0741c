// Reading of a profile's measured part (PROFILE_SCHEMA.md): `software`, the
// `measurement:` provenance, the kernel tables, overheads, NCCL tables and the
// `fit:` block. Strict as every sextant YAML: unknown keys, rows of the wrong
// length, non-positive sizes or times are diagnostics at their file:line:col.
// Internal to sim/core (config_loader.cc calls it for the profile's map).
//
// Attention is two tables of flow-sequence rows:
//   attention:      [batch, heads, seq, head_dim, forward_s, backward_s]
//                   multi-head attention (kv_heads = heads);
//   attention_gqa:  [batch, heads, kv_heads, seq, head_dim, forward_s, backward_s]
//                   grouped-query attention, kv_heads < heads and dividing them.
// `attention_gqa` is optional: absent (every profile written before it), all
// attention rows are multi-head. The simulator keeps one table per group size
// heads / kv_heads (cost_profile.h, MeasuredTables::Lookup::attention).
#pragma once

#include <string_view>
#include <vector>

#include "sim/core/cost_profile.h"
#include "sim/core/strict_yaml.h"

namespace sextant::sim {

/// The keys read_measured_profile_part accepts (appended to the scalar ones).
const std::vector<std::string_view>& measured_profile_keys();

/// Reads every measured key of `map` into `profile` (tables stays null when
/// the file has none of them).
void read_measured_profile_part(StrictMap& map, CostProfile& profile);

}  // namespace sextant::sim
