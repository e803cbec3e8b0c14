"""Range GPU projection in O(n log n) (pre-order intervals of the row tree, sorted keys) gives what
the direct definitions give, on every real trace: walking every launch call's enclosing ranges;
a step's GPU activities by their step (an nsys trace's NVTX range made steps: as a range); a TF/JAX range that launched nothing, its process's launches
during it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED, ids, needs_shared, shared_files

from tracekit import schema
from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of
from tracekit.analyze.ranges import RANGE_KINDS, ranges, subtree_intervals
from tracekit.ingest import load

TRACE_FILES = shared_files("hta/**/*.json.gz") + shared_files("xprof/**/*.xplane.pb") + shared_files("nsys/*.sqlite")
H100 = sorted((Path(__file__).parent / "data" / "h100").glob("*.pt.trace.json.gz"))


def _walked(table) -> dict[int, tuple[int, int, int, int]]:
    """The direct definition: for each GPU activity, every range above its launch call."""
    frame = frame_of(table)
    is_range = frame.mask(*RANGE_KINDS)
    out: dict[int, list[int]] = {}
    for g in frame.rows(*GPU_BUSY_KINDS).tolist():
        node = int(frame.parent[frame.launch_row[g]]) if frame.launch_row[g] >= 0 else -1
        while node >= 0:
            if is_range[node]:
                a = out.setdefault(node, [0, 0, 1 << 62, -(1 << 62)])
                a[0] += 1
                a[1] += int(frame.dur[g])
                a[2] = min(a[2], int(frame.start[g]))
                a[3] = max(a[3], int(frame.end[g]))
            node = int(frame.parent[node])
    # An nsys trace's steps made from one NVTX range's calls stay ranges, projected as nsys projects them.
    meta = (table.schema.metadata or {}).get(schema.META_TRACE_META_JSON.encode(), b"{}")
    nvtx_steps = schema.source_of(table) == "nsys" and "steps_from" in json.loads(meta or b"{}")
    step_kind = -1 if nvtx_steps else schema.KIND_CODES["step"]
    cross_thread = (table.schema.metadata or {}).get(schema.META_SOURCE.encode(), b"").decode() in ("tf", "jax")
    for node in frame.rows(*RANGE_KINDS).tolist():
        if frame.kind[node] == step_kind:
            mine = [g for g in frame.rows(*GPU_BUSY_KINDS).tolist() if frame.launch_row[g] >= 0
                    and frame.step[g] == frame.step[node] and frame.pid[frame.launch_row[g]] == frame.pid[node]]
        elif cross_thread and node not in out:
            mine = [g for g in frame.rows(*GPU_BUSY_KINDS).tolist() if frame.launch_row[g] >= 0
                    and frame.pid[frame.launch_row[g]] == frame.pid[node]
                    and frame.start[node] <= frame.start[frame.launch_row[g]] < frame.end[node]]
        else:
            continue
        out.pop(node, None)
        if mine:
            out[node] = [len(mine), int(frame.dur[mine].sum()), int(frame.start[mine].min()), int(frame.end[mine].max())]
    return {k: (v[0], v[1], v[2], v[3] - v[2]) for k, v in out.items()}


def _check(path: Path) -> None:
    table = load(path)
    want = _walked(table)
    inst = ranges(table).instances
    for r in inst.itertuples():
        ops, busy, first, span = want.get(r.row, (0, 0, None, None))
        assert (r.gpu_ops, r.gpu_busy_ns) == (ops, busy)
        if ops:
            assert (r.proj_start_ns, r.proj_dur_ns) == (float(first), float(span))
        else:
            assert np.isnan(r.proj_start_ns)


@needs_shared
@pytest.mark.parametrize("path", TRACE_FILES, ids=ids(TRACE_FILES))
def test_projection_equals_the_walk_on_every_shared_trace(path: Path) -> None:
    _check(path)


@pytest.mark.parametrize("path", H100, ids=lambda p: p.name.split("-")[0])
def test_projection_equals_the_walk_on_h100_traces(path: Path) -> None:
    _check(path)


def test_subtree_intervals_say_who_encloses_whom() -> None:
    frame = frame_of(load(H100[0]))
    tin, size = subtree_intervals(frame.parent, frame.depth)
    rng = np.random.default_rng(0)
    for b in rng.choice(len(frame), 200, replace=False).tolist():
        ancestors = set()
        node = int(frame.parent[b])
        while node >= 0:
            ancestors.add(node)
            node = int(frame.parent[node])
        for a in rng.choice(len(frame), 50, replace=False).tolist():
            inside = tin[a] <= tin[b] < tin[a] + size[a]
            assert inside == (a in ancestors or a == b)


@needs_shared
def test_tf_derived_steps_project_onto_their_gpus_work():
    """TF 2.3/2.4 mark steps only on the device ``Steps`` lines; each step's projection is the work
    its executor threads launched (none of it is under the synthesized step row)."""
    table = load(SHARED / "traces" / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb")
    inst = ranges(table).instances.sort_values("start_ns")
    assert inst.name.tolist() == ["Step 0", "Step 1"]
    assert inst.gpu_ops.tolist() == [688, 688]  # each GPU's kernels and copies in its step
    frame = frame_of(table)
    for r in inst.itertuples():
        gpu = frame.rows(*GPU_BUSY_KINDS)
        gpu = gpu[frame.step[gpu] == frame.step[r.row]]
        assert np.unique(frame.device[gpu]).size == 1
        assert r.proj_start_ns >= r.start_ns and r.proj_start_ns + r.proj_dur_ns <= r.start_ns + r.dur_ns


@needs_shared
def test_a_tf_range_that_launched_nothing_projects_onto_its_executor_threads_launches():
    """TF runs a range's ops on executor threads: a TraceMe range on the Python thread launches
    nothing itself. Here a range over step 0's window is added to the real BERT trace on its python3
    thread; it projects onto what the tf_gpu_private threads launched during it. The same range in a
    PyTorch trace (a DataLoader thread's, say) keeps no projection."""
    import pyarrow as pa

    table = load(SHARED / "traces" / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb")
    frame = frame_of(table)
    step0 = int(frame.rows("step")[0])
    python_row = next(i for i in range(len(frame)) if table["thread_name"][i].as_py() == "python3")
    added = table.slice(python_row, 1).to_pylist()[0]
    added.update(kind="user_range", name="train_step", start_ns=int(frame.start[step0]), dur_ns=int(frame.dur[step0]),
                 parent=None, depth=0, step=None, launch_row=None, op_row=None, args=None, correlation_id=None)
    with_range = pa.concat_tables([table, pa.Table.from_pylist([added], schema=table.schema)])
    inst = ranges(with_range).instances
    mine = inst[inst.name == "train_step"].iloc[0]
    launched = frame.launch_row[frame.rows(*GPU_BUSY_KINDS)]
    launched = launched[launched >= 0]
    inside = (frame.start[launched] >= frame.start[step0]) & (frame.start[launched] < frame.end[step0])
    assert mine.gpu_ops == inside.sum() > 600
    torch_like = with_range.replace_schema_metadata({**with_range.schema.metadata, schema.META_SOURCE.encode(): b"torch"})
    inst = ranges(torch_like).instances
    assert inst[inst.name == "train_step"].iloc[0].gpu_ops == 0


def test_a_range_inside_a_call_of_its_own_name_is_counted_once_in_outermost() -> None:
    """tests/data/tf/unnumbered_trace: Trace("train_step") around a tf.function whose call TraceMe TF
    also names train_step, 8 iterations. total sums all 16 calls, as nsys's nvtx_sum would; outermost
    only the program's 8, and the report says which names nest in themselves."""
    from tracekit import api

    table = load(Path(__file__).parent / "data" / "tf" / "unnumbered_trace.xplane.pb")
    rr = ranges(table)
    (row,) = rr.summary[rr.summary.name == "train_step"].to_dict("records")
    inst = rr.instances[rr.instances.name == "train_step"]
    assert row["instances"] == 16 and int(inst.in_same_name.sum()) == 8
    assert row["total_ns"] == int(inst.dur_ns.sum())
    assert row["outermost_ns"] == int(inst[~inst.in_same_name].dur_ns.sum()) < row["total_ns"]
    assert "run inside calls of the same name" in api.render(api.ranges(table), "markdown")
    flat = ranges(load(Path(__file__).parent / "data" / "tf" / "function_loop.xplane.pb")).summary
    assert (flat.outermost_ns == flat.total_ns).all()


def test_pytorch_module_events_are_ranges_with_their_gpu_projection():
    """torch.profiler(with_stack=True) records each nn.Module's forward as a Python event
    (``nn.Module: Linear_1``): the time per layer, which `ranges` left out (Python events are not
    ranges). tests/data/h200/item_sync_stack: 32 calls of a Sequential of Linear, ReLU, Linear."""
    from pathlib import Path

    from tracekit.analyze.ranges import ranges
    from tracekit.ingest import load

    trace = Path(__file__).parent / "data" / "h200" / "item_sync_stack.pt.trace.json.gz"
    summary = ranges(load(trace)).summary.set_index("name")
    layers = summary.loc[["nn.Module: Linear_0", "nn.Module: ReLU_0", "nn.Module: Linear_1"]]
    assert (layers.instances == 32).all() and (layers.mean_depth == 2).all()
    assert (summary.loc["nn.Module: Sequential_0", "total_ns"] >= layers.total_ns.sum())
    assert (layers.gpu_ops > 0).all()  # their launches project onto the GPU
    assert not any(n.startswith("$") or n.endswith(".py") for n in summary.index)  # other Python frames are not


def test_the_steps_are_one_range_summed_the_others_by_name():
    """ProfilerStep#1 ... ProfilerStep#4 are one range of the loop: one summary row, ProfilerStep#N, with
    4 instances (a 1,000-step trace listed 1,000 rows, and two traces' steps, numbered apart, never
    matched in compare); the instances keep each step's own name. User ranges stay by name."""
    rr = ranges(load(Path(__file__).parent / "data" / "cpu" / "optimizer_loop.pt.trace.json.gz"))
    summary = rr.summary.set_index("name")
    assert "Iteration#N" in summary.index and not any(n.startswith("Iteration#") and n != "Iteration#N" for n in summary.index)
    steps = rr.instances[rr.instances.name.str.startswith("Iteration#")]
    assert summary.loc["Iteration#N", "instances"] == len(steps) == 6
    assert summary.loc["Iteration#N", "total_ns"] == steps.dur_ns.sum()
    assert "Optimizer.step#SGD.step" in summary.index
