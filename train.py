"""bertlab's command line: ``python train.py task=sst2 model=minilm_l6 freeze=none`` (Hydra overrides)."""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

CONF = Path(__file__).resolve().parent / "conf"


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from bertlab.runtime.exits import user_errors
    from bertlab.runtime.run_dir import hold_log_files
    from bertlab.sweeps.run_state import finished_result
    from bertlab.train import run  # imported here so `--help` and tab completion stay fast
    from bertlab.training.stopping import answer_late_signals

    with user_errors():  # bad data / config / checkpoint: one paragraph and exit status 1, no traceback
        hold_log_files(cfg)  # nothing goes into train.log before the run is accepted in its run dir
        answer_late_signals()  # a stop signal after the run's end is answered, never a silent exit 143
        done = finished_result(cfg)  # a re-run multirun: this job's folder already holds its result
        return run(cfg) if done is False else done


if __name__ == "__main__":
    from bertlab.runtime.overrides import check_command_line

    check_command_line(sys.argv[1:], CONF)  # an unknown key: one paragraph with the nearest valid key
    main()
