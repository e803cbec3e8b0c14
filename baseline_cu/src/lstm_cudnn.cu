// The native reference: an LSTM forward through cuDNN's RNN API (cudnnRNNForward, the v8/v9
// descriptor API), as DeepBench measured it. --algo picks cuDNN's algorithm: standard (per-step
// GEMMs and a pointwise kernel), persist (CUDNN_RNN_ALGO_PERSIST_STATIC: the recurrent weights
// stay on chip for the whole sequence), persist_small_h (PERSIST_STATIC_SMALL_H, hidden <= 192),
// or auto: PyTorch's choice (aten/src/ATen/native/cudnn/RNN.cpp get_algo) -- small_h at hidden
// <= 192, persist for fp16 at batch % 8 == 0 and <= 128, else standard. An algorithm cuDNN refuses
// for the size falls back to standard; the JSON says which ran.
#include <cudnn.h>

#include "cuda_common.cuh"

namespace {

const char* kUsage =
    "lstm_cudnn [--config HIDDEN,BATCH,TIMESTEPS[,INPUT]]... [--dtype fp32|fp16] [--algo auto|standard|persist|persist_small_h]\n"
    "           [--warmup N] [--repeats N] [--min-time-ms MS] [--seed N] [--weights FILE --dump-output FILE] [--no-check]";

#define CUDNN_CHECK(call)                                                                         \
  do {                                                                                            \
    cudnnStatus_t st_ = (call);                                                                   \
    if (st_ != CUDNN_STATUS_SUCCESS) lstm::die(std::string(#call) + ": " + cudnnGetErrorString(st_)); \
  } while (0)

cudnnRNNAlgo_t pick_algo(const std::string& name, const lstm::Config& c, bool fp16) {
  if (name == "standard") return CUDNN_RNN_ALGO_STANDARD;
  if (name == "persist") return CUDNN_RNN_ALGO_PERSIST_STATIC;
  if (name == "persist_small_h") return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
  if (name != "auto") lstm::die("--algo is auto, standard, persist or persist_small_h");
  if (c.hidden <= 192) return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
  if (fp16 && c.batch % 8 == 0 && c.batch <= 128) return CUDNN_RNN_ALGO_PERSIST_STATIC;
  return CUDNN_RNN_ALGO_STANDARD;
}

const char* algo_name(cudnnRNNAlgo_t algo) {
  switch (algo) {
    case CUDNN_RNN_ALGO_PERSIST_STATIC: return "persist";
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H: return "persist_small_h";
    default: return "standard";
  }
}

struct Rnn {
  cudnnRNNDescriptor_t rnn{};
  cudnnDropoutDescriptor_t dropout{};
  cudnnRNNDataDescriptor_t x_desc{}, y_desc{};
  cudnnTensorDescriptor_t h_desc{}, c_desc{};
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
};

// Describe the LSTM for one algorithm; returns false where cuDNN does not support it at this size.
bool describe(cudnnHandle_t handle, Rnn& r, cudnnRNNAlgo_t algo, const lstm::Config& c, cudnnDataType_t type,
              const std::vector<int>& seq_lengths) {
  cudnnMathType_t math = type == CUDNN_DATA_HALF ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
  CUDNN_CHECK(cudnnSetRNNDescriptor_v8(r.rnn, algo, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                       CUDNN_LINEAR_INPUT, type, CUDNN_DATA_FLOAT, math, c.input, c.hidden, c.hidden,
                                       1, r.dropout, CUDNN_RNN_PADDED_IO_DISABLED));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(r.x_desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, c.timesteps, c.batch,
                                        c.input, seq_lengths.data(), nullptr));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(r.y_desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, c.timesteps, c.batch,
                                        c.hidden, seq_lengths.data(), nullptr));
  int dims[3] = {1, c.batch, c.hidden}, strides[3] = {c.batch * c.hidden, c.hidden, 1};
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(r.h_desc, type, 3, dims, strides));
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(r.c_desc, type, 3, dims, strides));
  CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, r.rnn, &r.weight_bytes));
  cudnnStatus_t st = cudnnGetRNNTempSpaceSizes(handle, r.rnn, CUDNN_FWD_MODE_INFERENCE, r.x_desc, &r.work_bytes,
                                               &r.reserve_bytes);
  if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) return false;
  CUDNN_CHECK(st);
  return true;
}

// nn.LSTM's weights into cuDNN's weight space: linear layers 0-3 are the input matrices of gates
// i, f, g, o ([H, I] row-major chunks of w_ih), 4-7 the recurrent ones; biases likewise.
template <typename T>
void load_weights(cudnnHandle_t handle, const Rnn& r, const lstm::Problem& p, void* space) {
  const int H = p.c.hidden, I = p.c.input;
  cudnnTensorDescriptor_t m_desc, b_desc;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&m_desc));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_desc));
  for (int lin = 0; lin < 8; ++lin) {
    void *m_addr = nullptr, *b_addr = nullptr;
    CUDNN_CHECK(cudnnGetRNNWeightParams(handle, r.rnn, 0, r.weight_bytes, space, lin, m_desc, &m_addr, b_desc, &b_addr));
    const int gate = lin % 4, cols = lin < 4 ? I : H;
    const std::vector<float>& w = lin < 4 ? p.w_ih : p.w_hh;
    const std::vector<float>& b = lin < 4 ? p.b_ih : p.b_hh;
    std::vector<float> m_chunk(w.begin() + 1ll * gate * H * cols, w.begin() + 1ll * (gate + 1) * H * cols);
    std::vector<float> b_chunk(b.begin() + gate * H, b.begin() + (gate + 1) * H);
    lstm::upload(static_cast<T*>(m_addr), m_chunk);
    lstm::upload(static_cast<T*>(b_addr), b_chunk);
  }
  cudnnDestroyTensorDescriptor(m_desc);
  cudnnDestroyTensorDescriptor(b_desc);
}

