"""GPU telemetry of a run: scripts/telemetry/gpu_sampler.py's raw file read, and summarised over a measured window.

    read(path) -> Telemetry
        Either source's file (NVML JSON lines, or nvidia-smi's CSV behind the sampler's header line) as the same
        records: Telemetry(path, source 'nvml'|'smi'|None, host, interval_s, started, gpus: tuple[Gpu],
        samples: tuple[Sample], why). A host with no GPU telemetry (source null) reads as no samples and its why.
        Bad input raises TelemetryError (an InputError): 'file:line: field: reason'.
    summarize(telemetry, start_s, end_s, images, gpus=None) -> WindowSummary
        The samples of the chosen GPUs (all by default) inside [start_s, end_s] (epoch seconds): SM clock, power,
        energy ('counter' from NVML's energy counter, else 'integrated' from the power), J/image, images/s per W,
        temperature, utilisation, the share of the window under each clock-event reason, samples and coverage.
        Fewer than MIN_SAMPLES samples on a GPU: its figures are None and `why` says so. Fields: start_s, end_s,
        images, gpus, samples, coverage, why, sm_mhz_median, sm_mhz_min, max_sm_mhz, sm_ratio_median, sm_ratio_min,
        power_mean_w, power_peak_w, limit_w, energy_j, energy_source, j_per_image, images_per_s_per_w,
        temp_peak_c, util_gpu_mean, util_jpeg_mean, reasons {name: share}, per_gpu (several GPUs); the property
        seconds.
A harness log's measured window is kit.results.gpu_telemetry.harness_window(log_path) -> (start_s, end_s, images).

nvidia-smi's timestamps carry no zone: they are anchored by the header's epoch `started` (smi.py says how).
The layer sits just above kit.core, below kit.results (tests/test_layering.py), which reports its summaries.

Sample's fields: t (epoch s), gpu, sm_mhz, mem_mhz, power_w, limit_w, energy_mj, temp_c, util_gpu, util_mem,
mem_used_mib, reasons (REASONS bits), power_instant_w, util_jpeg (the JPEG engines' %); None where the source has
no such field (nvidia-smi: energy_mj; NVML: power_instant_w; util_jpeg where the driver, GPU or the sampler that
wrote the file gives none).
"""

from kit.telemetry.reader import read
from kit.telemetry.records import REASONS, Gpu, Sample, Telemetry, TelemetryError, reason_names
from kit.telemetry.window import MIN_SAMPLES, WindowSummary, summarize

__all__ = ["MIN_SAMPLES", "REASONS", "Gpu", "Sample", "Telemetry", "TelemetryError", "WindowSummary", "read",
           "reason_names", "summarize"]
