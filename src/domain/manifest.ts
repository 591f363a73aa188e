// Manifest parsing and validation: TOML text -> validated, normalized Manifest.
//
// PURE: no node built-ins, no I/O. Workflow code imports this module, so it must stay inside
// Temporal's deterministic sandbox; the caller reads the file and hands over its text.
//
// Every problem is reported as a ManifestIssue naming the file, the dotted TOML path
// (snake_case, with array indices: `serves[2].gpu_role`) and what is wrong. All issues are
// collected; cross-field rules are skipped for a gpu or serve whose own fields already failed,
// so one typo does not cascade into a page of follow-on errors.

import { z } from 'zod';
import type { PathSegment } from './config-issues';
import { bool, describe, field, Issues, isString, nonEmptyString, parseTomlTable, tableArray, tableEntries } from './config-issues';
import type { GpuSpec, Manifest, ManifestIssue, ManifestResult, ServeApi, ServeClass, ServeSpec } from './types';
import { formatIssue, SERVE_APIS, SERVE_CLASSES } from './types';
import { findFlags, findSecretArgs, SECRET_FLAG_ENV, secretArgsToEnv } from './serve';
import type { Bound } from './bounds';
import { BOUNDS, boundRule, ENV_NAME_PATTERN, GPU_UUID_PATTERN, GPU_UUID_RULE, NAME_PATTERN, NAME_RULE, withinBound } from './bounds';

const GPU_MEMORY_UTILIZATION_FLAG = '--gpu-memory-utilization';
/** vLLM's default --gpu-memory-utilization when the flag is absent. */
const VLLM_DEFAULT_UTILIZATION = 0.9;

export const SERVE_DEFAULTS = {
  containerPort: 8000,
  bind: '127.0.0.1',
  healthPath: '/health',
  startTimeoutS: 600,
  stopTimeoutS: 30,
} as const;

// ---------------------------------------------------------------------------------------------
// Errors and small helpers

/** Thrown by manifestOrThrow; the message is one formatted issue per line. */
export class ManifestError extends Error {
  readonly issues: ManifestIssue[];

  constructor(issues: ManifestIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ManifestError';
    this.issues = issues;
  }
}

/** The manifest of an ok result; throws ManifestError carrying the errors otherwise. */
export function manifestOrThrow(result: ManifestResult): Manifest {
  if (result.ok) return result.manifest;
  throw new ManifestError(result.errors);
}

export function findServe(manifest: Manifest, name: string): ServeSpec | undefined {
  return manifest.serves.find((s) => s.name === name);
}

/**
 * The GPU a serve is pinned to. A validated manifest guarantees it exists, so a miss means the
 * serve did not come from this manifest: that is a programming error and throws.
 */
export function gpuFor(manifest: Manifest, serve: ServeSpec): GpuSpec {
  const gpu = manifest.gpus.find((g) => g.role === serve.gpuRole);
  if (!gpu) {
    throw new Error(`serve '${serve.name}' references gpu_role '${serve.gpuRole}', which is not in manifest node '${manifest.node}'`);
  }
  return gpu;
}

// ---------------------------------------------------------------------------------------------
// Field schemas (the shared ones, and the "must be …" message style, are in config-issues.ts)

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

const port = field<number>((v) => isInt(v) && v >= 1 && v <= 65535, 'an integer port in 1..65535');
const bounded = (bound: Bound) => field<number>((v) => withinBound(bound, v), boundRule(bound));
/** `what` says where the name ends up, so the rule reads as a reason rather than a whim. */
const safeName = (what: string) => field<string>((v) => isString(v) && NAME_PATTERN.test(v), `a name of ${NAME_RULE} (${what})`);
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
const bindAddress = field<string>((v) => isString(v) && isAddress(v), "an IPv4 or IPv6 address, or 'localhost'");
const healthPath = field<string>((v) => isString(v) && v.startsWith('/'), "a URL path starting with '/'");
const stringArray = z.array(field<string>(isString, 'a string'), {
  error: (iss) => `must be an array of strings (got ${describe(iss.input)})`,
});
const stringTable = z.record(
  z.string(),
  field<string>(isString, 'a string; quote it, e.g. "1"'),
  { error: (iss) => `must be a table of string values (got ${describe(iss.input)})` },
);

