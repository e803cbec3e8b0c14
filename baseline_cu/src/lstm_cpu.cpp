// The native CPU LSTM baseline: the structure of Appleyard et al.'s GPU LSTM, with a BLAS.
//
// One sgemm projects the inputs of all timesteps at once ([T*B, I] x [I, 4H]); then per timestep
// one sgemm adds the recurrent term ([B, H] x [H, 4H]) in place and one fused loop applies the
// biases, gate nonlinearities and the cell update. Nothing else: no framework, no allocation in
// the timed loop. Prints one JSON line per --config in the collectors' manifest format.
#include <cblas.h>

#ifdef TRACEKIT_SCIPY_OPENBLAS  // the scipy-openblas32 wheel prefixes every symbol with scipy_
#define cblas_sgemm scipy_cblas_sgemm
#define openblas_set_num_threads scipy_openblas_set_num_threads
#endif

#include <cstdio>
#include <string>
#include <vector>

#include "lstm_common.hpp"

namespace {

const char* kUsage =
    "lstm_cpu [--config HIDDEN,BATCH,TIMESTEPS[,INPUT]]... [--warmup N] [--repeats N] [--min-time-ms MS] [--threads N]\n"
    "         [--seed N] [--weights FILE --dump-output FILE] [--no-check]";

struct Buffers {
  std::vector<float> gates, out, cell, bias;
};

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// Biases, gate nonlinearities and the cell update for one timestep. Written as plain loops over
// restrict pointers so the compiler vectorizes them (with -ffast-math, through glibc's libmvec
// expf/tanhf), as a hand-written LSTM kernel would be.
void pointwise(const float* __restrict g, const float* __restrict bias, float* __restrict cell,
               float* __restrict h, int batch, int hidden) {
  for (int b = 0; b < batch; ++b) {
    const float* __restrict gb = g + 4ull * b * hidden;
    float* __restrict cb = cell + 1ull * b * hidden;
    float* __restrict hb = h + 1ull * b * hidden;
    for (int j = 0; j < hidden; ++j) {
      float ig = sigmoid(gb[j] + bias[j]);
      float fg = sigmoid(gb[hidden + j] + bias[hidden + j]);
      float gg = std::tanh(gb[2 * hidden + j] + bias[2 * hidden + j]);
      float og = sigmoid(gb[3 * hidden + j] + bias[3 * hidden + j]);
      float cn = fg * cb[j] + ig * gg;
      cb[j] = cn;
      hb[j] = og * std::tanh(cn);
    }
  }
}

void forward(const lstm::Problem& p, Buffers& buf) {
  const lstm::Config& c = p.c;
  const int H = c.hidden, B = c.batch, I = c.input, G = 4 * H;
  float* gates = buf.gates.data();
  // Input projection of every timestep: gates[T*B, 4H] = x[T*B, I] . w_ih^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c.timesteps * B, G, I, 1.0f, p.x.data(), I, p.w_ih.data(), I,
              0.0f, gates, G);
  std::fill(buf.cell.begin(), buf.cell.end(), 0.0f);
  for (int t = 0; t < c.timesteps; ++t) {
    float* g = gates + 1ull * t * B * G;
    float* h_out = buf.out.data() + 1ull * t * B * H;
    if (t > 0) {  // h0 = 0: the first step has no recurrent term
      const float* h_prev = h_out - 1ull * B * H;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, H, 1.0f, h_prev, H, p.w_hh.data(), H, 1.0f, g, G);
    }
    pointwise(g, buf.bias.data(), buf.cell.data(), h_out, B, H);
  }
}

}  // namespace

int main(int argc, char** argv) {
  lstm::Options o = lstm::parse_args(argc, argv, kUsage);
  if (o.dtype != "fp32") lstm::die("the CPU baseline computes in fp32 only");
  openblas_set_num_threads(o.threads);
  for (const lstm::Config& c : o.configs) {
    lstm::Problem p = lstm::make_problem(c, o);
    Buffers buf{std::vector<float>(4ull * c.timesteps * c.batch * c.hidden),
                std::vector<float>(1ull * c.timesteps * c.batch * c.hidden), std::vector<float>(1ull * c.batch * c.hidden),
                std::vector<float>(4ull * c.hidden)};
    for (size_t i = 0; i < buf.bias.size(); ++i) buf.bias[i] = p.b_ih[i] + p.b_hh[i];
    int64_t w0 = lstm::wall_ns();
    for (int i = 0; i < o.warmup; ++i) forward(p, buf);
    double warmup_s = (lstm::wall_ns() - w0) / 1e9;
    std::vector<double> wall, cpu;
    double timed_ns = 0;
    while (lstm::time_more(wall.size(), timed_ns, o.repeats, o.min_time_ms)) {
      int64_t a = lstm::wall_ns(), ca = lstm::thread_cpu_ns();
      forward(p, buf);
      cpu.push_back(static_cast<double>(lstm::thread_cpu_ns() - ca));
      wall.push_back(static_cast<double>(lstm::wall_ns() - a));
      timed_ns += wall.back();
    }
    std::string check = "null";
    if (o.check && lstm::worth_checking(c)) {
      char text[160];
      std::snprintf(text, sizeof text, "{\"max_abs_err\": %.3g, \"reference\": \"double-precision loop\"}",
                    lstm::max_abs_diff(buf.out, lstm::reference(p)));
      check = text;
    }
    if (!o.dump_output.empty()) lstm::dump(o.dump_output, buf.out);
    std::printf("{\"framework\": \"native\", \"framework_version\": \"%s\", \"variant\": \"cpu_blas\", "
                "\"device\": \"cpu\", \"device_name\": \"%s\", \"dtype\": \"fp32\", \"threads\": %d, \"config\": %s, "
                "\"timing\": {\"wall_ns\": %s, \"cpu_ns\": %s, \"warmup_s\": %.4f, \"method\": \"steady_clock+thread_cputime\"}, "
                "\"check\": %s}\n",
                lstm::json_escape(lstm::trim(OPENBLAS_VERSION)).c_str(), lstm::json_escape(lstm::cpu_model_name()).c_str(), o.threads,
                lstm::config_json(c).c_str(), lstm::summary_json(wall).c_str(), lstm::summary_json(cpu).c_str(), warmup_s,
                check.c_str());
    std::fflush(stdout);
  }
  return 0;
}
