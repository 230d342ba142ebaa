"""Training with Lightning: model and tokenizer building, the LightningModule, optimizer groups, freeze
policies and the update-scope audit, callbacks, checkpoints, resume and stop handling, distributed helpers."""
