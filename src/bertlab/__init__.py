"""bertlab: a PyTorch Lightning + Hydra experiment framework for BERT-style encoders."""

__version__ = "0.1.0"

__all__ = ["Predictor"]


def __getattr__(name: str):
    # `from bertlab import Predictor` without importing torch and Lightning for every `import bertlab`.
    if name == "Predictor":
        from bertlab.inference.predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