template <typename T>
void run(const lstm::Options& o, const lstm::Config& c, cudnnHandle_t handle, cudnnDataType_t type) {
  lstm::Problem p = lstm::make_problem(c, o);
  Rnn r;
  CUDNN_CHECK(cudnnCreateRNNDescriptor(&r.rnn));
  CUDNN_CHECK(cudnnCreateDropoutDescriptor(&r.dropout));
  CUDNN_CHECK(cudnnSetDropoutDescriptor(r.dropout, handle, 0.0f, nullptr, 0, o.seed));
  CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&r.x_desc));
  CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&r.y_desc));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&r.h_desc));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&r.c_desc));
  std::vector<int> seq_lengths(c.batch, c.timesteps);
  cudnnRNNAlgo_t algo = pick_algo(o.algo, c, type == CUDNN_DATA_HALF);
  std::string note;
  if (!describe(handle, r, algo, c, type, seq_lengths)) {
    note = std::string(", \"algo_requested\": \"") + algo_name(algo) + "\"";
    algo = CUDNN_RNN_ALGO_STANDARD;
    if (!describe(handle, r, algo, c, type, seq_lengths)) lstm::die("cuDNN supports no LSTM algorithm for this config");
  }
  lstm::DeviceBuffer<int> dev_seq(c.batch);
  CUDA_CHECK(cudaMemcpy(dev_seq.ptr, seq_lengths.data(), sizeof(int) * c.batch, cudaMemcpyHostToDevice));
  lstm::DeviceBuffer<char> weights(r.weight_bytes), work(r.work_bytes), reserve(r.reserve_bytes);
  lstm::DeviceBuffer<T> x(p.x.size()), y(1ull * c.timesteps * c.batch * c.hidden);
  load_weights<T>(handle, r, p, weights.ptr);
  lstm::upload(x.ptr, p.x);

  auto forward = [&] {
    lstm::NvtxRange range("forward");
    // hx = cx = nullptr: zero initial state, like the other variants.
    CUDNN_CHECK(cudnnRNNForward(handle, r.rnn, CUDNN_FWD_MODE_INFERENCE, dev_seq.ptr, r.x_desc, x.ptr, r.y_desc, y.ptr,
                                r.h_desc, nullptr, nullptr, r.c_desc, nullptr, nullptr, r.weight_bytes, weights.ptr,
                                r.work_bytes, work.ptr, r.reserve_bytes, reserve.ptr));
  };
  lstm::DeviceTiming timing = lstm::time_forward(forward, o.warmup, o.repeats, o.min_time_ms);
  std::vector<float> result = lstm::download(y.ptr, y.count);
  if (!o.dump_output.empty()) lstm::dump(o.dump_output, result);
  // CUDNN_DEFAULT_MATH lets cuDNN use TF32 tensor cores for fp32 data on Ampere and later (seen on an
  // H100: 1.5e-4 off the double reference), as PyTorch's nn.LSTM does (torch.backends.cudnn.allow_tf32).
  const char* math = type == CUDNN_DATA_HALF ? "fp16" : lstm::compute_capability_major() >= 8 ? "tf32" : "fp32";
  std::string extra = std::string(", \"algo\": \"") + algo_name(algo) + "\", \"math\": \"" + math + "\"" + note;
  lstm::print_result("cudnn_lstm", "cuDNN " + std::to_string(cudnnGetVersion()), o, c, timing,
                     lstm::check_json(o, p, result), extra);
  cudnnDestroyTensorDescriptor(r.h_desc);
  cudnnDestroyTensorDescriptor(r.c_desc);
  cudnnDestroyRNNDataDescriptor(r.x_desc);
  cudnnDestroyRNNDataDescriptor(r.y_desc);
  cudnnDestroyDropoutDescriptor(r.dropout);
  cudnnDestroyRNNDescriptor(r.rnn);
}

}  // namespace

int main(int argc, char** argv) {
  lstm::Options o = lstm::parse_args(argc, argv, kUsage);
  if (o.dtype != "fp32" && o.dtype != "fp16") lstm::die("--dtype is fp32 or fp16");
  cudnnHandle_t handle;
  CUDNN_CHECK(cudnnCreate(&handle));
  for (const lstm::Config& c : o.configs) {
    if (o.dtype == "fp16") run<__half>(o, c, handle, CUDNN_DATA_HALF);
    else run<float>(o, c, handle, CUDNN_DATA_FLOAT);
  }
  cudnnDestroy(handle);
  return 0;
}
