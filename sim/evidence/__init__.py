"""What the device model saw: the events that explain NPU-only failures, recorded as they
happen and put into the failure that follows (issue 24 item 1).

- board.py: EvidenceBoard, the tables in memory the launcher shares with the ranks;
- watch.py: the device watch, an observer of the rank (fence, cache line, stale cache line);
- explain.py: at a failure, the `never` check and the ranking, appended to the error.
"""
