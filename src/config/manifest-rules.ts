// The manifest's rules, each a named check that returns what it found. They run in the order of
// the lists below (the order of the messages follows), and a rule over a serve or a GPU only sees
// one whose own fields passed: one typo does not cascade into a page of follow-on errors.

import type { Finding, PathSegment, Rule } from './issues';
import { error, isString, warning } from './issues';
import type { RawServe } from './manifest-schema';
import type { GpuSpec, ServeSpec } from '../domain/types';
import {
  bindsOverlap,
  findGpuMemoryUtilization,
  GPU_MEMORY_UTILIZATION_FLAG,
  gpuBudgetMib,
  hasFlag,
  isLoopback,
  isWildcard,
  KV_CACHE_MEMORY_BYTES_FLAG,
  kvCacheMib,
  MIN_PLAUSIBLE_CAPACITY_MIB,
  utilizationMib,
  VLLM_DEFAULT_UTILIZATION,
} from '../domain/manifest';
import { findSecretArgs, SECRET_FLAG_ENV, SERVE_API_KEY_ENV, SLEEP_ENDPOINTS_ENV } from '../domain/serve';
import { ENV_NAME_PATTERN } from '../domain/bounds';

export interface Indexed<T> {
  index: number;
  spec: T;
}

/** A serve whose own fields passed the schema, with the TOML it came from. */
export interface ParsedServe extends Indexed<ServeSpec> {
  raw: RawServe;
}

/** First index of each usable gpu role and uuid, over every [[gpus]] entry, valid or not. */
export interface GpuIdentities {
  roleFirst: Map<string, number>;
  uuidFirst: Map<string, number>;
}

/** What the cross-field rules know about the whole manifest. */
export interface ManifestContext {
  identities: GpuIdentities;
  /** The valid GPUs by role, without duplicates. */
  gpuByRole: Map<string, Indexed<GpuSpec>>;
  /** Valid serves only. */
  serves: Indexed<ServeSpec>[];
  /** First serves[] index of each serve name. */
  nameFirst: Map<string, number>;
  /** The earlier serve holding the host port a serve asks for, by serves[] index. */
  portTaken: Map<number, Indexed<ServeSpec>>;
  /** [node] host_ram_budget_mib, when declared. */
  hostRamBudgetMib?: number;
}

const usable = (v: unknown): v is string => isString(v) && v.trim() !== '';
const tableOf = (raw: unknown): Record<string, unknown> => (typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {});

export function gpuIdentities(rawGpus: readonly unknown[]): GpuIdentities {
  const roleFirst = new Map<string, number>();
  const uuidFirst = new Map<string, number>();
  rawGpus.forEach((raw, index) => {
    const t = tableOf(raw);
    if (usable(t.role) && !roleFirst.has(t.role)) roleFirst.set(t.role, index);
    if (usable(t.uuid) && !uuidFirst.has(t.uuid)) uuidFirst.set(t.uuid, index);
  });
  return { roleFirst, uuidFirst };
}

/** A serve keeps the port it asks for unless an earlier serve that kept it binds over it. */
function portsTaken(serves: readonly Indexed<ServeSpec>[]): Map<number, Indexed<ServeSpec>> {
  const bound: Indexed<ServeSpec>[] = [];
  const taken = new Map<number, Indexed<ServeSpec>>();
  for (const entry of serves) {
    const clash = bound.find((o) => o.spec.port === entry.spec.port && bindsOverlap(o.spec.bind, entry.spec.bind));
    if (clash) taken.set(entry.index, clash);
    else bound.push(entry);
  }
  return taken;
}

export function manifestContext(
  identities: GpuIdentities,
  gpuByRole: Map<string, Indexed<GpuSpec>>,
  serves: Indexed<ServeSpec>[],
  hostRamBudgetMib?: number,
): ManifestContext {
  const nameFirst = new Map<string, number>();
  for (const { index, spec } of serves) if (!nameFirst.has(spec.name)) nameFirst.set(spec.name, index);
  return { identities, gpuByRole, serves, nameFirst, portTaken: portsTaken(serves), ...(hostRamBudgetMib !== undefined ? { hostRamBudgetMib } : {}) };
}

// ---------------------------------------------------------------------------------------------
// The file

