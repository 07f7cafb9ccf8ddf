// ONNX Runtime over exported cases: each DIR/<case>/model.onnx runs on the inputs in io.json
// (raw little-endian .bin files) and its outputs must match smelt's within rtol 1e-4 / atol 1e-5
// (integer and bool outputs exactly). Exit 77 (CTest's skip) when onnxruntime-node is absent.
//
//   node tests/onnx/export/run_ort.js DIR        (SMELT_ORT_NODE_MODULES: where the package is)
const fs = require('fs');
const path = require('path');

let ort;
try {
  const dir = process.env.SMELT_ORT_NODE_MODULES;
  ort = require(dir ? path.join(dir, 'onnxruntime-node') : 'onnxruntime-node');
} catch (e) {
  console.log('SKIP: onnxruntime-node is not installed (npm install --ignore-scripts onnxruntime-node ' +
              'into .cache/onnxruntime-node and set SMELT_ORT_NODE_MODULES to its node_modules)');
  process.exit(77);
}

const kinds = {
  float32: ['float32', Float32Array], float64: ['float64', Float64Array],
  int64: ['int64', BigInt64Array], bool: ['bool', Uint8Array], uint8: ['uint8', Uint8Array],
  int32: ['int32', Int32Array], int8: ['int8', Int8Array],
};

function load(dir, t) {
  const [type, Arr] = kinds[t.dtype];
  const buf = fs.readFileSync(path.join(dir, t.file));
  const copy = new Uint8Array(buf.length);  // aligned for the typed array
  copy.set(buf);
  return new ort.Tensor(type, new Arr(copy.buffer, 0, buf.length / Arr.BYTES_PER_ELEMENT), t.shape);
}

function differs(got, want, dtype) {
  if (got.length !== want.length) return `${got.length} elements, expected ${want.length}`;
  const floating = dtype === 'float32' || dtype === 'float64';
  for (let i = 0; i < want.length; ++i) {
    const a = Number(got[i]), b = Number(want[i]);
    const ok = !floating ? a === b
      : Number.isNaN(b) ? Number.isNaN(a)
      : !Number.isFinite(b) ? a === b
      : Math.abs(a - b) <= 1e-5 + 1e-4 * Math.abs(b);
    if (!ok) return `element ${i}: ${a}, expected ${b}`;
  }
  return '';
}

async function main(dirs) {
  let passed = 0, failed = 0;
  const options = {intraOpNumThreads: 2, graphOptimizationLevel: 'all'};
  for (const root of dirs) {
    for (const c of fs.readdirSync(root).sort()) {
      const dir = path.join(root, c);
      if (!fs.existsSync(path.join(dir, 'io.json'))) continue;
      const io = JSON.parse(fs.readFileSync(path.join(dir, 'io.json')));
      try {
        const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), options);
        const feeds = {};
        for (const i of io.inputs) feeds[i.name] = load(dir, i.tensor);
        const out = await session.run(feeds);
        let why = '';
        for (const o of io.outputs) {
          const want = load(dir, o.tensor), got = out[o.name];
          if (!got) why = `no output '${o.name}'`;
          else if (got.type !== want.type) why = `output '${o.name}' is ${got.type}, expected ${want.type}`;
          else if (got.dims.join() !== want.dims.join()) why = `output '${o.name}' has shape [${got.dims}], expected [${want.dims}]`;
          else why = differs(got.data, want.data, o.tensor.dtype);
          if (why) { why = `output '${o.name}': ${why}`; break; }
        }
        if (why) { ++failed; console.log(`FAIL ${c}: ${why}`); } else ++passed;
      } catch (e) {
        ++failed;
        console.log(`FAIL ${c}: ${String(e.message || e).split('\n')[0]}`);
      }
    }
  }
  console.log(`${passed} passed, ${failed} failed (onnxruntime-node ${require(path.join(
      process.env.SMELT_ORT_NODE_MODULES || '', 'onnxruntime-node/package.json')).version})`);
  process.exit(failed || passed === 0 ? 1 : 0);
}

main(process.argv.slice(2));
