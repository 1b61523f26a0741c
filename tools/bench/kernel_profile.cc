// A kernel-level profile of any CUDA program, ours or PyTorch, with no
// profiler installed: a CUDA injection library (the driver loads the shared
// library named by CUDA_INJECTION64_PATH at cuInit and calls its
// InitializeInjection) that records every kernel, memset and memcpy through
// CUPTI's activity API and, at exit, prints where the GPU's time went.
//
//   CUDA_INJECTION64_PATH=build-gpu/tools/libsextant_kernel_profile.so
//   SEXTANT_PROFILE_LAST_S=1.0 SEXTANT_PROFILE_OUT=profile.txt  <any CUDA program>
// (the three settings in the environment of the program).
//
// SEXTANT_PROFILE_LAST_S keeps only the activities that start in the last N
// seconds of the GPU timeline (steady state: warm-up, compilation and
// autotuning fall outside it); 0 or unset keeps everything.
// SEXTANT_PROFILE_OUT: the table's file (default: stderr). SEXTANT_PROFILE_TOP:
// rows printed (default 40).
//
// The table: per kernel name (demangled, template arguments cut), the total
// milliseconds in the window, calls, mean microseconds and the share of the
// window; then the window's length, the GPU's busy time (overlaps merged) and
// its idle time, so gaps between kernels show too; then the idle time by gap
// length and the longest gaps with the activities on either side
// (SEXTANT_PROFILE_GAPS of them, default 5).
//
// SEXTANT_PROFILE_API=1 also records the host's CUDA runtime and driver calls
// (CUPTI's API activity, on the GPU timeline's clock) and prints, for the
// thread that makes the most of them, the time in each call and what that
// thread was doing while the GPU stood idle (gaps of 2 us and more): in a
// runtime call (a launch, a synchronisation, a copy), in a driver call made
// outside the runtime (libraries such as cuBLAS launch through the driver), or
// in neither (the program's own host code). Recording the calls costs the host
// about a microsecond each, so the step runs a little slower than without it.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Activity {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::string name;
};

// The injection's only state: CUPTI calls back on its own threads, and the
// driver gives no handle to hang it on, so it lives here, guarded.
// One CUDA runtime or driver call on the host (names are CUPTI's static strings).
struct HostCall {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::uint32_t thread;
  bool runtime;
  const char* name;
};

struct Recorder {
  std::mutex mutex;
  std::vector<Activity> activities;
  std::vector<HostCall> host_calls;
};
Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: read by the atexit report
  return *r;
}

constexpr std::size_t kBufferBytes = 8u << 20;

