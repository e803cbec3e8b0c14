"""Writes tests/data/tf/embedding_{adam,sgd}.xplane.pb: real TF profiler captures (CPU) of Keras's
model.fit, 6 batches, of an embedding classifier (Embedding(200_000, 64), mean pooling, Dense(10);
batch 64 of 20 tokens) under Adam, whose dense slot updates touch every row of the table each step,
and under plain SGD, which updates only the rows looked up (tracekit.analyze.dense_slot_updates).
Prints each optimizer's time a batch unprofiled, with this table and with 2,000 rows.

    python tests/data/tf/make_embedding_optimizers.py
Made with TF 2.21 and Keras 3 on a 2-core AMD EPYC.
"""

import time

import keras
import numpy as np
from profiled import write_xspace

BATCH, TOKENS = 64, 20


def model_of(rows: int, optimizer: keras.optimizers.Optimizer) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((TOKENS,), dtype="int32"), keras.layers.Embedding(rows, 64),
                              keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(10)])
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(rows: int, batches: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.integers(0, rows, (BATCH * batches, TOKENS)).astype("int32"),
            rng.integers(0, 10, (BATCH * batches,)))


def main() -> None:
    for name, make in (("embedding_adam", lambda: keras.optimizers.Adam(1e-3)),
                       ("embedding_sgd", lambda: keras.optimizers.SGD(1e-2))):
        for rows in (200_000, 2_000):
            model, (x, y) = model_of(rows, make()), data(rows, 30)
            model.fit(x, y, batch_size=BATCH, verbose=0)
            start = time.perf_counter()
            model.fit(x, y, batch_size=BATCH, verbose=0)
            print(f"{name} with {rows:,} rows: {(time.perf_counter() - start) / 30 * 1e3:.1f} ms a batch")
        model, (x, y) = model_of(200_000, make()), data(200_000, 6)
        model.fit(x, y, batch_size=BATCH, verbose=0)
        write_xspace(name, lambda model=model, x=x, y=y: model.fit(x, y, batch_size=BATCH, verbose=0))


if __name__ == "__main__":
    main()
