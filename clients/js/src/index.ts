// Device client of the dpfreq longitudinal protocol, protocol version 2 (docs/protocol.md).
export { sha256, Hmac } from "./sha256.js";
export { KeyedStream, cumulativeMasses, derive, encodePart, subsetFromChoices } from "./keyed.js";
export type { Part } from "./keyed.js";
export { DeviceClient, PROTOCOL_VERSION, checkBundle } from "./client.js";
export type { Bundle, ClientState, EnrolmentMessage, Report } from "./client.js";
export { Device, WITHHELD, localStorageStore, memoryStore } from "./device.js";
export type { FlushResult, Refused, Store, WireReport } from "./device.js";
export { RETRY_STATUSES, Uploader, retryAfterSeconds } from "./uploader.js";
export type { UploaderOptions, Wait } from "./uploader.js";
