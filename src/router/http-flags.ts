// The router's HTTP bounds as main.js takes them on its command line: each a whole number within
// its bound, checked together (a budget below the body limit, or queues allowed more than the
// budget, is a mistake the router would only show as refusals), before anything listens. Flags,
// not config fields: fastify fixes them when the server is made, and /admin/reload could not
// change them, so the config would claim what the running router does not do.
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../adapters/http-bounds';
import { wholeNumber } from '../domain/inputs';
import { DEFAULT_BODY_BUDGET_BYTES } from './body-budget';
import { DEFAULT_HELD_BYTES } from './on-demand';
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_MAX_CONNECTIONS } from './server';

const MIB = 1024 * 1024;

interface FlagBound {
  min: number;
  max: number;
  default: number;
  unit: string;
  /** What it bounds and the answer past it, for --help. */
  what: string;
}

/**
 * - body-limit-mib 64 (1..1024): vision requests carry base64 images; 1 GiB is past any image and
 *   past what Node's heap takes three times over.
 * - body-budget-mib 512 (1..4096, at least the body limit): a parsed body costs the heap about
 *   three times its bytes; 4 GiB is Node's default heap limit, so more could never be held.
 * - held-mib 256 (1..4096, at most the body budget; unsaid, 256 or the budget if lower): held
 *   requests count against the budget too.
 * - request-timeout-s 60 (1..600): 64 MiB in 60 s is 1.1 MiB/s; a request slower than an OpenAI
 *   client's 600 s timeout is not being sent by one.
 * - max-connections 1024 (1..65536): a full on-demand queue beside a serve's batch; 65536 is past
 *   any file-descriptor limit a router is given.
 */
export const ROUTER_HTTP_FLAGS = {
  'body-limit-mib': { min: 1, max: 1024, default: DEFAULT_BODY_LIMIT_BYTES / MIB, unit: 'MiB', what: 'a request body (413 past it)' },
  'body-budget-mib': {
    min: 1,
    max: 4096,
    default: DEFAULT_BODY_BUDGET_BYTES / MIB,
    unit: 'MiB',
    what: 'the bodies of all requests together, received or being answered (503 body_budget past it)',
  },
  'held-mib': {
    min: 1,
    max: 4096,
    default: DEFAULT_HELD_BYTES / MIB,
    unit: 'MiB',
    what: 'the bodies the on-demand queues hold, a part of that budget (503 queue_full past it)',
  },
  'request-timeout-s': {
    min: 1,
    max: 600,
    default: DEFAULT_REQUEST_TIMEOUT_MS / 1000,
    unit: 'seconds',
    what: 'a whole request, headers and body, from its first byte (408 past it)',
  },
  'max-connections': { min: 1, max: 65_536, default: DEFAULT_MAX_CONNECTIONS, unit: 'connections', what: 'open at once (closed as they arrive past it)' },
} as const satisfies Record<string, FlagBound>;

export type RouterHttpFlag = keyof typeof ROUTER_HTTP_FLAGS;

export interface RouterHttpBounds {
  bodyLimitBytes: number;
  bodyBudgetBytes: number;
  heldBytesLimit: number;
  requestTimeoutMs: number;
  maxConnections: number;
}

/** The usage lines of the flags: each with its default and bound. */
export function httpFlagsUsage(): string {
  return Object.entries(ROUTER_HTTP_FLAGS)
    .map(([name, b]) => `  --${name.padEnd(18)} ${b.what}; default ${b.default}, ${b.min}..${b.max} ${b.unit}`)
    .join('\n');
}

/** The bounds the flags give (a flag not given: its default), or every problem with them, each naming its flag. */
export function routerHttpBounds(given: Partial<Record<RouterHttpFlag, string>>): { ok: true; bounds: RouterHttpBounds } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  const value = (name: RouterHttpFlag): number => {
    const b: FlagBound = ROUTER_HTTP_FLAGS[name];
    const text = given[name];
    if (text === undefined) return b.default;
    const n = wholeNumber(text);
    if (n >= b.min && n <= b.max) return n;
    problems.push(`--${name} must be a whole number of ${b.unit} in ${b.min}..${b.max} (got '${text}')`);
    return b.default;
  };
  const said = (name: RouterHttpFlag, n: number) => `--${name} ${n}${given[name] === undefined ? ' (the default)' : ''}`;
  const bodyLimit = value('body-limit-mib');
  const budget = value('body-budget-mib');
  // Unsaid, the queues take what they would by default as far as the budget allows.
  const held = given['held-mib'] === undefined ? Math.min(ROUTER_HTTP_FLAGS['held-mib'].default, budget) : value('held-mib');
  const timeoutS = value('request-timeout-s');
  const connections = value('max-connections');
  if (problems.length === 0 && budget < bodyLimit) {
    problems.push(
      `${said('body-budget-mib', budget)} is below ${said('body-limit-mib', bodyLimit)}: a body the router takes could never fit its budget for all bodies together`,
    );
  }
  if (problems.length === 0 && held > budget) {
    problems.push(
      `${said('held-mib', held)} is above ${said('body-budget-mib', budget)}: held requests count against that budget too, so the on-demand queues could never hold that much`,
    );
  }
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    bounds: {
      bodyLimitBytes: bodyLimit * MIB,
      bodyBudgetBytes: budget * MIB,
      heldBytesLimit: held * MIB,
      requestTimeoutMs: timeoutS * 1000,
      maxConnections: connections,
    },
  };
}

/** What the start line says of them. */
export function describeHttpBounds(b: RouterHttpBounds): string {
  return (
    `bodies up to ${b.bodyLimitBytes / MIB} MiB each and ${b.bodyBudgetBytes / MIB} MiB together, ${b.heldBytesLimit / MIB} MiB of them held; ` +
    `a request whole within ${b.requestTimeoutMs / 1000} s; ${b.maxConnections} connections`
  );
}
