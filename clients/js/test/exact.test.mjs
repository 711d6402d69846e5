// The TypeScript samplers realise the certified laws: every sampler is enumerated over its
// uniform draws (the same exact-threshold checks as the Python suite), and the uniform draws
// read the top bits of whole words and reject exactly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { KeyedStream, cumulativeMasses, subsetFromChoices } from "../dist/index.js";

class Need extends Error {}

/** A stream whose uniform draws come from a script (to enumerate every draw path). */
class Scripted extends KeyedStream {
  constructor(script) { super(new Uint8Array(32)); this.script = script; this.pos = 0; this.sizes = []; }
  uniformBelow(n) { return Number(this.uniformBelowBig(BigInt(n))); }
  uniformBelowBig(n) {
    this.sizes.push(n);
    if (this.pos >= this.script.length) throw new Need();
    return BigInt(this.script[this.pos++]);
  }
}

/** A stream whose 64-bit words come from a script. */
class Words extends KeyedStream {
  constructor(words) { super(new Uint8Array(32)); this.words = words; }
  next() {
    const w = this.words.shift();
    if (w === undefined) throw new Need();
    this.hi = Number(w >> 32n); this.lo = Number(w & 0xffffffffn); this.wordsRead += 1;
  }
}

const gcd = (a, b) => { while (b) [a, b] = [b, a % b]; return a; };
const add = ([a, b], [c, d]) => { const n = a * d + c * b, m = b * d, g = gcd(n, m); return [n / g, m / g]; };
const toFloat = ([n, d]) => Number(n * 10n ** 18n / d) / 1e18;

/** The law of ``fn(stream)`` over every draw path of mass >= 1/minDen; and the mass left. */
function enumerateLaw(fn, minDen) {
  const law = new Map();
  let left = [0n, 1n];
  const stack = [[]];
  while (stack.length) {
    const script = stack.pop();
    const s = new Scripted(script);
    try {
      const value = fn(s);
      const den = s.sizes.reduce((a, n) => a * n, 1n);
      law.set(value, add(law.get(value) ?? [0n, 1n], [1n, den]));
    } catch (e) {
      if (!(e instanceof Need)) throw e;
      const den = s.sizes.reduce((a, n) => a * n, 1n);
      const n = s.sizes[s.sizes.length - 1];
      if (den > minDen) { left = add(left, [1n, den / n]); continue; }
      for (let c = 0n; c < n; c++) stack.push([...script, c]);
    }
  }
  return { law, left };
}

test("uniform_below reads the top bits of whole words and rejects exactly", () => {
  assert.equal(new Words([]).uniformBelow(1), 0);
  assert.equal(new Words([(5n << 61n) | 12345n, 3n << 61n]).uniformBelow(5), 3);
  const big = (1n << 64n) + 7n;
  assert.equal(new Words([1n << 63n, 1n << 63n]).uniformBelowBig(big), (1n << 64n) | 1n);
  assert.equal(new Words([3n << 62n, 0n, 1n << 63n, 1n << 63n]).uniformBelowBig(big), (1n << 64n) | 1n);
  // 33..53 bits on numbers: the top b bits of one word, exactly
  for (const b of [33, 40, 52, 53]) {
    const n = 2 ** b - 1;
    const w = (BigInt(n - 1) << BigInt(64 - b)) | ((1n << BigInt(64 - b)) - 1n);
    assert.equal(new Words([w]).uniformBelow(n), n - 1);
    assert.equal(new Words([(1n << 64n) - 1n, 5n << BigInt(64 - b)]).uniformBelow(n), 5); // all-ones rejected
  }
  assert.throws(() => new Words([]).uniformBelow(0), RangeError);
});

test("partial Fisher-Yates: every l-subset exactly l! times (k = 1..6)", () => {
  for (let k = 1; k <= 6; k++) {
    for (let ell = 0; ell <= k; ell++) {
      const counts = new Map();
      const rec = (prefix) => {
        if (prefix.length === ell) {
          const key = subsetFromChoices(k, prefix).join(",");
          counts.set(key, (counts.get(key) ?? 0) + 1);
          return;
        }
        for (let c = 0; c < k - prefix.length; c++) rec([...prefix, c]);
      };
      rec([]);
      let binom = 1, fact = 1;
      for (let i = 0; i < ell; i++) { binom = binom * (k - i) / (i + 1); fact *= i + 1; }
      assert.equal(counts.size, binom);
      assert.deepEqual(new Set(counts.values()), new Set([fact]));
      for (const key of counts.keys()) assert.equal(key.split(",").filter((x) => x === "-1").length, ell);
    }
  }
});

test("distance inversion: U in [c_(l-1), c_l) gives distance l, for every law of the vectors", () => {
  const VECTORS = fileURLToPath(new URL("../../vectors/", import.meta.url));
  const cases = JSON.parse(readFileSync(VECTORS + "devices.json", "utf8")).cases;
  let checked = 0;
  for (const cs of cases) {
    for (const weights of Object.values(cs.bundle.laws)) {
      const cum = cumulativeMasses(weights.map(BigInt));
      const k = weights.length - 1;
      if (k > 16) continue;
      for (let ell = 0; ell <= k; ell++) {
        const lo = ell ? cum[ell - 1] : 0n;
        for (const u of [lo, cum[ell] - 1n]) {
          if (u < lo) continue; // an empty distance (mass 0) is never drawn
          const s = new Scripted([u, ...Array(ell).fill(0n)]);
          const v = s.distanceVector(cum, k);
          assert.equal(v.filter((a) => a === -1).length, ell);
          assert.equal(s.sizes[0], cum[k]);
          checked += 1;
        }
      }
    }
  }
  assert.ok(checked > 100);
});

test("cumulative masses: C(k, i) w(i) summed exactly", () => {
  assert.deepEqual(cumulativeMasses([1n, 1n, 1n, 1n]), [1n, 4n, 7n, 8n]);
  assert.deepEqual(cumulativeMasses([5n, 2n, 3n]), [5n, 9n, 12n]);
});

test("bernoulli_exp(a, m) = e^(-a/m), enumerated", () => {
  for (const [a, m] of [[0, 1], [1, 1], [1, 3], [2, 5]]) {
    const { law, left } = enumerateLaw((s) => s.bernoulliExp(a, m), 10n ** 7n);
    assert.ok(toFloat(left) < 1e-3);
    const p = toFloat(law.get(true) ?? [0n, 1n]);
    assert.ok(Math.abs(p - Math.exp(-a / m)) <= toFloat(left) + 1e-15, `${a}/${m}: ${p}`);
  }
});

test("geometric and keep bit: Pr[G = g] = (1 - e^-γ) e^-γg, Pr[keep] = 1/(1 + e^-γ), enumerated", () => {
  for (const [s, t] of [[1, 2], [1, 1], [3, 2]]) {
    const { law, left } = enumerateLaw((st) => st.geometric(s, t), 10n ** 6n);
    const slack = toFloat(left) + 1e-15;
    assert.ok(toFloat(left) < 1 / 20);
    const alpha = Math.exp(-s / t);
    for (let g = 0; g < 4; g++) {
      assert.ok(Math.abs(toFloat(law.get(g) ?? [0n, 1n]) - (1 - alpha) * alpha ** g) <= slack);
    }
    let keep = [0n, 1n];
    for (const [g, m] of law) if (g % 2 === 0) keep = add(keep, m);
    assert.ok(Math.abs(toFloat(keep) - 1 / (1 + alpha)) <= slack);
  }
});
