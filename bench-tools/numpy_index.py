#!/usr/bin/python3
"""NumPy reference for `verdryx bench index`: exact cosine top-2 over n unit
float32 rows of dim components (uniform [-0.5, 0.5) before normalisation, as
in the Go harness), one query at a time: scores = M @ q (OpenBLAS sgemv when
Debian's libopenblas0-pthread provides libblas.so.3), then argpartition for
the top k and a sort of those k. Prints one JSON line with the median single
query time over --reps queries.

Run with Debian's interpreter: /usr/bin/python3 bench-tools/numpy_index.py
"""
import argparse
import json
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=1536)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    rng = np.random.default_rng(42)
    m = rng.random((a.n, a.dim), dtype=np.float32) - np.float32(0.5)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    qs = rng.random((a.reps + 1, a.dim), dtype=np.float32) - np.float32(0.5)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)

    def search(q):
        s = m @ q
        top = np.argpartition(-s, a.k - 1)[: a.k]
        return top[np.argsort(-s[top], kind="stable")]

    search(qs[-1])  # warm up
    ds = []
    for i in range(a.reps):
        t = time.perf_counter()
        search(qs[i])
        ds.append(time.perf_counter() - t)
    ds.sort()
    blas = "unknown"
    try:
        from threadpoolctl import threadpool_info  # optional
        blas = ",".join(f"{p['internal_api']}/{p['num_threads']}" for p in threadpool_info())
    except Exception:
        pass
    print(json.dumps({"n": a.n, "dim": a.dim, "reps": a.reps, "numpy": np.__version__,
                      "blas": blas, "single_ms": ds[len(ds) // 2] * 1e3,
                      "min_ms": ds[0] * 1e3}))


if __name__ == "__main__":
    main()
