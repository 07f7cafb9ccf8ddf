#!/usr/bin/env node
// ONNX Runtime side of `make bench` (bench/run.py): the real-model workloads, served over stdin
// with the line protocol of torch_bench.py and smelt_bench --serve:
//   > list                      < {"threads": T, "peer": {...}, "workloads": [{"name", "impls": ["ort"], ...}]}
//   > run <workload> ort <n>    < {"ms": [t1, ..., tn]}   (after a warm-up of the same workload)
//                               < {"error": "..."}
//   > quit
//
//   node bench/ort_bench.js MODELS_DIR     MODELS_DIR holds tests/models/make_models.py's large models
//
// onnxruntime-node (the CPU runtime) comes from bench/ort/node_modules (`npm install
// --ignore-scripts` there: the install script only fetches optional GPU files). Sessions run with
// OMP_NUM_THREADS intra-op threads (the count run.py gives every side), one inter-op thread,
// sequential execution and all graph optimizations, as a user would configure ONNX Runtime for
// low-latency CPU inference.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const ortDir = path.join(__dirname, 'ort', 'node_modules', 'onnxruntime-node');
const ort = require(ortDir);
const ortVersion = JSON.parse(fs.readFileSync(path.join(ortDir, 'package.json'), 'utf8')).version;

const threads = parseInt(process.env.OMP_NUM_THREADS || '2', 10);
const modelsDir = process.argv[2] || path.join(__dirname, '..', 'build', 'models');

// The real models (bench/models.json, the list smelt_bench and torch_bench.py read too): name ->
// model directory, the work for GFLOP/s, and a text model's token input.
const WORKLOADS = JSON.parse(fs.readFileSync(path.join(__dirname, 'models.json'), 'utf8')).models;

function modelPath(w) { return path.join(modelsDir, w.dir, 'model.onnx'); }

async function build(w) {
  const session = await ort.InferenceSession.create(modelPath(w), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  // Random normal inputs of the declared shapes (the CNNs: float32 [1, 3, 224, 224]; the encoder
  // [1, 128, 256]).
  const feeds = {};
  if (w.tokens) {  // a text model: int64 token ids below its vocabulary size
    const n = w.tokens.reduce((a, b) => a * b, 1);
    const ids = new BigInt64Array(n);
    for (let i = 0; i < n; ++i) ids[i] = BigInt(Math.floor(Math.random() * w.vocab));
    feeds[session.inputNames[0]] = new ort.Tensor('int64', ids, w.tokens);
    return async () => { await session.run(feeds); };
  }
  const meta = session.inputMetadata || [];
  for (const name of session.inputNames) {
    const info = Array.isArray(meta) ? meta.find((m) => m.name === name) : meta[name];
    const dims = (info && info.shape ? info.shape : [1, 3, 224, 224]).map((d) => (typeof d === 'number' ? d : 1));
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {  // Box-Muller
      const u = Math.random() || 1e-12, v = Math.random();
      const r = Math.sqrt(-2 * Math.log(u));
      data[i] = r * Math.cos(2 * Math.PI * v);
      if (i + 1 < n) data[i + 1] = r * Math.sin(2 * Math.PI * v);
    }
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  return async () => { await session.run(feeds); };
}

async function timed(step, n) {
  const ms = [];
  for (let i = 0; i < n; ++i) {
    const t0 = process.hrtime.bigint();
    await step();
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return ms;
}

async function main() {
  const built = new Map();
  const rl = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of rl) {
    const parts = line.split('\t');
    if (parts[0] === 'quit') break;
    let reply;
    try {
      if (parts[0] === 'list') {
        reply = {
          threads,
          peer: {name: 'ONNX Runtime', version: ortVersion, package: 'onnxruntime-node', node: process.version,
                 options: `CPU execution provider, ${threads} intra-op threads, sequential, graphOptimizationLevel all`},
          workloads: WORKLOADS.map((w) => {
            const entry = {name: w.name, bytes: 0, flops: w.flops, impls: [], missing: {}, peak_memory: false};
            if (fs.existsSync(modelPath(w))) entry.impls.push('ort');
            else entry.missing.ort = `no ${modelPath(w)} (tests/models/make_models.py large ${modelsDir})`;
            return entry;
          }),
        };
      } else if (parts[0] === 'run' && parts.length === 4) {
        const [, name, impl, n] = parts;
        const w = WORKLOADS.find((x) => x.name === name);
        if (!w) throw new Error(`unknown workload '${name}'`);
        if (impl !== 'ort') throw new Error(`'${name}' has no impl '${impl}'`);
        if (!built.has(name)) {
          const step = await build(w);
          await timed(step, 3);  // warm-up: the first runs allocate and pick kernels
          built.set(name, step);
        }
        reply = {ms: await timed(built.get(name), parseInt(n, 10))};
      } else {
        reply = {error: `bad request '${line}' (list | run<TAB>name<TAB>impl<TAB>n | quit)`};
      }
    } catch (e) {
      reply = {error: String(e && e.message ? e.message : e)};
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

main();
