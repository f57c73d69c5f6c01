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
npm init -y >/dev/null
# The tarball, plus the only peers a subpath needs just to load (every other peer is needed only once the
# user passes in a client): vitest for /testing, fastify-plugin for /fastify, prom-client for /prometheus,
# @opentelemetry/api for /opentelemetry. TypeScript checks the types.
npm install --no-audit --no-fund --ignore-scripts "./$tarball" >/dev/null
npm install --no-audit --no-fund --ignore-scripts vitest@^4 fastify-plugin@^5 prom-client@^15 \
  @opentelemetry/api@^1.4 typescript@~5.9 @types/node@^20 >/dev/null

subpaths=$(node -e '
  const pkg = require("./node_modules/idempotency-kit/package.json");
  console.log(Object.keys(pkg.exports).filter((s) => s !== "./package.json")
    .map((s) => s === "." ? "idempotency-kit" : "idempotency-kit/" + s.slice(2)).join(" "));')

failed=0
for spec in $subpaths; do
  if node --input-type=module -e "const m = await import('$spec'); if (Object.keys(m).length === 0) throw new Error('no exports');" \
    && node -e "const m = require('$spec'); if (Object.keys(m).length === 0) throw new Error('no exports');"; then
    echo "packaging: $spec loads with import and require"
  else
    echo "packaging: $spec FAILED to load" >&2
    failed=1
  fi
done
# TypeScript users: every subpath's types resolve under NodeNext, from an ES module and a CommonJS one.
i=0
: > check.mts
: > check.cts
for spec in $subpaths; do
  echo "import * as m$i from '$spec'; void m$i;" >> check.mts
  echo "import m$i = require('$spec'); void m$i;" >> check.cts
  i=$((i + 1))
done
if npx --no-install tsc --noEmit --strict --module nodenext --moduleResolution nodenext --skipLibCheck \
  --types node check.mts check.cts; then
  echo "packaging: every subpath type-checks from TypeScript (ESM and CJS)"
else
  echo "packaging: TypeScript could not resolve every subpath" >&2
  failed=1
fi

if [[ -f node_modules/idempotency-kit/dist/cli/main.js ]]; then
  npx --no-install idempotency-kit --help >/dev/null && echo "packaging: the idempotency-kit bin runs"
fi
exit $failed
