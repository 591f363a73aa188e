// How a declared serve maps onto a container and the URLs it answers on. Pure, so the workflow
// can record the exact plan in history and activities apply it.
import type { GpuSpec, ServeSpec } from './types';

export const LABEL = {
  managed: 'gpures.managed',
  node: 'gpures.node',
  serve: 'gpures.serve',
  gpuRole: 'gpures.gpu_role',
  gpuUuid: 'gpures.gpu_uuid',
  class: 'gpures.class',
  vramMib: 'gpures.vram_mib',
  reservation: 'gpures.reservation',
  /** The operation run that started the container: a ledger reconciling from the box keeps it as the holder. */
  holder: 'gpures.holder',
} as const;

export function containerName(node: string, serve: string): string {
  return `gpures-${node}-${serve}`;
}

/** http://host:port, an IPv6 host in brackets. */
export function httpUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Where the worker reaches the serve: an unspecified bind address is reached over loopback. */
export function serveBaseUrl(serve: Pick<ServeSpec, 'bind' | 'port'>): string {
  return httpUrl(serve.bind === '0.0.0.0' ? '127.0.0.1' : serve.bind === '::' ? '::1' : serve.bind, serve.port);
}

export function serveHealthUrl(serve: Pick<ServeSpec, 'bind' | 'port' | 'healthPath'>): string {
  return `${serveBaseUrl(serve)}${serve.healthPath}`;
}

/**
 * The container's CMD: vLLM's arguments for an openai serve (its image's entrypoint is the
 * server), the manifest's args otherwise; empty keeps the image's own.
 */
export function serveCommand(serve: ServeSpec): string[] {
  return (serve.api ?? 'openai') === 'openai' ? vllmCommand(serve) : [...serve.args];
}

/** vLLM's OpenAI server arguments; the manifest's extra args come last so they can override. */
export function vllmCommand(serve: ServeSpec): string[] {
  return [
    '--model',
    serve.model,
    ...(serve.revision ? ['--revision', serve.revision] : []),
    '--served-model-name',
    serve.servedModelName,
    '--host',
    '0.0.0.0',
    '--port',
    String(serve.containerPort),
    ...serve.args,
  ];
}

export function serveLabels(node: string, serve: ServeSpec, gpu: GpuSpec, reservation: string, holder?: string): Record<string, string> {
  return {
    ...(holder ? { [LABEL.holder]: holder } : {}),
    [LABEL.managed]: 'true',
    [LABEL.node]: node,
    [LABEL.serve]: serve.name,
    [LABEL.gpuRole]: gpu.role,
    [LABEL.gpuUuid]: gpu.uuid,
    [LABEL.class]: serve.class,
    [LABEL.vramMib]: String(serve.vramMib),
    [LABEL.reservation]: reservation,
  };
}

export const REDACTED = '<redacted>';

/**
 * A flag names a secret when one of its words (split on '-' and '_') is one of these:
 * `--hf-token`, `--api-key`, `--db-password`, `--client-secret`, but not `--tokenizer`,
 * `--max-num-batched-tokens` or `--ssl-keyfile` (a path).
 */
const SECRET_WORDS = new Set(['token', 'key', 'apikey', 'secret', 'password', 'passwd', 'credential', 'credentials']);

export function isSecretFlag(flag: string): boolean {
  return (
    flag.startsWith('--') &&
    flag
      .slice(2)
      .toLowerCase()
      .split(/[-_]/)
      .some((w) => SECRET_WORDS.has(w))
  );
}

/** The key vLLM then wants as `Authorization: Bearer` on every /v1 route (/health and the sleep endpoints stay open). */
export const SERVE_API_KEY_ENV = 'VLLM_API_KEY';

/**
 * vLLM flags with an environment equivalent vLLM or huggingface_hub reads when the flag is
 * absent: how a secret reaches an openai serve without being on its command line.
 */
export const SECRET_FLAG_ENV: Readonly<Record<string, string>> = { '--api-key': SERVE_API_KEY_ENV, '--hf-token': 'HF_TOKEN' };

export interface FlagOccurrence {
  /** The flag as written before any '=' (`--hf-token`, `--HF_TOKEN`). */
  flag: string;
  /** Lowercase with '_' as '-' (`--api-key` for `--api_key`): vLLM's argument parser takes both spellings. */
  canonical: string;
  /** Index of the flag in args, and of the element holding the value (the flag's own for `--flag=value` or no value). */
  index: number;
  valueIndex: number;
  /** Undefined for a flag followed by another flag or by nothing. */
  value: string | undefined;
}

