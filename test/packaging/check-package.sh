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
# Install offline from the tarball alone: the optional peers are not needed to load any entry point.
npm install --no-audit --no-fund --omit=peer --ignore-scripts "./$tarball" >/dev/null

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
if [[ -f node_modules/idempotency-kit/dist/cli/main.js ]]; then
  npx --no-install idempotency-kit --help >/dev/null && echo "packaging: the idempotency-kit bin runs"
fi
exit $failed
