#!/usr/bin/env bash
# Install the Debian packages the kit's tests and host tooling need (Debian bookworm).
#   scripts/install_system_deps.sh          install what is missing (root only; idempotent)
#   scripts/install_system_deps.sh --list   print the package names and exit (any user)
# Why each package: openssh-server (test SSH hosts in network namespaces), docker.io
# (dockerd for image builds/runs), iproute2 (ip netns / veth), debootstrap (base image
# without a registry), docker-registry (local registry on 127.0.0.1:5000), rsync (staging),
# openmpi-bin (mpirun: the launcher NGC's TensorFlow and MXNet programs are started with, real in the tests),
# slurmctld slurmd slurmdbd slurm-client munge mariadb-server mariadb-client (a real Slurm with accounting for
# kit cluster --scheduler slurm's tests, tests/slurmhosts.py), podman catatonit (the second container runtime,
# kit.config.runtimes.podman, real in tests/test_podman.py; catatonit is its --init), chromium chromium-driver
# (headless Chromium and its WebDriver: tests/test_report_html.py opens report.html through Selenium).
set -euo pipefail

PACKAGES=(python3-venv openssh-server docker.io iproute2 debootstrap docker-registry rsync openmpi-bin slurmctld slurmd slurmdbd slurm-client munge mariadb-server mariadb-client podman catatonit chromium chromium-driver)

case "${1:-}" in
  --list) echo "${PACKAGES[*]}"; exit 0 ;;
  -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "install_system_deps.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
  echo "install_system_deps.sh: must run as root; run: sudo $0" >&2
  echo "  (it installs: ${PACKAGES[*]})" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install_system_deps.sh: apt-get/dpkg-query not found; this script supports Debian/Ubuntu only." >&2
  echo "  install by hand: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present (${PACKAGES[*]})"
  exit 0
fi

echo "system packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
echo "system packages: done"