/** Every occurrence of the flags `matches` accepts (by canonical spelling), in both the `--flag value` and `--flag=value` forms. */
export function findFlags(args: readonly string[], matches: (canonical: string) => boolean): FlagOccurrence[] {
  const found: FlagOccurrence[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const eq = arg.indexOf('=');
    const flag = eq >= 0 ? arg.slice(0, eq) : arg;
    const canonical = flag.toLowerCase().replace(/_/g, '-');
    if (!matches(canonical)) continue;
    const next = args[i + 1];
    if (eq >= 0) found.push({ flag, canonical, index: i, valueIndex: i, value: arg.slice(eq + 1) });
    else if (next === undefined || next.startsWith('--')) found.push({ flag, canonical, index: i, valueIndex: i, value: undefined });
    else found.push({ flag, canonical, index: i, valueIndex: ++i, value: next });
  }
  return found;
}

export type SecretArg = FlagOccurrence & { value: string };

/**
 * Every secret flag in args that carries a value. A bare secret flag (`--hf-token` followed by
 * another flag or nothing: "use the stored login") carries none and is not listed.
 */
export function findSecretArgs(args: readonly string[]): SecretArg[] {
  return findFlags(args, isSecretFlag).filter((f): f is SecretArg => f.value !== undefined);
}

/**
 * The serve with the secret flags of its args moved to their environment equivalents
 * (SECRET_FLAG_ENV), so neither the container's command line nor `ps` on the host shows them.
 * The manifest's rules have already refused any other secret flag and any clash with env.
 */
export function secretArgsToEnv(serve: ServeSpec): ServeSpec {
  const secrets = findSecretArgs(serve.args).filter((s) => SECRET_FLAG_ENV[s.canonical] !== undefined);
  if (!secrets.length) return serve;
  const drop = new Set(secrets.flatMap((s) => [s.index, s.valueIndex]));
  const env = { ...serve.env };
  for (const s of secrets) env[SECRET_FLAG_ENV[s.canonical] as string] = s.value;
  return { ...serve, args: serve.args.filter((_, i) => !drop.has(i)), env };
}

/** vLLM's flag that puts its memory under the sleep-mode allocator; without it /sleep frees nothing. */
export const SLEEP_MODE_FLAG = '--enable-sleep-mode';
/** vLLM serves /sleep, /wake_up and /is_sleeping only with this set to 1. */
export const SLEEP_ENDPOINTS_ENV = 'VLLM_SERVER_DEV_MODE';

/** A serve evicted by sleeping gets what vLLM's sleep mode needs: the flag (unless given) and the endpoints' variable. */
export function withSleepMode(serve: ServeSpec): ServeSpec {
  if (!serve.sleep) return serve;
  const args = serve.args.some((a) => a === SLEEP_MODE_FLAG || a.replace(/_/g, '-') === SLEEP_MODE_FLAG) ? serve.args : [...serve.args, SLEEP_MODE_FLAG];
  return { ...serve, args, env: { ...serve.env, [SLEEP_ENDPOINTS_ENV]: '1' } };
}

/**
 * The serve as it may appear in workflow history: env values (tokens such as HF_TOKEN live
 * there) and the values of secret flags replaced, names kept as evidence.
 */
export function redactServe(serve: ServeSpec): ServeSpec {
  const args = [...serve.args];
  for (const s of findSecretArgs(serve.args)) args[s.valueIndex] = s.index === s.valueIndex ? `${s.flag}=${REDACTED}` : REDACTED;
  return { ...serve, args, env: Object.fromEntries(Object.keys(serve.env).map((k) => [k, REDACTED])) };
}

/** Replaces the serve's secret values (env values, secret flags' values) wherever they appear in text. */
export function redactSecrets(text: string, serve: ServeSpec): string {
  const secrets = [...Object.values(serve.env), ...findSecretArgs(serve.args).map((s) => s.value)].filter((v) => v.length >= 4);
  // Longest first, so a secret that contains another is not left half visible.
  return secrets.sort((a, b) => b.length - a.length).reduce((out, secret) => out.split(secret).join(REDACTED), text);
}
