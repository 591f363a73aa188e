// Configuration from the environment, one reader per process kind (router, worker, CLI, the dev
// server's CLI lookup), each variable named, defaulted and checked by its own zod schema. A bad
// value throws an EnvError whose message starts with the variable's name.
//
// The checks run in a fixed order and the first problem is the one reported, with the wording
// each process has always printed (tests and operators read them).
import { homedir } from 'node:os';
import { isAbsolute, join, posix } from 'node:path';
import { z } from 'zod';
import toolchain from '../../config/toolchain.json';
import { MAX_BACKUPS_KEPT, MAX_HEALTHZ_STREAK, MAX_VERIFY_WINDOW_S, ROUTER_NAME_PATTERN } from '../domain/promotion';

export type Env = Readonly<Record<string, string | undefined>>;

/** A bad or missing environment variable; `variable` is the one the message is about. */
export class EnvError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    // Named plain 'Error' still: a process that prints the error prints what it always has.
    super(message);
  }
}

/** Reads one variable through its schema; the schema's message follows `NAME: `. */
function read<T>(env: Env, name: string, schema: z.ZodType<T>): T {
  const r = schema.safeParse(env[name]);
  if (!r.success) throw new EnvError(name, `${name}: ${r.error.issues[0]?.message ?? 'invalid value'}`);
  return r.data;
}

/** Unset, or set to the empty string: both mean "not configured". */
const optional = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));
/** The value as given, even empty; unset is undefined (callers default with `??`). */
const raw = z.string().optional();
const withDefault = (fallback: string) => optional.transform((v) => v ?? fallback);

/** A number in lo..hi (above lo when `above`), whole when `integer`: every size and duration has a bound. */
const inRange = (lo: number, hi: number, o: { integer?: boolean; above?: boolean; unit?: string } = {}) =>
  optional.pipe(
    z
      .string()
      .refine(
        (v) => {
          const n = Number(v);
          return v.trim() !== '' && Number.isFinite(n) && (o.above ? n > lo : n >= lo) && n <= hi && (!o.integer || Number.isInteger(n));
        },
        {
          error: (iss) =>
            `${o.integer ? 'an integer' : 'a number'}${o.unit ? ` of ${o.unit}` : ''} ${o.above ? `above ${lo}` : `from ${lo}`} ` +
            `${o.above ? 'and at most' : 'to'} ${hi} (got '${String(iss.input)}')`,
        },
      )
      .transform(Number)
      .optional(),
  );

const absolutePath = optional.pipe(
  z
    .string()
    .refine(isAbsolute, { error: (iss) => `an absolute path on this host (got '${String(iss.input)}')` })
    .optional(),
);

/** A path inside the router's container (POSIX, whatever this host is). */
const containerPath = optional.pipe(
  z
    .string()
    .refine((v) => posix.isAbsolute(v), {
      error: (iss) => `an absolute path inside the router's container, such as /config/router.toml (got '${String(iss.input)}')`,
    })
    .optional(),
);

/** A router deployment's name, as `gpures router promote --router` gives it. */
const routerName = optional.pipe(
  z
    .string()
    .refine((v) => ROUTER_NAME_PATTERN.test(v), {
      error: (iss) => `a name of letters, digits, '.', '_' and '-', starting with a letter or digit, such as router (got '${String(iss.input)}')`,
    })
    .optional(),
);

const jsonStringArray = optional.pipe(
  z
    .string()
    .transform((v, ctx): unknown => {
      try {
        return JSON.parse(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `a JSON array of strings such as ["--validate-only"] (got '${v}': ${(err as Error).message})` });
        return z.NEVER;
      }
    })
    .pipe(z.custom<string[]>((v) => Array.isArray(v) && v.every((a) => typeof a === 'string'), 'a JSON array of strings'))
    .optional(),
);

/**
 * The shortest token a server of ours accepts (the acquisition API's, the reference router's
 * admin token): 32 characters, e.g. 16 random bytes in hex. Length is what can be checked; the
 * token should also be random.
 */
