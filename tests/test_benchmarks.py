"""The benchmark scripts keep working: a one-step encoder benchmark on a tiny random BERT, and the report.

Benchmarks are scripts (``make bench``), not timed tests: nothing here asserts a speed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

pytestmark = pytest.mark.bench


def test_scripts_import():
    import ablations  # noqa: F401
    import end_to_end
    import hf_reference  # noqa: F401
    import preprocess_speed  # noqa: F401
    import run_all  # noqa: F401
    import unpadded  # noqa: F401

    full = end_to_end.cases(quick=False)
    sst2 = next(c for c in full if c.task == "sst2")
    assert (sst2.max_train, sst2.steps, end_to_end.BATCH) == (3200, 100, 32)
    assert sst2.hf_pads == ("max", "dynamic")


def test_encoder_speed_tiny_one_step(tmp_path):
    import encoder_speed

    result = encoder_speed.main(["--tiny", "--steps", "1", "--warmup", "0", "--threads", "1",
                                 "--dtypes", "fp32", "--json", str(tmp_path / "enc.json")])
    assert (tmp_path / "enc.json").is_file()
    assert {(r["mode"], r["dtype"]) for r in result["rows"]} == {("infer", "fp32"), ("train", "fp32")}
    for row in result["rows"]:
        assert row["bertlab_tokens_per_s"] > 0 and row["hf_tokens_per_s"] > 0 and row["ratio"] > 0
        assert 0 < row["bertlab_mfu"] < 1
    assert result["machine"]["matmul_peak_gflops"]["float32"] > 0


def test_model_flops_count():
    import encoder_speed

    shape = encoder_speed.ModelShape(layers=6, hidden=384, non_embedding_params=10_646_784)
    # forward: 2 flops per weight per token + QK^T and AV (2·T·H each per layer)
    assert shape.flops_per_token(128, train=False) == 2 * 10_646_784 + 4 * 6 * 128 * 384
    assert shape.flops_per_token(128, train=True) == 3 * shape.flops_per_token(128, train=False)


def test_child_peak_rss_is_the_childs_own():
    import common

    # The child holds its memory a moment, as a benchmark's children do for seconds: its peak is sampled from
    # /proc while it runs whenever this (test) process is the larger one.
    code = ("import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.5); "
            "print('{\"ok\": 1}')")
    run = common.run_child([sys.executable, "-c", code]).check("child")
    assert common.last_json_line(run.stdout) == {"ok": 1}
    assert run.peak_rss_mib > 200


def test_report_renders_ratios_first():
    import run_all

    machine = {"cpu": "cpu", "isa": ["avx2"], "logical_cpus": 2, "usable_cpus": 2, "memory_gib": 8.0,
               "matmul_peak_gflops": {"float32": 100.0, "bfloat16": 200.0}, "python": "3", "torch": "2",
               "transformers": "5", "lightning": "2", "tokenizers": "0"}
    enc_row = {"mode": "train", "dtype": "fp32", "batch": 16, "seq": 128, "bertlab_tokens_per_s": 2000.0,
               "hf_tokens_per_s": 1500.0, "ratio": 1.333, "bertlab_mfu": 0.2, "hf_mfu": 0.15}
    side = {"samples_per_s": 100.0, "train_wall_s": 32.0, "process_wall_s": 50.0, "peak_rss_mib": 1000.0}
    results = {
        "machine": machine,
        "encoder": {"rows": [enc_row], "non_embedding_params": 1, "warmup": 1, "repeats": 1,
                    "optimizers": {"bertlab": "fused", "hf": "fused"}, "machine": machine},
        "end_to_end": {"cases": [{"task": "sst2", "steps": 100, "batch_size": 32, "bertlab": side,
                                  "hf": {"max": {**side, "samples_per_s": 20.0}},
                                  "ratios": {"vs_trainer_max_padding": 5.0}}]},
        "preprocess": {"error": "boom"},
    }
    text = run_all.render(results, quick=False, threads=2, load_before=(0.5, 0, 0), load_after=(0.7, 0, 0),
                          started="now")
    assert text.index("## Ratios") < text.index("## Encoder") < text.index("## Machine")
    assert "| encoder train fp32 16x128 | 1.33× | ≥ 1.2× | yes |" in text
    assert "| SST-2 end-to-end vs Trainer (pad to max) | 5.00× | ≥ 4× | yes |" in text
    assert "## Failed" in text and "preprocess" in text


def test_unpadded_section_tiny(tmp_path):
    """benchmarks/unpadded.py on a random tiny BERT (no datasets): the encoder rows and the report section."""
    import run_all
    import unpadded

    result = unpadded.main(["--tiny", "--only", "encoder,fixed,profile", "--threads", "1",
                            "--json", str(tmp_path / "u.json")])
    assert (tmp_path / "u.json").is_file()
    enc = result["encoder"]
    assert enc["real_tokens"] < enc["padded_tokens"]  # random-order batches hold padding
    assert set(enc["real_tokens_per_s"]) == {"unpadded", "padded", "hf", "hf_fused"}
    assert all(v > 0 for v in enc["ratios"].values())
    assert [(r["batch"], r["seq"]) for r in result["fixed"]] == list(unpadded.TINY_FIXED)
    rows = {name: (ratio, target) for name, ratio, target in run_all.ratio_rows({"unpadded": result})}
    assert rows["unpadded: encoder train, SST-2 random batches, vs HF sdpa"] == (enc["ratios"]["unpadded_vs_hf"], 2.5)
    machine = {"cpu": "cpu", "isa": [], "logical_cpus": 2, "usable_cpus": 2, "memory_gib": 8.0, "python": "3",
               "torch": "2", "transformers": "5", "lightning": "2", "tokenizers": "0"}
    text = run_all.render({"machine": machine, "unpadded": result}, quick=True, threads=1,
                          load_before=(0.0, 0, 0), load_after=(0.0, 0, 0), started="now")
    assert "## Unpadded path" in text and "unpad=true" in text and "Where the time goes" in text
    assert "[CLS] head, auto" in text
    cls_row = f"unpadded: [CLS]-head train {unpadded.TINY_FIXED[0][0]}x{unpadded.TINY_FIXED[0][1]} (no padding), " \
              "unpad=auto / padded"
    assert rows[cls_row][0] == result["fixed"][0]["ratios"]["cls_auto_vs_padded"] > 0
    profile = result["profile"]["ms_per_step"]
    assert set(profile) == {"padded", "unpadded"} and set(profile["padded"]) == {*unpadded.COMPONENTS, "other"}
    assert sum(profile["unpadded"].values()) > 0
    (tmp_path / "results.json").write_text(json.dumps({"unpadded": result}))  # run_all's layout
    unpadded.main(["--plot-from", str(tmp_path / "results.json"), "--plot", str(tmp_path / "time.png")])
    assert (tmp_path / "time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_end_to_end_rounds_report_each_sides_median_run():
    import unpadded

    figures = {"a": iter([10.0, 30.0, 20.0]), "b": iter([5.0, 4.0, 6.0])}
    order = []

    def side(name):
        def run():
            order.append(name)
            return {"samples_per_s": next(figures[name]), "run": len(order)}
        return run

    sides = unpadded.median_rounds({"a": side("a"), "b": side("b")}, rounds=3, label="test")
    assert order == ["a", "b"] * 3  # sides in turn, round by round
    assert sides["a"]["samples_per_s"] == 20.0 and sides["a"]["run"] == 5  # the median run itself
    assert sides["b"]["samples_per_s"] == 5.0 and sides["b"]["samples_per_s_rounds"] == [5.0, 4.0, 6.0]


def test_unpadded_sections_and_cases():
    import unpadded

    assert unpadded.SECTIONS == ("encoder", "sst2", "conll", "fixed", "profile", "compile")
    assert unpadded.DEFAULT_SECTIONS == ("encoder", "sst2", "conll", "fixed", "profile")  # compile: opt-in
    assert (unpadded.BATCH, unpadded.SST2_EXAMPLES) == (32, 3200)
    assert (unpadded.CONLL_BATCH, unpadded.CONLL_SENTENCES) == (16, 2000)
    assert unpadded.FULL_FIXED == ((16, 128), (8, 384))
    lengths = [3, 9, 4, 7, 5, 2]
    batches = unpadded.random_order_batches(lengths, 3, 2, vocab=50)
    assert sorted(int(m.sum(1)[i]) for _, m in batches for i in range(3)) == sorted(lengths)
    for ids, mask in batches:
        assert ids.shape[1] == int(mask.sum(1).max())  # padded to the batch's longest
        assert not ids[mask == 0].any()
    with pytest.raises(SystemExit, match="--tiny measures the encoder only"):
        unpadded.main(["--tiny", "--only", "sst2"])


def test_unpadded_end_to_end_ratios_reach_the_report():
    import run_all

    side = {"samples_per_s": 10.0, "train_wall_s": 1.0, "process_wall_s": 2.0, "peak_rss_mib": 3.0}
    unp = {"benchmark": "unpadded",
           "sst2": {"steps": 100, "batch_size": 32, "sides": {"auto_random": side, "hf_dynamic": side},
                    "ratios": {"auto_random_vs_padded_random": 2.1, "auto_random_vs_trainer_dynamic": 2.4,
                               "auto_random_vs_padded_grouped": 0.96, "auto_grouped_vs_padded_grouped": 1.0}},
           "conll": {"steps": 125, "batch_size": 16, "sides": {"auto_random": side},
                     "ratios": {"auto_random_vs_padded_random": 1.7}}}
    rows = {name: (ratio, target) for name, ratio, target in run_all.ratio_rows({"unpadded": unp})}
    assert rows == {
        "unpadded: SST-2 end-to-end random order, auto / padded": (2.1, 2.0),
        "unpadded: SST-2 end-to-end random order, auto / Trainer (dynamic padding)": (2.4, 2.5),
        "unpadded: SST-2 end-to-end, auto random order / padded length-grouped": (0.96, 0.95),
        "unpadded: SST-2 end-to-end length-grouped, auto / padded": (1.0, None),
        "unpadded: CoNLL-2003 end-to-end random order, auto / padded": (1.7, 1.6),
    }
    text = "\n".join(run_all.render_unpadded(unp))
    assert "| SST-2 | auto_random | 100 × 32 |" in text and "| CoNLL-2003 | auto_random | 125 × 16 |" in text


def test_families_bench_tiny():
    """benchmarks/families.py at tiny shapes: one row per family of the registry (each at its spec's tiny shape)
    and its ratio row in the report."""
    import families
    import run_all

    from bertlab.models.families import families as registry

    result = families.main(["--tiny", "--threads", "1", "--repeats", "1"])
    assert set(result["families"]) == set(registry())
    rows = {name: ratio for name, ratio, _ in run_all.ratio_rows({"families": result})}
    assert rows["families: roberta-base encoder train, SST-2 random batches, vs transformers"] == \
        result["families"]["roberta"]["ratio_vs_hf"]


def test_predict_speed_ratios_reach_the_report():
    """The recorded prediction bench: each backend's ratio against the pipeline, with the issue's target."""
    import run_all

    recorded = json.loads((Path(__file__).resolve().parents[1] / "benchmarks/results/predict_speed.json").read_text())
    rows = {name: (ratio, target) for name, ratio, target in run_all.ratio_rows({"predict": recorded})}
    int8 = recorded["sst2"]["sides"]["bertlab_onnx_int8"]["speed_vs_pipeline"]
    assert rows["predict: SST-2 dev, bertlab onnx int8 vs pipeline"] == (int8, 3.0)
    assert rows["predict: CoNLL-2003 testa, bertlab torch vs pipeline"][1] == 2.0
    assert len([n for n in rows if n.startswith("predict: ")]) == 6


def test_a_distilled_students_speed_against_its_teacher_reaches_the_report():
    """predict_speed.py --student-run: the student's sides carry speed_vs_teacher; make bench's row has the
    issue's target (1.8×); a report without a student has no such row."""
    import predict_speed
    import run_all

    sides = {"bertlab_torch": [], "bertlab_onnx_int8": [], "student_torch": [], "student_onnx_int8": []}
    walls = {"bertlab_torch": 9.0, "bertlab_onnx_int8": 4.0, "student_torch": 4.5, "student_onnx_int8": 2.5}

    def fake_child(cmd, env=None):
        side = next(name for name in sides if f"{name}.jsonl" in " ".join(cmd))
        return type("Child", (), {"returncode": 0, "wall_s": walls[side], "peak_rss_mib": 100.0})()

    commands = {name: ["x", f"/tmp/{name}.jsonl"] for name in sides}
    import common

    original = common.run_child  # the processes are run by common.time_processes
    common.run_child = fake_child
    try:
        out = predict_speed.measure("sst2", commands, threads=1, rounds=1)
    finally:
        common.run_child = original
    assert out["student_torch"]["speed_vs_teacher"] == 2.0 and out["student_onnx_int8"]["speed_vs_teacher"] == 1.6
    assert "speed_vs_pipeline" not in out["student_torch"]  # no pipeline side measured
    rows = {name: (ratio, target) for name, ratio, target in run_all.ratio_rows({"predict": {"sst2": {"sides": out}}})}
    assert rows["predict: SST-2 dev, distilled 3-layer student vs its teacher, torch"] == (2.0, 1.8)
    assert rows["predict: SST-2 dev, distilled 3-layer student vs its teacher, onnx int8"] == (1.6, None)


def test_predict_speed_repeats_the_inputs_and_scores_the_first_copy(tmp_path):
    """--input-repeat K: one input file with the dev inputs K times over (prediction, not start-up, makes the
    time); accuracy and entity F1 read the first copy's records only, whatever the later copies say."""
    import predict_speed

    texts = ["good", "bad", "fine"]
    inputs = predict_speed.write_inputs(tmp_path / "in.txt", texts, 4)
    assert inputs.read_text().splitlines() == texts * 4
    gold = ["1", "0", "1"]
    out = tmp_path / "side.jsonl"
    records = [{"label": g} for g in gold] + [{"label": "0"}] * 9  # later copies all wrong: not scored
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert predict_speed.sequence_accuracy(out, gold, False, {}) == 1.0
    tags = [["B-PER", "O"], ["O"]]
    out.write_text("".join(json.dumps({"tags": t}) + "\n" for t in tags + [["O", "O"], ["B-LOC"]] * 2))
    assert predict_speed.entity_f1(out, tags) == 1.0
    with pytest.raises(SystemExit):
        predict_speed.main(["--sst2-run", str(tmp_path), "--input-repeat", "0"])
