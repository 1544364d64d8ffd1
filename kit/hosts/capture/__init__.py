"""Machine description from what the probes printed on each host.

PURE: parsers of recorded probe output (`nvidia-smi topo -m` in topo, `nvidia-smi -q -x` and `-q` in smi,
/proc/cpuinfo, /proc/meminfo, /etc/os-release in system) and the HostCapture they make up (model). Each parser
first drops terminal escapes and CRs (kit.core.text.clean_output): drivers print for terminals even into files.
Running the probes is kit.hosts.probe's job; comparing hosts is kit.hosts.consistency's. Nothing
here touches a host, a process or the clock.

A probe output that cannot be read raises EnvCaptureError naming the source (and the line
when there is one). A field a driver does not print ("N/A", missing) is None, never a guess.
"""

from kit.hosts.capture.errors import EnvCaptureError
from kit.hosts.capture.model import HostCapture, capture_from_dir, capture_from_probes
from kit.hosts.capture.smi import GpuInfo, GpuProcess, SmiReport, parse_query_text, parse_query_xml
from kit.hosts.capture.system import (
    CPU_QUOTA_PROBE,
    CpuInfo,
    parse_cpu_quota,
    parse_cpuinfo,
    parse_cpus_allowed,
    parse_meminfo,
    parse_os_release,
)
from kit.hosts.capture.topo import Topology, parse_topo

__all__ = ["CPU_QUOTA_PROBE", "CpuInfo", "EnvCaptureError", "GpuInfo", "GpuProcess", "HostCapture", "SmiReport",
           "Topology", "capture_from_dir", "capture_from_probes", "parse_cpu_quota", "parse_cpuinfo",
           "parse_cpus_allowed", "parse_meminfo", "parse_os_release", "parse_query_text", "parse_query_xml",
           "parse_topo"]
