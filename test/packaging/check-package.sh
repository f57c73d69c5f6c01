#!/usr/bin/env bash
# Packs the package, installs the tarball into a fresh project the way a user would, and imports every
# subpath with `import` and with `require` (Node >= 20.19 loads our ESM through require(esm)).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$root"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
cd "$work"
failed=0

# What the tarball holds: the built package, the docs, README, LICENSE and package.json. No source maps or
# declaration maps (they point at src/, which is not published), no tests, nothing else of the repository.
tar -tzf "$tarball" | sed 's|^package/||' | sort > contents.txt
unexpected=$(grep -Ev '^(dist/.+\.(js|d\.ts)|docs/.+\.md|README\.md|LICENSE|package\.json)$' contents.txt || true)
if [[ -n "$unexpected" ]]; then
  echo "packaging: the tarball holds files a user never needs:" >&2
  echo "$unexpected" | head -n 20 | sed 's/^/  /' >&2
  failed=1
elif grep -q 'sourceMappingURL' <(tar -xzOf "$tarball" --wildcards 'package/dist/*'); then
  echo "packaging: dist/ files reference source maps that are not published" >&2
  failed=1
else
  echo "packaging: the tarball holds dist/*.js, dist/*.d.ts, docs, README, LICENSE and package.json only"
fi

npm init -y >/dev/null
npm install --no-audit --no-fund --ignore-scripts "./$tarball" >/dev/null
# Optional peers are optional: with no peer installed at all, the root and every subpath whose peer is only
# needed once the user passes in a client (a pool, a channel, a connection) load.
for spec in idempotency-kit idempotency-kit/sqlite idempotency-kit/postgres idempotency-kit/redis \
  idempotency-kit/amqp idempotency-kit/nats idempotency-kit/redis-streams idempotency-kit/outbox \
  idempotency-kit/express idempotency-kit/fetch idempotency-kit/hono idempotency-kit/testing/checks; do
  if node --input-type=module -e "await import('$spec')" && node -e "require('$spec')"; then
    echo "packaging: $spec loads with no peer dependency installed"
  else
    echo "packaging: $spec needs a peer dependency just to load" >&2
    failed=1
  fi
done

# A store's driver that is not installed is the machine's failure, not the command line's: the CLI exits 1
# (not 2, a usage error) and says what to install, for SQLite as for PostgreSQL and Redis.
: > present.db
for args in 'migrate --sqlite fresh.db' 'stats --sqlite present.db' \
  'stats --database-url postgres://127.0.0.1:9/x' 'stats --redis-url redis://127.0.0.1:9'; do
  code=0
  # shellcheck disable=SC2086 # the arguments are split on purpose
  out=$(npx --no-install idempotency-kit $args 2>&1) || code=$?
  if [[ $code -eq 1 && "$out" == *"npm install "* ]]; then
    echo "packaging: idempotency-kit $args without its driver exits 1 with the install command"
  else
    echo "packaging: idempotency-kit $args without its driver exited $code: $out" >&2
    failed=1
  fi
done

# The only peers a subpath needs just to load: vitest for /testing, fastify-plugin for /fastify,
# prom-client for /prometheus, @opentelemetry/api for /opentelemetry. TypeScript checks the types.
npm install --no-audit --no-fund --ignore-scripts vitest@^4 fastify-plugin@^5 prom-client@^15 \
  @opentelemetry/api@^1.4 typescript@~5.9 @types/node@^20 >/dev/null

subpaths=$(node -e '
  const pkg = require("./node_modules/idempotency-kit/package.json");
  console.log(Object.keys(pkg.exports).filter((s) => s !== "./package.json")
    .map((s) => s === "." ? "idempotency-kit" : "idempotency-kit/" + s.slice(2)).join(" "));')

for spec in $subpaths; do
  if node --input-type=module -e "const m = await import('$spec'); if (Object.keys(m).length === 0) throw new Error('no exports');" \
    && node -e "const m = require('$spec'); if (Object.keys(m).length === 0) throw new Error('no exports');"; then
    echo "packaging: $spec loads with import and require"
  else
    echo "packaging: $spec FAILED to load" >&2
    failed=1
  fi
done
# TypeScript users: every subpath's types resolve under NodeNext (from an ES module and a CommonJS one),
# Node16 (ES modules: TypeScript models require(esm) under nodenext only) and Bundler.
i=0
: > check.mts
: > check.cts
: > check.ts
for spec in $subpaths; do
  echo "import * as m$i from '$spec'; void m$i;" >> check.mts
  echo "import m$i = require('$spec'); void m$i;" >> check.cts
  echo "import * as m$i from '$spec'; void m$i;" >> check.ts
  i=$((i + 1))
done
tsc_check() {
  local label=$1
  shift
  if npx --no-install tsc --noEmit --strict --skipLibCheck --types node "$@"; then
    echo "packaging: every subpath type-checks from TypeScript ($label)"
  else
    echo "packaging: TypeScript could not resolve every subpath ($label)" >&2
    failed=1
  fi
}
tsc_check 'nodenext, ESM and CJS' --module nodenext --moduleResolution nodenext check.mts check.cts
tsc_check 'node16, ESM' --module node16 --moduleResolution node16 check.mts
tsc_check 'bundler' --module esnext --moduleResolution bundler --target es2022 check.ts

# The bin, as `npx idempotency-kit` runs it from the installed package.
bin=$(node -p 'Object.values(require("./node_modules/idempotency-kit/package.json").bin ?? {})[0] ?? ""')
help=$(npx --no-install idempotency-kit --help 2>&1 || true)
if [[ -n "$bin" && -f "node_modules/idempotency-kit/$bin" && "$help" == "Usage: idempotency-kit "* ]]; then
  echo "packaging: the idempotency-kit bin runs"
else
  echo "packaging: the idempotency-kit bin is missing or does not run" >&2
  failed=1
fi

# The oldest node-redis the peer range allows (5) throws from destroy() on a client a failed connect closed:
# the CLI must still name the real cause.
npm install --no-audit --no-fund --ignore-scripts redis@^5 >/dev/null
code=0
out=$(npx --no-install idempotency-kit health --redis-url redis://127.0.0.1:9 2>&1) || code=$?
if [[ $code -eq 1 && "$out" == *"cannot connect to Redis at 127.0.0.1:9"* ]]; then
  echo "packaging: with node-redis 5, an unreachable Redis is reported as such"
else
  echo "packaging: with node-redis 5, health on an unreachable Redis exited $code: $out" >&2
  failed=1
fi
exit $failed
