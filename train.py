"""bertlab's command line: ``python train.py task=sst2 model=minilm_l6 freeze=none`` (Hydra overrides)."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from bertlab.train import run  # imported here so `--help` and tab completion stay fast

    return run(cfg)


if __name__ == "__main__":
    main()