export const MIN_TOKEN_CHARS = 32;

// ---------------------------------------------------------------------------------------------
// The reference router (src/router/main.ts)

export interface RouterProcessEnv {
  /** GPURES_ROUTER_TOKEN: the admin API's bearer token, at least MIN_TOKEN_CHARS characters. */
  adminToken: string;
  /**
   * GPURES_API_URL and GPURES_API_TOKEN: the acquisition API (docs/acquisition-api.md) an
   * on-demand tier acquires its serve through. Optional here; a config with an on-demand tier
   * refuses to load without them (src/router/server.ts).
   */
  acquisitions?: { url: string; token: string };
  /**
   * GPURES_ROUTER_CLIENT_TOKEN: the bearer token a request to an on-demand preset must carry (such
   * a request can acquire a serve, evicting others). Optional here; a config with an on-demand tier
   * refuses to load without it (src/router/on-demand-config.ts).
   */
  clientToken?: string;
}

const httpBase = optional.pipe(
  z
    .string()
    .refine((v) => /^https?:\/\/[^\s/?#@]+(\/[^\s?#]*)?$/.test(v), {
      error: (iss) => `an http(s) base URL such as http://127.0.0.1:8090, without credentials (got '${String(iss.input).replace(/\/\/[^/@]*@/, '//***@')}')`,
    })
    .transform((v) => v.replace(/\/+$/, ''))
    .optional(),
);

function acquisitionApiEnv(env: Env): RouterProcessEnv['acquisitions'] {
  const url = read(env, 'GPURES_API_URL', httpBase);
  const token = read(env, 'GPURES_API_TOKEN', optional);
  if (url && !token) throw new EnvError('GPURES_API_TOKEN', 'GPURES_API_URL is set but GPURES_API_TOKEN is not: the acquisition API needs its token');
  if (token && !url) throw new EnvError('GPURES_API_URL', 'GPURES_API_TOKEN is set but GPURES_API_URL is not: on-demand tiers need both');
  return url && token ? { url, token } : undefined;
}

export function routerProcessEnv(env: Env): RouterProcessEnv {
  const adminToken = read(env, 'GPURES_ROUTER_TOKEN', raw) ?? '';
  if (adminToken.trim() === '') {
    throw new EnvError(
      'GPURES_ROUTER_TOKEN',
      'GPURES_ROUTER_TOKEN is not set: the admin API (quiesce, readmit, reload) only accepts a bearer token, so the router will not start without one. ' +
        'Export GPURES_ROUTER_TOKEN=<secret> and start again.',
    );
  }
  if (adminToken.length < MIN_TOKEN_CHARS) {
    throw new EnvError(
      'GPURES_ROUTER_TOKEN',
      `GPURES_ROUTER_TOKEN is ${adminToken.length} characters, too short to be secret: at least ${MIN_TOKEN_CHARS} are required (e.g. \`openssl rand -hex 32\`)`,
    );
  }
  const acquisitions = acquisitionApiEnv(env);
  const clientToken = clientTokenEnv(env, adminToken, acquisitions?.token);
  return { adminToken, ...(acquisitions ? { acquisitions } : {}), ...(clientToken ? { clientToken } : {}) };
}

/**
 * The clients' token: as long as the others, and none of them, since every OpenAI client of the
 * router holds it (in its api_key) and neither the admin API nor the acquisition API is theirs.
 * The messages name the variables, never a value.
 */
