# sm-locust image for distributed runs: docker-compose.yml (one host) and deploy/kubernetes/ (a
# cluster). It holds the Locust master and workers, the local endpoint and a moto stand-in for
# CloudWatch/S3. There is no ENTRYPOINT: the compose file and the manifests name the installed
# program (`sm-locust ...` or `locust ...`) as their command.
#
# No credentials are copied in (.dockerignore keeps .aws/, .env and reports/ out); they come from
# the environment, a read-only ~/.aws mount (compose) or the pod's IAM role (Kubernetes).
#
# Base image pinned by version tag and digest (the multi-architecture index, so amd64 and arm64
# nodes both resolve it). To move on: `docker buildx imagetools inspect python:3.11.X-slim-bookworm`
# and replace both.
FROM python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# uid/gid 1000: the manifests' runAsUser/runAsGroup (runAsNonRoot needs a numeric user to check)
RUN groupadd --gid 1000 locust && useradd --create-home --uid 1000 --gid 1000 locust
WORKDIR /app

# Dependencies first (cached while only the code changes).
COPY pyproject.toml README.md ./
COPY sm_locust ./sm_locust
RUN pip install ".[prometheus]" "moto[server]>=5.0.20"

COPY locustfiles ./locustfiles
COPY examples ./examples
# Run folders: /reports (compose bind mount), /app/reports (`sm-locust run` in WORKDIR; an emptyDir
# on Kubernetes, where the root filesystem is read-only)
RUN mkdir -p /reports /app/reports && chown locust:locust /reports /app/reports

USER locust
# 8089 web UI, 5557 master <- workers, 9646 master's /metrics (--publish prometheus), 8080 local endpoint,
# 5000 CloudWatch stand-in
EXPOSE 8089 5557 9646 8080 5000
CMD ["sm-locust", "--help"]
