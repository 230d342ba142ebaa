"""What every run and command line stands on: typed configuration, user errors, command-line overrides,
console output, run folders, allowed ``_target_`` classes, network checks, loggers, safe file writes and
Hydra/DDP launch plumbing. Imports nothing else from bertlab."""