const nodeShape = { name: safeName('it becomes part of container names, workflow ids and the task queue') };

const gpuShape = {
  role: safeName("it becomes part of the ledger's workflow id and a container label"),
  uuid: gpuUuid,
  capacity_mib: bounded(BOUNDS.capacityMib),
  reserve_mib: bounded(BOUNDS.reserveMib),
};

const serveShape = {
  name: safeName('it becomes a container name and a workflow id'),
  gpu_role: nonEmptyString,
  class: serveClass,
  api: serveApi.optional(),
  vram_mib: bounded(BOUNDS.vramMib),
  image: nonEmptyString,
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
};

const topShape = {
  // A missing [node] table reports node.name as required rather than "node: required".
  node: z.preprocess((v) => v ?? {}, z.strictObject(nodeShape)),
  gpus: tableArray('gpus').optional(),
  serves: tableArray('serves').optional(),
};

const TopSchema = z.strictObject(topShape);
const GpuSchema = z.strictObject(gpuShape);
const ServeSchema = z.strictObject(serveShape);

type RawGpu = z.infer<typeof GpuSchema>;
type RawServe = z.infer<typeof ServeSchema>;

/** Allowed keys of the top-level table at a (relative) path: its own, or [node]'s. */
const topAllowedKeys = (path: readonly PathSegment[]): string[] => (path.length === 0 ? Object.keys(topShape) : Object.keys(nodeShape));

// ---------------------------------------------------------------------------------------------
// Addresses

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const ipv6Schema = z.ipv6();

function isAddress(v: string): boolean {
  return v === 'localhost' || IPV4.test(v) || ipv6Schema.safeParse(v).success;
}

/** 127.0.0.0/8, ::1 (in any zero-padded spelling) and "localhost". */
export function isLoopback(bind: string): boolean {
  const b = bind.toLowerCase();
  if (b === 'localhost') return true;
  if (IPV4.test(b)) return b.startsWith('127.');
  return /^(0{0,4}:){2,7}0{0,3}1$/.test(b);
}

function isWildcard(bind: string): boolean {
  return bind === '0.0.0.0' || /^(0{0,4}:){2,7}0{0,4}$/.test(bind.toLowerCase());
}

function canonicalBind(bind: string): string {
  const b = bind.toLowerCase();
  if (b === 'localhost') return '127.0.0.1';
  if (isLoopback(b) && !IPV4.test(b)) return '::1';
  return b;
}

/** Whether two host binds on the same port collide (a wildcard collides with everything). */
function bindsOverlap(a: string, b: string): boolean {
  if (isWildcard(a) || isWildcard(b)) return true;
  if (a === 'localhost' || b === 'localhost') return isLoopback(a) && isLoopback(b);
  return canonicalBind(a) === canonicalBind(b);
}

// ---------------------------------------------------------------------------------------------
// vLLM --gpu-memory-utilization

export interface UtilizationFlag {
  /** The parsed value; undefined when missing or not a number. */
  value: number | undefined;
  /** The raw text of the value, if any. */
  raw: string | undefined;
  /** Index in args of the element holding the value (or the flag itself when the value is missing). */
  index: number;
}

/**
 * Every --gpu-memory-utilization occurrence in a vLLM arg list, in both the `--flag value` and
 * `--flag=value` forms (vLLM also accepts the underscore spelling).
 */
