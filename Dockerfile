# Image of a broker node for docker-compose.yml (broker-1..3 share it): Node 20 on glibc (the
# uWebSockets.js binaries behind hyper-express need glibc 2.27+), the dependencies package-lock.json
# pins, dist/ built, dev dependencies pruned. The Lua scripts are read from src/storage/lua at startup.
FROM node:20-bookworm
WORKDIR /app
COPY package.json package-lock.json ./
# npm 11 may refuse its own lock in `npm ci` (it writes only this platform's optional packages into it; see
# .ci/run); npm install takes the same versions.
RUN npm ci --no-audit --no-fund || npm install --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund
ENV NODE_ENV=production
USER node
EXPOSE 8080
# SIGTERM drains the node (503 for new requests, in-flight publishes finish, streams end) and exits 0.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
