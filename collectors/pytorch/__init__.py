"""PyTorch LSTM variants (``variants``, ``lm``), their runnable workloads, and the collector (``collect``)."""
