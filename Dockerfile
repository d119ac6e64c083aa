# syntax=docker/dockerfile:1
# Keel gateway image: `docker build -t keel .`, then see compose.yaml and docs/operations.md.

FROM node:24-bookworm-slim AS build
WORKDIR /app
# Toolchain for better-sqlite3's native addon, used when no prebuilt binary matches.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# --ignore-scripts: dependencies' install steps wait; the native addon is built here, on its own.
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY scripts/bundle.mjs ./scripts/
RUN npm run build \
 && npm prune --omit=dev \
 && mkdir -p src/control/web

FROM node:24-bookworm-slim
# tini as PID 1 forwards SIGTERM to Node and reaps the agent's tool processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
# A non-loopback listen address makes Keel require KEEL_API_KEY and KEEL_CONTROL_TOKEN (pass
# both at run time; compose.yaml insists on them) and the Host names it answers: by default the
# port published on the host's loopback. Set KEEL_HTTP_PUBLIC_HOSTS to the names clients use.
# GLIBC_TUNABLES: the malloc settings Keel gives every gateway it starts (src/lib/malloc-tunables.ts).
ENV NODE_ENV=production \
    GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072 \
    KEEL_HOME=/data \
    KEEL_HTTP_HOST=0.0.0.0 \
    KEEL_HTTP_PORT=8642 \
    KEEL_HTTP_PUBLIC_HOSTS=127.0.0.1:8642,localhost:8642
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/src/control/web ./src/control/web
RUN mkdir -p /data && chown node:node /data && chmod 700 /data
USER node
VOLUME ["/data"]
EXPOSE 8642
STOPSIGNAL SIGTERM
# Healthy = ready for turns; a starting, draining or stopping gateway answers 503.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.KEEL_HTTP_PORT||8642)+'/readyz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "/app/bin/keel.js", "gateway", "run"]
