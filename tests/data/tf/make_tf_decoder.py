"""Writes tests/data/tf/tf_decoder.xplane.pb: a real TF profiler capture (CPU) of a GRU cell decoding
greedily inside a tf.function (hidden 256, vocabulary 1,000, 4 sequences, 16 tokens; autograph's
tf.while_loop), each token ``tf.argmax`` of the output then the next token's embedding (GatherV2),
4 calls marked as steps (tracekit.analyze.launch's cell-decoder style); and tf_teacher_forced_eval.xplane.pb,
the same cell evaluated with teacher forcing (``target[:, t]`` embedded, ``tf.argmax`` for the accuracy),
not a decoder.

    python tests/data/tf/make_tf_decoder.py
Made with TF 2.21 and Keras 3.
"""

import keras
import tensorflow as tf
from profiled import write_xspace

VOCAB, HIDDEN = 1000, 256


def main() -> None:
    keras.utils.set_random_seed(0)
    embed, cell, head = keras.layers.Embedding(VOCAB, HIDDEN), keras.layers.GRUCell(HIDDEN), keras.layers.Dense(VOCAB)

    @tf.function
    def decode(start: tf.Tensor) -> tf.Tensor:
        token, h = start, tf.zeros((4, HIDDEN))
        tokens = tf.TensorArray(tf.int32, size=16)
        for t in tf.range(16):
            out, state = cell(embed(token), [h])
            h = state[0] if isinstance(state, (list, tuple)) else state
            token = tf.argmax(head(out), -1, output_type=tf.int32)
            tokens = tokens.write(t, token)
        return tokens.stack()

    start = tf.ones((4,), tf.int32)
    decode(start)  # traced outside the capture

    def run() -> None:
        for i in range(4):
            with tf.profiler.experimental.Trace("decode", step_num=i, _r=1):
                decode(start).numpy()

    write_xspace("tf_decoder", run)

    target = tf.random.stateless_uniform((4, 17), seed=(0, 1), maxval=VOCAB, dtype=tf.int32)

    @tf.function
    def evaluate() -> tf.Tensor:
        h, correct = tf.zeros((4, HIDDEN)), tf.constant(0)
        for t in tf.range(16):
            out, state = cell(embed(target[:, t]), [h])
            h = state[0] if isinstance(state, (list, tuple)) else state
            chosen = tf.argmax(head(out), -1, output_type=tf.int32)
            correct += tf.reduce_sum(tf.cast(chosen == target[:, t + 1], tf.int32))
        return correct

    evaluate()

    def run_eval() -> None:
        for i in range(4):
            with tf.profiler.experimental.Trace("evaluate", step_num=i, _r=1):
                evaluate().numpy()

    write_xspace("tf_teacher_forced_eval", run_eval)


if __name__ == "__main__":
    main()