function clientTokenEnv(env: Env, adminToken: string, apiToken: string | undefined): string | undefined {
  const token = read(env, 'GPURES_ROUTER_CLIENT_TOKEN', optional);
  if (token === undefined) return undefined;
  if (token.length < MIN_TOKEN_CHARS) {
    throw new EnvError(
      'GPURES_ROUTER_CLIENT_TOKEN',
      `GPURES_ROUTER_CLIENT_TOKEN is ${token.length} characters, too short to be secret: at least ${MIN_TOKEN_CHARS} are required (e.g. \`openssl rand -hex 32\`)`,
    );
  }
  for (const [other, value] of [
    ['GPURES_ROUTER_TOKEN', adminToken],
    ['GPURES_API_TOKEN', apiToken],
  ] as const) {
    if (token === value) {
      throw new EnvError(
        'GPURES_ROUTER_CLIENT_TOKEN',
        `GPURES_ROUTER_CLIENT_TOKEN is the same as ${other}: every client of the router's on-demand presets holds it, so it must be a token of its own`,
      );
    }
  }
  return token;
}

// ---------------------------------------------------------------------------------------------
// The worker (src/worker/)

export interface WorkerEnv {
  /** GPURES_ROUTER_URL and GPURES_ROUTER_TOKEN: the router eviction quiesces and readmits through. */
  router?: { url: string; token: string };
  /** GPURES_ROUTER_URL as given, for the worker's start line. */
  routerUrl?: string;
  /** GPURES_NVIDIA_SMI (default nvidia-smi). */
  nvidiaSmi: string;
  /**
   * GPURES_NVIDIA_SMI_LOOP_MS: the interval of the worker's one long-lived nvidia-smi -lms stream
   * (default 100 ms), or 'off' for a process per reading (a driver whose nvidia-smi lacks -lms).
   */
  nvidiaSmiLoopMs: number | 'off';
  /** GPURES_METRICS_ADDR: where /metrics listens (docs/metrics.md); unset is the default address, 'off' none. */
  metrics?: MetricsAddr | 'off';
  /** Where a failed start's last lines are kept (failedStartsDir). */
  failedStartsDir: string;
}

/** HOST:PORT of a metrics endpoint; an IPv6 host in brackets ([::1]:9475). */
export interface MetricsAddr {
  host: string;
  port: number;
}

/** The worker's /metrics unless told otherwise: loopback, a port of its own. */
export const DEFAULT_METRICS_ADDR: MetricsAddr = { host: '127.0.0.1', port: 9475 };

/** 'off', or HOST:PORT with PORT in 0..65535 (0 picks a free one); the problem otherwise. */
export function parseMetricsAddr(value: string): MetricsAddr | 'off' | { problem: string } {
  if (value === 'off') return 'off';
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  const port = Number(m?.[3]);
  if (!m || port > 65535) return { problem: `HOST:PORT (PORT 0..65535, an IPv6 host in brackets) or 'off' (got '${value}')` };
  return { host: (m[1] ?? m[2]) as string, port };
}

const metricsAddr = optional.transform((v, ctx) => {
  if (v === undefined) return undefined;
  const parsed = parseMetricsAddr(v);
  if (typeof parsed === 'object' && 'problem' in parsed) {
    ctx.addIssue({ code: 'custom', message: parsed.problem });
    return z.NEVER;
  }
  return parsed;
});

/** The stream's default interval: a reading waits half of it on average, and nvidia-smi's own query takes milliseconds. */
export const DEFAULT_NVIDIA_SMI_LOOP_MS = 100;

const loopMs = optional.transform((v, ctx): number | 'off' => {
  if (v === undefined) return DEFAULT_NVIDIA_SMI_LOOP_MS;
  if (v === 'off') return 'off';
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 20 || n > 10_000) {
    ctx.addIssue({ code: 'custom', message: `an integer number of milliseconds from 20 to 10000, or 'off' (got '${v}')` });
    return z.NEVER;
  }
  return n;
});

