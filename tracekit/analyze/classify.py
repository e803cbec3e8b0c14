"""Classification as data: ordered rule tables mapping event names to classes.

Every table is a list of ``(class, pattern)`` pairs tried in order (Python ``re.search``); the
first match wins and names that match nothing are ``"other"``. Each *unique* name is classified
once and mapped back through the dictionary codes, so a million-row trace costs one regex pass
over a few thousand names.

Kernel rules follow ``../shared/research/kernel_classes.md`` §2 (checked on 60 real kernel names)
with two additions: NCCL/RCCL communication, and TensorFlow's Eigen/cuDNN names. Framework-op
rules cover PyTorch ATen names and TensorFlow op types (the part after ``:`` in
``scope/name:Type``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.analyze.frame import Frame, dictionary_codes, per_frame
from tracekit.ingest.columns import distinct, factorize, trace_extra
from tracekit.ingest.links import byte_mask, member_mask, nearest_ancestor
from tracekit.schema import GPU_ACTIVITY_KINDS

# Classes, in the priority order the GPU breakdown uses when kernels overlap (see breakdown.py).
KERNEL_CLASSES = ("communication", "rnn", "attention", "convolution", "gemm", "cast", "reduction", "elementwise", "other", "memcpy",
                  "memset", "sync")
OP_CLASSES = ("rnn", "convolution", "gemm", "cast", "copy", "elementwise", "reduction", "fft", "linalg", "communication",
              "compiled", "other")
API_CLASSES = ("launch", "sync", "memory", "other")

# Kernel rules carry a scope: "full" matches the whole demangled name, "base" only the kernel's own
# name (``kernel_base_name``: no return type, template arguments or parameters). Template arguments
# name epilogues, functors, dtypes and libraries (``cutlass::half_t`` in a flash-attention kernel,
# ``fbgemm_gpu::`` in a permute kernel), so a rule about what a kernel *is* reads the base name; only
# rules whose evidence lives in the arguments (the cast lambda inside an elementwise kernel, the GEMM
# tile inside ``cutlass::Kernel<...>``) read the full name.
KERNEL_RULES: list[tuple[str, str, str]] = [
    ("memcpy", r"^Memcpy |^\[CUDA memcpy|^memcpy|^MemcpyH2D|^MemcpyD2H|^MemcpyD2D", "full"),
    ("memset", r"^Memset |^\[CUDA memset|^memset", "full"),
    ("communication", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|AllReduce|AllGather|ReduceScatter|"
                      r"AllToAll|SendRecv|cross_device_reduce|custom_ar|two_shot|one_shot_all|symm_mem|c10d::", "base"),
    # cuDNN 9 on Hopper runs the fp16 persistent LSTM as ampere_lstm_tile16<...> after persistRNN_init_*.
    ("rnn", r"RNN_blockPersist_|persistRNN_|_lstm_tile\d|elemWiseRNNcell|(LSTM|GRU|RNN)_elementWise_(fp|bp)|GENERIC_elementWise_bp|\bLSTM_|"
            r"cudnn::.*\b(rnn|RNN)|\b(lstm|gru)_cell_(forward|backward)\b|initstates|miopen.*(rnn|lstm)|"
            r"LSTMBlockCell|BlockLSTM", "full"),
    # Inductor names a Triton kernel for the ATen ops it fuses, sorted, so "_to_copy" comes first in any
    # kernel that converts a dtype somewhere: only one that does nothing else (views aside) is a cast.
    ("cast", r"^triton_poi_fused__to_copy(_(_unsafe_view|view|clone|transpose|squeeze|unsqueeze|permute|expand|t|"
             r"slice|select|reshape|alias|as_strided))*_\d+$", "base"),
    ("attention", r"^triton_tem_fused_\w*(attention|sdpa)", "base"),
    ("convolution", r"^triton_tem_fused_\w*convolution", "base"),
    ("gemm", r"^triton_tem_", "base"),  # Inductor's templates: mm, addmm, bmm (max-autotune)
    ("reduction", r"^triton_(red|per)_", "base"),
    ("elementwise", r"^triton_poi_", "base"),
    ("cast", r"(float16|bfloat16|float8|bfloat16tofloat32|float16tofloat32)_copy_kernel|"
             r"direct_copy_kernel.*(LoadWithCast|StoreWithCast)|fetch_and_cast|cast_and_store|"
             r"gpu_kernel_impl<.*direct_copy_kernel.*lambda\(int\)#2|_to_copy|convert_?(fp|bf)16|"
             r"TensorConversionOp|cast_transpose|CastTranspose|_float_to_hfp8|"
             r"_hfp8_to_float|quantize_fp8|fp8_quantize|(^|::)cast_kernel|^wrapped_convert(_\d+)?$", "full"),
    # Fused attention (FlashAttention, xFormers/CUTLASS fmha, cuDNN SDPA, paged/decode attention).
    # cuDNN's SDPA backward starts with compute_dot_do_o (the rowwise dot of dO and O).
    ("attention", r"flash_fwd|flash_bwd|flash_attn|flashattn|fmha|attention|attn_fwd|attn_bwd|_attn_|mha_fwd|"
                  r"mha_bwd|sdpa|paged_attention|decode_attention|flashinfer|xformers|compute_dot_do_o", "base"),
    # cuDNN/TF convolutions are implicit GEMMs by name; they are their own class (before gemm).
    ("convolution", r"convolve|scudnn|s\d+cudnn_|conv2d|Conv2D|conv_kernel|_fprop_|_dgrad_|_wgrad_|fprop_|dgrad|wgrad|"
                    r"winograd|cudnn::.*conv|implicit_gemm.*conv|conv.*implicit_gemm|ImplicitGemmConvolution|"
                    r"conv_depthwise|depthwise_conv|DepthwiseConv|fft2d_[rc]2[rc]|flip_filter|im2col|cask_cudnn|"
                    r"kern_precompute_indices", "full"),
    ("gemm", r"(?<!fb)gemm|gemv|dot_kernel|cutlass|xmma_gemm|nvjet_|cublasLt|splitKreduce|magma_.*gemm|^Cijk_|"
             r"\bmm_kernel|matmul|_mm_|triton_tem_fused_(mm|addmm|bmm)|bmm_|fused_moe|moe_.*gemm|grouped_gemm|"
             r"s1688gemm|s16816gemm|h884gemm", "base"),
    # cuBLASLt's epilogue kernels and CUTLASS kernels name their GEMM only in their arguments.
    ("gemm", r"cutlass\w*::Kernel2?<.*gemm|cublasLt", "full"),
    ("reduction", r"reduce_kernel|Reduce|reduce_|softmax|SoftMax|cunn_|nll_loss|layer_norm|LayerNorm|batch_norm|"
                  r"BatchNorm|welford|triton_red_|triton_per_|cub::Device(Reduce|Segmented|Scan)|DeviceScan|argmax|ArgMax|"
                  r"sum_functor|norm_kernel|ColumnReduce|RowReduce|BlockReduce|bn_fw|bn_bw|GammaBeta|RowwiseMoments|"
                  r"rms_?norm|RMSNorm|group_norm|max_pool|avg_pool|adaptive_\w*pool|pooling|MaxPool|AvgPool|"
                  r"^input_\w*fusion|^wrapped_reduce(_\d+)?$", "base"),
    ("elementwise", r"elementwise_kernel|elementwise|triton_poi_|Functor|CatArrayBatchedCopy|"
                    r"direct_copy_kernel|multi_tensor_apply|fused_dropout|where_kernel|clamp|CUDAFunctor|"
                    r"vectorized_|unrolled_|kernelPointwiseApply|sigmoid|tanh|fused_|"
                    r"CudaCodeGen::kernel\d+|^func_\d+$|EigenMetaKernel|BiasNHWCKernel|BiasNCHWKernel|BiasGradNHWC|"
                    r"^loop_\w*fusion|act_and_mul|silu|gelu|rotary|rope_|"
                    # vLLM's KV cache write: a copy of each token's keys and values into the cache
                    r"reshape_and_cache|"
                    # cuDNN's layout conversions around its NHWC kernels for NCHW tensors (memory-bound)
                    r"nchwToNhwc|nhwcToNchw|"
                    # XLA:GPU runs a lone HLO it did not fuse as a kernel named wrapped_<opcode>
                    r"^wrapped_(?!dot|convolution)[a-z_]+(_\d+)?$", "base"),
]

# PyTorch ATen/compiled names; TensorFlow op types are matched as ``tf_base_op`` gives them (the type
# after the last ':', oneDNN's ``_Mkl``/``_MklNative`` rewrite undone), by family: a gradient, a fused
# or a quantized variant of an op is in the op's class. Unknown ops are "other", which the breakdown
# does not count as compute, so a family missing here shows up as framework time.
TF_CONV = r"^_?(Fused|Quantized)?(Pad|ResizeAndPad)?(Conv[123]D|DepthwiseConv2dNative)\w*$"
# XLA's collective HLO instructions (tf.function(jit_compile=True), JAX), by opcode (all-reduce.3,
# all-gather-start.1) or, in JAX, by the primitive that made them (psum.7 from jax.lax.psum/pmean,
# ppermute, psum_scatter): on CPU devices the instruction runs the exchange itself.
XLA_COLLECTIVE = (r"^(wrapped_)?(all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute|"
                  r"collective-broadcast)(-start|-done)?(\.\d+)?$|"
                  r"^(psum|pmax|pmin|all_gather|psum_scatter|reduce_scatter|ppermute|all_to_all|ragged_all_to_all|"
                  r"pbroadcast)(\.\d+)?$")
TF_GEMM = r"^_?(Fused|Quantized)?(Batch)?MatMul\w*$|^(Einsum|SparseMatMul|SparseTensorDenseMatMul)$"
# ONNX operator types as ONNX Runtime's profile names its nodes' runs (``tracekit/ingest/onnxruntime.py``),
# standard and ORT's contrib ops, where the TF rules do not already give them their class. ORT's fused
# attention ops (two GEMMs around a softmax) count with the GEMMs, as PyTorch's CPU SDPA does. Min,
# Max, Sum, Mean and Where are ONNX_BARE_ELEMENTWISE's (classify_op_name).
ONNX_RNN = r"^(LSTM|GRU|RNN|DynamicQuantizeLSTM|AttnLSTM)$"
ONNX_CONV = (r"^(Conv|FusedConv|NhwcConv|NhwcFusedConv|QLinearConv|ConvInteger|ConvTranspose|QLinearConvTranspose|"
             r"ConvTransposeWithDynamicPads|DeformConv)$")
ONNX_GEMM = (r"^(Gemm|FusedGemm|QGemm|QLinearMatMul|DynamicQuantizeMatMul|GemmFloat8|Attention|QAttention|"
             r"MultiHeadAttention|GroupQueryAttention|PackedAttention|PackedMultiHeadAttention|SparseAttention|"
             r"DecoderAttention|DecoderMaskedMultiHeadAttention|DecoderMaskedSelfAttention|LongformerAttention)$")
ONNX_CAST = r"^(CastLike|QuantizeLinear|DequantizeLinear|DynamicQuantizeLinear)$"
ONNX_COPY = r"^(MemcpyToHost|MemcpyFromHost)$"
ONNX_REDUCTION = (r"^(Reduce(Sum|Mean|Max|Min|Prod|L1|L2|LogSum|LogSumExp|SumSquare)|ArgMax|ArgMin|TopK|CumSum|"
                  r"Softmax|LogSoftmax|Hardmax|LayerNormalization|SimplifiedLayerNormalization|SkipLayerNormalization|"
                  r"SkipSimplifiedLayerNormalization|EmbedLayerNormalization|GroupNorm|GroupNormalization|SkipGroupNorm|"
                  r"RMSNormalization|InstanceNormalization|BatchNormalization|MaxPool|AveragePool|GlobalAveragePool|"
                  r"GlobalMaxPool|LpPool|GlobalLpPool|QLinearAveragePool|QLinearGlobalAveragePool|NonMaxSuppression|"
                  r"NonZero|Unique)$")
# PaddlePaddle's kernel launches as its profiler names them (``matmul kernel launch``,
# ``matmul_grad kernel launch``; tracekit/ingest/paddle.py): on a CPU the kernel's compute itself, so
# these carry the class; the dygraph op around each (``matmul dygraph``), autograd's grad nodes and
# the infer_meta / node-creation steps are the framework's. An op type not listed stays other.
_PADDLE_LAUNCH = r"(_grad)*_? kernel launch$"
PADDLE_RNN = r"^(rnn|lstm|gru|cudnn_lstm)" + _PADDLE_LAUNCH
PADDLE_CONV = (r"^(conv[123]d|depthwise_conv2d|conv[23]d_transpose|depthwise_conv2d_transpose|fused_conv2d\w*|"
               r"conv2d_fusion)" + _PADDLE_LAUNCH)
PADDLE_GEMM = (r"^(matmul|matmul_v2|mul|bmm|fc|linear|addmm|einsum|fused_gemm_epilogue|fused_linear\w*|flash_attn\w*|"
               r"memory_efficient_attention|multihead_matmul|fused_multi_transformer\w*|fused_attention|"
               r"weight_only_linear|llm_int8_linear)" + _PADDLE_LAUNCH)
PADDLE_CAST = r"^(cast|quantize_linear|dequantize_linear|weight_quantize)" + _PADDLE_LAUNCH
PADDLE_COPY = r"^(memcpy\w*|assign|assign_value|copy_to|share_data|contiguous)" + _PADDLE_LAUNCH
PADDLE_COMMUNICATION = (r"^(c_allreduce_\w+|c_allgather|c_reducescatter|c_broadcast|all_reduce|all_gather|"
                        r"reduce_scatter|send_v2|recv_v2|alltoall|all_to_all|broadcast)" + _PADDLE_LAUNCH)
PADDLE_REDUCTION = (r"^(mean|mean_all|sum|max|min|prod|amax|amin|logsumexp|softmax|log_softmax|cross_entropy\w*|"
                    r"softmax_with_cross_entropy|sigmoid_cross_entropy_with_logits|layer_norm|batch_norm|"
                    r"sync_batch_norm|group_norm|instance_norm|rms_norm|fused_rms_norm|fused_layer_norm|"
                    r"fused_bias_residual_layernorm|pool2d|pool3d|max_pool[23]d_with_index|argmax|argmin|top_k|"
                    r"top_k_v2|topk|argsort|sort|cumsum|cumprod|p_norm|norm|squared_l2_norm|reduce_\w+|all|any|"
                    r"nonzero|unique|accuracy)" + _PADDLE_LAUNCH)
PADDLE_ELEMENTWISE = (r"^(add|subtract|multiply|divide|elementwise_\w+|scale|relu|relu6|gelu|silu|swish|sigmoid|tanh|"
                      r"exp|log|log1p|sqrt|rsqrt|pow|square|abs|sign|reciprocal|floor|ceil|round|clip|maximum|minimum|"
                      r"where|full|full_like|full_with_tensor|fill_constant|fill_any_like|fill|uniform|uniform_random|"
                      r"gaussian|gaussian_random|randint|dropout|fused_dropout_add|leaky_relu|hardswish|hardsigmoid|elu|"
                      r"selu|celu|softplus|softsign|mish|erf|logical_\w+|bitwise_\w+|equal|not_equal|greater_than|"
                      r"greater_equal|less_than|less_equal|isfinite|isnan|isinf|concat|split|split_with_num|slice|"
                      r"strided_slice|gather|gather_nd|scatter|scatter_nd_add|index_select|index_sample|take_along_axis|"
                      r"put_along_axis|embedding|lookup_table_v2|transpose|tile|expand|expand_v2|expand_as|"
                      r"broadcast_to|pad|pad3d|flip|roll|stack|unstack|one_hot|one_hot_v2|sum_n|add_n|tril|triu|"
                      r"tril_triu|arange|range|linspace|lerp|label_smooth|swiglu|fused_bias_act|adam|adamw|sgd|momentum|"
                      r"merged_adam|merged_momentum|lamb|fused_adam|check_finite_and_unscale|update_loss_scaling)"
                      + _PADDLE_LAUNCH)
ONNX_ELEMENTWISE = (r"^(Add|Sub|Mul|Div|Pow|Sqrt|Reciprocal|Abs|Neg|Exp|Log|Floor|Ceil|Round|Sign|Mod|Not|And|Or|"
                    r"Xor|Equal|Greater|GreaterOrEqual|Less|LessOrEqual|IsNaN|IsInf|Sin|Cos|Erf|Tanh|Sigmoid|Relu|"
                    r"LeakyRelu|PRelu|Elu|Selu|Celu|ThresholdedRelu|HardSigmoid|HardSwish|Mish|Softplus|Softsign|"
                    r"Shrink|Clip|Gelu|BiasGelu|FastGelu|QuickGelu|BiasSplitGelu|BiasAdd|BiasSoftmax|BiasDropout|"
                    r"BitmaskDropout|Dropout|QLinearAdd|QLinearMul|QLinearSigmoid|QLinearLeakyRelu|QLinearConcat|"
                    r"Expand|Tile|Pad|Resize|Upsample|Slice|Split|Concat|Gather|GatherElements|GatherND|"
                    r"ScatterElements|ScatterND|Trilu|RotaryEmbedding|DepthToSpace|SpaceToDepth|OneHot|Range|"
                    r"ConstantOfShape|Compress|ReverseSequence|GridSample|Transpose)$")
TF_REDUCTION = (r"^(Sum|Mean|Max|Min|Prod|All|Any|ArgMax|ArgMin|EuclideanNorm|Softmax|LogSoftmax|"
                r"SoftmaxCrossEntropyWithLogits|SparseSoftmaxCrossEntropyWithLogits|L2Loss|BiasAddGrad|Cumsum|Cumprod|"
                r"TopKV2|LRN|LRNGrad|Segment\w+|UnsortedSegment\w+|"
                # embedding lookups' pooling (TF recommenders), counting and set ops, box selection
                r"SparseSegment(Sum|Mean|SqrtN)\w*|Bincount|DenseBincount|Unique|UniqueV2|UniqueWithCounts\w*|"
                r"Where|NonMaxSuppression\w*|CombinedNonMaxSuppression|"
                # TF's numeric checks scan a tensor for NaN/Inf (tracekit.analyze.tf_debug_checks)
                r"CheckNumerics|CheckNumericsV2|DebugNumericSummaryV2)$|"
                r"^_?(Fused)?(BatchNorm|LayerNorm|InstanceNorm)\w*$|^(Max|Avg)Pool\w*$")
TF_ELEMENTWISE_OPS = (
    r"Add|AddV2|AddN|Sub|Mul|MulNoNan|RealDiv|Div|DivNoNan|FloorDiv|FloorMod|Mod|TruncateDiv|TruncateMod|"
    r"Sigmoid|Tanh|Relu|Relu6|Elu|Selu|Gelu|LeakyRelu|Softplus|Softsign|Swish|Mish|Exp|Expm1|Log|Log1p|Neg|Abs|"
    r"Sign|Square|SquaredDifference|Sqrt|Rsqrt|Reciprocal|Inv|Pow|Maximum|Minimum|Floor|Ceil|Round|Rint|Cos|Sin|"
    r"Tan|Acos|Asin|Atan|Atan2|Cosh|Sinh|Erf|Erfc|Greater|GreaterEqual|Less|LessEqual|Equal|NotEqual|LogicalAnd|"
    r"LogicalOr|LogicalNot|IsFinite|IsNan|IsInf|Select|SelectV2|ClipByValue|BiasAdd|BiasAddV1|Fill|ZerosLike|"
    r"OnesLike|ConcatV2|Pack|Unpack|Split|SplitV|AssignAddVariableOp|AssignSubVariableOp|"
    r"ComplexAbs|Complex|Real|Imag|Angle|Conj|"  # complex numbers: an FFT's neighbours
    r"Acosh|Asinh|Atanh|Erfinv|Digamma|Lgamma|Igamma|Igammac|BesselI0e|BesselI1e|Xdivy|Xlogy|Xlog1py|"
    r"BitwiseAnd|BitwiseOr|BitwiseXor|Invert|LeftShift|RightShift")
# Kernels that move or generate data (Transpose, Tile, StridedSlice, TensorList reads and writes,
# random fills): memory-bound work the executor runs like any op; on a GPU the same ops run as
# Eigen kernels, which the kernel rules count as elementwise. Pure metadata ops (Reshape, ExpandDims,
# Identity, ReadVariableOp) stay "other".
TF_DATA_OPS = (
    r"Transpose|ConjugateTranspose|Tile|Pad|PadV2|MirrorPad|MirrorPadGrad|Slice|StridedSlice|StridedSliceGrad|"
    r"GatherV2|GatherNd|ResourceGather|ScatterNd|TensorScatterUpdate|TensorScatterAdd|ReverseV2|BroadcastTo|OneHot|"
    r"DepthToSpace|SpaceToDepth|ResizeBilinear|ResizeBilinearGrad|ResizeNearestNeighbor|ResizeNearestNeighborGrad|"
    r"TensorListStack|TensorListFromTensor|TensorListGetItem|TensorListSetItem|TensorListGather|TensorListScatter\w*|"
    r"AssignVariableOp|RandomUniform|RandomUniformInt|RandomStandardNormal|TruncatedNormal|StatelessRandom\w*|"
    r"Gather|Concat|Range|Reverse|ReverseSequence|Roll|MatrixBandPart|BatchToSpaceND|SpaceToBatchND|"
    r"ExtractImagePatches|DynamicPartition|DynamicStitch|InvertPermutation|Multinomial|RandomShuffle|Bucketize|"
    r"(Resource)?Scatter(Nd)?(Add|Sub|Mul|Div|Max|Min|Update|NonAliasingAdd)|TensorScatter(Sub|Max|Min)|"
    r"StridedSliceAssign|ResizeBicubic|ResizeBicubicGrad|ResizeArea|ScaleAndTranslate\w*|CropAndResize\w*|"
    r"ImageProjectiveTransformV[23]|AdjustContrastv2|AdjustSaturation|AdjustHue|RGBToHSV|HSVToRGB|"
    r"DebugIdentityV[23]")  # a debug dump's copy of a tensor (tracekit.analyze.tf_debug_checks)
TF_ELEMENTWISE = (rf"^_?(Fused)?({TF_ELEMENTWISE_OPS})$|^({TF_DATA_OPS})$|"
                  r"^(Relu|Relu6|Elu|Selu|Gelu|LeakyRelu|Softplus|Softsign|Sigmoid|Tanh|Sqrt|Rsqrt|Reciprocal|Inv)Grad$|"
                  r"^(Resource)?(Sparse)?Apply\w+$")  # optimizer updates: ResourceApplyAdam, ApplyGradientDescent

# Pointwise math beyond the everyday ops in OP_RULES, each with its in-place twin (``sin_``, ``silu_``):
# trigonometry, special functions, bitwise and comparison ops, activations.
_POINTWISE = ("abs|absolute|acos|acosh|arccos|arccosh|arcsin|arcsinh|arctan|arctan2|arctanh|asin|asinh|atan|atan2|"
              "atanh|angle|bitwise_\\w+|ceil|celu|clip|copysign|cos|cosh|deg2rad|digamma|divide|eq|erf|erfc|erfinv|"
              "exp2|expm1|fix|float_power|floor|floor_divide|fmax|fmin|fmod|frac|gcd|ge|gelu|glu|greater\\w*|gt|"
              "hardshrink|heaviside|hypot|i0|igamma|igammac|lcm|ldexp|le|less\\w*|lgamma|log10|log1p|log2|"
              "logaddexp2?|logical_\\w+|logit|lt|mul|multiply|mvlgamma|nan_to_num|ne|negative|nextafter|not_equal|"
              "polygamma|positive|prelu|_prelu_kernel|rad2deg|reciprocal|remainder|round|rsqrt|selu|sgn|sign|signbit|"
              "silu|sin|sinc|sinh|softshrink|special_\\w+|square|subtract|tan|threshold|true_divide|trunc|xlogy|"
              "_add_relu|log_sigmoid_forward|rrelu_with_noise\\w*|exp|sqrt|pow|neg|log|hardtanh|leaky_relu|elu|mish|"
              "hardswish|hardsigmoid|relu|sigmoid|tanh|clamp|clamp_min|clamp_max|uniform|normal|bernoulli|zero|fill")
ELEMENTWISE_MORE = (
    rf"^aten::({_POINTWISE})_?$|"
    r"^aten::(glu_backward|logit_backward|log_sigmoid_backward|rrelu_with_noise_backward|_prelu_kernel_backward|"
    # gathers, scatters and copies of parts of tensors (memory-bound like cat)
    r"index|index_select|index_put_?|_index_put_impl_|index_add_?|index_copy_?|index_fill_?|_unsafe_index(_put)?|"
    r"_unsafe_masked_index\w*|gather|take|scatter_?|scatter_add_?|scatter_reduce_?|masked_scatter_?|"
    r"masked_scatter_backward|select_scatter|slice_scatter|diagonal_scatter|as_strided_scatter|select_backward|"
    r"slice_backward|diagonal_backward|unfold_backward|embedding|embedding_backward|flip|roll|rot90|repeat|"
    r"repeat_interleave|tile|tril_?|triu_?|diag|diag_embed|block_diag|one_hot|im2col|col2im|pixel_shuffle|"
    r"pixel_unshuffle|channel_shuffle|pad|pad_sequence|_pack_padded_sequence|polar|complex|_chunk_cat|"
    r"linalg_cross|frexp|conj_physical_?|hann_window|_standard_gamma|"
    # tensors made from scratch and random numbers
    r"full|full_like|arange|linspace|logspace|eye|scalar_tensor|rand|rand_like|randn|randn_like|randint|randint_like|"
    r"randperm|multinomial|poisson|exponential_?|geometric_?|cauchy_?|log_normal_?|_fused_dropout|alpha_dropout|"
    r"feature_alpha_dropout|feature_dropout|_masked_scale|_philox_normal_|_philox_uniform_|renorm_?|"
    r"_weight_norm_interface(_backward)?|searchsorted|bucketize|isin|"
    # resampling: interpolation and grid sampling
    r"_?upsample_\w+|grid_sampler(_[23]d)?(_backward)?|affine_grid_generator\w*|_amp_foreach_non_finite_check_and_unscale_)$")

OP_RULES: list[tuple[str, str]] = [
    # ONNX Runtime's op types first: exact names, which no aten op or TF scope path has.
    ("rnn", ONNX_RNN), ("convolution", ONNX_CONV), ("gemm", ONNX_GEMM), ("cast", ONNX_CAST), ("copy", ONNX_COPY),
    ("reduction", ONNX_REDUCTION), ("elementwise", ONNX_ELEMENTWISE),
    # PaddlePaddle's kernel launches: a suffix no other profiler's op names carry.
    ("rnn", PADDLE_RNN), ("convolution", PADDLE_CONV), ("gemm", PADDLE_GEMM), ("cast", PADDLE_CAST),
    ("copy", PADDLE_COPY), ("communication", PADDLE_COMMUNICATION), ("reduction", PADDLE_REDUCTION),
    ("elementwise", PADDLE_ELEMENTWISE),
    ("rnn", r"^aten::(lstm|gru|rnn_tanh|rnn_relu|quantized_lstm|quantized_gru)$|_cudnn_rnn|mkldnn_rnn|miopen_rnn|_thnn_fused_lstm_cell|"
            r"_thnn_fused_gru_cell|^aten::(lstm_cell|gru_cell|rnn_tanh_cell|rnn_relu_cell)$|"
            r"^(BlockLSTM|BlockLSTMV2|BlockLSTMGrad|BlockLSTMGradV2|LSTMBlockCell|LSTMBlockCellGrad|GRUBlockCell|"
            r"GRUBlockCellGrad|CudnnRNN|CudnnRNNV2|CudnnRNNV3|CudnnRNNBackprop|CudnnRNNBackpropV2|CudnnRNNBackpropV3)$"),
    ("convolution", r"^aten::(convolution|_convolution|conv1d|conv2d|conv3d|cudnn_convolution\w*|"
                    r"convolution_backward|mkldnn_convolution|_convolution_depthwise2d|conv_transpose\w*|"
                    # ATen's own kernels where no library takes the call (im2col + GEMM on the CPU: a
                    # first layer of 3 channels, dilated and transposed convolutions; depthwise on a
                    # GPU), and those of other backends (MIOpen on ROCm, MPS, NNPACK, out-of-tree)
                    r"_slow_conv2d_(forward|backward)|thnn_conv2d|slow_conv3d(_forward)?|slow_conv_dilated[23]d|"
                    r"slow_conv_transpose[23]d|_nnpack_spatial_convolution|_conv_depthwise2d|conv_depthwise3d|"
                    r"miopen_(depthwise_)?convolution\w*|_?mps_convolution\w*|convolution(_backward)?_overrideable|"
                    r"_convolution_double_backward|_convolution_mode|conv_tbc(_backward)?)$|" + TF_CONV + "|"
                    # XLA:CPU HLO instructions: convolution.2, and fusions named for a convolution
                    r"^(wrapped_)?convolution([a-z_\-]*_fusion)?(\.\d+)?$|"
                    # oneDNN's convolutions called from Inductor's CPU code (freezing) and TorchScript's
                    r"^mkldnn::_convolution(_transpose)?_pointwise_?$|^mkldnn_prepacked::conv2d_run$|^prim::mkldnn_convolution$|"
                    # PyTorch's quantized convolutions (eager quantized modules, PT2E on oneDNN); not
                    # their weight prepacking, which is set-up work
                    r"^(_?quantized::conv|onednn::qconv)(?!\w*(prepack|unpack))\w*(\.new)?$|"
                    # torchvision's deformable convolution (detection models)
                    r"^torchvision::_?deform_conv2d(_backward)?$"),
    # CPU fused attention (two GEMMs around a softmax, in one op) is counted with the GEMMs.
    ("gemm", r"^aten::(mm|addmm_?|bmm|baddbmm_?|matmul|linear|addmv_?|mv|dot|vdot|addr|_addmm_activation|addbmm_?|"
             r"_grouped_mm|_scaled_grouped_mm|_scaled_mm_v2|_cslt_sparse_mm|_euclidean_dist|linear_backward|"
             r"_scaled_dot_product_flash_attention_for_cpu|_scaled_dot_product_flash_attention_for_cpu_backward|"
             # the fused attention ops of GPUs and other backends (flash, memory-efficient, cuDNN's; torch
             # 2.9+ runs cuDNN's through _cudnn_attention_forward/_backward inside the SDPA op)
             r"_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?|_cudnn_attention_(forward|backward)|"
             r"_scaled_dot_product_fused_attention_overrideable(_backward)?|_flash_attention_(forward|backward)\w*|"
             r"_efficient_attention_(forward|backward))$|"
             r"mkldnn.*(linear|matmul)|"
             r"^mkl::|_mkl_linear|onednn::(?!\w*(prepack|unpack))|_linear_pointwise|" + TF_GEMM + "|"
             # Quantized and weight-only-quantized GEMMs on the CPU: dynamic quantization's
             # quantized::linear_dynamic, int8/int4 weight packs (LLM inference), fbgemm, fp8
             r"^_?quantized::(linear|matmul|_?wrapped_quantized_linear|wrapped_fbgemm_linear)(?!\w*(prepack(?!ed)|unpack(?!ed)))"
             r"\w*$|^quantized::int4mm_packed_weight_cpu$|^sparse::qlinear(?!\w*(prepack|unpack))\w*$|"
             r"^aten::(_weight_int8pack_mm|_weight_int4pack_mm\w*|"
             r"_int_mm|_scaled_mm|_dyn_quant_matmul_4bit|fbgemm_linear_int8_weight\w*|fbgemm_linear_fp16_weight\w*)$|"
             # sparse and structured-sparse products, grouped and mixed-dtype ones, Inductor's mm + mm
             r"^aten::(_sparse_mm|_sparse_addmm|hspmm|smm|sspaddmm|sparse_sampled_addmm|_sparse_sparse_matmul|"
             r"_sparse_semi_structured_(addmm|linear|mm)|_sparse_mm_reduce_impl(_backward)?|_mixed_dtypes_linear|"
             r"_scaled_grouped_mm_v2|_foreach_mm|_wrapped_quantized_linear_prepacked|_sparse_csr_mm)$|^inductor::_mm_plus_mm$|"
             # graph libraries' sparse and grouped products (torch_sparse's SparseTensor matmul, pyg-lib)
             r"^torch_sparse::(spmm|spspmm)_(sum|mean|min|max)$|^pyg::(segment_matmul|grouped_matmul)$|"
             # XLA:CPU HLO instructions (tf.function(jit_compile=True)): MatMul.8, MatMul_1.10, dot.3
             r"^(MatMul|BatchMatMul\w*|dot)(_\d+)?\.\d+$|^(wrapped_)?dot(\.\d+)?$"),
    ("cast", r"^aten::(_autocast_to_reduced_precision|_autocast_to_full_precision)$|^(Cast|QuantizeV2|Dequantize)$|"
             # Quantization's conversions: quantize / dequantize (eager, PT2E), fake-quantization in QAT
             r"^aten::(quantize_per_tensor\w*|quantize_per_channel|dequantize|fake_quantize_per_\w+|_fake_quantize\w*)$|"
             r"^quantized_decomposed::(quantize|dequantize)_per_\w+$"),
    # ... and oneDNN's layout conversions of activations (torch.jit.optimize_for_inference / to_mkldnn
    # models: into its blocked layout and back, 19% of a small frozen CNN's step; weight reorders, a
    # preparation like prepacking, stay other).
    ("copy", r"^aten::(to|_to_copy|copy_|type_as|contiguous|clone|to_dense|_to_dense|to_mkldnn|"
             r"_mkldnn_reshape|_mkldnn_transpose_?|"
             # sparse layouts made from dense or COO tensors: a pass over the values
             r"_to_sparse\w*|to_sparse\w*|_coalesce|coalesce)$"),
    # FFTs: PyTorch's (torch.fft.*, stft/istft call _fft_r2c / _fft_c2r / _fft_c2c), TF's FFT ops,
    # XLA's fft HLO instruction.
    ("fft", r"^aten::(_fft_r2c|_fft_c2r|_fft_c2c|fft_\w+|stft|istft|_fft_r2c_backward|_fft_c2r_backward)$|"
            r"^(I?R?FFT|I?R?FFT[23]D|I?R?FFTND|BatchFFT\w*)$|^(wrapped_)?fft(\.\d+)?$"),
    # Dense linear algebra beyond matrix products (LAPACK on the CPU, cuSOLVER/MAGMA on a GPU; not
    # matrix_power, a loop of aten::mm calls whose time is GEMM):
    # decompositions, solves, inverses, determinants, matrix functions. Second-order optimizers
    # (Shampoo, SOAP) run an eigendecomposition or matrix root per step. PyTorch's torch.linalg and
    # its older names, TF's linear-algebra ops (and their gradients), XLA's cholesky and
    # triangular-solve HLOs and its LAPACK custom calls.
    ("linalg", r"^aten::_?linalg_(eigh|eigvalsh|eig|eigvals|svd|svdvals|qr|cholesky|cholesky_ex|inv|inv_ex|solve|"
               r"solve_ex|solve_triangular|lstsq|det|slogdet|lu|lu_factor|lu_factor_ex|lu_solve|ldl_factor|"
               r"ldl_factor_ex|ldl_solve|matrix_exp|pinv|householder_product|tensorsolve|tensorinv|matrix_rank|"
               r"cond)(_backward)?$|"
               r"^aten::(_?svd|_svd_helper|qr|cholesky|cholesky_solve|_cholesky_solve_helper|cholesky_inverse|inverse|"
               r"logdet|slogdet|det|lu_unpack|lu_solve|triangular_solve|geqrf|ormqr|orgqr|matrix_exp|"
               r"matrix_exp_backward|pinverse)$|"
               r"^(Cholesky|CholeskyGrad|Qr|Svd|SelfAdjointEig|SelfAdjointEigV2|Eig|MatrixInverse|MatrixDeterminant|"
               r"LogMatrixDeterminant|MatrixSolve|MatrixSolveLs|MatrixTriangularSolve|BandedTriangularSolve|"
               r"TridiagonalSolve|TridiagonalMatMul|Lu|MatrixExponential|MatrixLogarithm|MatrixSquareRoot|"
               r"BatchCholesky\w*|BatchMatrix(Inverse|Determinant|Solve|SolveLs|TriangularSolve)|BatchSelfAdjointEig\w*|"
               r"BatchSvd)$|"
               r"^(wrapped_)?(cholesky|triangular-solve)(\.\d+)?$|^lapack_\w+$"),
    # torchrec's collectives are autograd Functions named <collective>_Req / _Wait (All2All_Pooled_Req,
    # ReduceScatterV_Wait, ...), their backward nodes with "Backward" appended.
    ("communication", r"^nccl:|^c10d::|^gloo:|^record_param_comms$|^(NcclAllReduce|NcclReduce|NcclBroadcast|"
                      r"Collective(Reduce|Gather|Bcast|AllToAll|ReduceScatter)\w*|_Send|_Recv|_HostSend|_HostRecv)$|"
                      r"^(Variable_Batch_)?(All2All|AllGather|ReduceScatter)\w*_(Req|Wait)(Backward)?$|"
                      + XLA_COLLECTIVE),
    # Inductor's generated C++ kernels (recorded with torch._inductor.config.cpp.enable_kernel_profile),
    # named by the ops they fuse: graph_0_cpp_fused_gelu_native_layer_norm_0. Compute, not wrappers.
    ("gemm", r"^(graph_\d+_)?cpp_fused_(\w+?_)?(addmm|mm|bmm|baddbmm|linear)_"),
    ("reduction", r"^(graph_\d+_)?cpp_fused_\w*?_(sum|mean|amax|amin|argmax|argmin|prod|softmax|norm|var|std|"
                  r"logsumexp|cumsum|max_pool2d_with_indices|avg_pool2d|nll_loss\w*)_"),
    ("elementwise", r"^(graph_\d+_)?cpp_fused_"),
    ("compiled", r"^Torch-Compiled Region|^TorchDynamo Cache Lookup|^## Call CompiledFxGraph|^CompiledFunction|"
                 r"^inductor_wrapper_call$|"
                 r"AOTDispatcher|^Pregraph bytecode|^prim::(TensorExprGroup|CudaFusionGroup|"
                 r"FusionGroup|DifferentiableGraph)$|^_XlaRun$|^XlaLaunch$"),
    ("reduction", r"^aten::(sum|mean|max|min|amax|amin|argmax|argmin|softmax|_softmax|log_softmax|_log_softmax|"
                  r"nll_loss\w*|cross_entropy_loss|layer_norm|native_layer_norm|batch_norm|native_batch_norm|norm|"
                  r"var|std|prod|cumsum|native_layer_norm_backward|native_batch_norm_backward|cudnn_batch_norm|"
                  r"cudnn_batch_norm_backward|miopen_batch_norm|_batch_norm_impl_index|_batch_norm_impl_index_backward|"
                  r"max_pool[123]d|max_pool[123]d_with_indices|avg_pool[123]d|_?adaptive_avg_pool[123]d|"
                  r"_?adaptive_max_pool[123]d|binary_cross_entropy|binary_cross_entropy_with_logits|mse_loss|"
                  r"l1_loss|smooth_l1_loss|all|any|logsumexp|topk|sort|argsort|linalg_vector_norm|linalg_norm|"
                  r"linalg_matrix_norm|frobenius_norm|"
                  # backward passes of the reductions above, and embedding gradients (a scatter-add)
                  r"_softmax_backward_data|_log_softmax_backward_data|max_pool[123]d_with_indices_backward|"
                  r"avg_pool[123]d_backward|_adaptive_avg_pool[123]d_backward|adaptive_max_pool[123]d_backward|"
                  r"mse_loss_backward|binary_cross_entropy_backward|smooth_l1_loss_backward|embedding_dense_backward|"
                  r"_embedding_bag|_embedding_bag_forward_only|_embedding_bag_backward|_embedding_bag_dense_backward|"
                  r"_embedding_bag_per_sample_weights_backward|"
                  # oneDNN-layout pooling (optimize_for_inference)
                  r"mkldnn_adaptive_avg_pool2d(_backward)?|mkldnn_max_pool[23]d(_backward)?|"
                  # batch norm's newer entry points, group and RMS norm
                  r"_batch_norm_no_update|_batch_norm_with_update\w*|_native_batch_norm_legit\w*|batch_norm_backward|"
                  r"miopen_batch_norm_backward|group_norm|native_group_norm(_backward)?|rms_norm|_fused_rms_norm(_backward)?|"
                  r"instance_norm|_safe_softmax|"
                  # scans, order statistics, counting and set operations
                  r"cumsum_|cumprod_?|cummax|cummin|logcumsumexp|_logcumsumexp|aminmax|std_mean|var_mean|nansum|"
                  r"nanmean|count_nonzero|median|nanmedian|mode|kthvalue|quantile|nanquantile|histc|bincount|"
                  r"_unique2?|unique_consecutive|unique_dim|nonzero|nonzero_static|masked_select|segment_reduce|"
                  r"index_reduce_?|dist|trace|pdist|_pdist_(forward|backward)|_cdist_(forward|backward)|pairwise_distance|"
                  r"max_unpool[23]d|fractional_max_pool[23]d|"
                  # more losses (the rest are above)
                  r"huber_loss(_backward)?|hinge_embedding_loss|margin_ranking_loss|soft_margin_loss(_backward)?|"
                  r"multi_margin_loss\w*|multilabel_margin_loss\w*|kl_div|_ctc_loss(_backward)?|ctc_loss|"
                  r"_segment_reduce_backward|_sparse_sum|_sparse_sum_backward)$|"
                  # detection's non-maximum suppression (a sort, then a sweep), torch_scatter's reductions
                  r"^torchvision::nms$|^torch_scatter::(scatter|segment)_(sum|add|mean|min|max|mul|logsumexp|softmax|"
                  r"log_softmax|std)\w*$|"
                  + TF_REDUCTION + "|"
                  # XLA:CPU HLO reductions: reduce, and pooling (reduce-window) with its gradient (select-and-scatter)
                  r"^(wrapped_)?(reduce|reduce-window|select-and-scatter)(\.\d+)?$"),
    ("elementwise", r"^aten::(add|add_|sub|sub_|mul|mul_|div|div_|sigmoid|sigmoid_|tanh|tanh_|relu|relu_|gelu|"
                    r"silu|exp|log|neg|rsub|addcmul_|addcdiv_|lerp_|sqrt|rsqrt|pow|fill_|zero_|zeros|ones|"
                    r"zeros_like|ones_like|empty_like|where|clamp|clamp_|threshold_backward|sigmoid_backward|"
                    r"tanh_backward|cat|stack|_foreach_\w+|_fused_(adam|adamw|sgd|adagrad)_?|dropout|native_dropout|native_dropout_backward|masked_fill_?|"
                    r"clamp_min_?|clamp_max_?|bernoulli_?|uniform_|normal_|exp_|log2|log1p|log_|abs|sign|reciprocal|"
                    r"erf|floor|ceil|round|trunc|minimum|maximum|eq|ne|lt|gt|le|ge|logical_(and|or|not)|nan_to_num|"
                    r"hardtanh_?|leaky_relu_?|elu_?|softplus|gelu_backward|silu_backward|hardswish_?|"
                    r"leaky_relu_backward|sqrt_|pow_|neg_|relu6|hardswish_backward|hardsigmoid_?|hardsigmoid_backward|"
                    r"elu_backward|softplus_backward|hardtanh_backward|mish_?|mish_backward|addcmul|addcdiv|lerp|"
                    r"isnan|isinf|isneginf|isposinf|isfinite|_transform_bias_rescale_qkv|constant_pad_nd|"
                    r"(reflection|replication)_pad[123]d(_backward)?)$|" + ELEMENTWISE_MORE + "|" + TF_ELEMENTWISE + "|"
                    # XLA:CPU loop fusions and wrapped pointwise HLOs: tanh_multiply_fusion, wrapped_add
                    r"^[a-z_\-]+_fusion(\.\d+)?$|^wrapped_[a-z_]+(\.\d+)?$|"
                    # gathers of other libraries: torchvision's RoI pooling (bilinear samples of feature
                    # maps, detection heads), torch_scatter's gathers
                    r"^torchvision::_?(ps_)?roi_(align|pool)(_backward)?$|^torch_scatter::gather_(csr|coo)$"),
]

# Intel GPUs (PTI): SYCL's Unified Runtime (ur*, formerly pi*) over Level Zero (ze*).
API_RULES: list[tuple[str, str]] = [
    ("launch", r"^(cuda|cu|hip|hipExtModule)Launch(Kernel|CooperativeKernel|KernelEx|KernelExC|HostFunc)?(_v\d+)?(_ptsz)?$|"
               r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)|^cudaLaunchKernel|^cuLaunchKernel|"
               r"^(hipModuleLaunchKernel|hipExtLaunchKernel)|^LaunchKernel$|"
               r"^(ur|pi)EnqueueKernelLaunch\w*$|^zeCommandListAppendLaunch\w*Kernel\w*$|^urCommandBufferEnqueueExp$"),
    ("sync", r"Synchronize|^cudaStreamWaitEvent|^cuStreamWaitEvent|^hipStreamWaitEvent|^cudaEventQuery|"
             r"^cudaStreamQuery|^StreamSynchronize|^EventSynchronize|"
             r"^(ur|pi)(QueueFinish|EventWait|EventsWait)$|^zeCommandListHostSynchronize$"),
    ("memory", r"Memcpy|Memset|Malloc|Free|HostAlloc|HostRegister|HostUnregister|MemAlloc|MemFree|MemPool|"
               r"cudaMemGetInfo|cuMemGetInfo|MemAdvise|MemPrefetch|cudaPointerGetAttributes|"
               r"^(ur|pi)EnqueueUSM(Fill|Memcpy|Memset|Fill2D|Memcpy2D|Prefetch|Advise)\w*$|^urUSM\w*(Alloc|Free)$|"
               r"^zeCommandListAppendMemory(Copy|Fill)\w*$|^zeMem(Alloc|Free)\w*$"),
]

# Python frames in which the thread waits rather than works: a lock, a sleep, a poll, a condition,
# a join. Python stacks (torch.profiler(with_stack=True), TF's Python tracer) record them like any
# frame, and a DataLoader's queue feeder or pin-memory thread sits in one for the whole capture. A
# frame open when the profiler started is recorded without the C call it is blocked in, so the
# Python-level waits are named too. Only frames whose whole subtree waits are listed (a queue's get
# also unpickles what it got). torch names frames "threading.py(327): wait" and C calls as CPython's
# profiler does; TF "$threading.py:327 wait" and "$time sleep" ("$<unknown> acquire" for methods).
_AT_LINE = r"(?:\(\d+\): |:\d+ )"
_FILE = r"(?:^\$|^|/)"
PYTHON_WAIT = re.compile(
    r"^<built-in method acquire of (_thread\.lock|_thread\.RLock|_multiprocessing\.SemLock) object|"
    r"^<built-in function (sleep|select|waitpid|wait|wait3|wait4|sigwait|sigtimedwait|sigwaitinfo)>$|"
    r"^<built-in method (poll|select|control) of select\.|"
    r"^<built-in method (recv|recv_into|recvfrom|accept) of _socket\.socket object|"
    r"^\$(time sleep|select (select|poll|epoll)|posix (waitpid|wait|wait3|wait4)|"
    r"signal (sigwait|sigtimedwait|sigwaitinfo)|<unknown> (acquire|poll|recv|recv_into|recvfrom|accept))$|"
    rf"{_FILE}threading\.py{_AT_LINE}(wait|join|_wait_for_tstate_lock)$|"
    rf"{_FILE}selectors\.py{_AT_LINE}select$|"
    rf"{_FILE}multiprocessing/connection\.py{_AT_LINE}(wait|poll|_poll)$|"
    rf"{_FILE}concurrent/futures/_base\.py{_AT_LINE}(result|wait|as_completed)$|"
    rf"{_FILE}subprocess\.py{_AT_LINE}(wait|_wait|_try_wait|communicate)$")


@per_frame
def python_wait_rows(frame: Frame) -> np.ndarray:
    """The python_function rows in which the thread waits (``PYTHON_WAIT``), with every Python frame
    they call. Host time leaves them out: a blocked thread is idle. Cached on the frame."""
    rows = frame.rows("python_function")
    codes = distinct(frame.name_code[rows])
    waits = [c for c in codes[codes >= 0].tolist() if PYTHON_WAIT.search(frame.names[c])]
    if waits:
        waiting = np.zeros(len(frame), bool)
        waiting[rows[member_mask(frame.name_code[rows], waits)]] = True
        rest = rows[~waiting[rows]]
        waiting[rest[nearest_ancestor(frame.parent, rest, waiting) >= 0]] = True
        rows = np.flatnonzero(waiting)
    else:
        rows = np.zeros(0, np.int64)
    return rows


# Python called from a compiled program: TF's tf.py_function (EagerPyFunc), tf.numpy_function and
# tf.compat.v1.py_func (PyFunc, PyFuncStateless), which run under Python's GIL and which XLA cannot
# compile; JAX's host callbacks inside a jitted function (jax.debug.print, jax.debug.callback,
# jax.pure_callback, io_callback: HLO instructions debug_print.1, pure_callback.3, ...), each a round
# trip from XLA to Python and back.
PYTHON_CALLBACK = re.compile(r"(^|:)(PyFunc|PyFuncStateless|EagerPyFunc)$|"
                             r"^(debug_print|debug_callback|pure_callback|io_callback|python_callback|"
                             r"xla_python_cpu_callback|xla_ffi_python_cpu_callback)(\.\d+)?$")
# Building a tf.data pipeline and its iterator on the loop's thread: the eager dataset ops
# (EagerLocalExecute: TensorSliceDataset, ParallelMapDatasetV2, ...), MakeIterator with its
# MakeIterator::<dataset> ranges, AnonymousIteratorV3 (iter(dataset) in eager). Keras's predict, fit
# and evaluate build one per call, so a loop calling predict per batch builds one per batch.
PIPELINE_BUILD = re.compile(r"^EagerLocalExecute: (\w+Dataset(V\d+)?|MakeIterator|AnonymousIterator(V\d+)?)$|"
                            r"^MakeIterator(::|$)")
# torch.profiler wraps each batch fetch in "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
# TF's is the IteratorGetNext op (a graph op, or "EagerLocalExecute: IteratorGetNext" in an eager loop).
# The input pipeline's time on the loop's thread is those and the pipeline's building.
DATA_LOADER = re.compile(r"DataLoader.*__next__|^IteratorGetNext|::IteratorGetNext|^EagerLocalExecute: IteratorGetNext|"
                         + PIPELINE_BUILD.pattern)


@per_frame
def data_loading_rows(frame: Frame) -> np.ndarray:
    """Host rows fetching batches (DataLoader __next__, tf.data IteratorGetNext) or building a tf.data
    pipeline (``PIPELINE_BUILD``). Cached on the frame."""
    codes = [i for i, n in enumerate(frame.names) if DATA_LOADER.search(n)]
    return np.flatnonzero(member_mask(frame.name_code, codes) &
                          frame.mask("user_range", "cpu_op", "python_function", "other")) if codes else np.zeros(0, np.int64)


# tf.data's own threads (tf_data_private_threadpool, tf_data_iterator_resource, ...): the input
# pipeline's map functions and prefetching run there, beside the loop, not as part of its step.
_INPUT_PIPELINE_THREAD = re.compile(r"^tf_data_")


@per_frame
def input_pipeline_mask(frame: Frame) -> np.ndarray:
    """Rows on the input pipeline's own threads (tf.data's), by their thread name. Cached on the frame."""
    mask = np.zeros(len(frame), bool)
    if "thread_name" in frame.table.column_names:
        codes, names = dictionary_codes(frame.table.column("thread_name"))
        wanted = [i for i, n in enumerate(names) if n and _INPUT_PIPELINE_THREAD.match(n)]
        if wanted:
            mask = member_mask(codes, wanted)
    return mask


@per_frame
def collective_rows(frame: Frame) -> np.ndarray:
    """Host rows inside collective communication: ops and ranges named as the communication op class
    (``gloo:all_reduce`` on gloo's worker thread, ``nccl:all_reduce``, ``c10d::allreduce_``), by row.
    Cached on the frame."""
    host = frame.mask("user_range", "cpu_op")
    codes = [c for c in distinct(frame.name_code[host]).tolist() if c >= 0
             and classify_op_name(frame.names[c]) == "communication"]
    return np.flatnonzero(member_mask(frame.name_code, codes) & host) if codes else np.zeros(0, np.int64)


# Ops that run a collective themselves: TensorFlow's (MirroredStrategy's CollectiveReduceV2 on CPU,
# recorded on a "collective_ops/..." line from its start to its done callback) and XLA's collective
# instructions (each CPU device's thread runs its part of psum.7), where PyTorch's c10d ops only hand
# theirs to gloo's threads or NCCL's stream.
_COLLECTIVE_ITSELF = re.compile(r"^(Collective\w+|Nccl\w+)$|" + XLA_COLLECTIVE)


@per_frame
def collective_work_rows(frame: Frame) -> np.ndarray:
    """The collectives that are the communication itself, run on the host: rows of
    ``collective_rows`` with no host op or call of their own thread inside them that are ranges
    (gloo's worker threads record only ``gloo:all_reduce``) or TensorFlow collective ops (their span
    is the exchange, waits for the peers included) or XLA collective instructions. Where the trace has GPU communication kernels,
    host collectives are NCCL's enqueues (``nccl:all_reduce`` around a kernel launch), and none is.
    Cached on the frame."""
    rows = collective_rows(frame)
    ranges = frame.mask("user_range")[rows]
    itself = [c for c in distinct(frame.name_code[rows[~ranges]]).tolist()
              if c >= 0 and _COLLECTIVE_ITSELF.match(tf_base_op(frame.names[c]))]
    rows = rows[ranges | member_mask(frame.name_code[rows], itself)]
    kernels = frame.rows("gpu_kernel")
    if rows.size and kernels.size and (classify_rows(frame).kernel[kernels] == KERNEL_CLASSES.index("communication")).any():
        rows = rows[:0]
    has_child = np.zeros(rows.size, bool)
    host = frame.mask("cpu_op", "runtime_api", "driver_api").copy()
    host[rows] = False  # a collective op is not its own child, nor is another collective beside it
    for thread in np.unique(frame.thread_key[rows]).tolist():  # few threads: one vectorized search each
        starts = np.sort(frame.start[host & (frame.thread_key == thread)], kind="stable")  # timsort: near-sorted
        if not starts.size:
            continue
        mine = np.flatnonzero(frame.thread_key[rows] == thread)
        # The thread's first host row that starts at or after the range does: inside the range?
        j = np.searchsorted(starts, frame.start[rows[mine]], "left")
        has_child[mine] = (j < starts.size) & (starts[np.minimum(j, starts.size - 1)] < frame.end[rows[mine]])
    return rows[~has_child]


def collectives_beside(frame: Frame, threads: np.ndarray) -> np.ndarray:
    """``collective_work_rows`` on other threads of the processes of ``threads`` (thread keys): the
    collectives those threads can be waiting for (gloo's workers beside the training thread)."""
    rows = collective_work_rows(frame)
    if not rows.size or not threads.size:
        return rows[:0]
    pids = np.unique(frame.pid[member_mask(frame.thread_key, threads)])
    return rows[~member_mask(frame.thread_key[rows], threads) & member_mask(frame.pid[rows], pids)]


_COMPILED: dict[int, list[tuple[str, re.Pattern[str], bool]]] = {}


def _compiled(rules: Sequence[tuple[str, ...]]) -> list[tuple[str, re.Pattern[str], bool]]:
    key = id(rules)
    if key not in _COMPILED:
        _COMPILED[key] = [(r[0], re.compile(r[1]), len(r) > 2 and r[2] == "base") for r in rules]
    return _COMPILED[key]


def kernel_base_name(name: str) -> str:
    """A demangled kernel name reduced to the kernel's own qualified name: no return type, template
    arguments or parameter list (``void at::native::reduce_kernel<512, 1, ...>(...)`` ->
    ``at::native::reduce_kernel``). Names that are not C++ signatures come back unchanged."""
    text = name.replace("(anonymous namespace)", "anonymous").replace("<unnamed>", "unnamed")
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    base = "".join(out).strip()
    if not base:
        return name
    # A return type ("void ", "std::enable_if<...>::type ") precedes the name; other spaces are part of it.
    words = base.split(" ")
    return words[-1] if len(words) > 1 and (words[0] == "void" or words[0].endswith("::type")) else base


def short_name(name: str, limit: int = 80) -> str:
    """A name fit for a sentence: a demangled kernel's base name (no template arguments or parameters);
    a TF op's last three scopes (``…/gru_cell/MatMul_1_grad/MatMul:MatMul``); cut to ``limit``
    characters. Full names stay in the tables."""
    base = kernel_base_name(name)
    scopes = base.split("/")
    if len(scopes) > 3 and ":" in scopes[-1]:
        base = "…/" + "/".join(scopes[-3:])
    return base if len(base) <= limit else base[: limit - 1] + "…"


def classify_name(name: str, rules: Sequence[tuple[str, ...]]) -> str:
    """Class of one name under an ordered rule table; ``"other"`` when no rule matches."""
    base: str | None = None
    for cls, rx, on_base in _compiled(rules):
        if on_base:
            base = kernel_base_name(name) if base is None else base
            if rx.search(base):
                return cls
        elif rx.search(name):
            return cls
    return "other"


def is_dtype_change(types: list[str] | None) -> bool:
    """Whether a copy's tensor inputs have different dtypes (``copy_(dst, src)``: dst first)."""
    if not types:
        return False
    tensor_types = [t for t in types[:2] if isinstance(t, str) and t and t != "Scalar"]
    return len(tensor_types) == 2 and tensor_types[0] != tensor_types[1]


# --- per-row classes of a whole trace --------------------------------------------------------

NO_CLASS = -1


@dataclass
class RowClasses:
    """Class index per row (``NO_CLASS`` where a view does not apply).

    kernel: GPU activity rows, index into ``KERNEL_CLASSES`` (kernel view: by kernel name, and a
        kernel launched by a dtype-changing copy is a cast).
    op: framework op rows (cpu_op), index into ``OP_CLASSES``, after the copy rules.
    op_view: for op rows and GPU rows, the op-view class: ``rnn`` when any enclosing framework op
        is a fused RNN (casts excepted: autocast casts inside the fused op), else the op's own class (GPU rows: their launching op's).
    api: runtime/driver API rows, index into ``API_CLASSES``.
    by_hlo: op rows whose class their XLA HLO instruction gave (``_classify_xla_ops_by_hlo``): one
        instruction name can be two ops in two modules, which tables keep apart by class.
    hlo_float64: op rows whose HLO instruction runs a float64 (or complex128) matrix product or
        convolution (``tracekit.ingest.hlo.instruction_facts``); None without HLO modules.
    """

    kernel: np.ndarray
    op: np.ndarray
    op_view: np.ndarray
    api: np.ndarray
    by_hlo: np.ndarray | None = None
    hlo_float64: np.ndarray | None = None  # op rows whose HLO instruction runs a float64 product or convolution


def _by_name(frame: Frame, rows: np.ndarray, rules: Sequence[tuple[str, ...]], classes: Sequence[str],
             classify: Callable[[str], str] | None = None) -> np.ndarray:
    """Class index of each row, classifying each distinct name once (by ``classify`` when given)."""
    codes = frame.name_code[rows]
    used = distinct(codes)
    lookup = np.full(len(frame.names) + 1, classes.index("other"), np.int8)
    for code in used[used >= 0]:
        name = frame.names[code]
        lookup[code] = classes.index(classify(name) if classify else classify_name(name, rules))
    return lookup[codes]


# An AOTInductor model calls ATen ops it does not generate code for through a C shim, recorded as ops
# (aoti_torch_cpu_addmm_out) where the package was compiled with cpp.enable_kernel_profile.
_AOTI_SHIM = re.compile(r"^aoti_torch_(?:cpu|cuda|xpu|mps)_(\w+)$")


# ONNX ops whose TF namesakes are other classes: ONNX's Where selects and its Sum, Mean, Max and Min
# combine tensors element by element; TF's Where finds indices and its Sum, Mean, Max and Min reduce.
# A bare op type is an ONNX Runtime node's name: TF's ops are recorded scoped ("…/Where:Where") or as
# EagerLocalExecute children, and reach their type through ``tf_base_op`` below.
ONNX_BARE_ELEMENTWISE = frozenset({"Where", "Sum", "Mean", "Max", "Min"})


def classify_op_name(name: str) -> str:
    """An op's class by ``OP_RULES``: the name as recorded (``aten::mm``, ``gloo:all_reduce``), else the
    TF op type it ran (``tf_base_op``: ``…/Conv2D:_MklNativeConv2D`` -> ``Conv2D``)."""
    if name in ONNX_BARE_ELEMENTWISE:
        return "elementwise"
    cls = classify_name(name, OP_RULES)
    shim = _AOTI_SHIM.match(name) if cls == "other" else None
    if shim:  # aoti_torch_cpu_addmm_out runs aten::addmm's out= form
        op = shim.group(1)
        cls = classify_name(f"aten::{op}", OP_RULES)
        if cls == "other" and op.endswith("_out"):
            cls = classify_name(f"aten::{op[:-4]}", OP_RULES)
    if cls == "other" and name.startswith(_CUSTOM_AUTOGRAD):
        cls = _custom_op_class(name[len(_CUSTOM_AUTOGRAD):])
    if cls == "other":
        op_type = tf_base_op(name)
        if op_type != name:
            cls = classify_name(op_type, OP_RULES)
    return cls


# A custom op registered with autograd through torch.library (torchvision's roi_align, nms) runs its
# forward inside a range named for it, GeneratedBackwardFor_torchvision_roi_align_default (namespace,
# op, overload joined by "_"), under the op's own range: that range's own time is the op's kernel (a
# Faster R-CNN training step on a CPU: 78 ms of roi_align's 87 ms, read as work of no class). Its
# backward node, ..._defaultBackward, calls the backward op (torchvision::_roi_align_backward), which
# is classed itself.
_CUSTOM_AUTOGRAD = "GeneratedBackwardFor_"


def _custom_op_class(joined: str) -> str:
    """The class of the op ``namespace_op_overload`` names, trying each split of it into namespace and
    op (namespaces have underscores too: torch_scatter), with and without its last part as the overload."""
    if joined.endswith("Backward"):
        return "other"
    parts = joined.split("_")
    for end in (len(parts) - 1, len(parts)):
        for i in range(1, end):
            cls = classify_name(f"{'_'.join(parts[:i])}::{'_'.join(parts[i:end])}", OP_RULES)
            if cls != "other":
                return cls
    return "other"


_TF_OP_TYPE = re.compile(r"^[^\s:]+:(_?[A-Za-z][A-Za-z0-9_]*)$")


EAGER_OP = "EagerLocalExecute: "
_MKL_PREFIX = re.compile(r"^_Mkl(Native)?(?=[A-Z])")


def _tf_op_type(name: str) -> str:
    """``scope/name:Type`` -> ``Type`` for TensorFlow op events, ``EagerLocalExecute: Type`` ->
    ``Type`` for eager ones; other names unchanged."""
    if name.startswith(EAGER_OP):
        return name[len(EAGER_OP):]
    m = _TF_OP_TYPE.match(name)
    return m.group(1) if m else name


def tf_base_op(name: str) -> str:
    """The TF op type an event ran, with oneDNN's graph rewrite undone (``_MklMatMul`` ->
    ``MatMul``, ``_MklNativeFusedMatMul`` -> ``_FusedMatMul``), so an eager op and its graph-mode
    twin, or a build with oneDNN and one without, pair up and get one class; other names unchanged."""
    op = _tf_op_type(name)
    base = _MKL_PREFIX.sub("", op)
    if base == op:
        return op
    return "_" + base if base.startswith("Fused") and not base.startswith("FusedBatchNorm") else base


def _eager_ops(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """TF eager ops are ``EagerExecute`` events whose child ``EagerLocalExecute: MatMul`` names the
    op (no separate kernel event exists, even at host tracer level 3): (the EagerExecute op rows,
    the name codes of their naming children)."""
    codes = [i for i, name in enumerate(frame.names) if name.startswith(EAGER_OP)]
    none = np.zeros(0, np.int64)
    if not codes or "EagerExecute" not in frame.names:
        return none, none
    rows = np.flatnonzero(member_mask(frame.name_code, codes))
    parents = frame.parent[rows]
    ok = parents >= 0
    rows, parents = rows[ok], parents[ok]
    eager = frame.names.index("EagerExecute")
    ok = (frame.name_code[parents] == eager) & frame.mask("cpu_op")[parents]
    return parents[ok], frame.name_code[rows[ok]]


def _classify_eager_ops(frame: Frame, op: np.ndarray) -> None:
    parents, codes = _eager_ops(frame)
    for code in np.unique(codes):
        op[parents[codes == code]] = OP_CLASSES.index(classify_op_name(frame.names[code]))


@per_frame
def op_name_codes(frame: Frame) -> np.ndarray:
    """Per row, the code (into ``frame.names``) of the name that says which op it is: its own,
    except for TF's eager ops, all named ``EagerExecute``, whose child names the op
    (``EagerLocalExecute: MatMul``). Tables of ops group by it. Cached on the frame."""
    parents, codes = _eager_ops(frame)
    if parents.size:
        result = frame.name_code.copy()
        result[parents] = codes
    else:
        result = frame.name_code
    return result


def classify_rows(frame: Frame) -> RowClasses:
    """Classify every row of a trace (see ``RowClasses``), once per frame."""
    return frame.memo("classify_rows", lambda: _classify_rows(frame))


def _classify_rows(frame: Frame) -> RowClasses:
    n = len(frame)
    kernel = np.full(n, NO_CLASS, np.int8)
    op = np.full(n, NO_CLASS, np.int8)
    api = np.full(n, NO_CLASS, np.int8)

    gpu_rows = frame.rows(*GPU_ACTIVITY_KINDS)
    kernel[gpu_rows] = _by_name(frame, gpu_rows, KERNEL_RULES, KERNEL_CLASSES)
    # The kind decides for copies and sets whatever their names say.
    kernel[frame.rows("gpu_memcpy")] = KERNEL_CLASSES.index("memcpy")
    kernel[frame.rows("gpu_memset")] = KERNEL_CLASSES.index("memset")
    kernel[frame.rows("gpu_sync")] = KERNEL_CLASSES.index("sync")

    op_rows = frame.rows("cpu_op")
    op[op_rows] = _by_name(frame, op_rows, OP_RULES, OP_CLASSES, classify_op_name)
    _classify_eager_ops(frame, op)
    _resolve_copies(frame, op, op_rows)
    by_hlo, hlo_float64 = _classify_xla_ops_by_hlo(frame, op, op_rows)  # last: the HLO's copy is data movement, not aten's copy_

    api_rows = frame.rows("runtime_api", "driver_api")
    api[api_rows] = _by_name(frame, api_rows, API_RULES, API_CLASSES)
    _classify_apis_by_what_they_started(frame, api, gpu_rows)

    # Kernel view: a kernel launched by a dtype-changing copy is a cast whatever its name.
    cast_op = op == OP_CLASSES.index("cast")
    launched_by = frame.op_row[gpu_rows]
    by_cast = (launched_by >= 0) & cast_op[np.maximum(launched_by, 0)]
    movable = byte_mask(kernel[gpu_rows], [KERNEL_CLASSES.index(c) for c in ("elementwise", "other")])
    kernel[gpu_rows[by_cast & movable]] = KERNEL_CLASSES.index("cast")

    op_view = op.copy()
    rnn = OP_CLASSES.index("rnn")
    # Autocast casts its inputs inside the fused op (aten::mkldnn_rnn_layer on CPU): a cast stays a cast.
    inside_rnn = (nearest_ancestor(frame.parent, op_rows, op == rnn) >= 0) & (op[op_rows] != OP_CLASSES.index("cast"))
    op_view[op_rows[inside_rnn]] = rnn
    has_op = launched_by >= 0
    op_view[gpu_rows[has_op]] = op_view[launched_by[has_op]]
    return RowClasses(kernel=kernel, op=op, op_view=op_view, api=api, by_hlo=by_hlo, hlo_float64=hlo_float64)


_HLO_MODULE = r'"hlo_module":"(?P<module>[^"]*)"'
_PROGRAM_ID = r'"program_id":(?P<program>-?\d+)'


def _classify_xla_ops_by_hlo(frame: Frame, op: np.ndarray,
                             op_rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """XLA ops whose compiled module is in the trace take the class their HLO instruction computes
    (``tracekit.ingest.hlo``): the names say how XLA built an instruction, not what it computes
    (``ynn_fusion.1`` is a matrix product on XLA:CPU, ``ynn_fusion.2`` a sum). Each op event names its
    module and program (``hlo_module``, ``program_id`` in its args), as instruction names repeat
    across modules; ops whose instruction the HLO leaves open keep their name's class. Returns the
    mask of rows classed here and that of rows running float64 products (None when the trace holds
    no HLO module)."""
    extra = trace_extra(frame.table)
    modules = extra.get("hlo_classes")
    if not isinstance(modules, dict) or not modules or op_rows.size == 0:
        return None, None
    listed = extra.get("hlo_float64")
    doubles = ({key: dict.fromkeys(names, "float64") for key, names in listed.items() if isinstance(names, list)}
               if isinstance(listed, dict) else {})
    by_hlo = np.zeros(len(frame), bool)
    double = np.zeros(len(frame), bool)
    named = {name for classes in modules.values() if isinstance(classes, dict) for name in classes}
    codes = [c for c in distinct(frame.name_code[op_rows]).tolist() if c >= 0 and frame.names[c] in named]
    rows = op_rows[member_mask(frame.name_code[op_rows], codes)]
    if rows.size == 0:
        return by_hlo, double
    args = frame.table.column("args").take(pa.array(rows))
    storage = pa.chunked_array([c.storage for c in args.chunks], args.type.storage_type)
    # Each distinct (instruction, module, program) is looked up once: a long capture repeats a few.
    parts = [frame.name_code[rows].astype(np.int64)]
    texts: list[list[str | None]] = []
    for pattern, field in ((_HLO_MODULE, "module"), (_PROGRAM_ID, "program")):
        encoded = pc.struct_field(pc.extract_regex(storage, pattern), field).combine_chunks().dictionary_encode()
        parts.append(np.asarray(encoded.indices.fill_null(-1), np.int64) + 1)
        texts.append([None, *encoded.dictionary.to_pylist()])
    key = (parts[0] * (len(texts[0]) + 1) + parts[1]) * (len(texts[1]) + 1) + parts[2]
    distinct_keys, index = factorize(key)
    first = np.zeros(distinct_keys.size, np.int64)
    first[index] = np.arange(index.size)  # a row of each key (they all name the same instruction)
    cls = np.full(distinct_keys.size, NO_CLASS, np.int8)
    key_double = np.zeros(distinct_keys.size, bool)
    for j, i in enumerate(first.tolist()):
        where = (texts[0][int(parts[1][i])], texts[1][int(parts[2][i])], frame.names[int(parts[0][i])])
        name_class = _hlo_class(modules, *where)
        cls[j] = OP_CLASSES.index(name_class) if name_class in OP_CLASSES else NO_CLASS
        key_double[j] = bool(doubles) and _hlo_class(doubles, *where) == "float64"
    row_class = cls[index]
    classed = row_class != NO_CLASS
    op[rows[classed]] = row_class[classed]
    by_hlo[rows[classed]] = True
    double[rows[key_double[index]]] = True
    return by_hlo, double


def _hlo_class(modules: dict, module: str | None, program: str | None, instruction: str) -> str | None:
    """The class of an instruction of the module an event names; without its program id (xprof's
    JSON drops it), the class every compiled module of that name gives the instruction, if they agree."""
    if program is not None:
        classes = modules.get(f"{module}#{program}")
        return classes.get(instruction) if isinstance(classes, dict) else None
    said = {classes.get(instruction) for key, classes in modules.items()
            if key.rpartition("#")[0] == module and isinstance(classes, dict)}
    return said.pop() if len(said) == 1 else None


def _classify_apis_by_what_they_started(frame: Frame, api: np.ndarray, gpu_rows: np.ndarray) -> None:
    """An API call that the name rules left as ``other`` but that a GPU activity's correlation points
    at did start that activity: a launch for a kernel, a memory call for a copy or set.

    The evidence outranks the name: TensorFlow before 2022 names the CUPTI API event after the kernel
    it launched (``volta_sgemm_128x64_nn``, not ``cudaLaunchKernel``), and vendors add launch APIs.
    """
    launcher = frame.launch_row[gpu_rows]
    linked = launcher >= 0
    if not linked.any():
        return
    other = API_CLASSES.index("other")
    for kinds, cls in ((("gpu_kernel", "gpu_graph"), "launch"), (("gpu_memcpy", "gpu_memset"), "memory")):
        of_kind = frame.mask(*kinds)[gpu_rows] & linked
        started = launcher[of_kind]
        api[started[api[started] == other]] = API_CLASSES.index(cls)


_INPUT_TYPES = r'"Input type":\["(?P<dst>[^"]*)","(?P<src>[^"]*)"'


def _resolve_copies(frame: Frame, op: np.ndarray, op_rows: np.ndarray) -> None:
    """Copies that change dtype become casts (and so do the copy ops around them); other copies
    take the class of their nearest enclosing classified op, unless that op is composite (its math
    runs as ops of its class below it) and the copy surely moves data (see below). A copy no classified op encloses stays
    ``copy`` (data movement, memory-bound work: a top-level ``x.contiguous()`` moves every byte) where
    its recorded input types show one dtype; without them it may be a cast and is ``other``, which
    the unclassified-work check names with what would tell the two apart (record_shapes)."""
    copy, cast, other = OP_CLASSES.index("copy"), OP_CLASSES.index("cast"), OP_CLASSES.index("other")
    copy_rows = op_rows[op[op_rows] == copy]
    if copy_rows.size == 0:
        return
    copies = copy_rows[frame.name_code[copy_rows] == _code_of(frame, "aten::copy_")]
    one_dtype = np.zeros(op.size, bool)  # copy_ rows whose recorded input types are one tensor dtype
    if copies.size:
        # copy_(dst, src): read both dtypes from the args JSON in one vectorized regex pass.
        args = frame.table.column("args").take(pa.array(copies))
        storage = pa.chunked_array([c.storage for c in args.chunks], args.type.storage_type)
        found = pc.extract_regex(storage, _INPUT_TYPES)
        dst, src = pc.struct_field(found, "dst"), pc.struct_field(found, "src")
        # As is_dtype_change: two tensor dtypes (not empty, not "Scalar") that differ; no match is null.
        tensor = [pc.and_(pc.not_equal(t, ""), pc.not_equal(t, "Scalar")) for t in (dst, src)]
        changes = pc.fill_null(pc.and_(pc.and_(*tensor), pc.not_equal(dst, src)), False).to_numpy(zero_copy_only=False)
        one_dtype[copies] = pc.fill_null(pc.and_(pc.and_(*tensor), pc.equal(dst, src)), False).to_numpy(zero_copy_only=False)
        cur = copies[changes]
        op[cur] = cast
        # aten::to -> aten::_to_copy -> aten::copy_: the copy ops wrapping a cast are the same cast.
        cur = frame.parent[cur]
        while cur.size:
            cur = cur[cur >= 0]
            cur = cur[op[cur] == copy]
            op[cur] = cast
            cur = frame.parent[cur]
    remaining = copy_rows[op[copy_rows] == copy]
    wanted = (op != copy) & (op != other) & (op != NO_CLASS)
    ancestor = nearest_ancestor(frame.parent, remaining, wanted)
    # A copy inside an op that runs its math as ops of its own class is that op's data movement, not
    # its math: aten::matmul's aten::reshape clones a non-contiguous input before its aten::bmm (a
    # Hugging Face GPT-2's attention: 0.8 ms of its training step's 40 ms "GEMM", 20% of it on a core
    # shared with another process, where the copies waited longest). A copy inside an
    # op with no such op below it (aten::addmm's bias copy, aten::mul's scalar made a tensor) is that
    # op's own work and takes its class.
    enclosing = np.maximum(ancestor, 0)
    inherits = (ancestor >= 0) & ~_runs_ops_of_its_class(frame, op, op_rows, wanted, np.unique(ancestor[ancestor >= 0]))[enclosing]
    # Copy ops that cannot change a dtype (a clone, a layout conversion, the copy_ a clone runs) move
    # data whatever is recorded; the others are copies only where their input types show one dtype.
    keeps_dtype = member_mask(frame.name_code[remaining], [_code_of(frame, n) for n in DTYPE_KEEPING_COPIES])
    in_clone = frame.parent[remaining]
    keeps_dtype |= (in_clone >= 0) & member_mask(frame.name_code[np.maximum(in_clone, 0)],
                                                 [_code_of(frame, n) for n in DTYPE_KEEPING_COPIES])
    moves_data = one_dtype[remaining] | keeps_dtype
    # A possible cast (aten::to without recorded types) inside a composite op keeps the op's class as before.
    op[remaining] = np.where(inherits | ((ancestor >= 0) & ~moves_data), op[enclosing],
                             np.where(moves_data, copy, other))


def _runs_ops_of_its_class(frame: Frame, op: np.ndarray, op_rows: np.ndarray, wanted: np.ndarray,
                           candidates: np.ndarray) -> np.ndarray:
    """Per row, whether a classified op below it, with no classified op between them, has its class: a
    composite op (aten::matmul over aten::bmm, aten::linear over aten::addmm) rather than one whose
    work the trace does not split. Found for the classes of ``candidates`` (other rows: False)."""
    out = np.zeros(op.size, bool)
    if not candidates.size:
        return out
    # Only ops below a candidate can make it composite: climb from the classified ops of the candidates' classes.
    classes = np.unique(op[candidates])
    below = op_rows[wanted[op_rows] & member_mask(op[op_rows], classes.tolist())]
    nearest = nearest_ancestor(frame.parent, below, wanted)
    same = (nearest >= 0) & (op[np.maximum(nearest, 0)] == op[below])
    out[nearest[same]] = True
    return out


LAYOUT_CONVERSIONS = ("aten::to_dense", "aten::_to_dense", "aten::to_mkldnn", "aten::_mkldnn_reshape",
                      "aten::_mkldnn_transpose", "aten::_mkldnn_transpose_")
# Copy ops that keep their input's dtype (``aten::to``, ``_to_copy``, ``copy_`` and ``type_as`` may cast).
DTYPE_KEEPING_COPIES = ("aten::clone", "aten::contiguous", *LAYOUT_CONVERSIONS)


def _code_of(frame: Frame, name: str) -> int:
    try:
        return frame.names.index(name)
    except ValueError:
        return -2
