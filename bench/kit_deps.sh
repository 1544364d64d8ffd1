# Sourced by the GPU checks: the kit's dependencies from .whl/ (installed under $KIT_SITE) when $PY cannot import
# them (README, "On your own GPU box"); exits 2 naming CHECK when neither works. Needs PY and CHECK set.
site=${KIT_SITE:-/tmp/kit-site}
if ! "$PY" -c 'import fabric, docker, mlperf_logging' 2>/dev/null; then
  if compgen -G '.whl/*.whl' >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --target "$site" .whl/*.whl
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "$CHECK: the kit's dependencies are not importable by $PY and there is no .whl/ folder" >&2
    echo "  (make setup, or bring the wheels: README, 'On your own GPU box')" >&2
    exit 2
  fi
fi
# nvImageCodec and its nvJPEG (the gpu loader's second decoder, pure-Python-tagged wheels) where .whl/ carries them
# and $PY lacks them, though it has the kit's other dependencies
if compgen -G '.whl/nvidia_nvimgcodec_*.whl' >/dev/null && ! "$PY" -c 'from nvidia import nvimgcodec' 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --upgrade --target "$site" .whl/nvidia_nvimgcodec_*.whl \
    .whl/nvidia_nvjpeg-*.whl
  case ":${PYTHONPATH:-}:" in *":$site:"*) ;; *) export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" ;; esac
fi
