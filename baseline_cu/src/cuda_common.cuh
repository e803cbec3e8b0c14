// CUDA helpers shared by the cuDNN and cuBLAS baselines: error checks, NVTX, event timing, dtypes.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <functional>
#include <string>
#include <vector>

#include "lstm_common.hpp"

#define CUDA_CHECK(call)                                                                               \
  do {                                                                                                 \
    cudaError_t err_ = (call);                                                                         \
    if (err_ != cudaSuccess) lstm::die(std::string(#call) + ": " + cudaGetErrorString(err_));          \
  } while (0)

namespace lstm {

// An NVTX push/pop range (header-only NVTX v3: a no-op unless a tool such as nsys is attached).
struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

struct DeviceTiming {
  std::vector<double> event_ns, wall_ns;
  double warmup_s = 0;
};

// Warm up, then time each call with CUDA events (device time between the first and the last
// launch, launch latency included) and with the host clock around the synchronized call.
inline DeviceTiming time_forward(const std::function<void()>& forward, int warmup, int repeats, double min_time_ms) {
  DeviceTiming t;
  int64_t w0 = wall_ns();
  {
    NvtxRange range("warmup");
    for (int i = 0; i < warmup; ++i) forward();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  t.warmup_s = (wall_ns() - w0) / 1e9;
  cudaEvent_t begin, end;
  CUDA_CHECK(cudaEventCreate(&begin));
  CUDA_CHECK(cudaEventCreate(&end));
  double timed_ns = 0;
  while (time_more(t.wall_ns.size(), timed_ns, repeats, min_time_ms)) {
    NvtxRange range("step");
    int64_t h0 = wall_ns();
    CUDA_CHECK(cudaEventRecord(begin));
    forward();
    CUDA_CHECK(cudaEventRecord(end));
    CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    t.event_ns.push_back(ms * 1e6);
    t.wall_ns.push_back(static_cast<double>(wall_ns() - h0));
    timed_ns += t.wall_ns.back();
  }
  CUDA_CHECK(cudaEventDestroy(begin));
  CUDA_CHECK(cudaEventDestroy(end));
  return t;
}

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) { CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T) + 1)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Host floats to the device in the run's dtype (fp32, or fp16 rounded on the host).
template <typename T>
inline void upload(T* dst, const std::vector<float>& src) {
  std::vector<T> converted(src.size());
  for (size_t i = 0; i < src.size(); ++i) converted[i] = static_cast<T>(src[i]);
  CUDA_CHECK(cudaMemcpy(dst, converted.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
inline std::vector<float> download(const T* src, size_t n) {
  std::vector<T> raw(n);
  CUDA_CHECK(cudaMemcpy(raw.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(raw[i]);
  return out;
}

inline std::string device_name() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

inline int compute_capability_major() {
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}

// One manifest-format JSON line for a CUDA baseline run.
inline void print_result(const char* variant, const std::string& version, const Options& o, const Config& c,
                         const DeviceTiming& t, const std::string& check, const std::string& extra) {
  std::printf("{\"framework\": \"native\", \"framework_version\": \"%s\", \"variant\": \"%s\", \"device\": \"cuda\", "
              "\"device_name\": \"%s\", \"dtype\": \"%s\", \"threads\": 1, \"config\": %s, "
              "\"timing\": {\"wall_ns\": %s, \"cuda_event_ns\": %s, \"warmup_s\": %.4f, \"method\": \"cuda events + steady_clock\"}, "
              "\"check\": %s%s}\n",
              json_escape(version).c_str(), variant, json_escape(device_name()).c_str(), o.dtype.c_str(),
              config_json(c).c_str(), summary_json(t.wall_ns).c_str(), summary_json(t.event_ns).c_str(), t.warmup_s,
              check.c_str(), extra.c_str());
  std::fflush(stdout);
}

inline std::string check_json(const Options& o, const Problem& p, const std::vector<float>& out) {
  if (!o.check || !worth_checking(p.c)) return "null";
  char text[160];
  std::snprintf(text, sizeof text, "{\"max_abs_err\": %.3g, \"reference\": \"double-precision loop\"}",
                max_abs_diff(out, reference(p)));
  return text;
}

}  // namespace lstm
