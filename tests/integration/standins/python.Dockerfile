# A stand-in for the official python:3.11-slim image (Debian 12's python3 is
# 3.11), for the compose test on machines that cannot pull from a registry.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
CMD ["python3"]
