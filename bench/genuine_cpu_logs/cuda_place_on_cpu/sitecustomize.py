"""On a CPU build of Paddle 1.x, answer `fluid.CUDAPlace(i)` with `fluid.CPUPlace()`: NOT part of any program.

Put on PYTHONPATH by bench/genuine_cpu_logs/run_plsc.py only (Python imports `sitecustomize` at start-up). PLSC at
its pin puts its executor and loader on `fluid.CUDAPlace(FLAGS_selected_gpus)` (plsc/entry.py:948-949, Entry.train),
and a CPU build of Paddle ends the process there (pybind.cc: "Cannot use GPU because you have installed CPU version
PaddlePaddle", then exit). The program's files stay as pinned: only the place Paddle hands back differs.

Only the name programs call, `paddle.fluid.CUDAPlace`, is replaced, once the program itself has imported
paddle.fluid (`paddle.fluid.core.CUDAPlace`, the type Paddle's own isinstance checks use, is left alone); importing
Paddle here at start-up instead would hang (Paddle 1.8's import starts Python subprocesses, which would import this
module again). It says so on stderr, so the log itself tells.
"""

import importlib.abc
import importlib.util
import sys

TARGET = "paddle.fluid"


def _answer_on_cpu(fluid) -> None:
    if fluid.is_compiled_with_cuda():
        return

    def cuda_place_on_cpu(dev_id=0, _cpu=fluid.CPUPlace):
        return _cpu()

    fluid.CUDAPlace = cuda_place_on_cpu
    version = getattr(sys.modules.get("paddle"), "__version__", "?")
    sys.stderr.write(f"sitecustomize (bench/genuine_cpu_logs/cuda_place_on_cpu): Paddle {version} is a CPU build: "
                     "paddle.fluid.CUDAPlace(i) answers paddle.fluid.CPUPlace()\n")
    sys.stderr.flush()


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _answer_on_cpu(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)  # once: find the real spec, then wrap its loader
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
