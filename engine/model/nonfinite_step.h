// What a training step with a non-finite loss or gradient norm does, and how
// it is reported. Plain C++ (tested on the CPU); the trainer finds the tensor
// (Trainer::first_nonfinite_gradient) and `sextant run` applies the policy.
//
// A NaN or Inf in the gradients never updates the weights: the clip factor
// becomes NaN and AdamW skips the step on the device (kernels/grad_norm.h).
// What follows is the run's choice: `stop` (the default) ends it at that step
// naming the first parameter, in the flat layout's order (parameter_layout.h),
// whose gradient is not finite — found after the fact, by one sum of squares
// per tensor, only when the norm is not finite, so a healthy step pays
// nothing; `skip` goes on with the next batch, as Megatron does with a loss
// scaler (its optimizer skips a step whose gradients hold an Inf or NaN;
// Micikevicius et al. 2018, Sec. 3.2) and as this engine always did.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sextant::engine {

enum class NonFinitePolicy { kStop, kSkip };

/// "stop" or "skip"; nullopt for anything else.
std::optional<NonFinitePolicy> parse_nonfinite_policy(std::string_view text);

/// Whether a step's loss and gradient norm are both finite.
bool step_is_finite(double loss, double grad_norm);

/// Index of the first value that is not finite (NaN or ±Inf); -1 when all are.
int first_nonfinite(std::span<const float> values);

/// "step 12: loss nan, gradient norm inf; the first parameter whose gradient
/// is not finite is 'layers.1.fc2_weight'". `tensor` empty: the gradients were
/// not searched (the norm is finite) or none was found.
std::string nonfinite_step_message(int step, double loss, double grad_norm, const std::string& tensor);

}  // namespace sextant::engine
