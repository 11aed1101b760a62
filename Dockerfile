# The application image: one image for the four app processes of docker-compose.yml
# (api, worker, migrate, sandbox), which picks one with `command:`. Default: the API.
#
#   docker build -t payment-orchestrator:local .
#   docker run --rm -e ADMIN_TOKEN=... -e DATABASE_URL=... -e TEMPORAL_ADDRESS=... payment-orchestrator:local
#
# The image runs compiled JavaScript: a build stage runs `npm run build` (tsc to dist/, the
# prebuilt workflow bundle, the API reference page's script), and the final stage has only
# production dependencies and dist/.
FROM node:20-bookworm-slim AS build

WORKDIR /app
# package.json's postinstall runs patch-package, which applies patches/ (the PostgreSQL
# driver's mend, in production too: the API and worker refuse to start without it), and
# scripts/install-temporal.sh, so both must be in place;
# SKIP_TEMPORAL_CLI=1 makes the second do nothing: the Temporal CLI (dev server) is for the
# embedded dev stack and the tests, and in the image nothing would use it.
COPY package.json package-lock.json ./
COPY patches patches
COPY scripts/install-temporal.sh scripts/
RUN SKIP_TEMPORAL_CLI=1 npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:20-bookworm-slim

WORKDIR /app

# Dependencies first, so that a source change does not re-run npm ci. Production
# dependencies only: no tsx, no TypeScript, no front-end toolchain.
COPY package.json package-lock.json ./
COPY patches patches
COPY scripts/install-temporal.sh scripts/
RUN SKIP_TEMPORAL_CLI=1 npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# The compiled code and the healthcheck scripts, owned by root and read-only to the process user.
COPY --from=build /app/dist dist
COPY deploy deploy

# production: JSON logs, and lib/config.ts refuses to start without ADMIN_TOKEN.
ENV NODE_ENV=production

# Unprivileged: the `node` user (uid 1000) of the official image.
USER node

# api (PORT, default 3000) and sandbox (SANDBOX_PORT, default 4010); the worker listens on none.
EXPOSE 3000 4010

# `node` itself, not npm: a single process that receives SIGTERM and shuts down
# gracefully (api/process.ts, worker/process.ts).
CMD ["node", "dist/api/main.js"]
