// What a name, a GPU id and every duration or size may be, in one place: the manifest, the CLI,
// the acquisition API and the workflows' own input checks all read these, so a value one of them
// accepts is never refused (or, worse, half-used) by another.
//
// PURE: no node built-ins, no I/O; workflow code imports it.

/**
 * Node names, GPU roles and serve names: a DNS label (RFC 1123: lowercase letters, digits and
 * '-', 1..63 characters, no '-' at either end). They become Docker container names
 * (`gpures-<node>-<serve>`, Docker allows [a-zA-Z0-9][a-zA-Z0-9_.-]*), Docker label values,
 * workflow ids (`ledger/<node>/<role>`), task queues (`gpures.<node>`) and visibility queries
 * quoted with '...': no '/', '.', '..', quote, space, shell metacharacter or non-ASCII letter can
 * get through.
 */
export const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const NAME_RULE = "lowercase letters, digits and '-', 1..63 characters, starting and ending with a letter or digit";

const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
/**
 * A GPU as nvidia-smi names it: `GPU-<uuid>`, or a MIG instance as `MIG-<uuid>` (drivers R470
 * and later). The older `MIG-GPU-<uuid>/<gi>/<ci>` form is refused: its '/' would reach container
 * labels and device requests, and `nvidia-smi -L` on a current driver prints the MIG-<uuid> form.
 */
export const GPU_UUID_PATTERN = new RegExp(`^(GPU|MIG)-${UUID}$`);
export const GPU_UUID_RULE = "'GPU-' or 'MIG-' and a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), as `nvidia-smi -L` prints it";

