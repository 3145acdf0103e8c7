"""Inside lsd's own run: does each replay match eager eps on the same input? And with a sync before the copy?"""
import sys, torch
sys.path.insert(0, ".")
import workloads.lsd as L
from autotune.space import load_space
from autotune.devices import resolve_device

orig = L._graphed
mode = sys.argv[1]


def wrapped(eps, shape, device, grad_mode):
    g = orig(eps, shape, device, grad_mode)

    def call(x, t):
        if mode == "sync":
            torch.cuda.synchronize()
        r = g(x, t)
        e = eps(x, t)
        print(mode, "replay-eager", float((r - e).abs().max()), "x", tuple(x.shape), x.stride(), x.dtype, float(t[0]), flush=True)
        return r
    return call


L._graphed = wrapped
space = load_space("lsd").for_device(resolve_device("auto").profile)
w = L.LsdWorkload("tiny", device="cuda")
ref = w.to_reference(w.build(space.reference)())
cfg = space.validate({**dict(space.baseline), "batch_size": 2, "cuda_graph": True})
run = w.build(cfg)
for _ in range(2):
    print(mode, "check", w.check(w.to_reference(run()), ref, cfg).error, flush=True)
