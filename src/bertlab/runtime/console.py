"""What a run prints on the console: ``quiet``, ``normal`` (the default) or ``verbose``.

- normal: bertlab's own lines (the resolved choices, data, batch arithmetic), a progress bar that fits 80
  columns, then the summary. Lightning's INFO lines (accelerator availability, checkpoint restores, its
  model-summary table) go to ``<run_dir>/train.log`` only; wandb is silent on the console (its files and run
  folder are unchanged).
- quiet (``quiet=true``): warnings, errors and the final summary; no progress bar.
- verbose (``verbose=true``): everything Lightning and wandb print, as they print it.

Every line appears once in every mode: Lightning's own console handlers are removed, so its records reach
the console only through the root logger's handlers (Hydra's console handler and ``train.log``).
Advertisements in Lightning's output are dropped in every mode.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback, RichProgressBar
from lightning.pytorch.callbacks.progress.rich_progress import BatchesProcessedColumn, CustomBarColumn
from rich.progress import ProgressColumn
from rich.text import Text

from bertlab.runtime.logs import MODES, configure_console, console_mode  # noqa: F401  (imported from here too)
from bertlab.runtime.progress import RunEstimate, clock_text

# Short names for the progress bar: it must fit 80 columns beside the bar.
_SHORT = {"accuracy": "acc", "matthews_correlation": "mcc", "perplexity": "ppl", "exact_match": "em",
          "combined_score": "score", "spearmanr": "spearman", "samples_per_s": "ex/s", "tokens_per_s": "tok/s",
          "mlm_accuracy": "mlm_acc", "nsp_accuracy": "nsp_acc", "loss": "loss"}


def short_metric_name(name: str) -> str:
    """``train/loss`` → ``loss``, ``val/accuracy`` → ``val_acc``, ``train/samples_per_s`` → ``ex/s``."""
    stage, _, metric = name.rpartition("/")
    short = _SHORT.get(metric, metric)
    return short if stage in ("", "train") else f"{stage}_{short}"


def format_value(value: Any) -> str:
    """Four significant digits for floats (``0.48``, not ``0.47999998927116394``); others as they are."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class ElapsedRemainingColumn(ProgressColumn):
    """The training bar: ``elapsed<remaining`` for the whole run (validations included; ``1:05<12:30``), from
    the run's :class:`RunEstimate` (``?`` until the first steps are measured); other bars: their elapsed time."""

    def __init__(self, bar: ProgressBar) -> None:
        super().__init__()
        self.bar = bar

    def render(self, task: Any) -> Text:
        estimate = self.bar.estimate
        if (estimate is not None and task.id == self.bar.train_progress_bar_id
                and estimate.elapsed_s() is not None):
            return Text(f"{clock_text(estimate.elapsed_s())}<{clock_text(estimate.remaining_s())}",
                        style="progress.elapsed")
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text(clock_text(elapsed), style="progress.elapsed")


class ProgressBar(RichProgressBar):
    """Lightning's rich progress bar in 80 columns: the epoch (counted from 1, of the epochs the run plans),
    a short bar, batches, elapsed < remaining time of the run, then the training loss, the monitored
    validation metric and the throughput, with short names and 4 significant digits. Every logged metric is
    still in the loggers and ``metrics.json``."""

    def __init__(self, monitor: str, estimate: RunEstimate | None = None) -> None:
        super().__init__()
        self.monitor = monitor
        self.estimate = estimate

    def configure_columns(self, trainer: Any) -> list:
        return [
            "[progress.description]{task.description}",
            CustomBarColumn(bar_width=8, complete_style=self.theme.progress_bar,
                            finished_style=self.theme.progress_bar_finished, pulse_style=self.theme.progress_bar_pulse),
            BatchesProcessedColumn(style=self.theme.batch_progress),
            ElapsedRemainingColumn(self),
        ]

    def _get_train_description(self, current_epoch: int) -> str:
        # Lightning counts from 0 ("Epoch 0/0" for a one-epoch run); people count from 1.
        plan = self.estimate.plan if self.estimate is not None else None
        total = plan.epochs if plan is not None else self.trainer.max_epochs
        description = f"Epoch {current_epoch + 1}" + (f"/{total}" if total is not None and total >= 0 else "")
        if len(self.validation_description) > len(description):  # as Lightning: no flicker between bars
            description = f"{description:{len(self.validation_description)}}"
        return description

    def get_metrics(self, trainer: Any, pl_module: Any) -> dict[str, Any]:
        shown = ("train/loss", self.monitor, "train/samples_per_s", "train/tokens_per_s")
        metrics = trainer.progress_bar_metrics
        return {short_metric_name(k): format_value(metrics[k]) for k in shown if k in metrics}


class AutoLogInterval(Callback):
    """``trainer.log_every_n_steps=null``: log every ``max(1, steps // 20)`` optimizer steps, at most every 50,
    so a short run still has a learning curve (at least 20 points) and a long one is not flooded."""

    def __init__(self, at_most: int = 50, points: int = 20) -> None:
        self.at_most = at_most
        self.points = points

    def interval(self, total_steps: float) -> int:
        if total_steps == float("inf"):
            return self.at_most
        return max(1, min(self.at_most, int(total_steps) // self.points))

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        trainer.log_every_n_steps = self.interval(trainer.estimated_stepping_batches)
