# pygc: python_gc's ground truth. Builds a heap of container objects
# (automatic collections off), closes fd 3 when ready, and at a byte on
# stdin runs gc.collect() N times, each over the heap plus a known cycle
# garbage, timing it with time.perf_counter_ns. Prints per collection
#   gc <tid> <ns> <collected>
# (collected: gc.collect()'s return, what gc__done reports), then waits
# for stdin's EOF (the interpreter's own collection at exit comes after
# the probe stopped).
import gc
import os
import sys
import threading
import time

N = 5
gc.disable()
heap = [[i] for i in range(300000)]
os.close(3)
sys.stdin.buffer.read(1)
tid = threading.get_native_id()
out = []
for _ in range(N):
    garbage = [[] for _ in range(1000)]
    for g in garbage:
        g.append(g)
    del garbage, g
    t0 = time.perf_counter_ns()
    n = gc.collect()
    out.append((time.perf_counter_ns() - t0, n))
for d, n in out:
    print("gc", tid, d, n)
sys.stdout.flush()
sys.stdin.buffer.read()