std::string short_name(const char* mangled) {
  if (mangled == nullptr) return "(unnamed)";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  // "void ns::kernel<...>(args)" -> "ns::kernel<...>": drop the return type and
  // the argument list, and cut long template argument lists.
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  for (const std::string anonymous = "(anonymous namespace)::";;) {
    const std::size_t at = name.find(anonymous);
    if (at == std::string::npos) break;
    name.erase(at, anonymous.size());
  }
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0) {
      name.resize(i);
      break;
    }
  }
  constexpr std::size_t kMaxChars = 96;
  if (name.size() > kMaxChars) name = name.substr(0, kMaxChars - 3) + "...";
  return name;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::vector<Activity> batch;
  std::vector<HostCall> calls;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        batch.push_back({k->start, k->end, short_name(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        batch.push_back({m->start, m->end, "[memset]"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        batch.push_back({m->start, m->end, "[memcpy]"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        const char* name = nullptr;
        cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
        calls.push_back({a->start, a->end, a->threadId, runtime, name != nullptr ? name : "(unnamed call)"});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.activities.insert(r.activities.end(), batch.begin(), batch.end());
  r.host_calls.insert(r.host_calls.end(), calls.begin(), calls.end());
}

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atof(v) : fallback;
}

struct Interval {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
};

// A stretch of one host thread's time in one CUDA call.
struct Segment {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::string label;
};

// The thread's calls as non-overlapping segments in time order: its top-level
// runtime calls, and its driver calls made outside any runtime call (those made
// inside one are how the runtime call did its work).
std::vector<Segment> host_segments(const std::vector<HostCall>& calls, std::uint32_t thread) {
  std::vector<HostCall> runtime, driver;
  for (const HostCall& c : calls)
    if (c.thread == thread) (c.runtime ? runtime : driver).push_back(c);
  const auto by_start = [](const HostCall& a, const HostCall& b) { return a.start_ns < b.start_ns; };
  std::sort(runtime.begin(), runtime.end(), by_start);
  std::sort(driver.begin(), driver.end(), by_start);
  std::vector<Segment> top;
  std::uint64_t covered_to = 0;
  for (const HostCall& c : runtime) {
    if (c.start_ns < covered_to) continue;  // nested in the previous one
    top.push_back({c.start_ns, c.end_ns, c.name});
    covered_to = c.end_ns;
  }
  std::vector<Segment> segments = top;
  std::size_t i = 0;
  covered_to = 0;
  for (const HostCall& d : driver) {
    while (i < top.size() && top[i].end_ns <= d.start_ns) ++i;
    const bool inside_runtime = i < top.size() && top[i].start_ns <= d.start_ns;
    if (inside_runtime || d.start_ns < covered_to) continue;
    segments.push_back({d.start_ns, d.end_ns, std::string("driver ") + d.name});
    covered_to = d.end_ns;
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.start_ns < b.start_ns; });
  return segments;
}

void print_sums(FILE* out, const char* title, const std::map<std::string, std::pair<double, long>>& sums,
                double of_ns, std::size_t top) {
  std::vector<std::pair<std::string, std::pair<double, long>>> rows(sums.begin(), sums.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::fprintf(out, "%s\n%10s %8s %10s %7s  %s\n", title, "total_ms", "calls", "mean_us", "share", "call");
  for (std::size_t i = 0; i < rows.size() && i < top; ++i) {
    const auto& [ns, calls] = rows[i].second;
    std::fprintf(out, "%10.3f %8ld %10.2f %6.2f%%  %s\n", ns * 1e-6, calls, calls > 0 ? ns * 1e-3 / calls : 0.0,
                 100.0 * ns / of_ns, rows[i].first.c_str());
  }
}

// The host thread that makes the most CUDA calls in the window: where its time
// went, and what it was doing while the GPU was idle.
void report_host(FILE* out, const std::vector<HostCall>& calls, const std::vector<Interval>& idle,
                 std::uint64_t window_start, std::uint64_t window_end) {
  std::map<std::uint32_t, long> per_thread;
  for (const HostCall& c : calls)
    if (c.start_ns >= window_start && c.start_ns < window_end) ++per_thread[c.thread];
  if (per_thread.empty()) return;
  const std::uint32_t thread =
      std::max_element(per_thread.begin(), per_thread.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  const std::vector<Segment> segments = host_segments(calls, thread);
  std::map<std::string, std::pair<double, long>> in_call;
  double in_calls_ns = 0;
  for (const Segment& s : segments) {
    if (s.start_ns < window_start || s.start_ns >= window_end) continue;
    auto& [ns, n] = in_call[s.label];
    ns += static_cast<double>(s.end_ns - s.start_ns);
    ++n;
    in_calls_ns += static_cast<double>(s.end_ns - s.start_ns);
  }
  const double window_ns = static_cast<double>(window_end - window_start);
  const auto top = static_cast<std::size_t>(env_double("SEXTANT_PROFILE_TOP", 40));
  print_sums(out, "host thread: its CUDA calls in the window (share of the window)", in_call, window_ns, top / 2);
  std::fprintf(out, "host thread in CUDA calls %.3f ms (%.2f%%), in its own code %.3f ms\n", in_calls_ns * 1e-6,
               100.0 * in_calls_ns / window_ns, (window_ns - in_calls_ns) * 1e-6);
  // The idle gaps against the segments (both in time order).
  const std::string outside = "(in no CUDA call: the program's own host code)";
  std::map<std::string, std::pair<double, long>> during;
  double idle_ns = 0;
  std::size_t j = 0;
  for (const Interval& g : idle) {
    while (j < segments.size() && segments[j].end_ns <= g.start_ns) ++j;
    double covered_ns = 0;
    for (std::size_t k = j; k < segments.size() && segments[k].start_ns < g.end_ns; ++k) {
      const double ns = static_cast<double>(std::min(g.end_ns, segments[k].end_ns) -
                                            std::max(g.start_ns, segments[k].start_ns));
      auto& [sum, n] = during[segments[k].label];
      sum += ns;
      ++n;
      covered_ns += ns;
    }
    const double gap_ns = static_cast<double>(g.end_ns - g.start_ns);
    auto& [sum, n] = during[outside];
    sum += gap_ns - covered_ns;
    ++n;
    idle_ns += gap_ns;
  }
  if (idle_ns > 0)
    print_sums(out, "GPU idle (gaps >= 2 us) by what the host thread was doing (share of that idle time)", during,
               idle_ns, top / 2);
}

void report() {
  cuptiActivityFlushAll(1);
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<Activity>& all = r.activities;
  const char* path = std::getenv("SEXTANT_PROFILE_OUT");
  FILE* out = path != nullptr ? std::fopen(path, "w") : stderr;
  if (out == nullptr) out = stderr;
  if (all.empty()) {
    std::fprintf(out, "kernel profile: no GPU activity recorded\n");
    return;
  }
  std::sort(all.begin(), all.end(), [](const Activity& a, const Activity& b) { return a.start_ns < b.start_ns; });
  std::uint64_t last_end = 0;
  for (const Activity& a : all) last_end = std::max(last_end, a.end_ns);
  const double last_s = env_double("SEXTANT_PROFILE_LAST_S", 0.0);
  const std::uint64_t window_start =
      last_s > 0 ? last_end - std::min<std::uint64_t>(last_end, static_cast<std::uint64_t>(last_s * 1e9))
                 : all.front().start_ns;

  struct Sum {
    double ns = 0;
    long calls = 0;
  };
  std::map<std::string, Sum> sums;
  struct Gap {
    std::uint64_t start_ns;
    std::uint64_t ns;
    const std::string* before;
    const std::string* after;
  };
  std::vector<Gap> gaps;
  const std::string* last_name = nullptr;
  std::uint64_t first_start = last_end, busy_ns = 0, covered_to = 0;
  for (const Activity& a : all) {
    if (a.start_ns < window_start) continue;
    first_start = std::min(first_start, a.start_ns);
    Sum& s = sums[a.name];
    s.ns += static_cast<double>(a.end_ns - a.start_ns);
    ++s.calls;
    if (last_name != nullptr && a.start_ns > covered_to)
      gaps.push_back({covered_to, a.start_ns - covered_to, last_name, &a.name});
    // Busy time with overlapping activities merged (sorted by start).
    const std::uint64_t from = std::max(a.start_ns, covered_to);
    if (a.end_ns > from) busy_ns += a.end_ns - from;
    if (a.end_ns >= covered_to) last_name = &a.name;
    covered_to = std::max(covered_to, a.end_ns);
  }
  const double window_ns = static_cast<double>(last_end - first_start);
  std::vector<std::pair<std::string, Sum>> rows(sums.begin(), sums.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  const auto top = static_cast<std::size_t>(env_double("SEXTANT_PROFILE_TOP", 40));
  std::fprintf(out, "%10s %8s %10s %7s  %s\n", "total_ms", "calls", "mean_us", "share", "kernel");
  double shown_ns = 0;
  for (std::size_t i = 0; i < rows.size() && i < top; ++i) {
    const Sum& s = rows[i].second;
    shown_ns += s.ns;
    std::fprintf(out, "%10.3f %8ld %10.2f %6.2f%%  %s\n", s.ns * 1e-6, s.calls, s.ns * 1e-3 / s.calls,
                 100.0 * s.ns / window_ns, rows[i].first.c_str());
  }
  double total_ns = 0;
  for (const auto& row : rows) total_ns += row.second.ns;
  std::fprintf(out, "%10.3f %8s %10s %6.2f%%  (%zu other names)\n", (total_ns - shown_ns) * 1e-6, "", "",
               100.0 * (total_ns - shown_ns) / window_ns, rows.size() > top ? rows.size() - top : 0);
  std::fprintf(out, "window %.3f ms, GPU busy %.3f ms (%.2f%%), idle %.3f ms\n", window_ns * 1e-6,
               static_cast<double>(busy_ns) * 1e-6, 100.0 * static_cast<double>(busy_ns) / window_ns,
               (window_ns - static_cast<double>(busy_ns)) * 1e-6);
  // Idle time by gap length: many short gaps (launch latency between dependent
  // kernels) or a few long ones (the host).
  constexpr std::uint64_t kBounds[] = {2'000, 10'000, 100'000};
  double idle_ms[4] = {}, count[4] = {};
  for (const Gap& g : gaps) {
    int b = 0;
    while (b < 3 && g.ns >= kBounds[b]) ++b;
    idle_ms[b] += static_cast<double>(g.ns) * 1e-6;
    ++count[b];
  }
  std::fprintf(out, "idle by gap: <2 us %.3f ms (%.0f gaps), 2-10 us %.3f ms (%.0f), 10-100 us %.3f ms (%.0f), "
               ">=100 us %.3f ms (%.0f)\n", idle_ms[0], count[0], idle_ms[1], count[1], idle_ms[2], count[2],
               idle_ms[3], count[3]);
  if (!r.host_calls.empty()) {
    std::vector<Interval> idle;  // the gaps of 2 us and more, in time order
    for (const Gap& g : gaps)
      if (g.ns >= kBounds[0]) idle.push_back({g.start_ns, g.start_ns + g.ns});
    report_host(out, r.host_calls, idle, first_start, last_end);
  }
  const auto longest = static_cast<std::size_t>(env_double("SEXTANT_PROFILE_GAPS", 5));
  std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.ns > b.ns; });
  for (std::size_t i = 0; i < gaps.size() && i < longest; ++i)
    std::fprintf(out, "gap %.1f us after %s, before %s\n", static_cast<double>(gaps[i].ns) * 1e-3,
                 gaps[i].before->c_str(), gaps[i].after->c_str());
  if (out != stderr) std::fclose(out);
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (env_double("SEXTANT_PROFILE_API", 0) != 0) {
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  std::atexit(report);
  return 1;
}
