// Every conformance vector of clients/vectors/ reproduced exactly, and a changed byte detected.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DeviceClient, KeyedStream, PROTOCOL_VERSION, checkBundle, derive } from "../dist/index.js";

const VECTORS = fileURLToPath(new URL("../../vectors/", import.meta.url));
const load = (name) => JSON.parse(readFileSync(VECTORS + name, "utf8"));
const unhex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const part = ([tag, value]) => (tag === "s" ? value : tag === "i" ? BigInt(value) : unhex(value));

/** What a client computes for one device of a case, in the vectors' form. */
export function runDevice(bundle, dev) {
  const c = new DeviceClient(bundle, unhex(dev.secret));
  const reports = [];
  [...dev.x].forEach((ch, i) => {
    for (const r of c.observe(i + 1, Number(ch))) {
      assert.equal(r.param_id, bundle.param_id);
      assert.equal(r.order, c.order);
      reports.push([i + 1, r.interval, r.bit]);
    }
  });
  if (dev.finish) for (const r of c.finish()) reports.push([dev.x.length, r.interval, r.bit]);
  // the counters of the vectors (the slots ahead and withheld are not protocol state: empty)
  const { secret, ahead, withheld, ...final } = c.toState();
  assert.deepEqual([ahead, withheld], [[], []]);
  assert.equal(secret, dev.secret);
  return { secret, x: dev.x, finish: dev.finish, order: c.order, r: c.r,
    v: Array.from(c.v, (a) => (a > 0 ? "+" : "-")).join(""), reports, final };
}

/** Check one whole devices file; returns the number of reports compared. */
export function checkDevices(doc) {
  let n = 0;
  for (const cs of doc.cases) {
    for (const dev of cs.devices) {
      const got = runDevice(cs.bundle, dev);
      const { final, ...rest } = dev;
      const { final: gotFinal, ...gotRest } = got;
      assert.deepEqual(gotRest, rest, cs.name);
      assert.deepEqual(gotFinal, final, cs.name);
      n += dev.reports.length;
    }
  }
  return n;
}

test("primitives: derive, words, uniform_below, bernoulli_exp, keep", () => {
  const p = load("primitives.json");
  const secret = unhex(p.secret);
  for (const d of p.derive) assert.equal(hex(derive(secret, ...d.parts.map(part))), d.out);
  const key = derive(secret, ...p.stream.parts.map(part));
  assert.equal(hex(key), p.stream.key);
  const s = new KeyedStream(key);
  assert.deepEqual(p.stream.words.map(() => s.word().toString(16).padStart(16, "0")), p.stream.words);
  for (const u of p.uniform_below) {
    const st = new KeyedStream(derive(secret, "uniform", u.n));
    assert.deepEqual(u.draws.map(() => st.uniformBelowBig(BigInt(u.n)).toString()), u.draws, u.n);
    assert.equal(st.wordsRead, u.words_read);
  }
  for (const b of p.bernoulli_exp) {
    const st = new KeyedStream(derive(secret, "bernoulli", b.a, b.m));
    assert.deepEqual(b.draws.map(() => st.bernoulliExp(b.a, b.m)), b.draws);
    assert.equal(st.wordsRead, b.words_read);
  }
  for (const k of p.keep) {
    const [num, den] = k.gamma.split("/").map(Number);
    const st = new KeyedStream(derive(secret, "keep", k.gamma));
    assert.deepEqual(k.draws.map(() => st.keep(num, den)), k.draws);
    assert.equal(st.wordsRead, k.words_read);
  }
});

test("devices: every case, every report, every final counter", () => {
  const n = checkDevices(load("devices.json"));
  assert.ok(n > 1000, `only ${n} reports compared`);
});

test("devices: a restored state resumes with identical reports", () => {
  for (const cs of load("devices.json").cases.slice(0, 12)) {
    const dev = cs.devices[4];
    const half = Math.floor(dev.x.length / 2);
    const a = new DeviceClient(cs.bundle, unhex(dev.secret));
    for (let t = 1; t <= half; t++) a.observe(t, Number(dev.x[t - 1]));
    const b = DeviceClient.fromState(cs.bundle, JSON.parse(JSON.stringify(a.toState())));
    for (let t = half + 1; t <= dev.x.length; t++) {
      const x = Number(dev.x[t - 1]);
      assert.deepEqual(b.observe(t, x), a.observe(t, x));
    }
  }
});

test("one changed byte of the vectors fails the check", () => {
  const text = readFileSync(VECTORS + "devices.json", "utf8");
  const doc = JSON.parse(text);
  const dev = doc.cases[7].devices[2];
  dev.reports[dev.reports.length - 1][2] ^= 1; // flip the last bit of one device
  assert.throws(() => checkDevices(doc), assert.AssertionError);
});

test("a bundle names its randomizer by method only", () => {
  const { method, ...rest } = load("devices.json").cases[0].bundle;
  assert.equal(checkBundle({ ...rest, method }).method, method);
  assert.throws(() => checkBundle({ ...rest, randomizer: method }), /^RangeError: method of the bundle/);
});

test("the protocol version is 2, and the vectors are of it", () => {
  assert.equal(PROTOCOL_VERSION, 2);
  assert.equal(load("devices.json").protocol, 2);
  assert.equal(load("primitives.json").protocol, 2);
  for (const cs of load("devices.json").cases) assert.equal(cs.bundle.protocol, 2, cs.name);
});

test("a bundle of protocol version 1 is refused naming the supported version", () => {
  const bundle = { ...load("devices.json").cases[0].bundle, protocol: 1 };
  const outdated = "RangeError: protocol of the bundle must be 2, the supported protocol version "
    + "(the bundle is outdated: fetch the study's bundle again); got 1.";
  assert.throws(() => checkBundle(bundle), (e) => String(e) === outdated);
  assert.throws(() => new DeviceClient(bundle, new Uint8Array(32)), (e) => String(e) === outdated);
  assert.throws(() => checkBundle({ ...bundle, protocol: 3 }),
    /^RangeError: protocol of the bundle must be 2, .*\(this client is outdated: update it\); got 3\.$/);
});

test("the worked example of docs/protocol.md §3", () => {
  const S = Uint8Array.from({ length: 32 }, (_, i) => i);
  const K = derive(S, "longitudinal-device", "0123456789abcdef", "coin", 7);
  assert.equal(hex(K), "f6ca9109bf5d51158f6f369be5ae53f1d8a3a4de38da2ea380e89ec331ed82b7");
  assert.equal(hex(derive(K, "block", 0)), "49c644314973cd51f73e5a5c5f0a6f5e0104e77218e7962f60a3917a8278ebd5");
  assert.equal(new KeyedStream(K).coin(), -1);
});
