"""Classification rule tables on real names (kernel_classes.md examples and names from the
shared traces), the copy/cast rules, and one regex pass per unique name."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.analyze import classify
from tracekit.analyze.classify import API_RULES, KERNEL_RULES, classify_name, classify_op_name
from tracekit.analyze.frame import Frame
from tracekit.ingest import load

# Real kernel names (from ../shared/research/kernel_classes.md §2 and the shared traces).
KERNELS = {
    "void RNN_blockPersist_fp_LSTM<float, float, float, 1>": "rnn",
    "void elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2, (cudnnRNNBiasMode_t)2>(int, int, int)": "rnn",
    "at::native::(anonymous namespace)::lstm_cell_forward<float, float, int, 1>": "rnn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::float16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)": "cast",
    "triton_poi_fused__to_copy_0": "cast",
    "volta_sgemm_128x64_tn": "gemm",
    "nvjet_tst_128x16_64x11_2x1_v_bz_TNT": "gemm",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(T1::Params)": "gemm",
    "void splitKreduce_kernel<32, 16, int, __half, __half>": "gemm",
    "cudnn_infer_volta_scudnn_128x64_relu_xregs_large_nn_v1": "convolution",
    "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>": "convolution",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>>>>": "reduction",
    "cunn_SoftMaxForward<4, float, float, float, LogSoftMaxForwardEpilogue>": "reduction",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >": "elementwise",
    "CudaCodeGen::kernel1(CudaCodeGen::Tensor<CudaCodeGen::__bfloat, (int)2, (int)2>)": "elementwise",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "Memcpy HtoD (Pageable -> Device)": "memcpy",
    "Memset (Device)": "memset",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>": "other",
}
OPS = {
    # Quantized CPU inference (torch.ao dynamic / static quantization, PT2E, weight-only int8/int4)
    "quantized::linear_dynamic": "gemm", "quantized::linear_relu": "gemm", "quantized::linear": "gemm",
    "quantized::linear_prepack": "other", "quantized::conv2d.new": "convolution", "quantized::conv2d_relu": "convolution",
    "quantized::conv2d_prepack": "other", "onednn::qconv2d_pointwise": "convolution", "onednn::qlinear_pointwise": "gemm",
    "onednn::qlinear_prepack": "other", "aten::_weight_int8pack_mm": "gemm", "aten::_weight_int4pack_mm_for_cpu": "gemm",
    "aten::_convert_weight_to_int4pack_for_cpu": "other", "aten::_int_mm": "gemm",
    "aten::quantize_per_tensor": "cast", "aten::quantize_per_tensor_dynamic": "cast", "aten::dequantize": "cast",
    "quantized_decomposed::dequantize_per_tensor": "cast", "aten::fake_quantize_per_tensor_affine": "cast",
    "aten::lstm": "rnn", "aten::mkldnn_rnn_layer": "rnn", "aten::lstm_cell": "rnn", "aten::_cudnn_rnn": "rnn",
    "aten::addmm": "gemm", "aten::linear": "gemm", "aten::copy_": "copy", "aten::_to_copy": "copy",
    "aten::sigmoid_": "elementwise", "aten::add": "elementwise", "aten::convolution": "convolution",
    "lstm_1/while/body/_1/lstm_1/while/lstm_cell_1/MatMul:_MklMatMul": "gemm",
    "lstm_1/while/body/_1/lstm_1/while/lstm_cell_1/Cast/Cast:Cast": "cast", "BlockLSTMV2:BlockLSTMV2": "rnn",
    "lstm_1/while/body/_1/lstm_1/while/lstm_cell_1/Sigmoid:Sigmoid": "elementwise",
    "Torch-Compiled Region: 0/0": "compiled", "aten::empty": "other",
    # Ops that do arithmetic and were "other" (their time counted as dispatch by whatif's no-dispatch):
    # the top "other" ATen ops by self time over the shared HTA traces and new captures.
    "aten::uniform_": "elementwise", "aten::clamp_min_": "elementwise", "aten::bernoulli_": "elementwise",
    "aten::nan_to_num": "elementwise", "aten::eq": "elementwise", "aten::exp_": "elementwise",
    "aten::max_pool2d_with_indices": "reduction", "aten::cudnn_batch_norm": "reduction",
    "aten::native_layer_norm_backward": "reduction", "aten::binary_cross_entropy_with_logits": "reduction",
    "aten::_adaptive_avg_pool2d": "reduction",
    # Backward ops of a torch CNN and transformer training step (real captures) that were "other".
    "aten::max_pool2d_with_indices_backward": "reduction", "aten::_log_softmax_backward_data": "reduction",
    "aten::_softmax_backward_data": "reduction", "aten::embedding_dense_backward": "reduction",
    "aten::isneginf": "elementwise", "aten::_scaled_dot_product_flash_attention_for_cpu": "gemm",
    # Convolutions no library takes (a CPU model's 3-channel first layer runs _slow_conv2d_forward:
    # 2% of a batch-1 CNN's step read as dispatch), other backends' and Inductor's oneDNN calls; their
    # weight reorders stay set-up work. Sparse, grouped and quantized products likewise.
    "aten::_slow_conv2d_forward": "convolution", "aten::_slow_conv2d_backward": "convolution",
    "aten::slow_conv_dilated2d": "convolution", "aten::slow_conv_transpose2d": "convolution",
    "aten::_conv_depthwise2d": "convolution", "aten::miopen_convolution": "convolution",
    "mkldnn::_convolution_pointwise": "convolution", "mkldnn::_reorder_convolution_weight": "other",
    "aten::mkldnn_reorder_conv2d_weight": "other", "_quantized::conv2d_relu": "convolution",
    "aten::_to_dense": "copy", "aten::to_mkldnn": "copy", "aten::mkldnn_adaptive_avg_pool2d": "reduction",
    "aten::mkldnn_max_pool2d": "reduction",
    # Other libraries' compute ops: torchvision's detection ops, PyG's torch_scatter / torch_sparse /
    # pyg-lib, sparse layout conversions (a GNN given a CSR adjacency).
    "torchvision::nms": "reduction", "torchvision::roi_align": "elementwise", "torchvision::_roi_align_backward": "elementwise",
    "torchvision::ps_roi_pool": "elementwise", "torchvision::deform_conv2d": "convolution",
    "torchvision::_deform_conv2d_backward": "convolution", "torch_scatter::scatter_sum": "reduction",
    "torch_scatter::segment_max_csr": "reduction", "torch_scatter::gather_csr": "elementwise",
    "torch_sparse::spmm_sum": "gemm", "pyg::segment_matmul": "gemm", "aten::_sparse_csr_mm": "gemm",
    "aten::_to_sparse_csr": "copy", "aten::_coalesce": "copy", "aten::_segment_reduce_backward": "reduction",
    "torchvision::_nms_kernel_impl": "other",
    "_quantized::conv2d_prepack": "other", "_quantized::linear_dynamic": "gemm", "aten::_sparse_addmm": "gemm",
    "quantized::linear_dynamic_fp16_unpacked_weight": "gemm", "quantized::linear_unpack": "other",
    "aten::_foreach_mm": "gemm", "inductor::_mm_plus_mm": "gemm", "sparse::qlinear_prepack": "other",
    # TF op types by family (tf_base_op undoes oneDNN's rewrite first).
    "block_1/depthwise/DepthwiseConv2dNativeBackpropFilter:_MklNativeDepthwiseConv2dNativeBackpropFilter": "convolution",
    "dense/Relu:_MklNativeFusedMatMul": "gemm", "conv/BiasAdd:_FusedConv2D": "convolution",
    "bn/FusedBatchNormGradV3:FusedBatchNormGradV3": "reduction", "x/Relu6Grad:Relu6Grad": "elementwise",
    "sq/SquaredDifference:SquaredDifference": "elementwise", "t/transpose:_MklTranspose": "elementwise",
    "SGD/AssignSubVariableOp:AssignSubVariableOp": "elementwise", "r/Reshape:Reshape": "other",
    # Dense linear algebra (LAPACK / cuSOLVER): PyTorch's torch.linalg and older names, TF's ops and their
    # oneDNN-free names, XLA's HLOs; norms are reductions; linalg's error check stays bookkeeping.
    "aten::linalg_eigh": "linalg", "aten::_linalg_eigh": "linalg", "aten::_linalg_svd": "linalg",
    "aten::linalg_qr": "linalg", "aten::linalg_cholesky_ex": "linalg", "aten::linalg_solve_ex": "linalg",
    "aten::_linalg_solve_ex": "linalg", "aten::linalg_inv_ex": "linalg", "aten::_linalg_slogdet": "linalg",
    "aten::linalg_lu_factor_ex": "linalg", "aten::linalg_solve_triangular": "linalg", "aten::inverse": "linalg",
    "aten::cholesky_solve": "linalg", "aten::matrix_exp": "linalg", "aten::geqrf": "linalg",
    "aten::linalg_vector_norm": "reduction", "aten::linalg_matrix_norm": "reduction",
    "aten::_linalg_check_errors": "other", "aten::linalg_matrix_power": "other",
    "grad/SelfAdjointEigV2:SelfAdjointEigV2": "linalg", "chol/Cholesky:Cholesky": "linalg",
    "inv/MatrixInverse:MatrixInverse": "linalg", "solve/MatrixTriangularSolve:MatrixTriangularSolve": "linalg",
    "LogMatrixDeterminant": "linalg", "cholesky.3": "linalg", "triangular-solve.1": "linalg",
    "lapack_ssyevd_ffi": "linalg",
    # ATen compute ops that were "other" (torch 2.13's registry, checked one by one): in-place
    # activations (nn.SiLU(inplace=True) runs silu_), positional encodings' sin/cos, resampling,
    # gathers and scatters, RNG, norms' newer entry points, scans, GPU fused attention.
    "aten::silu_": "elementwise", "aten::gelu_": "elementwise", "aten::sin": "elementwise", "aten::cos_": "elementwise",
    "aten::bitwise_and": "elementwise", "aten::remainder": "elementwise", "aten::special_erfcx": "elementwise",
    "aten::upsample_bilinear2d": "elementwise", "aten::_upsample_nearest_exact2d_backward": "elementwise",
    "aten::grid_sampler_2d": "elementwise", "aten::index": "elementwise", "aten::index_put_": "elementwise",
    "aten::gather": "elementwise", "aten::scatter_add_": "elementwise", "aten::embedding": "elementwise",
    "aten::randn": "elementwise", "aten::arange": "elementwise", "aten::roll": "elementwise", "aten::tril": "elementwise",
    "aten::native_group_norm": "reduction", "aten::_native_batch_norm_legit_no_training": "reduction",
    "aten::_fused_rms_norm": "reduction", "aten::cumsum_": "reduction", "aten::nonzero": "reduction",
    "aten::_unique2": "reduction", "aten::_cdist_forward": "reduction", "aten::huber_loss": "reduction",
    "aten::_scaled_dot_product_flash_attention": "gemm", "aten::_efficient_attention_forward": "gemm",
    "aten::_scaled_dot_product_cudnn_attention_backward": "gemm", "aten::_cudnn_attention_forward": "gemm",
    "aten::_cudnn_attention_backward": "gemm", "aten::addmm_": "gemm", "aten::_grouped_mm": "gemm",
    "aten::quantized_lstm": "rnn",
    # TF ops that were "other" (tf.raw_ops): embedding pooling, scatters, set ops, resampling.
    "emb/SparseSegmentMean:SparseSegmentMean": "reduction", "u/UniqueV2:UniqueV2": "reduction",
    "w/Where:Where": "reduction", "nms/NonMaxSuppressionV5:NonMaxSuppressionV5": "reduction",
    "s/ResourceScatterAdd:ResourceScatterAdd": "elementwise", "t/TensorScatterMax:TensorScatterMax": "elementwise",
    "r/ResizeBicubic:ResizeBicubic": "elementwise", "c/CropAndResize:CropAndResize": "elementwise",
    "g/Gather:Gather": "elementwise", "x/Erfinv:Erfinv": "elementwise", "d/DynamicStitch:DynamicStitch": "elementwise",
    "data/DecodeJpeg:DecodeJpeg": "other",  # tf.data's decoding stays the input pipeline's
    # Views and allocations stay "other": they do no arithmetic.
    "aten::empty_strided": "other", "aten::as_strided": "other", "aten::view": "other", "aten::equal": "other",
    "aten::select": "other", "aten::slice": "other", "aten::unsafe_split": "other", "aten::_local_scalar_dense": "other",
}
APIS = {"cudaStreamWaitEvent": "sync", "cudaStreamWaitEvent_v3020": "sync", "cudaEventSynchronize": "sync",
        "cudaLaunchKernel": "launch", "cuLaunchKernel": "launch", "cudaLaunchKernelExC": "launch",
        "cudaGraphLaunch": "launch", "cudaStreamSynchronize": "sync", "cudaDeviceSynchronize": "sync",
        "cudaMemcpyAsync": "memory", "cudaMalloc": "memory", "cudaStreamIsCapturing": "other"}


@pytest.mark.parametrize(("name", "cls"), KERNELS.items())
def test_kernel_rules(name, cls):
    assert classify_name(name, KERNEL_RULES) == cls


def _kernel_table() -> list[tuple[str, str, str]]:
    rows = []
    for line in (Path(__file__).parent / "data" / "kernel_classes.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            cls, source, name = line.split("\t", 2)
            rows.append((cls, source, name))
    return rows


KERNEL_TABLE = _kernel_table()


def test_the_kernel_table_covers_every_class_with_enough_real_names():
    assert len(KERNEL_TABLE) >= 80
    assert {cls for cls, _, _ in KERNEL_TABLE} >= set(classify.KERNEL_CLASSES) - {"sync"}


@pytest.mark.parametrize(("cls", "source", "name"), KERNEL_TABLE, ids=[f"{c}:{n[:50]}" for c, _, n in KERNEL_TABLE])
def test_real_kernel_names_get_their_class(cls, source, name):
    assert classify_name(name, KERNEL_RULES) == cls, f"{name} ({source})"


@pytest.mark.parametrize(("name", "base"), [
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
     "at::native::reduce_kernel"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long>(int)",
     "at::native::anonymous::indexSelectLargeIndex"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, float>(int)", "internal::gemvx::kernel"),
    ("volta_sgemm_128x64_tn", "volta_sgemm_128x64_tn"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD"),
])
def test_kernel_base_name_drops_return_type_template_arguments_and_parameters(name, base):
    assert classify.kernel_base_name(name) == base


def test_template_arguments_do_not_decide_what_a_kernel_is():
    """A FlashAttention kernel instantiated on cutlass::half_t is attention, not a CUTLASS GEMM; an
    FBGEMM permute kernel is not a GEMM because its namespace says fbgemm."""
    flash = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, cutlass::half_t>>(Flash_fwd_params)"
    assert classify_name(flash, KERNEL_RULES) == "attention"
    permute = "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)"
    assert classify_name(permute, KERNEL_RULES) == "other"


@pytest.mark.parametrize(("name", "cls"), OPS.items())
def test_op_rules(name, cls):
    assert classify.classify_op_name(name) == cls


@pytest.mark.parametrize(("name", "cls"), APIS.items())
def test_api_rules(name, cls):
    assert classify_name(name, API_RULES) == cls


def test_copy_is_a_cast_only_when_dtypes_differ():
    assert classify.is_dtype_change(["c10::BFloat16", "float", "Scalar"])
    assert not classify.is_dtype_change(["float", "float", "Scalar"])
    assert not classify.is_dtype_change(None)


@needs_shared
def test_each_unique_name_is_classified_once(monkeypatch):
    t = load(TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    seen: list[str] = []
    original = classify.classify_name

    def counting(name: str, rules: list[tuple[str, str]]) -> str:
        seen.append(name)
        return original(name, rules)

    monkeypatch.setattr(classify, "classify_name", counting)
    frame = Frame(t)
    classify.classify_rows(frame)
    groups = [("gpu_kernel", "gpu_memcpy", "gpu_memset", "gpu_graph", "gpu_sync"), ("cpu_op",), ("runtime_api", "driver_api")]
    distinct = sum(len({frame.name_code[r] for r in frame.rows(*g)}) for g in groups)
    assert len(seen) == distinct  # one regex pass per distinct name per table, not per row
    assert distinct < t.num_rows / 50


def _torch_cast_trace(tmp: Path) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    out = tmp / "cast.json"
    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        x.to(torch.bfloat16)      # a cast: float -> bf16
        x.clone()                 # a copy, no dtype change
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.mm(x, x)
    prof.export_chrome_trace(str(out))
    return out


def test_cast_rule_on_a_real_torch_trace(tmp_path):
    t = load(_torch_cast_trace(tmp_path))
    frame = Frame(t)
    rows = classify.classify_rows(frame)
    op_rows = frame.rows("cpu_op")
    by_name: dict[str, set[str]] = {}
    for r in op_rows:
        by_name.setdefault(frame.name(int(r)), set()).add(classify.OP_CLASSES[rows.op[r]])
    assert "cast" in by_name["aten::copy_"]
    assert by_name["aten::to"] == {"cast"} or "cast" in by_name["aten::to"]
    assert "cast" not in by_name.get("aten::clone", {"other"})


def test_torch_collectives_keep_their_class_and_tf_ones_get_it_by_op_type():
    """``gloo:all_reduce`` looks like a TF ``scope:Type`` name; the name as recorded is matched first."""
    assert classify.classify_op_name("gloo:all_reduce") == "communication"
    assert classify.classify_op_name("nccl:all_reduce") == "communication"
    assert classify.classify_op_name("replica/allreduce:CollectiveReduceV2") == "communication"


@needs_shared
def test_torchrec_collectives_are_communication():
    # torchrec's embedding all-to-alls are autograd Functions (All2All_Pooled_Req / _Wait, their
    # backward nodes ...Backward): HTA's samples hold them beside the NCCL kernels they launch.
    frame = Frame(load(TRACES / "hta" / "negative_queue_length_values_check" / "rank0.json.gz"))
    names = {n for n in frame.names if n.startswith("All2All_")}
    assert {"All2All_Pooled_Req", "All2All_Pooled_Wait", "All2All_Pooled_ReqBackward"} <= names
    assert {classify.classify_op_name(n) for n in names} == {"communication"}
    assert classify.classify_op_name("Variable_Batch_All2All_Pooled_Wait") == "communication"
    assert classify.classify_op_name("ReduceScatterV_Req") == "communication"
    # The engine's node around one is named after it but is the autograd engine's call, not the collective.
    assert classify.classify_op_name("autograd::engine::evaluate_function: All2All_Pooled_ReqBackward") != "communication"


def test_onednn_layout_conversions_are_copies_without_recorded_dtypes(tmp_path):
    """torch.jit.optimize_for_inference runs a CNN in oneDNN's blocked layout: aten::to_mkldnn in,
    aten::_to_dense out (19% of this step), data movement whose args record no dtype to tell a cast
    by. As ops of no class they were dispatch: 22% of the step, 2% now."""
    torch = pytest.importorskip("torch")
    from conftest import capture_steps

    import tracekit
    from tracekit.analyze.classify import OP_CLASSES, classify_rows
    from tracekit.analyze.frame import frame_of

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()
    x = torch.randn(8, 3, 64, 64)
    with torch.no_grad():
        frozen = torch.jit.optimize_for_inference(torch.jit.script(model))
        frozen(x)
        frame = frame_of(load(capture_steps(tmp_path / "ofi.json", lambda: frozen(x))))
    ops = frame.rows("cpu_op")
    dense = ops[frame.name_code[ops] == frame.names.index("aten::_to_dense")]
    assert dense.size and (classify_rows(frame).op[dense] == OP_CLASSES.index("copy")).all()
    cpu = tracekit.report(frame.table).launch.breakdown.cpu_ops
    whole = cpu[cpu.step == -1].iloc[0]
    assert whole.copy_ns > 0.05 * whole.span_ns and whole.dispatch_ns < 0.15 * whole.span_ns, whole


def test_copies_inside_composite_ops_are_data_movement_not_their_math():
    """A Hugging Face GPT-2 (tests/data/cpu/parameter_loop_diffusers_ema): aten::matmul's aten::reshape
    clones a non-contiguous input before its aten::bmm. Those clones and their copy_ were counted as
    GEMM (their nearest classified op, aten::matmul, whose math is the aten::bmm below it); they are
    copies. aten::addmm's bias copy has no GEMM op below addmm and stays addmm's work (gemm), and
    a top-level x.contiguous() is a copy though its dtypes are not recorded (a clone cannot cast)."""
    from tracekit.analyze.classify import OP_CLASSES, classify_rows
    from tracekit.analyze.frame import frame_of

    frame = frame_of(load(Path(__file__).parent / "data" / "cpu" / "parameter_loop_diffusers_ema.pt.trace.json.gz"))
    op = classify_rows(frame).op

    def chain(row: int) -> list[str]:
        names = [frame.name(row)]
        while frame.parent[row] >= 0 and len(names) < 4:
            row = int(frame.parent[row])
            names.append(frame.name(row))
        return names

    seen: dict[str, set[str]] = {"matmul clone": set(), "addmm bias": set(), "top contiguous": set()}
    for row in frame.rows("cpu_op").tolist():
        names, cls = chain(row), OP_CLASSES[op[row]]
        if names[:4] == ["aten::copy_", "aten::clone", "aten::reshape", "aten::matmul"]:
            seen["matmul clone"].add(cls)
        elif names[:2] == ["aten::copy_", "aten::addmm"]:
            seen["addmm bias"].add(cls)
        elif names[0] == "aten::contiguous" and names[1].startswith("ProfilerStep#"):
            seen["top contiguous"].add(cls)
    assert seen == {"matmul clone": {"copy"}, "addmm bias": {"gemm"}, "top contiguous": {"copy"}}, seen


def test_a_custom_ops_autograd_range_takes_the_ops_class():
    """tests/data/cpu/roi_align: torchvision's roi_align runs its forward inside a range named
    GeneratedBackwardFor_torchvision_roi_align_default (torch.library's autograd registration), whose
    own time is the kernel's: read as work of no class (13% of the step, 'counted as dispatch')."""
    assert classify_op_name("GeneratedBackwardFor_torchvision_roi_align_default") == "elementwise"
    assert classify_op_name("GeneratedBackwardFor_torch_scatter_scatter_sum_default") == "reduction"
    assert classify_op_name("GeneratedBackwardFor_torchvision_roi_align_defaultBackward") == "other"  # its op is classed
    assert classify_op_name("GeneratedBackwardFor_mylib_unknown_default") == "other"
    r = tracekit.report(Path(__file__).parent / "data" / "cpu" / "roi_align.pt.trace.json.gz").launch
    assert not any("inside ops with no class" in e for e in r.evidence), r.evidence
