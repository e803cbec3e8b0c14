"""Writes tests/data/tf/predict_per_call.xplane.pb: a real TF profiler capture (CPU) of a loop calling
Keras's model.predict on one sample at a time, 20 calls, for a 64-256-10 Dense model. Each call builds
a tf.data pipeline and its iterators (MakeIterator, eager dataset ops) and traces the pipeline's map
functions; the model's own step is under 2% of the loop. Timed here unprofiled: 46 ms a predict call,
2.7 ms for model(x), 1.25 ms for model.predict_on_batch(x).

    python tests/data/tf/make_predict_per_call.py
Made with TF 2.21 and Keras 3 (the host file is named after the machine, "vm" here).
"""

import keras
import numpy as np
from profiled import write_xspace

rng = np.random.default_rng(0)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
samples = [rng.random((1, 64), dtype=np.float32) for _ in range(20)]
model.predict(samples[0], verbose=0)  # traced outside the capture
write_xspace("predict_per_call", lambda: [model.predict(x, verbose=0) for x in samples])
