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
} as const;

export function containerName(node: string, serve: string): string {
  return `gpures-${node}-${serve}`;
}

/** Where the worker reaches the serve: an unspecified bind address is reached over loopback. */
export function serveBaseUrl(serve: Pick<ServeSpec, 'bind' | 'port'>): string {
  const host = serve.bind === '0.0.0.0' ? '127.0.0.1' : serve.bind === '::' ? '::1' : serve.bind;
  return `http://${host.includes(':') ? `[${host}]` : host}:${serve.port}`;
}

export function serveHealthUrl(serve: Pick<ServeSpec, 'bind' | 'port' | 'healthPath'>): string {
  return `${serveBaseUrl(serve)}${serve.healthPath}`;
}

/** vLLM's OpenAI server arguments; the manifest's extra args come last so they can override. */
/**
 * The container's CMD: vLLM's arguments for an openai serve (its image's entrypoint is the
 * server), the manifest's args otherwise; empty keeps the image's own.
 */
export function serveCommand(serve: ServeSpec): string[] {
  return (serve.api ?? 'openai') === 'openai' ? vllmCommand(serve) : [...serve.args];
}

export function vllmCommand(serve: ServeSpec): string[] {
  return [
    '--model', serve.model,
    ...(serve.revision ? ['--revision', serve.revision] : []),
    '--served-model-name', serve.servedModelName,
    '--host', '0.0.0.0',
    '--port', String(serve.containerPort),
    ...serve.args,
  ];
}

export function serveLabels(node: string, serve: ServeSpec, gpu: GpuSpec, reservation: string): Record<string, string> {
  return {
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
/** vLLM flags whose value is a credential. */
const SECRET_FLAGS = ['--api-key'];

/**
 * The serve as it may appear in workflow history: env values (tokens such as HF_TOKEN live
 * there) and the values of credential flags replaced, names kept as evidence.
 */
export function redactServe(serve: ServeSpec): ServeSpec {
  const args = serve.args.map((a, i) => {
    if (SECRET_FLAGS.some((f) => a.startsWith(`${f}=`))) return `${a.slice(0, a.indexOf('=') + 1)}${REDACTED}`;
    const prev = serve.args[i - 1];
    return prev !== undefined && SECRET_FLAGS.includes(prev) ? REDACTED : a;
  });
  return { ...serve, args, env: Object.fromEntries(Object.keys(serve.env).map((k) => [k, REDACTED])) };
}

/** Replaces the serve's secret values (env values, credential flags) wherever they appear in text. */
export function redactSecrets(text: string, serve: ServeSpec): string {
  const secrets = [
    ...Object.values(serve.env),
    ...serve.args.flatMap((a, i) => {
      const eq = SECRET_FLAGS.find((f) => a.startsWith(`${f}=`));
      if (eq) return [a.slice(eq.length + 1)];
      return SECRET_FLAGS.includes(a) && serve.args[i + 1] !== undefined ? [serve.args[i + 1] as string] : [];
    }),
  ].filter((v) => v.length >= 4);
  return secrets.reduce((out, secret) => out.split(secret).join(REDACTED), text);
}
