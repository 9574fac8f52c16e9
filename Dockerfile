FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY tracer ./tracer
COPY collector ./collector
COPY demo_app ./demo_app
RUN pip install --no-cache-dir .
ENV OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
ENTRYPOINT ["python", "-m", "demo_app.serve_one"]
