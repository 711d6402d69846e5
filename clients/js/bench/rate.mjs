// Report generation rate of the TypeScript client in Node, with a baseline measured in the
// same run: the same keyed coins drawn through WebCrypto's asynchronous HMAC (crypto.subtle).
// Usage: npm run bench [-- devices]   (prints rates and their ratio; no timed assertions)
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DeviceClient, deriveMessageForBench } from "./shim.mjs";

const VECTORS = fileURLToPath(new URL("../../vectors/", import.meta.url));
const cs = JSON.parse(readFileSync(VECTORS + "devices.json", "utf8")).cases
  .find((c) => c.name.startsWith("auto-d1000"));
const bundle = cs.bundle;
const devices = Number(process.argv[2] ?? 400);

function secret(i) {
  const s = new Uint8Array(32);
  new DataView(s.buffer).setUint32(0, i + 1);
  return s;
}

// every device observes the whole horizon (1000 periods, padded to 1024); x flips every 97
let t0 = performance.now();
const cpu0 = process.cpuUsage();
let reports = 0, observeMs = 0;
for (let i = 0; i < devices; i++) {
  const c = new DeviceClient(bundle, secret(i));
  const o0 = performance.now();
  for (let t = 1; t <= bundle.horizon; t++) reports += c.observe(t, (t / 97) & 1).length;
  observeMs += performance.now() - o0;
}
const totalMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const cpuS = (cpu.user + cpu.system) / 1e6;

// baseline: one report's keyed coin via WebCrypto (stream key, then its first block)
const { subtle } = globalThis.crypto;
const n = Math.min(20000, reports);
t0 = performance.now();
const sk = await subtle.importKey("raw", secret(0), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
for (let j = 1; j <= n; j++) {
  const k = await subtle.sign("HMAC", sk, deriveMessageForBench(bundle.param_id, j));
  const bk = await subtle.importKey("raw", k, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  await subtle.sign("HMAC", bk, deriveMessageForBench(null, 0));
}
const webMs = performance.now() - t0;

const rate = reports / (totalMs / 1000);
const steady = reports / (observeMs / 1000);
const web = n / (webMs / 1000);
console.log(`devices ${devices}, reports ${reports}`);
console.log(`reports/s, devices created and run: ${rate.toFixed(0)}`);
console.log(`reports per CPU second (all):     ${(reports / cpuS).toFixed(0)}`);
console.log(`reports/s, observe() only:          ${steady.toFixed(0)}`);
console.log(`baseline WebCrypto coin draws/s:    ${web.toFixed(0)}`);
console.log(`ratio client / WebCrypto baseline:  ${(rate / web).toFixed(1)}`);
