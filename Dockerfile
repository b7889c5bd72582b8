# parkway's image: the package with its HTTP extra, installed once at build time.
# Your workflows go in an image built on this one, e.g.
#     FROM parkway:local
#     COPY myapp /app/myapp
# and PARKWAY_WORKFLOWS=myapp.flows tells `parkway serve` which modules it may import
# (workers import from /app, their working directory).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY parkway ./parkway
RUN pip install --no-cache-dir '.[http]' && useradd --system --home /app parkway
USER parkway
CMD ["parkway", "worker"]