const gpusDeclared: Rule<Record<string, unknown>, void> = (doc) =>
  doc.gpus === undefined || (Array.isArray(doc.gpus) && doc.gpus.length === 0)
    ? [error('gpus', 'at least one GPU is required: add a [[gpus]] table with role, uuid, capacity_mib and reserve_mib')]
    : [];

export const documentRules: Rule<Record<string, unknown>, void>[] = [gpusDeclared];

// ---------------------------------------------------------------------------------------------
// One GPU

const reserveBelowCapacity: Rule<Indexed<GpuSpec>, void> = ({ index, spec: gpu }) =>
  gpu.reserveMib >= gpu.capacityMib
    ? [
        error(
          ['gpus', index, 'reserve_mib'],
          `reserve ${gpu.reserveMib} MiB must be less than capacity_mib ${gpu.capacityMib} MiB (it would leave no budget for serves)` +
            // The warning below is not shown beside an error: the likely cause goes with it.
            (gpu.capacityMib < MIN_PLAUSIBLE_CAPACITY_MIB ? `; capacity_mib is in MiB: ${gpu.capacityMib} GiB would be ${gpu.capacityMib * 1024}` : ''),
        ),
      ]
    : [];

/** A card's size written in GiB (`capacity_mib = 32`) passes every bound and makes the whole ledger a toy: say so. */
const capacityInMib: Rule<Indexed<GpuSpec>, void> = ({ index, spec: gpu }) =>
  gpu.capacityMib < MIN_PLAUSIBLE_CAPACITY_MIB
    ? [
        warning(
          ['gpus', index, 'capacity_mib'],
          `${gpu.capacityMib} MiB is less than any GPU has: sizes in the manifest are MiB, as nvidia-smi's memory.total reports them ` +
            `(${gpu.capacityMib} GiB would be ${gpu.capacityMib * 1024})`,
        ),
      ]
    : [];

export const gpuRules: Rule<Indexed<GpuSpec>, void>[] = [capacityInMib, reserveBelowCapacity];

const uniqueGpuRole: Rule<Indexed<unknown>, GpuIdentities> = ({ index, spec }, { roleFirst }) => {
  const { role } = tableOf(spec);
  const first = usable(role) ? roleFirst.get(role) : undefined;
  return first !== undefined && first !== index
    ? [error(['gpus', index, 'role'], `duplicate gpu role '${String(role)}' (first declared at gpus[${first}])`)]
    : [];
};

const uniqueGpuUuid: Rule<Indexed<unknown>, GpuIdentities> = ({ index, spec }, { uuidFirst }) => {
  const { uuid } = tableOf(spec);
  const first = usable(uuid) ? uuidFirst.get(uuid) : undefined;
  return first !== undefined && first !== index
    ? [error(['gpus', index, 'uuid'], `duplicate gpu uuid '${String(uuid)}' (first declared at gpus[${first}]); one card would be budgeted twice`)]
    : [];
};

/** Over every [[gpus]] entry, valid or not: a duplicate is one even when its other fields are wrong. */
export const gpuIdentityRules: Rule<Indexed<unknown>, GpuIdentities>[] = [uniqueGpuRole, uniqueGpuUuid];

// ---------------------------------------------------------------------------------------------
// One serve, on its own

const openaiNamesItsModel: Rule<ParsedServe, void> = ({ index, raw, spec }) =>
  spec.api !== 'openai'
    ? []
    : (['model', 'served_model_name'] as const)
        .filter((key) => raw[key] === undefined)
        .map((key) =>
          error(
            ['serves', index, key],
            `is required for api = "openai" (the default): ${key === 'model' ? 'the model vLLM loads' : 'the id /v1/models must report'}; ` +
              'a serve that is not an OpenAI-compatible server sets api = "http" or "none"',
          ),
        );

const routerTierNeedsOpenai: Rule<ParsedServe, void> = ({ index, spec }) =>
  spec.api !== 'openai' && spec.routerTier !== undefined
    ? [
        error(
          ['serves', index, 'router_tier'],
          'a router tier needs api = "openai": the router readmits a tier only after /v1/models reports its exact model, ' +
            `which an api = "${spec.api}" serve does not serve`,
        ),
      ]
    : [];

