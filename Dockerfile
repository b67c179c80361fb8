# sm-locust image for distributed runs (docker-compose.yml): Locust master/worker, the local
# endpoint and a moto CloudWatch stand-in. No credentials are copied in (.dockerignore keeps
# .aws/, .env and reports/ out); they come from the environment or a read-only ~/.aws mount.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 1000 locust
WORKDIR /app

# Dependencies first (cached while only the code changes).
COPY pyproject.toml README.md ./
COPY sm_locust ./sm_locust
RUN pip install . "moto[server]>=5.0.20"

COPY locustfiles ./locustfiles
COPY examples ./examples
RUN mkdir -p /reports && chown locust:locust /reports

USER locust
# 8089 web UI, 5557 master <- workers, 8080 local endpoint, 5000 CloudWatch stand-in
EXPOSE 8089 5557 8080 5000
CMD ["sm-locust", "--help"]
