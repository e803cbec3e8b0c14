"""TensorFlow LSTM variants (``variants``, ``lm``), their workloads, and the collector (``collect``).

Named ``tflow`` so that it never shadows the ``tensorflow`` package.
"""
