// What the benchmark needs from the built package.
import { DeviceClient, encodePart } from "../dist/index.js";

export { DeviceClient };

const UTF8 = new TextEncoder();
const cat = (parts) => {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
};

/** The derive() message of ("longitudinal-device", param_id, "coin", j), or of ("block", 0). */
export function deriveMessageForBench(paramId, j) {
  const parts = paramId === null ? ["block", 0]
    : ["longitudinal-device", paramId, "coin", j];
  return cat([UTF8.encode("dpfreq-kdf-1"), ...parts.map(encodePart)]);
}
