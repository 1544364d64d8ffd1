"""FleetX VGG16 (fleet collective): seed 000's VGG16 baseline, and its auto-parallel table (DALI)."""

from __future__ import annotations

from kit.config.programs.base import STATIC, Cluster, Impl, Program, RanAs, RefJob, SavedProgram, paddle_launch
from kit.results.extract import Method


class FleetX(Program):
    scripts = ("fleetx/vgg16_benchmark.py", "reference/saved_programs.py")  # its driver, and what checks the staged
    impl = Impl(
        "fleetx", "paddle", "vgg16", "FleetX VGG16 (fleet collective)", "fleetx", "FleetX", "python", "fleetx-vgg",
        "PaddlePaddle/FleetX benchmark/paddle/vgg_benchmark.py (strategy), scripts/fleetx/vgg16_benchmark.py",
        # auto: seed 000's auto-parallel table (DistributedStrategy.auto = True alone, DALI reading the data)
        data_format="fleetx", modes=("auto",), needs_dali=("auto",),
        # the kit's driver is Paddle 2 API, but the fleetx package it imports loads paddle.fluid (its framework,
        # core; fleetx/applications/*.py at the pin), which Paddle 2.6 removed
        needs_fluid=True,
        # VGG16() loads it from <purelib>/fleetx/applications/, else downloads it (applications/model.py; the files
        # util.load_program always opens); the driver points it at <root>/saved-programs beside the fleetx checkout
        saved_programs=(SavedProgram("vgg16_nchw", "fleetx/applications", (
            "startup_program", "main_program", "para_info", "input_names", "loss_name", "unique_name_guard",
            "stop_gradient")),))

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        train = [f"{scripts_dir}/fleetx/vgg16_benchmark.py", "--batch-size", str(job.batch_size)]
        train += {"amp": ["--amp"], "auto": ["--auto"]}.get(job.precision, [])
        train += ["--data-dir", data_dir] if data_dir else []
        env = {"PYTHONPATH": "."}  # cwd is FleetX/python: the fleetx package of the pinned checkout
        if job.gpus == 1:
            return ["python", *train], env
        launch = paddle_launch(job.gpus_per_node)
        if job.nodes > 1:
            launch += ["--master", f"{cluster.hosts[0]}:{cluster.port}", "--nnodes", str(job.nodes), "--rank",
                       str(cluster.rank)]
            # the launcher takes this node's address from POD_IP (else gethostbyname(hostname): 127.0.x.1 or nothing
            # on many hosts, and then rank 0 never serves --master); as PaddleClas's platform set it, argv unchanged
            env["POD_IP"] = cluster.here
        return [*launch, *train], env

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # 'speed' is steps/s. Seed 000 (FleetX VGG16 baseline): skip the first 20 steps, the mean throughput of the
        # next 100 (the median of 7 runs: the suite's repeats); the kit's: the same steps, samples / time
        scale = job.batch_size * job.gpus
        return Method(skip=20, count=100, scale=scale), Method(skip=20, reduce="harmonic_mean", scale=scale)

    def ran_as(self, job: RefJob) -> RanAs:
        return RanAs(None, STATIC, "FleetX trains a static graph (scripts/fleetx/vgg16_benchmark.py: "
                                   "paddle.enable_static), which no harness mode is; its VGG16 application at the "
                                   "pinned checkout sets the layout, which the kit does not read")


PROGRAM = FleetX()
