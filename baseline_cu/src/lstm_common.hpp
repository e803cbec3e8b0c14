// Shared by the native LSTM baselines: command line, weights, the reference LSTM, timing, JSON.
//
// Layout (PyTorch nn.LSTM's, gates i, f, g, o): w_ih [4H, I], w_hh [4H, H], b_ih [4H], b_hh [4H],
// input x [T, B, I] sequence-major, output h for every timestep [T, B, H], zero initial state.
// --weights FILE reads exactly those arrays (little-endian float32, in that order, then x), so a
// test can feed nn.LSTM's own weights; otherwise they come from a seeded generator.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lstm {

struct Config {
  int hidden = 256, batch = 16, timesteps = 20, input = 256;
};

constexpr int kMaxSamples = 10000;

// Another timed call: fewer than `repeats` so far, or fewer than `min_time_ms` of calls timed.
inline bool time_more(size_t calls, double timed_ns, int repeats, double min_time_ms) {
  return calls < static_cast<size_t>(repeats) || (timed_ns < min_time_ms * 1e6 && calls < kMaxSamples);
}

struct Options {
  std::vector<Config> configs;
  int warmup = 3, repeats = 10, threads = 1;
  // Time past --repeats until the calls add up to this (a median of a few sub-ms calls is noise),
  // at most kMaxSamples calls.
  double min_time_ms = 0;
  uint64_t seed = 0;
  std::string weights_file, dump_output, dtype = "fp32", algo = "auto";
  bool check = true;
};

[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(2);
}

inline Config parse_config(const std::string& text) {
  Config c;
  int values[4] = {0, 0, 0, 0};
  int n = std::sscanf(text.c_str(), "%d,%d,%d,%d", &values[0], &values[1], &values[2], &values[3]);
  if (n < 3) die("--config wants HIDDEN,BATCH,TIMESTEPS[,INPUT], got '" + text + "'");
  c.hidden = values[0];
  c.batch = values[1];
  c.timesteps = values[2];
  c.input = n == 4 ? values[3] : values[0];
  if (c.hidden <= 0 || c.batch <= 0 || c.timesteps <= 0 || c.input <= 0) die("sizes must be positive: " + text);
  return c;
}

inline Options parse_args(int argc, char** argv, const char* usage) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--config") o.configs.push_back(parse_config(value()));
    else if (a == "--warmup") o.warmup = std::stoi(value());
    else if (a == "--repeats") o.repeats = std::stoi(value());
    else if (a == "--min-time-ms") o.min_time_ms = std::stod(value());
    else if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--weights") o.weights_file = value();
    else if (a == "--dump-output") o.dump_output = value();
    else if (a == "--dtype") o.dtype = value();
    else if (a == "--algo") o.algo = value();
    else if (a == "--no-check") o.check = false;
    else if (a == "-h" || a == "--help") { std::printf("%s\n", usage); std::exit(0); }
    else die("unknown argument " + a + "\n" + usage);
  }
  if (o.configs.empty()) o.configs.push_back(Config{});
  if (o.repeats < 1 || o.warmup < 0 || o.min_time_ms < 0)
    die("--repeats must be >= 1, --warmup and --min-time-ms >= 0");
  if (!o.weights_file.empty() && o.configs.size() != 1) die("--weights goes with exactly one --config");
  return o;
}

struct Problem {
  Config c;
  std::vector<float> w_ih, w_hh, b_ih, b_hh, x;
};

// splitmix64: a tiny, portable generator, so every baseline draws the same weights for a seed.
inline double uniform01(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 11) * (1.0 / 9007199254740992.0);
}

