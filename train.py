"""bertlab's command line: ``python train.py task=sst2 model=minilm_l6 freeze=none`` (Hydra overrides)."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from bertlab.reliability import user_errors
    from bertlab.train import run  # imported here so `--help` and tab completion stay fast

    with user_errors():  # bad data / config / checkpoint: one paragraph and exit status 1, no traceback
        return run(cfg)


if __name__ == "__main__":
    main()
