#!/usr/bin/env node
// Derives this package's checked-in copies from the repository's wire contract:
//   proto/breakerd/v1/breaker.proto   a copy of ../../proto (loaded at run time)
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
const source = path.resolve(pkgRoot, '../../proto/breakerd/v1/breaker.proto');
const protoRel = 'breakerd/v1/breaker.proto';

const protoCopy = path.join(outRoot, 'proto', protoRel);
fs.mkdirSync(path.dirname(protoCopy), { recursive: true });
fs.copyFileSync(source, protoCopy);

const generated = path.join(outRoot, 'src', 'generated');
fs.rmSync(generated, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    require.resolve('@grpc/proto-loader/build/bin/proto-loader-gen-types.js'),
    '--keepCase', '--longs=String', '--enums=String', '--defaults', '--oneofs',
    '--includeComments', '--grpcLib=@grpc/grpc-js',
    '-I', 'proto', '-O', path.join('src', 'generated'), protoRel,
  ],
  { cwd: outRoot, stdio: 'inherit' },
);
