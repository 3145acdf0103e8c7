"""Where does lsd's cuda_graph knob go wrong? Eager against replayed eps on the same inputs."""
import sys, torch
sys.path.insert(0, ".")
from workloads.lsd import LsdWorkload, _graphed
from autotune.space import load_space
from autotune.devices import resolve_device

space = load_space("lsd").for_device(resolve_device("auto").profile)
w = LsdWorkload("tiny", device="cuda")
base = space.validate({**dict(space.baseline), "batch_size": 2})
graph = space.validate({**dict(space.baseline), "batch_size": 2, "cuda_graph": True})
ref = w.to_reference(w.build(space.reference)())
for name, cfg in (("eager b2", base), ("graph b2", graph)):
    run = w.build(cfg)
    outs = [w.to_reference(run()) for _ in range(3)]
    print(name, [float((o - ref).abs().max()) for o in outs], [w.check(o, ref, cfg).error for o in outs], flush=True)
model = w.model().eval().cuda()
eps = lambda x, t: model(x, t)
g = _graphed(eps, (2, 4, 16, 16), torch.device("cuda"), torch.no_grad)
torch.manual_seed(0)
for i in range(3):
    x = torch.randn(2, 4, 16, 16, device="cuda"); t = torch.full((2,), 400.0 - 100 * i, device="cuda")
    with torch.no_grad():
        e = eps(x, t); r = g(x, t)
    print("step", i, float((e - r).abs().max()), float(e.abs().max()), flush=True)