export function findGpuMemoryUtilization(args: readonly string[]): UtilizationFlag[] {
  return findFlags(args, (f) => f === GPU_MEMORY_UTILIZATION_FLAG).map(({ value: raw, valueIndex: index }) => ({
    value: raw !== undefined && /^\s*(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i.test(raw) ? Number(raw) : undefined,
    raw,
    index,
  }));
}

/** MiB vLLM will take at utilization u of a card of capacityMib, rounded down to whole MiB. */
export function utilizationMib(u: number, capacityMib: number): number {
  // The epsilon keeps float noise (0.29 * 100 = 28.999…) from rounding a whole MiB away.
  return Math.floor(u * capacityMib + 1e-9);
}

function hasFlag(args: readonly string[], flag: string): boolean {
  return args.some((a) => a.replace(/_/g, '-') === flag || a.replace(/_/g, '-').startsWith(`${flag}=`));
}

// ---------------------------------------------------------------------------------------------
// Secrets in args: only through the environment

const SECRET_FLAG_ENV_TEXT = Object.entries(SECRET_FLAG_ENV).map(([flag, env]) => `${flag} → env.${env}`).join(', ');

/**
 * A secret on a command line is visible to every `ps` on the host. An openai serve's vLLM flags
 * with an environment equivalent are moved there (secretArgsToEnv); any other secret flag is an
 * error, because the project cannot know how the image would read it from its environment.
 */
function secretArgsFit(serve: ServeSpec, index: number, issues: Issues): boolean {
  let ok = true;
  const seen = new Map<string, number>();
  for (const secret of findSecretArgs(serve.args)) {
    const at: PathSegment[] = ['serves', index, 'args', secret.index];
    const envName = serve.api === 'openai' ? SECRET_FLAG_ENV[secret.canonical] : undefined;
    const first = seen.get(secret.canonical);
    if (envName === undefined) {
      issues.error(
        at,
        `${secret.flag} would put a secret on the container's command line, which \`ps\` on the host shows; set it in env instead, for the image to read from its environment` +
          (serve.api === 'openai' ? ` (vLLM's own flags are moved there: ${SECRET_FLAG_ENV_TEXT})` : ''),
      );
    } else if (first !== undefined) {
      issues.error(at, `${secret.flag} is given more than once (first at args[${first}])`);
    } else if (serve.env[envName] !== undefined) {
      issues.error(at, `${secret.flag} and env.${envName} both set it (the flag reaches the container as env.${envName}); keep one`);
    } else if (secret.value.trim() === '') {
      issues.error(at, `${secret.flag} needs a value (an empty one would leave the serve without it)`);
    } else {
      seen.set(secret.canonical, secret.index);
      continue;
    }
    ok = false;
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Normalization

function toGpu(raw: RawGpu): GpuSpec {
  return { role: raw.role, uuid: raw.uuid, capacityMib: raw.capacity_mib, reserveMib: raw.reserve_mib };
}

function toServe(raw: RawServe): ServeSpec {
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
  };
  if (raw.revision !== undefined) serve.revision = raw.revision;
  if (raw.router_tier !== undefined) serve.routerTier = raw.router_tier;
  return serve;
}

// ---------------------------------------------------------------------------------------------
// parseManifest

interface Indexed<T> {
  index: number;
  spec: T;
}

/**
 * Parses and validates manifest TOML. `file` is only used to label issues. Never throws for bad
 * input: every problem comes back as an issue.
 */
export function parseManifest(text: string, file: string): ManifestResult {
  const issues = new Issues(file);
  const fail = (): ManifestResult => ({ ok: false, errors: issues.errors, warnings: issues.warnings });

  // 1. TOML
  const doc = parseTomlTable(text, issues);
  if (doc === undefined) return fail();

  // 2. Top-level shape; [[gpus]] and [[serves]] entries are validated one by one below so that a
  //    bad entry does not hide the good ones from the cross-field rules.
  const top = TopSchema.safeParse(doc, { reportInput: true });
  if (!top.success) issues.fromZod(top.error.issues, [], topAllowedKeys);
  const nodeName = top.success ? top.data.node.name : undefined;
  const rawGpus = tableEntries(doc, 'gpus');
  const rawServes = tableEntries(doc, 'serves');
  if (doc.gpus === undefined || (Array.isArray(doc.gpus) && doc.gpus.length === 0)) {
    issues.error('gpus', 'at least one GPU is required: add a [[gpus]] table with role, uuid, capacity_mib and reserve_mib');
  }

  // 3. GPUs: own fields, then their own rules.
  const gpus: Indexed<GpuSpec>[] = [];
  rawGpus.forEach((raw, index) => {
    const r = GpuSchema.safeParse(raw, { reportInput: true });
    if (!r.success) {
      issues.fromZod(r.error.issues, ['gpus', index], Object.keys(gpuShape));
      return;
    }
    const gpu = toGpu(r.data);
    if (gpu.reserveMib >= gpu.capacityMib) {
      issues.error(
        ['gpus', index, 'reserve_mib'],
        `reserve ${gpu.reserveMib} MiB must be less than capacity_mib ${gpu.capacityMib} MiB (it would leave no budget for serves)`,
      );
      return;
    }
    gpus.push({ index, spec: gpu });
  });

  // Duplicate roles / uuids (over every entry whose role/uuid is a usable string).
  const roleFirst = new Map<string, number>();
  const uuidFirst = new Map<string, number>();
  const knownRoles: string[] = [];
  const badGpuIndexes = new Set<number>();
  rawGpus.forEach((raw, index) => {
    const t = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
    if (isString(t.role) && t.role.trim() !== '') {
      const first = roleFirst.get(t.role);
      if (first !== undefined) {
        issues.error(['gpus', index, 'role'], `duplicate gpu role '${t.role}' (first declared at gpus[${first}])`);
        badGpuIndexes.add(index);
      } else {
        roleFirst.set(t.role, index);
        knownRoles.push(t.role);
      }
    }
    if (isString(t.uuid) && t.uuid.trim() !== '') {
      const first = uuidFirst.get(t.uuid);
      if (first !== undefined) {
        issues.error(
          ['gpus', index, 'uuid'],
          `duplicate gpu uuid '${t.uuid}' (first declared at gpus[${first}]); one card would be budgeted twice`,
        );
        badGpuIndexes.add(index);
      } else {
        uuidFirst.set(t.uuid, index);
      }
    }
  });
  const gpuByRole = new Map<string, Indexed<GpuSpec>>();
  for (const g of gpus) if (!badGpuIndexes.has(g.index)) gpuByRole.set(g.spec.role, g);

  // 4. Serves: own fields, then per-serve rules (bind, utilization flag syntax).
  const serves: Indexed<ServeSpec>[] = [];
  rawServes.forEach((raw, index) => {
    const r = ServeSchema.safeParse(raw, { reportInput: true });
    if (!r.success) {
      issues.fromZod(r.error.issues, ['serves', index], Object.keys(serveShape));
      return;
    }
    const serve = toServe(r.data);
    let ok = true;

    if (serve.api === 'openai') {
      for (const key of ['model', 'served_model_name'] as const) {
        if (r.data[key] === undefined) {
          issues.error(['serves', index, key], `is required for api = "openai" (the default): ${key === 'model' ? 'the model vLLM loads' : 'the id /v1/models must report'}; a serve that is not an OpenAI-compatible server sets api = "http" or "none"`);
          ok = false;
        }
      }
    } else if (serve.routerTier !== undefined) {
      issues.error(
        ['serves', index, 'router_tier'],
        `a router tier needs api = "openai": the router readmits a tier only after /v1/models reports its exact model, which an api = "${serve.api}" serve does not serve`,
      );
      ok = false;
    }

    if (!isLoopback(serve.bind)) {
      if (r.data.allow_non_loopback_bind === true) {
        issues.warn(
          ['serves', index, 'bind'],
          `binds port ${serve.port} on non-loopback address '${serve.bind}' (allowed by allow_non_loopback_bind = true): the serve is reachable beyond this host`,
        );
      } else {
        issues.error(
          ['serves', index, 'bind'],
          `'${serve.bind}' is not a loopback address, so the serve would be reachable beyond this host; bind to 127.0.0.1 (the default), or set allow_non_loopback_bind = true on this serve to allow it`,
        );
        ok = false;
      }
    }

    for (const key of Object.keys(serve.env)) {
      if (!ENV_NAME_PATTERN.test(key)) {
        issues.error(['serves', index, 'env', key], `${JSON.stringify(key)} is not an environment variable name: letters, digits and '_', not starting with a digit (${String(ENV_NAME_PATTERN)})`);
        ok = false;
      }
    }

    const utilFlags = findGpuMemoryUtilization(serve.args);
    utilFlags.forEach((flag, k) => {
      const at: PathSegment[] = ['serves', index, 'args', flag.index];
      if (k > 0) {
        issues.error(at, `${GPU_MEMORY_UTILIZATION_FLAG} is given more than once (first at args[${utilFlags[0]?.index ?? 0}])`);
        ok = false;
      } else if (flag.raw === undefined) {
        issues.error(at, `${GPU_MEMORY_UTILIZATION_FLAG} needs a value, a fraction in (0, 1]`);
        ok = false;
      } else if (flag.value === undefined || !(flag.value > 0 && flag.value <= 1)) {
        issues.error(at, `${GPU_MEMORY_UTILIZATION_FLAG} must be a fraction in (0, 1] (got ${JSON.stringify(flag.raw)})`);
        ok = false;
      }
    });

    if (!secretArgsFit(serve, index, issues)) ok = false;

    if (ok) serves.push({ index, spec: secretArgsToEnv(serve) });
  });

  // 5. Cross-field rules over the serves that passed their own checks.
  const nameFirst = new Map<string, number>();
  const bound: Indexed<ServeSpec>[] = [];
  for (const entry of serves) {
    const { index, spec: s } = entry;

    const firstName = nameFirst.get(s.name);
    if (firstName !== undefined) {
      issues.error(['serves', index, 'name'], `duplicate serve name '${s.name}' (first declared at serves[${firstName}])`);
    } else {
      nameFirst.set(s.name, index);
    }

    const clash = bound.find((o) => o.spec.port === s.port && bindsOverlap(o.spec.bind, s.bind));
    if (clash) {
      issues.error(
        ['serves', index, 'port'],
        `host port ${s.port} on ${s.bind} is already taken by serves[${clash.index}] ('${clash.spec.name}') on ${clash.spec.bind}` +
          (isWildcard(s.bind) || isWildcard(clash.spec.bind) ? ' (a wildcard bind conflicts with every address)' : ''),
      );
    } else {
      bound.push(entry);
    }

    if (!roleFirst.has(s.gpuRole)) {
      const known = knownRoles.length ? knownRoles.map((r) => `'${r}'`).join(', ') : 'none declared';
      issues.error(['serves', index, 'gpu_role'], `unknown gpu_role '${s.gpuRole}' (known roles: ${known})`);
      continue;
    }
    const gpu = gpuByRole.get(s.gpuRole)?.spec;
    if (!gpu) continue; // the GPU itself is invalid and already reported

    const budget = gpu.capacityMib - gpu.reserveMib;
    if (s.vramMib > budget) {
      issues.error(
        ['serves', index, 'vram_mib'],
        `${s.vramMib} MiB exceeds the budget of gpu_role '${gpu.role}' (capacity ${gpu.capacityMib} − reserve ${gpu.reserveMib} = ${budget} MiB)`,
      );
      continue;
    }

    const util = findGpuMemoryUtilization(s.args)[0];
    if (util?.value !== undefined) {
      const draw = utilizationMib(util.value, gpu.capacityMib);
      if (s.vramMib < draw) {
        issues.error(
          ['serves', index, 'vram_mib'],
          `${s.vramMib} MiB understates the serve's real draw: vLLM will take ${GPU_MEMORY_UTILIZATION_FLAG} ${util.raw ?? util.value} × capacity ${gpu.capacityMib} MiB = ${draw} MiB, so the ledger would lie; raise vram_mib to at least ${draw} or lower the utilization`,
        );
      }
    } else if (/vllm/i.test(s.image) && !hasFlag(s.args, '--kv-cache-memory-bytes')) {
      const draw = utilizationMib(VLLM_DEFAULT_UTILIZATION, gpu.capacityMib);
      if (s.vramMib < draw) {
        issues.warn(
          ['serves', index, 'args'],
          `no ${GPU_MEMORY_UTILIZATION_FLAG} or --kv-cache-memory-bytes: vLLM defaults to ${VLLM_DEFAULT_UTILIZATION} × capacity ${gpu.capacityMib} MiB = ${draw} MiB, far above the ${s.vramMib} MiB reservation`,
        );
      }
    }
  }

  // Residents are meant to be co-resident: say so when their sum cannot fit.
  for (const { index, spec: gpu } of gpuByRole.values()) {
    const budget = gpu.capacityMib - gpu.reserveMib;
    const resident = serves
      .filter((s) => s.spec.gpuRole === gpu.role && s.spec.class === 'resident')
      .reduce((sum, s) => sum + s.spec.vramMib, 0);
    if (resident > budget) {
      issues.warn(
        ['gpus', index],
        `resident serves on gpu_role '${gpu.role}' declare ${resident} MiB, over its budget of ${budget} MiB by ${resident - budget} MiB: they cannot all be admitted at once`,
      );
    }
  }

  if (issues.errors.length > 0 || nodeName === undefined) return fail();
  return {
    ok: true,
    manifest: { node: nodeName, gpus: gpus.map((g) => g.spec), serves: serves.map((s) => s.spec) },
    warnings: issues.warnings,
  };
}
