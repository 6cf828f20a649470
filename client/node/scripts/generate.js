#!/usr/bin/env node
// Derives this package's checked-in copies from the repository's wire contract:
//   proto/breakerd/v1/breaker.proto   a copy of ../../proto (loaded at run time)
//   proto/grpc/health/v1/health.proto a copy of gRPC's health protocol (the
//                                     away probe), from $GRPC_PROTO_DIR, default
//                                     /usr/share/grpc-proto (Debian: grpc-proto)
//   src/generated/                    TypeScript types from proto-loader-gen-types
//
// Usage: node scripts/generate.js [OUT_ROOT]
// OUT_ROOT defaults to this package; test.sh passes a temporary directory and
// diffs the result against the checked-in files to catch stale copies.
//
// The flags below must match the loader options in src/proto.ts.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const pkgRoot = path.resolve(__dirname, '..');
const outRoot = path.resolve(process.argv[2] ?? pkgRoot);
const grpcProtoDir = process.env.GRPC_PROTO_DIR || '/usr/share/grpc-proto';
const protos = [
  { rel: 'breakerd/v1/breaker.proto', from: path.resolve(pkgRoot, '../../proto') },
  { rel: 'grpc/health/v1/health.proto', from: grpcProtoDir },
];

for (const { rel, from } of protos) {
  const source = path.join(from, rel);
  if (!fs.existsSync(source)) {
    console.error(`generate.js: ${source} not found (install grpc-proto or set GRPC_PROTO_DIR)`);
    process.exit(1);
  }
  const copy = path.join(outRoot, 'proto', rel);
  fs.mkdirSync(path.dirname(copy), { recursive: true });
  fs.copyFileSync(source, copy);
}

const generated = path.join(outRoot, 'src', 'generated');
fs.rmSync(generated, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    require.resolve('@grpc/proto-loader/build/bin/proto-loader-gen-types.js'),
    '--keepCase', '--longs=String', '--enums=String', '--defaults', '--oneofs',
    '--includeComments', '--grpcLib=@grpc/grpc-js',
    '-I', 'proto', '-O', path.join('src', 'generated'), ...protos.map((p) => p.rel),
  ],
  { cwd: outRoot, stdio: 'inherit' },
);