/** Idle is judged by the router's record of routed requests: a serve it does not route has none, and would look idle while busy. */
const idleTtlNeedsRouterTier: Rule<ParsedServe, void> = ({ index, spec }) =>
  spec.idleTtlS !== undefined && spec.routerTier === undefined
    ? [
        error(
          ['serves', index, 'idle_ttl_s'],
          'needs a router_tier: an idle lease expires when the router has routed no request to the serve for that long, ' +
            'and the router sees no request of a serve it does not route, so it would bring the serve down while in use; ' +
            "give the serve a router tier, or lease it for a fixed time (`serves up --lease`, the API's lease_s)",
        ),
      ]
    : [];

const loopbackBind: Rule<ParsedServe, void> = ({ index, raw, spec }) => {
  if (isLoopback(spec.bind)) return [];
  const at = ['serves', index, 'bind'];
  return raw.allow_non_loopback_bind === true
    ? [
        warning(
          at,
          `binds port ${spec.port} on non-loopback address '${spec.bind}' (allowed by allow_non_loopback_bind = true): the serve is reachable beyond this host`,
        ),
      ]
    : [
        error(
          at,
          `'${spec.bind}' is not a loopback address, so the serve would be reachable beyond this host; bind to 127.0.0.1 (the default), ` +
            'or set allow_non_loopback_bind = true on this serve to allow it',
        ),
      ];
};

const envNamesArePosix: Rule<ParsedServe, void> = ({ index, spec }) =>
  Object.keys(spec.env)
    .filter((key) => !ENV_NAME_PATTERN.test(key))
    .map((key) =>
      error(
        ['serves', index, 'env', key],
        `${JSON.stringify(key)} is not an environment variable name: letters, digits and '_', not starting with a digit (${String(ENV_NAME_PATTERN)})`,
      ),
    );

const gpuMemoryUtilizationFlag: Rule<ParsedServe, void> = ({ index, spec }) => {
  const flags = findGpuMemoryUtilization(spec.args);
  const found: Finding[] = [];
  flags.forEach((flag, k) => {
    const at: PathSegment[] = ['serves', index, 'args', flag.index];
    if (k > 0) {
      found.push(error(at, `${GPU_MEMORY_UTILIZATION_FLAG} is given more than once (first at args[${flags[0]?.index ?? 0}])`));
    } else if (flag.raw === undefined) {
      found.push(error(at, `${GPU_MEMORY_UTILIZATION_FLAG} needs a value, a fraction in (0, 1]`));
    } else if (flag.value === undefined || !(flag.value > 0 && flag.value <= 1)) {
      found.push(error(at, `${GPU_MEMORY_UTILIZATION_FLAG} must be a fraction in (0, 1] (got ${JSON.stringify(flag.raw)})`));
    }
  });
  return found;
};

const SECRET_FLAG_ENV_TEXT = Object.entries(SECRET_FLAG_ENV)
  .map(([flag, env]) => `${flag} → env.${env}`)
  .join(', ');

/**
 * A secret on a command line is visible to every `ps` on the host. An openai serve's vLLM flags
 * with an environment equivalent are moved there (secretArgsToEnv); any other secret flag is an
 * error, because the project cannot know how the image would read it from its environment.
 */
const secretsThroughEnv: Rule<ParsedServe, void> = ({ index, spec: serve }) => {
  const found: Finding[] = [];
  const seen = new Map<string, number>();
  for (const secret of findSecretArgs(serve.args)) {
    const at: PathSegment[] = ['serves', index, 'args', secret.index];
    const envName = serve.api === 'openai' ? SECRET_FLAG_ENV[secret.canonical] : undefined;
    const first = seen.get(secret.canonical);
    if (envName === undefined) {
      found.push(
        error(
          at,
          `${secret.flag} would put a secret on the container's command line, which \`ps\` on the host shows; ` +
            'set it in env instead, for the image to read from its environment' +
            (serve.api === 'openai' ? ` (vLLM's own flags are moved there: ${SECRET_FLAG_ENV_TEXT})` : ''),
        ),
      );
    } else if (first !== undefined) {
      found.push(error(at, `${secret.flag} is given more than once (first at args[${first}])`));
    } else if (serve.env[envName] !== undefined) {
      found.push(error(at, `${secret.flag} and env.${envName} both set it (the flag reaches the container as env.${envName}); keep one`));
    } else if (secret.value.trim() === '') {
      found.push(error(at, `${secret.flag} needs a value (an empty one would leave the serve without it)`));
    } else {
      seen.set(secret.canonical, secret.index);
    }
  }
  return found;
};

