// The manifest's schema (zod, one field at a time, each with its own "must be …" message) and its
// normalization from TOML's snake_case into the ServeSpec and GpuSpec the rest of the project uses.

import { z } from 'zod';
import type { PathSegment } from './issues';
import { bool, describe, describeKind, field, isString, nonEmptyString, tableArray } from './issues';
import type { GpuSpec, ServeApi, ServeClass, ServeSpec } from '../domain/types';
import { EVICTION_MODES, SERVE_APIS, SERVE_CLASSES } from '../domain/types';
import type { EvictionMode } from '../domain/types';
import { IPV4, SERVE_DEFAULTS } from '../domain/manifest';
import type { Bound } from '../domain/bounds';
import {
  BOUNDS,
  boundRule,
  GPU_UUID_PATTERN,
  GPU_UUID_RULE,
  IMAGE_REFERENCE_RULE,
  isImageReference,
  NAME_PATTERN,
  NAME_RULE,
  withinBound,
} from '../domain/bounds';

const ipv6Schema = z.ipv6();

function isAddress(v: string): boolean {
  return v === 'localhost' || IPV4.test(v) || ipv6Schema.safeParse(v).success;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

const port = field<number>((v) => isInt(v) && v >= 1 && v <= 65535, 'an integer port in 1..65535');
const bounded = (bound: Bound) => field<number>((v) => withinBound(bound, v), boundRule(bound));
/** `what` says where the name ends up, so the rule reads as a reason rather than a whim. */
const safeName = (what: string) => field<string>((v) => isString(v) && NAME_PATTERN.test(v), `a name of ${NAME_RULE} (${what})`);
const imageReference = field<string>(isImageReference, IMAGE_REFERENCE_RULE);
const gpuUuid = field<string>((v) => isString(v) && GPU_UUID_PATTERN.test(v), GPU_UUID_RULE);
const serveClass = z.custom<ServeClass>((v) => isString(v) && (SERVE_CLASSES as readonly string[]).includes(v), {
  error: (iss) =>
    iss.input === undefined
      ? `is required (one of ${SERVE_CLASSES.join(', ')})`
      : isString(iss.input)
        ? `unknown class ${JSON.stringify(iss.input)} (allowed: ${SERVE_CLASSES.join(', ')})`
        : `must be one of ${SERVE_CLASSES.join(', ')} (got ${describe(iss.input)})`,
});
const serveApi = z.custom<ServeApi>((v) => isString(v) && (SERVE_APIS as readonly string[]).includes(v), {
  error: (iss) => `unknown api ${isString(iss.input) ? JSON.stringify(iss.input) : describe(iss.input)} (allowed: ${SERVE_APIS.join(', ')})`,
});
const evictionMode = z.custom<EvictionMode>((v) => isString(v) && (EVICTION_MODES as readonly string[]).includes(v), {
  error: (iss) => `unknown eviction ${isString(iss.input) ? JSON.stringify(iss.input) : describe(iss.input)} (allowed: ${EVICTION_MODES.join(', ')})`,
});
const sleepLevel = field<1 | 2>((v) => v === 1 || v === 2, '1 (weights offloaded to host RAM) or 2 (weights discarded)');
const bindAddress = field<string>((v) => isString(v) && isAddress(v), "an IPv4 or IPv6 address, or 'localhost'");
const healthPath = field<string>((v) => isString(v) && v.startsWith('/'), "a URL path starting with '/'");
// args and env hold secrets (the value after --hf-token, HF_TOKEN's), and a manifest error reaches
// API answers, workflow history and logs: their errors say what kind of value is there, never the value.
const stringArray = z.array(field<string>(isString, 'a string', describeKind), {
  error: (iss) => `must be an array of strings (got ${describeKind(iss.input)})`,
});
const stringTable = z.record(z.string(), field<string>(isString, 'a string; quote it, e.g. "1"', describeKind), {
  error: (iss) => `must be a table of string values (got ${describeKind(iss.input)})`,
});

const nodeShape = {
  name: safeName('it becomes part of container names, workflow ids and the task queue'),
  /** The default of every serve's min_residency_s. */
  min_residency_s: bounded(BOUNDS.minResidencyS).optional(),
  /** What level-1 sleeps may take of host RAM together. */
  host_ram_budget_mib: bounded(BOUNDS.hostRamMib).optional(),
};

export const gpuShape = {
  role: safeName("it becomes part of the ledger's workflow id and a container label"),
  uuid: gpuUuid,
  capacity_mib: bounded(BOUNDS.capacityMib),
  reserve_mib: bounded(BOUNDS.reserveMib),
};

export const serveShape = {
  name: safeName('it becomes a container name and a workflow id'),
  gpu_role: nonEmptyString,
  class: serveClass,
  api: serveApi.optional(),
  vram_mib: bounded(BOUNDS.vramMib),
  image: imageReference,
  // Required for api = "openai" (the default); checked with the other per-serve rules.
  model: nonEmptyString.optional(),
  revision: nonEmptyString.optional(),
  served_model_name: nonEmptyString.optional(),
  port,
  container_port: port.optional(),
  bind: bindAddress.optional(),
  allow_non_loopback_bind: bool.optional(),
  router_tier: nonEmptyString.optional(),
  args: stringArray.optional(),
  env: stringTable.optional(),
  health_path: healthPath.optional(),
  start_timeout_s: bounded(BOUNDS.startTimeoutS).optional(),
  stop_timeout_s: bounded(BOUNDS.stopTimeoutS).optional(),
  min_residency_s: bounded(BOUNDS.minResidencyS).optional(),
  idle_ttl_s: bounded(BOUNDS.idleTtlS).optional(),
  // How an evictable serve is evicted; the sleep_* fields only with eviction = "sleep" (manifest-rules.ts).
  eviction: evictionMode.optional(),
  sleep_level: sleepLevel.optional(),
  sleep_residual_mib: bounded(BOUNDS.sleepResidualMib).optional(),
  sleep_host_ram_mib: bounded(BOUNDS.hostRamMib).optional(),
};

const topShape = {
  // A missing [node] table reports node.name as required rather than "node: required".
  node: z.preprocess((v) => v ?? {}, z.strictObject(nodeShape)),
  gpus: tableArray('gpus').optional(),
  serves: tableArray('serves').optional(),
};

export const TopSchema = z.strictObject(topShape);
export const GpuSchema = z.strictObject(gpuShape);
export const ServeSchema = z.strictObject(serveShape);

export type RawGpu = z.infer<typeof GpuSchema>;
export type RawServe = z.infer<typeof ServeSchema>;

/** Allowed keys of the top-level table at a (relative) path: its own, or [node]'s. */
export const topAllowedKeys = (path: readonly PathSegment[]): string[] => (path.length === 0 ? Object.keys(topShape) : Object.keys(nodeShape));

// ---------------------------------------------------------------------------------------------
// Normalization

export function toGpu(raw: RawGpu): GpuSpec {
  return { role: raw.role, uuid: raw.uuid, capacityMib: raw.capacity_mib, reserveMib: raw.reserve_mib };
}

/** `nodeMinResidencyS`: [node] min_residency_s, or its default. */
export function toServe(raw: RawServe, nodeMinResidencyS: number): ServeSpec {
  const serve: ServeSpec = {
    name: raw.name,
    gpuRole: raw.gpu_role,
    class: raw.class,
    api: raw.api ?? 'openai',
    vramMib: raw.vram_mib,
    image: raw.image,
    // Outside openai these only label the serve; the name stands in where they are not given.
    model: raw.model ?? raw.name,
    servedModelName: raw.served_model_name ?? raw.name,
    port: raw.port,
    containerPort: raw.container_port ?? SERVE_DEFAULTS.containerPort,
    bind: raw.bind ?? SERVE_DEFAULTS.bind,
    args: [...(raw.args ?? [])],
    env: Object.fromEntries(Object.entries(raw.env ?? {})),
    healthPath: raw.health_path ?? SERVE_DEFAULTS.healthPath,
    startTimeoutS: raw.start_timeout_s ?? SERVE_DEFAULTS.startTimeoutS,
    stopTimeoutS: raw.stop_timeout_s ?? SERVE_DEFAULTS.stopTimeoutS,
    minResidencyS: raw.min_residency_s ?? nodeMinResidencyS,
  };
  if (raw.revision !== undefined) serve.revision = raw.revision;
  if (raw.router_tier !== undefined) serve.routerTier = raw.router_tier;
  if (raw.idle_ttl_s !== undefined) serve.idleTtlS = raw.idle_ttl_s;
  // Incomplete sleep settings are refused by the rules before the serve is used.
  if (raw.eviction === 'sleep') {
    const level = raw.sleep_level ?? 1;
    serve.sleep = {
      level,
      residualMib: raw.sleep_residual_mib ?? 0,
      ...(level === 1 && raw.sleep_host_ram_mib !== undefined ? { hostRamMib: raw.sleep_host_ram_mib } : {}),
    };
  }
  return serve;
}
