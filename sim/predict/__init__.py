"""Performance prediction (issue 17): replay what the simulator recorded on a device profile.

launch(..., predict="atlas-a2") -> LaunchResult.prediction; `triton-dist predict` (cli.py).
record.py records each program's ops in every rank; model.py replays them on a profile
(profile.py, profiles/*.json); report.py turns the replay into tables and a trace.
"""
from __future__ import annotations

import glob
import os
import pickle
import shutil
import tempfile

from .profile import Profile, known, load

__all__ = ["Profile", "known", "load", "start", "finish", "predict_records", "read_records"]


def start(device):
    """In the launcher, before the ranks fork: check the device and make what the ranks
    record into ((directory, shared slot table) for SimBackend.init)."""
    load(device)                  # an unknown device fails before anything runs
    from .record import PerfSlots
    return tempfile.mkdtemp(prefix="triton_dist-predict-"), PerfSlots()


def read_records(directory: str) -> dict:
    recs = {}
    for path in glob.glob(os.path.join(directory, "rank*.perf.pkl")):
        with open(path, "rb") as f:
            doc = pickle.load(f)
        recs[doc["rank"]] = doc["launches"]
    return recs


def finish(result, state, device, ok: bool) -> None:
    """In the launcher, after the ranks finished: the prediction onto result (if they all did)."""
    directory = state[0]
    try:
        if ok:
            result.prediction = predict_records(read_records(directory), device)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def predict_records(records: dict, device, scale=None):
    """Replay every launch of `records` ({rank: launches}) on `device`; a report.Prediction."""
    from .model import LaunchTimeline
    from .report import Prediction, summarize
    prof = load(device)
    n = max((len(v) for v in records.values()), default=0)
    tls = [LaunchTimeline(records, i, prof, scale).run() for i in range(n)]
    return Prediction(prof.name, [summarize(t) for t in tls], prof.launch_host * 1e6, tls)