/**
 * vLLM with a key answers 401 on every /v1 route without it. The bring-up's identity probe sends
 * the serve's key (read from the manifest, never from history), but the router is another process
 * with no serve's secrets: its readmit and every request it forwards would be refused. Behind the
 * router, clients authenticate to the router (its client token for on-demand presets) and the
 * serve stays on loopback.
 */
const keyedServeBehindRouter: Rule<ParsedServe, void> = ({ index, spec }) => {
  if (spec.api !== 'openai' || spec.routerTier === undefined) return [];
  const flag = findSecretArgs(spec.args).find((a) => SECRET_FLAG_ENV[a.canonical] === SERVE_API_KEY_ENV);
  if (flag === undefined && spec.env[SERVE_API_KEY_ENV] === undefined) return [];
  const at: PathSegment[] = flag ? ['serves', index, 'args', flag.index] : ['serves', index, 'env', SERVE_API_KEY_ENV];
  return [
    error(
      at,
      `${flag ? `${flag.flag} ` : ''}sets vLLM's API key, so it answers 401 on /v1 without the key, and the router (router_tier '${spec.routerTier}') sends none: its readmit and ` +
        'every request it forwards would be refused; keep the key off a routed serve (it binds to loopback) or drop its router_tier',
    ),
  ];
};

/** Only evictable serves are ever evicted, so only theirs protects anything. */
const residencyOfAVictim: Rule<ParsedServe, void> = ({ index, raw, spec }) =>
  raw.min_residency_s !== undefined && spec.class !== 'evictable'
    ? [
        warning(
          ['serves', index, 'min_residency_s'],
          `has no effect on a ${spec.class} serve: only evictable serves are evicted, so only they need time before they may be evicted again`,
        ),
      ]
    : [];

// ---------------------------------------------------------------------------------------------
// Eviction by sleeping (vLLM's sleep mode)

const SLEEP_FIELDS = ['sleep_level', 'sleep_residual_mib', 'sleep_host_ram_mib'] as const;

/** How a serve is evicted matters only to a serve that is evicted, and sleeping only to a vLLM. */
const evictionOfAVictim: Rule<ParsedServe, void> = ({ index, raw, spec }) => {
  const at = ['serves', index, 'eviction'];
  if (raw.eviction === undefined) return [];
  if (spec.class !== 'evictable') {
    const why = `only evictable serves are evicted, and this one is ${spec.class}`;
    return [
      raw.eviction === 'sleep' ? error(at, `"sleep" cannot apply: ${why}; make it class = "evictable" or drop eviction`) : warning(at, `has no effect: ${why}`),
    ];
  }
  if (raw.eviction === 'sleep' && spec.api !== 'openai') {
    return [
      error(
        at,
        `"sleep" needs a vLLM serve (api = "openai"): sleep mode is vLLM's /sleep and /wake_up, which an api = "${spec.api}" serve does not have; use "stop"`,
      ),
    ];
  }
  return [];
};

