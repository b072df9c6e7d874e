"""The largest-batch search shared by the GPU benchmark's two sides (vdnn's plans, PyTorch's trials)."""


def largest_batch(start, granularity, ok, go_on, cap=None):
    """Doubles the batch from `start` while ok(batch), then bisects down to `granularity`; stops early
    when go_on() turns false. Returns (good, bad): the largest batch that passed (0 if none did) and the
    smallest that failed (None if none did)."""
    g = max(1, granularity)
    good, bad, b = 0, None, start
    while (cap is None or b <= cap) and go_on():
        if ok(b):
            good, b = b, b * 2
        else:
            bad = b
            break
    while bad is not None and bad - good > g and go_on():
        mid = (good + bad) // 2
        mid -= mid % g
        if mid <= good:
            mid = good + g
        if mid >= bad:
            break
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good, bad
