# gpucloud image: the reaper's CronJob and queue workers run it (set it as
# [remote] image in config.toml). Build from the repository root:
#   docker build -t ghcr.io/you/gpucloud:0.1.0 .
# The first stage builds the wheel from this source tree, the second installs
# only that wheel (and its dependencies), so the image holds what a
# `pip install` of the release would.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY providers ./providers
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.12-slim
COPY --from=build /dist /dist
RUN pip install --no-cache-dir /dist/gpucloud-*.whl && rm -rf /dist
# Runs as root: on container clouds the job runner writes its state under
# /var/lib/gpucloud inside this container. No key is baked in: the reaper
# reads them from the environment (a Kubernetes Secret), workers need none.
ENV GPUCLOUD_HOME=/tmp/gpucloud
ENTRYPOINT ["gpucloud"]
CMD ["--help"]
