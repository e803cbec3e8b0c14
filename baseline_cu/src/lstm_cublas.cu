// An LSTM forward from cuBLAS GEMMs and one fused pointwise kernel per step (Appleyard et al.,
// "Optimizing Performance of Recurrent Neural Networks on GPUs", 2016): one large GEMM projects the
// inputs of all timesteps; then per timestep one recurrent GEMM accumulates into that step's gates
// and one kernel applies biases, nonlinearities and the cell update. fp32 or fp16 storage (fp16:
// GEMMs accumulate in fp32 via cublasGemmEx, pointwise math in fp32).
#include <cublas_v2.h>

#include "cuda_common.cuh"

namespace {

const char* kUsage =
    "lstm_cublas [--config HIDDEN,BATCH,TIMESTEPS[,INPUT]]... [--dtype fp32|fp16] [--warmup N] [--repeats N] [--min-time-ms MS]\n"
    "            [--seed N] [--weights FILE --dump-output FILE] [--no-check]";

#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    cublasStatus_t st_ = (call);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS) lstm::die(std::string(#call) + ": cuBLAS status " + std::to_string(st_)); \
  } while (0)

__device__ inline float sigmoidf(float v) { return 1.0f / (1.0f + __expf(-v)); }

// gates: this step's [B, 4H] (row-major) pre-activations without bias; h_out: [B, H].
template <typename T>
__global__ void lstm_pointwise(const T* __restrict__ gates, const float* __restrict__ bias, float* __restrict__ cell,
                               T* __restrict__ h_out, int batch, int hidden) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= batch * hidden) return;
  int b = idx / hidden, j = idx % hidden;
  const T* g = gates + static_cast<size_t>(b) * 4 * hidden;
  float ig = sigmoidf(static_cast<float>(g[j]) + bias[j]);
  float fg = sigmoidf(static_cast<float>(g[hidden + j]) + bias[hidden + j]);
  float gg = tanhf(static_cast<float>(g[2 * hidden + j]) + bias[2 * hidden + j]);
  float og = sigmoidf(static_cast<float>(g[3 * hidden + j]) + bias[3 * hidden + j]);
  float c = fg * cell[idx] + ig * gg;
  cell[idx] = c;
  h_out[idx] = static_cast<T>(og * tanhf(c));
}

template <typename T>
cudaDataType_t cuda_type();
template <>
cudaDataType_t cuda_type<float>() { return CUDA_R_32F; }
template <>
cudaDataType_t cuda_type<__half>() { return CUDA_R_16F; }

// Row-major [rows, cols] is column-major [cols, rows]: C[m=4H, n] += W^T[4H, k] * X[k, n] in
// column-major terms is gates[n, 4H] += X[n, k] . W^T for row-major W [4H, k] and X [n, k].
template <typename T>
void gemm(cublasHandle_t handle, int m, int n, int k, const T* w, const T* x, T* c, float beta) {
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, cuda_type<T>(), k, x, cuda_type<T>(), k,
                            &beta, c, cuda_type<T>(), m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <typename T>
void run(const lstm::Options& o, const lstm::Config& c, cublasHandle_t handle) {
  lstm::Problem p = lstm::make_problem(c, o);
  const int H = c.hidden, B = c.batch, T_ = c.timesteps, I = c.input, G = 4 * H;
  lstm::DeviceBuffer<T> w_ih(p.w_ih.size()), w_hh(p.w_hh.size()), x(p.x.size()), gates(1ull * T_ * B * G),
      out(1ull * T_ * B * H);
  lstm::DeviceBuffer<float> bias(G), cell(1ull * B * H);
  lstm::upload(w_ih.ptr, p.w_ih);
  lstm::upload(w_hh.ptr, p.w_hh);
  lstm::upload(x.ptr, p.x);
  std::vector<float> b(G);
  for (int i = 0; i < G; ++i) b[i] = p.b_ih[i] + p.b_hh[i];
  lstm::upload(bias.ptr, b);
  const int threads = 256, blocks = (B * H + threads - 1) / threads;

  auto forward = [&] {
    lstm::NvtxRange range("forward");
    CUDA_CHECK(cudaMemsetAsync(cell.ptr, 0, sizeof(float) * B * H));
    {
      lstm::NvtxRange input("input_projection");
      gemm<T>(handle, G, T_ * B, I, w_ih.ptr, x.ptr, gates.ptr, 0.0f);
    }
    lstm::NvtxRange steps("recurrence");
    for (int t = 0; t < T_; ++t) {
      T* g = gates.ptr + 1ull * t * B * G;
      T* h = out.ptr + 1ull * t * B * H;
      if (t > 0) gemm<T>(handle, G, B, H, w_hh.ptr, h - 1ull * B * H, g, 1.0f);  // h0 = 0: no term at t = 0
      lstm_pointwise<T><<<blocks, threads>>>(g, bias.ptr, cell.ptr, h, B, H);
    }
    CUDA_CHECK(cudaGetLastError());
  };
  lstm::DeviceTiming timing = lstm::time_forward(forward, o.warmup, o.repeats, o.min_time_ms);
  std::vector<float> result = lstm::download(out.ptr, out.count);
  if (!o.dump_output.empty()) lstm::dump(o.dump_output, result);
  int version = 0;
  CUBLAS_CHECK(cublasGetVersion(handle, &version));
  lstm::print_result("cublas_lstm", "cuBLAS " + std::to_string(version), o, c, timing, lstm::check_json(o, p, result),
                     std::string(", \"kernels_per_step\": 2, \"math\": \"") + (o.dtype == "fp16" ? "fp16" : "fp32") + "\"");
}

}  // namespace

int main(int argc, char** argv) {
  lstm::Options o = lstm::parse_args(argc, argv, kUsage);
  if (o.dtype != "fp32" && o.dtype != "fp16") lstm::die("--dtype is fp32 or fp16");
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  // Default math: fp32 GEMMs in full fp32 (no TF32), like PyTorch's default for matmuls
  // (torch.backends.cuda.matmul.allow_tf32 = False); the cuDNN baseline may use TF32 (its "math" field).
  CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  for (const lstm::Config& c : o.configs) {
    if (o.dtype == "fp16") run<__half>(o, c, handle);
    else run<float>(o, c, handle);
  }
  cublasDestroy(handle);
  return 0;
}
