"""The sa field of benches/harmonics.rs (d = 3, A = V = I, beta = 4) written in numpy, the
baseline of benches/README.md: CPU seconds per evaluation for n tokens (argument)."""
import sys
import time

import numpy as np
n = int(sys.argv[1]); beta = 4.0
rng = np.random.default_rng(1)
x = rng.standard_normal((n, 3)); x /= np.linalg.norm(x, axis=1, keepdims=True)
def field(x):
    out = np.empty_like(x)
    for s in range(0, n, 2000):
        sc = beta * x[s:s+2000] @ x.T
        sc -= sc.max(axis=1, keepdims=True)
        w = np.exp(sc); w /= w.sum(axis=1, keepdims=True)
        f = w @ x
        out[s:s+2000] = f - np.sum(f * x[s:s+2000], axis=1, keepdims=True) * x[s:s+2000]
    return out
field(x)
t0 = time.process_time(); k = 0
while k < 2 or time.process_time() - t0 < 2: field(x); k += 1
print(n, (time.process_time() - t0) / k, "CPU s per evaluation (numpy, sa direct, A = V = I)")