/** The sleep settings: each only with eviction = "sleep", and what the ledger and the host need to know declared. */
const sleepDeclared: Rule<ParsedServe, void> = ({ index, raw, spec }) => {
  const at = (field: string): PathSegment[] => ['serves', index, field];
  if (raw.eviction !== 'sleep') {
    return SLEEP_FIELDS.filter((f) => raw[f] !== undefined).map((f) =>
      error(at(f), `applies only with eviction = "sleep" (this serve is ${raw.eviction === undefined ? 'stopped, the default' : 'stopped'} when evicted)`),
    );
  }
  const found: Finding[] = [];
  const level = raw.sleep_level ?? 1;
  if (raw.sleep_residual_mib === undefined) {
    found.push(
      error(
        at('sleep_residual_mib'),
        'is required with eviction = "sleep": what the sleeping serve still holds on its GPU (its CUDA context and buffers, often 500–1000 MiB); ' +
          'the ledger keeps it committed and hands the rest to the acquirer',
      ),
    );
  } else if (raw.sleep_residual_mib >= spec.vramMib) {
    found.push(
      error(at('sleep_residual_mib'), `${raw.sleep_residual_mib} MiB is not below vram_mib ${spec.vramMib}: a sleep would free nothing; use eviction = "stop"`),
    );
  }
  if (level === 1 && raw.sleep_host_ram_mib === undefined) {
    found.push(
      error(
        at('sleep_host_ram_mib'),
        'is required with sleep_level 1: the host RAM the offloaded weights take (about their size); ' +
          "a sleep that does not fit the node's host_ram_budget_mib falls back to level 2",
      ),
    );
  }
  if (level === 2 && raw.sleep_host_ram_mib !== undefined) {
    found.push(warning(at('sleep_host_ram_mib'), 'has no effect at sleep_level 2, which discards the weights instead of keeping them in host RAM'));
  }
  const devMode = spec.env[SLEEP_ENDPOINTS_ENV];
  if (devMode !== undefined && devMode !== '1') {
    found.push(
      error(
        ['serves', index, 'env', SLEEP_ENDPOINTS_ENV],
        // Not the value: it is under env, where secrets are.
        `is set, and not to 1: vLLM serves /sleep and /wake_up only with ${SLEEP_ENDPOINTS_ENV}=1, which eviction = "sleep" sets; remove it`,
      ),
    );
  }
  if (!isLoopback(spec.bind)) {
    found.push(
      warning(
        at('eviction'),
        `"sleep" turns on vLLM's development endpoints (${SLEEP_ENDPOINTS_ENV}=1: /sleep, /wake_up, /collective_rpc) on '${spec.bind}', beyond this host: anyone who reaches port ${spec.port} can put the serve to sleep`,
      ),
    );
  }
  return found;
};

/** vLLM allocates exactly --kv-cache-memory-bytes of KV cache beside the weights: a reservation below it alone lies. */
const vramCoversKvCache: Rule<ParsedServe, void> = ({ index, spec: s }) => {
  const kv = (s.api ?? 'openai') === 'openai' ? kvCacheMib(s.args) : undefined;
  if (!kv || s.vramMib >= kv.mib) return [];
  return [
    error(
      ['serves', index, 'vram_mib'],
      `${s.vramMib} MiB is less than the KV cache alone: ${KV_CACHE_MEMORY_BYTES_FLAG} ${kv.raw} is ${kv.mib} MiB, and vLLM loads the weights beside it, ` +
        `so the ledger would lie; raise vram_mib (it is in MiB: ${s.vramMib} GiB would be ${s.vramMib * 1024})`,
    ),
  ];
};

export const serveRules: Rule<ParsedServe, void>[] = [
  openaiNamesItsModel,
  routerTierNeedsOpenai,
  idleTtlNeedsRouterTier,
  loopbackBind,
  envNamesArePosix,
  gpuMemoryUtilizationFlag,
  vramCoversKvCache,
  secretsThroughEnv,
  keyedServeBehindRouter,
  residencyOfAVictim,
  evictionOfAVictim,
  sleepDeclared,
];

// ---------------------------------------------------------------------------------------------
// One serve among the others, on its GPU

const uniqueServeName: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec }, { nameFirst }) => {
  const first = nameFirst.get(spec.name);
  return first !== undefined && first !== index
    ? [error(['serves', index, 'name'], `duplicate serve name '${spec.name}' (first declared at serves[${first}])`)]
    : [];
};

const hostPortFree: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec: s }, { portTaken }) => {
  const clash = portTaken.get(index);
  if (!clash) return [];
  return [
    error(
      ['serves', index, 'port'],
      `host port ${s.port} on ${s.bind} is already taken by serves[${clash.index}] ('${clash.spec.name}') on ${clash.spec.bind}` +
        (isWildcard(s.bind) || isWildcard(clash.spec.bind) ? ' (a wildcard bind conflicts with every address)' : ''),
    ),
  ];
};

const gpuRoleKnown: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec }, { identities }) => {
  if (identities.roleFirst.has(spec.gpuRole)) return [];
  const roles = [...identities.roleFirst.keys()];
  const known = roles.length ? roles.map((r) => `'${r}'`).join(', ') : 'none declared';
  return [error(['serves', index, 'gpu_role'], `unknown gpu_role '${spec.gpuRole}' (known roles: ${known})`)];
};

/** The serve's GPU when it is valid (an unknown or invalid one is already reported). */
const gpuOf = (serve: ServeSpec, ctx: ManifestContext): GpuSpec | undefined => ctx.gpuByRole.get(serve.gpuRole)?.spec;

