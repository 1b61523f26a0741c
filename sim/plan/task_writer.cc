#include "sim/plan/task_writer.h"

#include <stdexcept>

namespace sextant::sim {

TaskWriter::TaskWriter(Plan& plan, std::size_t pipeline_keys)
    : plan_(plan),
      send_(pipeline_keys, kNoTask),
      posted_(pipeline_keys, kNoTask),
      send_posted_(pipeline_keys, kNoTask) {}

void TaskWriter::begin_stage() {
  frontier_.clear();
  pending_.clear();
  tail_ = kNoTask;
  last_compute_ = kNoTask;
}

std::uint32_t TaskWriter::add(const Task& task, std::span<const DepRef> deps,
                              std::uint32_t fallback) {
  Task t = task;
  t.first_dep = static_cast<std::uint32_t>(plan_.deps.size());
  t.dep_count = static_cast<std::uint32_t>(deps.size());
  for (const DepRef& d : deps) {
    if (d.kind != DepRef::Kind::kTask) {
      fixups_.push_back({static_cast<std::uint32_t>(plan_.deps.size()), d, fallback});
    }
    plan_.deps.push_back(d.kind == DepRef::Kind::kTask ? d.value : 0);
  }
  const auto id = static_cast<std::uint32_t>(plan_.tasks.size());
  plan_.tasks.push_back(t);
  if (t.kind == TaskKind::kCompute) last_compute_ = id;
  return id;
}

std::vector<DepRef> TaskWriter::chain_deps() const {
  std::vector<DepRef> out;
  out.reserve(frontier_.size() + pending_.size());
  for (std::uint32_t id : frontier_) out.push_back(DepRef::task(id));
  out.insert(out.end(), pending_.begin(), pending_.end());
  return out;
}

std::uint32_t TaskWriter::chain(const Task& task) {
  scratch_.clear();
  for (std::uint32_t id : frontier_) scratch_.push_back(DepRef::task(id));
  scratch_.insert(scratch_.end(), pending_.begin(), pending_.end());
  pending_.clear();
  const std::uint32_t id = add(task, scratch_);
  frontier_.assign(1, id);
  tail_ = id;
  return id;
}

void TaskWriter::resolve() {
  for (const Fixup& f : fixups_) {
    std::uint32_t target = kNoTask;
    if (f.ref.kind == DepRef::Kind::kSend) {
      target = send_[f.ref.value];
      if (target == kNoTask) throw std::logic_error("plan: a receive has no matching send");
    } else if (f.ref.kind == DepRef::Kind::kSendPosted) {
      // A send always follows the compute that produced what it sends.
      target = send_posted_[f.ref.value];
      if (target == kNoTask) throw std::logic_error("plan: a blocking receive has no posted send");
    } else {
      target = posted_[f.ref.value] != kNoTask ? posted_[f.ref.value] : f.fallback;
    }
    plan_.deps[f.position] = target;
  }
}

}  // namespace sextant::sim