inline Problem make_problem(const Config& c, const Options& o) {
  Problem p{c, std::vector<float>(4ull * c.hidden * c.input), std::vector<float>(4ull * c.hidden * c.hidden),
            std::vector<float>(4ull * c.hidden), std::vector<float>(4ull * c.hidden),
            std::vector<float>(1ull * c.timesteps * c.batch * c.input)};
  if (!o.weights_file.empty()) {
    std::ifstream in(o.weights_file, std::ios::binary);
    if (!in) die("cannot open --weights " + o.weights_file);
    for (auto* v : {&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh, &p.x}) {
      in.read(reinterpret_cast<char*>(v->data()), static_cast<std::streamsize>(v->size() * sizeof(float)));
      if (!in) die(o.weights_file + ": too short for the given --config");
    }
    if (in.peek() != EOF) die(o.weights_file + ": longer than the given --config needs");
    return p;
  }
  uint64_t state = o.seed * 0x1000193ull + 1;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hidden));  // nn.LSTM's init range
  for (auto* v : {&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh})
    for (auto& w : *v) w = static_cast<float>((2 * uniform01(state) - 1) * scale);
  for (auto& v : p.x) v = static_cast<float>(2 * uniform01(state) - 1);
  return p;
}

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The equations in plain double-precision loops: the reference every baseline is checked against.
inline std::vector<float> reference(const Problem& p) {
  const Config& c = p.c;
  const int H = c.hidden, B = c.batch, I = c.input;
  std::vector<double> h(1ull * B * H, 0.0), cell(1ull * B * H, 0.0), gates(4ull * H);
  std::vector<float> out(1ull * c.timesteps * B * H);
  for (int t = 0; t < c.timesteps; ++t) {
    std::vector<double> h_next(h.size());
    for (int b = 0; b < B; ++b) {
      const float* x = &p.x[(1ull * t * B + b) * I];
      for (int r = 0; r < 4 * H; ++r) {
        double acc = p.b_ih[r] + p.b_hh[r];
        for (int k = 0; k < I; ++k) acc += static_cast<double>(p.w_ih[1ull * r * I + k]) * x[k];
        for (int k = 0; k < H; ++k) acc += static_cast<double>(p.w_hh[1ull * r * H + k]) * h[1ull * b * H + k];
        gates[r] = acc;
      }
      for (int j = 0; j < H; ++j) {
        double ig = sigmoid(gates[j]), fg = sigmoid(gates[H + j]), gg = std::tanh(gates[2 * H + j]),
               og = sigmoid(gates[3 * H + j]);
        double cn = fg * cell[1ull * b * H + j] + ig * gg;
        cell[1ull * b * H + j] = cn;
        h_next[1ull * b * H + j] = og * std::tanh(cn);
        out[(1ull * t * B + b) * H + j] = static_cast<float>(h_next[1ull * b * H + j]);
      }
    }
    h.swap(h_next);
  }
  return out;
}

// Checking costs T*B*4H*(I+H) multiply-adds in double; skip it where that would dominate the run.
inline bool worth_checking(const Config& c) {
  return 1.0 * c.timesteps * c.batch * 4.0 * c.hidden * (c.input + c.hidden) <= 2e9;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

inline void dump(const std::string& path, const std::vector<float>& out) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  if (!f) die("cannot write " + path);
}

inline std::string summary_json(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  auto rank = [&](double q) { return samples[std::min(n - 1, static_cast<size_t>(std::llround(q * (n - 1))))]; };
  double median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  std::ostringstream s;
  s.precision(15);
  s << "{\"median\": " << median << ", \"p10\": " << rank(0.1) << ", \"p90\": " << rank(0.9)
    << ", \"min\": " << samples[0] << ", \"n\": " << n << "}";
  return s.str();
}

inline std::string trim(const std::string& text) {
  auto a = text.find_first_not_of(' '), b = text.find_last_not_of(' ');
  return a == std::string::npos ? "" : text.substr(a, b - a + 1);
}

inline std::string json_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

inline std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      auto start = line.find_first_not_of(' ', colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "cpu";
}

inline std::string config_json(const Config& c) {
  std::ostringstream s;
  s << "{\"batch\": " << c.batch << ", \"hidden\": " << c.hidden << ", \"input\": " << c.input
    << ", \"layers\": 1, \"timesteps\": " << c.timesteps << "}";
  return s.str();
}

inline int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace lstm