const withinGpuBudget: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec: s }, ctx) => {
  const gpu = gpuOf(s, ctx);
  if (!gpu || s.vramMib <= gpuBudgetMib(gpu)) return [];
  return [
    error(
      ['serves', index, 'vram_mib'],
      `${s.vramMib} MiB exceeds the budget of gpu_role '${gpu.role}' (capacity ${gpu.capacityMib} − reserve ${gpu.reserveMib} = ${gpuBudgetMib(gpu)} MiB)`,
    ),
  ];
};

/** The ledger must not lie: vram_mib covers what vLLM will really take of the card. */
const vramCoversVllmDraw: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec: s }, ctx) => {
  const gpu = gpuOf(s, ctx);
  if (!gpu || s.vramMib > gpuBudgetMib(gpu)) return [];
  const util = findGpuMemoryUtilization(s.args)[0];
  if (util?.value !== undefined) {
    const draw = utilizationMib(util.value, gpu.capacityMib);
    if (s.vramMib >= draw) return [];
    return [
      error(
        ['serves', index, 'vram_mib'],
        `${s.vramMib} MiB understates the serve's real draw: ` +
          `vLLM will take ${GPU_MEMORY_UTILIZATION_FLAG} ${util.raw ?? util.value} × capacity ${gpu.capacityMib} MiB = ${draw} MiB, ` +
          `so the ledger would lie; raise vram_mib to at least ${draw} or lower the utilization`,
      ),
    ];
  }
  // Only an OpenAI-speaking serve is a vLLM server: an image name with "vllm" in it that runs
  // something else (api "http" or "none", a sidecar, a sleep) takes no vLLM default.
  if ((s.api ?? 'openai') !== 'openai' || !/vllm/i.test(s.image) || hasFlag(s.args, '--kv-cache-memory-bytes')) return [];
  const draw = utilizationMib(VLLM_DEFAULT_UTILIZATION, gpu.capacityMib);
  if (s.vramMib >= draw) return [];
  return [
    warning(
      ['serves', index, 'args'],
      `no ${GPU_MEMORY_UTILIZATION_FLAG} or --kv-cache-memory-bytes: ` +
        `vLLM defaults to ${VLLM_DEFAULT_UTILIZATION} × capacity ${gpu.capacityMib} MiB = ${draw} MiB, ` +
        `far above the ${s.vramMib} MiB reservation`,
    ),
  ];
};

/** A level-1 sleep larger than the node's host RAM budget never fits: every eviction of it would fall back. */
const levelOneSleepFitsHostRam: Rule<Indexed<ServeSpec>, ManifestContext> = ({ index, spec: s }, { hostRamBudgetMib }) =>
  s.sleep?.level === 1 && s.sleep.hostRamMib !== undefined && hostRamBudgetMib !== undefined && s.sleep.hostRamMib > hostRamBudgetMib
    ? [
        warning(
          ['serves', index, 'sleep_host_ram_mib'],
          `${s.sleep.hostRamMib} MiB is over the node's host_ram_budget_mib ${hostRamBudgetMib}: a level-1 sleep of it never fits, so every eviction falls back to level 2`,
        ),
      ]
    : [];

export const crossServeRules: Rule<Indexed<ServeSpec>, ManifestContext>[] = [
  uniqueServeName,
  hostPortFree,
  gpuRoleKnown,
  withinGpuBudget,
  vramCoversVllmDraw,
  levelOneSleepFitsHostRam,
];

// ---------------------------------------------------------------------------------------------
// The whole manifest

/** Residents are meant to be co-resident: say so when their sum cannot fit. */
const residentsFitTogether: Rule<void, ManifestContext> = (_none, { gpuByRole, serves }) => {
  const found: Finding[] = [];
  for (const { index, spec: gpu } of gpuByRole.values()) {
    const budget = gpuBudgetMib(gpu);
    const resident = serves.filter((s) => s.spec.gpuRole === gpu.role && s.spec.class === 'resident').reduce((sum, s) => sum + s.spec.vramMib, 0);
    if (resident > budget) {
      found.push(
        warning(
          ['gpus', index],
          `resident serves on gpu_role '${gpu.role}' declare ${resident} MiB, over its budget of ${budget} MiB by ${resident - budget} MiB: ` +
            'they cannot all be admitted at once',
        ),
      );
    }
  }
  return found;
};

export const manifestRules: Rule<void, ManifestContext>[] = [residentsFitTogether];