export function workerEnv(env: Env): WorkerEnv {
  const url = read(env, 'GPURES_ROUTER_URL', httpBase);
  const token = read(env, 'GPURES_ROUTER_TOKEN', optional);
  if (url && !token) {
    throw new EnvError('GPURES_ROUTER_TOKEN', 'GPURES_ROUTER_URL is set but GPURES_ROUTER_TOKEN is not: the router admin API needs its token');
  }
  // Empty is unset: an empty binary would fail at the first reading, naming nothing.
  const nvidiaSmi = read(env, 'GPURES_NVIDIA_SMI', withDefault('nvidia-smi'));
  const nvidiaSmiLoopMs = read(env, 'GPURES_NVIDIA_SMI_LOOP_MS', loopMs);
  const metrics = read(env, 'GPURES_METRICS_ADDR', metricsAddr);
  return {
    ...(url && token ? { router: { url, token } } : {}),
    ...(url !== undefined ? { routerUrl: url } : {}),
    nvidiaSmi,
    nvidiaSmiLoopMs,
    ...(metrics !== undefined ? { metrics } : {}),
    failedStartsDir: failedStartsDir(env),
  };
}

/**
 * GPURES_STATE_DIR/failed-starts: where the worker keeps a failed start's last lines and `gpures
 * serves logs` reads them, so both must see the same GPURES_STATE_DIR. Default: as root
 * /var/lib/gpures (beside the production Temporal's state), else $XDG_STATE_HOME/gpu-reservations
 * (~/.local/state/gpu-reservations).
 */
export function failedStartsDir(env: Env): string {
  const given = read(env, 'GPURES_STATE_DIR', absolutePath);
  const xdg = env['XDG_STATE_HOME'];
  const fallback = process.getuid?.() === 0 ? '/var/lib/gpures' : join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.local', 'state'), 'gpu-reservations');
  return join(given ?? fallback, 'failed-starts');
}

/** The router deployment a worker may promote (docs/promotion.md); see src/worker/router-targets.ts. */
export interface PromotionEnv {
  configPath: string;
  url: string;
  adminToken: string;
  name?: string;
  container: string;
  containerConfigPath?: string;
  validateArgs?: string[];
  verifyWindowS?: number;
  healthzStreak?: number;
  backupsKept?: number;
}

/**
 * Promotion's settings, or undefined when GPURES_ROUTER_CONFIG is unset. `checkConfigPath` runs
 * on the live config's path as soon as it is known to be absolute, before the other variables.
 */
export function promotionEnv(env: Env, checkConfigPath: (path: string) => void = () => undefined): PromotionEnv | undefined {
  const configPath = read(env, 'GPURES_ROUTER_CONFIG', absolutePath);
  if (configPath === undefined) return undefined;
  checkConfigPath(configPath);
  const url = read(env, 'GPURES_ROUTER_URL', httpBase);
  const adminToken = read(env, 'GPURES_ROUTER_TOKEN', optional);
  if (!url || !adminToken) {
    const missing = url ? 'GPURES_ROUTER_TOKEN' : 'GPURES_ROUTER_URL';
    throw new EnvError(missing, 'GPURES_ROUTER_CONFIG is set: router promotion also needs GPURES_ROUTER_URL and GPURES_ROUTER_TOKEN');
  }
  const validateArgs = read(env, 'GPURES_ROUTER_VALIDATE_ARGS', jsonStringArray);
  const name = read(env, 'GPURES_ROUTER_NAME', routerName);
  const container = read(env, 'GPURES_ROUTER_CONTAINER', withDefault('gpures-router'));
  const containerConfigPath = read(env, 'GPURES_ROUTER_CONTAINER_CONFIG', containerPath);
  const out: PromotionEnv = { configPath, url, adminToken, container };
  if (name !== undefined) out.name = name;
  if (containerConfigPath !== undefined) out.containerConfigPath = containerConfigPath;
  if (validateArgs !== undefined) out.validateArgs = validateArgs;
  const verifyWindowS = read(env, 'GPURES_ROUTER_VERIFY_WINDOW_S', inRange(0, MAX_VERIFY_WINDOW_S, { above: true, unit: 'seconds' }));
  if (verifyWindowS !== undefined) out.verifyWindowS = verifyWindowS;
  const healthzStreak = read(env, 'GPURES_ROUTER_HEALTHZ_STREAK', inRange(1, MAX_HEALTHZ_STREAK, { integer: true }));
  if (healthzStreak !== undefined) out.healthzStreak = healthzStreak;
  const backupsKept = read(env, 'GPURES_ROUTER_BACKUPS_KEPT', inRange(1, MAX_BACKUPS_KEPT, { integer: true }));
  if (backupsKept !== undefined) out.backupsKept = backupsKept;
  return out;
}

