"""bertlab: a PyTorch Lightning + Hydra experiment framework for BERT-style encoders."""

__version__ = "0.1.0"
