"""Using a trained checkpoint: ``Predictor`` (records for new text), reading prediction inputs, and export as a
Hugging Face folder. The command lines are ``python -m bertlab.predict`` and ``python -m bertlab.export``."""
