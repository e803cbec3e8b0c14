#!/usr/bin/env bash
# One call of a lent GPU machine (device tool: run "bash tests/data/h200/make_on_gpu.sh"): each
# workload of make_workloads.py beside the remedy applied to it, timed in one run; all of it comes
# back as $OUT/h200.tgz.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
W=${W:-gpu-work}
mkdir -p $W
exec > >(tee $W/session.log) 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv
t0=$SECONDS
timeout -k 5 300 python3 tests/data/h200/make_workloads.py $W/new --device cuda --only ${ONLY:-resnet50_train,gpt2_generate,transformer_train_whole_graph,sync_each_op,pageable_copy,slow_loader,tiny_ops,tiny_ops_compiled,tiny_ops_graphed,item_sync,item_sync_nosync,inductor_mlp,inductor_mlp_graphed,transformer_train,transformer_train_compiled,transformer_train_graphed}
echo "== torch: exit $? after $((SECONDS - t0))s"
JAX_ONLY=${JAX_ONLY-jax_train,jax_train_nonblocking,jax_scan_lstm,jax_scan_lstm_unroll5}  # set empty to skip JAX
if [ -n "$JAX_ONLY" ]; then
  timeout -k 5 60 python3 tests/data/h200/make_workloads.py $W/new --device cuda --only $JAX_ONLY
  echo "== jax: exit $? after $((SECONDS - t0))s"
fi
ls -la $W/new
tar czf $OUT/h200.tgz $W