// ---------------------------------------------------------------------------------------------
// The CLI (for src/cli/: what it reads today by hand)

/** The dev server's own UI (`temporal server start-dev` serves it on its port + 1000). */
export const DEFAULT_TEMPORAL_UI_URL = 'http://127.0.0.1:8233';

export interface CliEnv {
  /** GPURES_MANIFEST: the manifest when --manifest is not given (empty is kept, as today). */
  manifest?: string;
  /** GPURES_ROUTER_CONFIG: the router config to cross-check; empty turns the check off. */
  routerConfig?: string;
  /** GPURES_API_TOKEN: the acquisition API's token ('' when unset; apiTokenProblem judges it). */
  apiToken: string;
  /** GPURES_NVIDIA_SMI (default nvidia-smi). */
  nvidiaSmi: string;
  /** GPURES_TEMPORAL_UI_URL: the Temporal UI the ledger page links into (default http://127.0.0.1:8233, the dev server's). */
  temporalUiUrl: string;
  /**
   * GPURES_METRICS_ADDR, as the node's worker reads it: where `gpures ledger` asks that worker
   * first (its /v1/ledger beside /metrics); 'off' asks Temporal only.
   */
  workerEndpoint: MetricsAddr | 'off';
  /**
   * GPURES_SIM_BOX: the simulated box's serves directory (`gpures demo --keep` prints it), where
   * `serves logs` reads instead of Docker.
   */
  simBox?: string;
  /** GPURES_STATE_DIR/failed-starts, as the worker keeps them (failedStartsDir). */
  failedStartsDir: string;
}

export function cliEnv(env: Env): CliEnv {
  const manifest = read(env, 'GPURES_MANIFEST', raw);
  const routerConfig = read(env, 'GPURES_ROUTER_CONFIG', raw);
  const simBox = read(env, 'GPURES_SIM_BOX', optional);
  return {
    ...(simBox !== undefined ? { simBox } : {}),
    ...(manifest !== undefined ? { manifest } : {}),
    ...(routerConfig !== undefined ? { routerConfig } : {}),
    apiToken: read(env, 'GPURES_API_TOKEN', raw) ?? '',
    nvidiaSmi: read(env, 'GPURES_NVIDIA_SMI', withDefault('nvidia-smi')),
    temporalUiUrl: read(env, 'GPURES_TEMPORAL_UI_URL', httpBase) ?? DEFAULT_TEMPORAL_UI_URL,
    workerEndpoint: read(env, 'GPURES_METRICS_ADDR', metricsAddr) ?? DEFAULT_METRICS_ADDR,
    failedStartsDir: failedStartsDir(env),
  };
}

// ---------------------------------------------------------------------------------------------
// The dev server's Temporal CLI (src/dev/)

export interface DevServerEnv {
  /** TEMPORAL_CLI: an explicit Temporal CLI binary, tried first. */
  temporalCli?: string;
  /** GPURES_CACHE (default ~/.cache/gpu-reservations): where scripts/setup.sh builds the CLI. */
  cacheDir: string;
}

export function devServerEnv(env: Env): DevServerEnv {
  const temporalCli = read(env, 'TEMPORAL_CLI', optional);
  const cacheDir = read(env, 'GPURES_CACHE', raw) ?? join(homedir(), toolchain.cacheUnderHome);
  return { ...(temporalCli !== undefined ? { temporalCli } : {}), cacheDir };
}
