"""Writes tests/data/tf/sliced_sequence{,_unstacked,_while}.xplane.pb: real TF profiler captures (CPU, one intra-op
and one inter-op thread, 3 steps marked with Trace("train", step_num=i, _r=1)) of a tf.function training
step of a small tanh recurrence over a projected 32x50x128 sequence, under tf.GradientTape. The first
takes each timestep as seq[:, t] in the loop: 50 slice ops a step, each with a StridedSliceGrad that
builds a zero gradient of the whole sequence, summed by AddN. The second slices once with tf.unstack.
The third loops over tf.range, which AutoGraph makes a tf.while_loop: one slice op run 50 times a step.

    python tests/data/tf/make_sliced_sequence.py
Made with TF 2.21 on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX): 9.2 ms a step sliced,
4.2 ms unstacked, 9.1 ms in the while loop, unprofiled.
"""


import numpy as np
import tensorflow as tf
from profiled import unprofiled_ms, write_steps

TIMESTEPS, BATCH, HIDDEN = 50, 32, 128


def training_step(form: str):
    x = tf.constant(np.random.default_rng(0).random((BATCH, TIMESTEPS, HIDDEN), dtype=np.float32))
    proj = tf.Variable(tf.random.stateless_normal((HIDDEN, HIDDEN), (0, 1)) * 0.1)
    recurrent = tf.Variable(tf.random.stateless_normal((HIDDEN, HIDDEN), (0, 2)) * 0.1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            seq = tf.einsum("bth,hk->btk", x, proj)
            pieces = tf.unstack(seq, axis=1) if form == "unstacked" else None
            h = tf.zeros((BATCH, HIDDEN))
            for t in tf.range(TIMESTEPS) if form == "while" else range(TIMESTEPS):
                h = tf.tanh((pieces[t] if pieces is not None else seq[:, t]) + h @ recurrent)
            loss = tf.reduce_sum(h)
        return tape.gradient(loss, [proj, recurrent])

    return step


if __name__ == "__main__":
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    for form in ("sliced", "unstacked", "while"):
        name = "sliced_sequence" if form == "sliced" else f"sliced_sequence_{form}"
        step = training_step(form)
        print(f"{name}: {unprofiled_ms(step):.1f} ms a step unprofiled")
        write_steps(name, step)