// Docker's reference grammar (github.com/distribution/reference, regexp.go), written out piece by
// piece so each can be checked against it there.
const ALPHANUMERIC = '[a-z0-9]+';
const SEPARATOR = '(?:[._]|__|-+)';
const PATH_COMPONENT = `${ALPHANUMERIC}(?:${SEPARATOR}${ALPHANUMERIC})*`;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const HOST = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])`;
const IMAGE_NAME = `(?:${HOST}(?::[0-9]+)?/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '\\w[\\w.-]{0,127}';
const DIGEST = 'sha256:[a-f0-9]{64}';
const IMAGE_REFERENCE_PATTERN = new RegExp(`^(${IMAGE_NAME})(?::${TAG})?(?:@${DIGEST})?$`);
/** Docker refuses a repository name longer than this. */
const MAX_IMAGE_NAME = 255;
/**
 * The longest reference the grammar allows: a name, a tag and a digest at their longest. Checked
 * before the pattern: a host and a first path component can match the same text, so a long
 * near-miss would backtrack.
 */
const MAX_IMAGE_REFERENCE = MAX_IMAGE_NAME + ':'.length + 128 + '@sha256:'.length + 64;

/**
 * Whether `v` is an image reference Docker would parse: `[host[:port]/]path[:tag][@sha256:hex]`.
 * It goes unescaped into Docker API paths (`GET /images/<ref>/json`): dockerd answers a '..'
 * component with a redirect that docker-modem follows with a request nothing listens to for
 * errors (ENOTFOUND crashed the worker), and a space fails only when the operation runs.
 */
export function isImageReference(v: unknown): v is string {
  if (typeof v !== 'string' || v.length > MAX_IMAGE_REFERENCE) return false;
  const name = IMAGE_REFERENCE_PATTERN.exec(v)?.[1];
  return name !== undefined && name.length <= MAX_IMAGE_NAME;
}
/** Completes "must be …". */
export const IMAGE_REFERENCE_RULE =
  "a Docker image reference such as \"vllm/vllm-openai:v0.11.0\": [host[:port]/]name[:tag][@sha256:digest], the name lowercase letters and digits joined by '.', '_', '__', '-' or '/'";

/** POSIX environment variable names: what a shell and Docker's `--env NAME=value` take. */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface Bound {
  min: number;
  max: number;
  unit: 'seconds' | 'MiB';
}

/**
 * Every duration and size a manifest or an operation's input may carry, as whole numbers. Past
 * these a value is a typo or worse (1e300 s quiesced a tier and then looped on Temporal's
 * "Invalid duration string"), never a setting.
 */
export const BOUNDS = {
  /** 1 TiB: above any GPU's memory. */
  capacityMib: { min: 1, max: 1_048_576, unit: 'MiB' },
  reserveMib: { min: 0, max: 1_048_575, unit: 'MiB' },
  vramMib: { min: 1, max: 1_048_576, unit: 'MiB' },
  /** A day: a large model's first download and load fit well inside it. */
  startTimeoutS: { min: 1, max: 86_400, unit: 'seconds' },
  /** How long a start slot's holder may hold it by its own bounds (a stop's timeout and release check): a start's at most. */
  holdS: { min: 0, max: 86_400, unit: 'seconds' },
  /** Docker's grace period before SIGKILL: an hour is already far beyond any serve's shutdown. */
  stopTimeoutS: { min: 0, max: 3_600, unit: 'seconds' },
  /** How long a victim (or a serve going down) may drain its in-flight requests. */
  drainTimeoutS: { min: 1, max: 3_600, unit: 'seconds' },
  /** How long an acquisition waits for an evicted serve's VRAM to come back on nvidia-smi. */
  releaseTimeoutS: { min: 1, max: 600, unit: 'seconds' },
  /**
   * How long a serve that came up by an acquisition or a restore stays safe from eviction. 0 turns
   * it off; past an hour it no longer damps thrash, it pins the serve, which class = "resident" says.
   */
  minResidencyS: { min: 0, max: 3_600, unit: 'seconds' },
  /**
   * A fixed lease, and how far one extension may reach from now: a week covers a job left over a
   * weekend; a serve meant to stay longer is brought up without a lease, not leased for a year.
   */
  leaseS: { min: 1, max: 604_800, unit: 'seconds' },
  /** An idle lease's time to live without a routed request: a day (Ollama keeps 5 min, llama-swap's ttl is per model). */
  idleTtlS: { min: 1, max: 86_400, unit: 'seconds' },
  /** What a sleeping serve keeps on its GPU: 0 (nothing) up to a whole GPU's memory. */
  sleepResidualMib: { min: 0, max: 1_048_576, unit: 'MiB' },
  /** Host RAM: 16 TiB, above any single host. */
  hostRamMib: { min: 1, max: 16_777_216, unit: 'MiB' },
} as const satisfies Record<string, Bound>;

export type BoundName = keyof typeof BOUNDS;

export function withinBound(bound: Bound, v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= bound.min && v <= bound.max;
}

/** Completes "must be …": `a whole number of seconds in 1..3600`. */
export function boundRule(bound: Bound): string {
  return `a whole number of ${bound.unit} in ${bound.min}..${bound.max}`;
}

/** `gpures serves logs` (src/domain/logs.ts): what one command reads of a serve's output. */
export const LOG_BOUNDS = {
  /** llama-swap's and docker's habit is a screenful or two; 10,000 lines is a whole vLLM start-up many times over. */
  tail: { default: 200, max: 10_000 },
  /** The oldest --since: a month, past any log a box keeps for a container that still exists. */
  sinceS: { max: 30 * 86_400 },
  /** What one answer without --follow prints at most: its last bytes are kept, the first ones said to be left out. */
  maxBytes: 4 * 1024 * 1024,
  /**
   * A line longer than this is written out in pieces rather than held whole: a secret that straddles
   * two pieces of such a line is not redacted (vLLM's lines are a few hundred bytes).
   */
  maxLineBytes: 64 * 1024,
  /**
   * A failed start's last lines, kept by the worker when its compensation removes the container
   * (src/adapters/failed-starts/files.ts): a vLLM traceback fits, and one file per serve stays small.
   */
  failedStart: { lines: 200, bytes: 256 * 1024, files: 64 },
  /**
   * How long --follow waits for a container that does not exist yet (a `serves up` admitted, its
   * start slot or room not yet had): the serve's start_timeout_s, or this with --node, which has no manifest.
   */
  followWaitS: 600,
} as const;
