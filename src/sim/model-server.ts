// A small vLLM imitation for the simulated box: the same arguments, the same endpoints and the
// same observable states (503 while "loading", then 200), so bring-up, identity checks, drain
// and eviction run against it exactly as against a vLLM container, without a GPU.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { envNumber, SIM_MS, SleepMode, SleepModeError, sleepModeFromEnv } from './sleep-mode';
import { writeFileAtomic } from './state-dir';
import type { Draw, SleepModeOptions } from './sleep-mode';

export interface VllmArgs {
  model: string;
  revision?: string;
  servedModelName: string;
  host: string;
  port: number;
  /** --enable-sleep-mode was given. */
  sleepMode?: true;
}

export interface ModelServerOptions extends VllmArgs {
  /** Id reported by /v1/models (default: the served model name); another value is an identity mismatch. */
  reportedId?: string;
  /** VLLM_API_KEY: as vLLM, every /v1 route then answers 401 without `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Until then /health answers 503 and the API 503, as vLLM while it loads; 'never' stays loading. */
  startDelayMs: number | 'never';
  /** Time taken to answer a completion or embedding, unless the request body sets `sim_delay_ms`. */
  responseDelayMs: number;
  /** How long a SIGTERM waits for in-flight requests before the process exits anyway. */
  drainTimeoutMs: number;
  /** vLLM's sleep mode (src/sim/sleep-mode.ts); without it, no sleep endpoints. */
  sleep?: SleepModeOptions;
  /** Where the serve's GPU and host-RAM draw is written as it sleeps and wakes, for the fake nvidia-smi (SIM_DRAW_FILE). */
  drawFile?: string;
  log?: (line: string) => void;
}

export interface ModelServer {
  readonly host: string;
  readonly port: number;
  /** Requests being answered now (what vllm:num_requests_running reports). */
  inFlight(): number;
  ready(): boolean;
  /** Stops accepting connections and waits (bounded) for in-flight requests; true when they all finished. */
  shutdown(drainTimeoutMs?: number): Promise<boolean>;
}

const DEFAULT_MODEL = 'facebook/opt-125m';
// Loopback unless told (vLLM's own default is every interface): the simulated server runs on the host itself, not in a container.
export const DEFAULTS = { startDelayMs: 300, responseDelayMs: 0, drainTimeoutMs: 30_000, port: 8000, host: '127.0.0.1' } as const;

/** Parses vLLM's api_server arguments (`--flag value` and `--flag=value`, a leading `serve MODEL`); others are ignored. */
export function parseVllmArgs(argv: readonly string[]): VllmArgs {
  const out: { model?: string; revision?: string; served?: string; host: string; port: number; sleepMode?: true } = {
    host: DEFAULTS.host,
    port: DEFAULTS.port,
  };
  let i = 0;
  if (argv[0] === 'serve' && argv[1] !== undefined && !argv[1].startsWith('-')) {
    out.model = argv[1];
    i = 2;
  }
  const known = new Set(['--model', '--revision', '--served-model-name', '--host', '--port']);
  for (; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--enable-sleep-mode' || arg === '--enable_sleep_mode') out.sleepMode = true;
    let flag: string;
    let value: string | undefined;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      flag = arg.slice(0, eq);
      value = arg.slice(eq + 1);
    } else {
      flag = arg;
      if (known.has(flag)) value = argv[++i];
    }
    if (!known.has(flag)) continue;
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case '--model':
        out.model = value;
        break;
      case '--revision':
        out.revision = value;
        break;
      case '--served-model-name':
        out.served = value;
        break;
      case '--host':
        out.host = value;
        break;
      case '--port': {
        const port = Number(value);
        if (!/^\d+$/.test(value) || port > 65535) throw new Error(`invalid --port: ${value}`);
        out.port = port;
        break;
      }
    }
  }
  const model = out.model ?? DEFAULT_MODEL;
  return {
    model,
    ...(out.revision !== undefined ? { revision: out.revision } : {}),
    servedModelName: out.served ?? model,
    host: out.host,
    port: out.port,
    ...(out.sleepMode ? { sleepMode: true as const } : {}),
  };
}

const envMs = (env: NodeJS.ProcessEnv, key: string, fallback: number) => envNumber(env, key, fallback, SIM_MS);

/** SIM_START_DELAY_MS (ms or 'never'), SIM_MODEL_ID, SIM_RESPONSE_DELAY_MS, SIM_DRAIN_TIMEOUT_MS, SIM_DRAW_FILE, and sleep mode's (sleepModeFromEnv). */
export function optionsFromEnv(args: VllmArgs, env: NodeJS.ProcessEnv): ModelServerOptions {
  const start = env['SIM_START_DELAY_MS'];
  const reportedId = env['SIM_MODEL_ID'];
  const drawFile = env['SIM_DRAW_FILE'];
  const apiKey = env['VLLM_API_KEY'];
  return {
    ...args,
    ...(reportedId ? { reportedId } : {}),
    ...(apiKey ? { apiKey } : {}),
    sleep: sleepModeFromEnv(args.sleepMode === true, env),
    ...(drawFile ? { drawFile } : {}),
    startDelayMs: start === 'never' ? 'never' : envMs(env, 'SIM_START_DELAY_MS', DEFAULTS.startDelayMs),
    responseDelayMs: envMs(env, 'SIM_RESPONSE_DELAY_MS', DEFAULTS.responseDelayMs),
    drainTimeoutMs: envMs(env, 'SIM_DRAIN_TIMEOUT_MS', DEFAULTS.drainTimeoutMs),
  };
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The largest request body read, as the router's own limit: vision requests carry base64 images. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on('end', () =>
      size > MAX_BODY_BYTES
        ? reject(new HttpError(413, 'BadRequestError', `request body over ${MAX_BODY_BYTES} bytes`))
        : resolve(Buffer.concat(chunks).toString('utf8')),
    );
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  sendJson(res, status, { error: { message, type, param: null, code: status } });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The text of a chat message's content: a string, or the text parts of a multimodal list. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => {
      if (!isRecord(part)) return '';
      if (part['type'] === 'text' && typeof part['text'] === 'string') return part['text'];
      return `[${String(part['type'])}]`;
    })
    .filter(Boolean)
    .join(' ');
}

function words(text: string): string[] {
  return text.split(/\s+/).filter(Boolean);
}

/** A deterministic unit vector of 8 dimensions derived from the text. */
export function simEmbedding(text: string, dims = 8): number[] {
  const digest = createHash('sha256').update(text).digest();
  const raw = Array.from({ length: dims }, (_, i) => ((digest[i % digest.length] ?? 0) / 255) * 2 - 1);
  const norm = Math.sqrt(raw.reduce((s, x) => s + x * x, 0)) || 1;
  return raw.map((x) => Math.round((x / norm) * 1e6) / 1e6);
}

export function startModelServer(opts: ModelServerOptions): Promise<ModelServer> {
  const log = opts.log ?? (() => undefined);
  const id = opts.reportedId ?? opts.servedModelName;
  const startedAt = Date.now();
  let readyAt = opts.startDelayMs === 'never' ? Infinity : startedAt + opts.startDelayMs;
  let inFlight = 0;
  let draining = false;
  let seq = 0;
  const idleWaiters: (() => void)[] = [];

  const isReady = () => Date.now() >= readyAt;
  const sleepMode = opts.sleep ? new SleepMode(opts.sleep, (draw) => writeDraw(draw)) : undefined;
  /** Atomically, so the fake nvidia-smi never reads half a file. */
  function writeDraw(draw: Draw): void {
    if (!opts.drawFile) return;
    writeFileAtomic(opts.drawFile, JSON.stringify(draw));
    log(`draw: ${draw.gpuMib} MiB on the GPU, ${draw.hostRamMib} MiB of host RAM (sleep level ${draw.level})`);
  }
  if (Number.isFinite(readyAt)) {
    setTimeout(() => log(`ready: serving ${id}`), Math.max(0, readyAt - Date.now())).unref();
  }

  /** Counts the request as running until its response is finished or its connection gone. */
  const running = new Set<ServerResponse>();
  function track(res: ServerResponse): void {
    inFlight++;
    running.add(res);
    let done = false;
    res.on('close', () => {
      if (done) return;
      done = true;
      running.delete(res);
      inFlight--;
      if (inFlight === 0) idleWaiters.splice(0).forEach((w) => w());
    });
  }

  function requestDelay(body: Record<string, unknown>): number {
    const d = body['sim_delay_ms'];
    if (d === undefined) return opts.responseDelayMs;
    if (typeof d !== 'number' || !Number.isFinite(d) || d < 0 || d > SIM_MS.max)
      throw new HttpError(400, 'BadRequestError', `sim_delay_ms must be a number of milliseconds in 0..${SIM_MS.max}`);
    return d;
  }

  function checkModel(body: Record<string, unknown>): void {
    const m = body['model'];
    if (m === undefined || m === null) return;
    if (m !== opts.servedModelName && m !== id)
      throw new HttpError(404, 'NotFoundError', `The model \`${typeof m === 'string' ? m : JSON.stringify(m)}\` does not exist.`);
  }

  async function parseJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
    const text = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BadRequestError', 'request body is not valid JSON');
    }
    if (!isRecord(body)) throw new HttpError(400, 'BadRequestError', 'request body must be a JSON object');
    return body;
  }

  async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await parseJsonBody(req);
    checkModel(body);
    const messages = body['messages'];
    if (!Array.isArray(messages) || messages.length === 0) throw new HttpError(400, 'BadRequestError', 'messages must be a non-empty list');
    const list: unknown[] = messages;
    const delay = requestDelay(body);
    const lastUser = [...list].reverse().find((m) => isRecord(m) && m['role'] === 'user');
    const prompt = list.map((m) => (isRecord(m) ? contentText(m['content']) : '')).join(' ');
    const question = isRecord(lastUser) ? contentText(lastUser['content']) : '';
    const answer = `[${id}] echo: ${question.length > 200 ? `${question.slice(0, 200)}...` : question}`;
    const usage = { prompt_tokens: words(prompt).length, completion_tokens: words(answer).length, total_tokens: words(prompt).length + words(answer).length };
    const completionId = `chatcmpl-sim-${++seq}`;
    const created = Math.floor(Date.now() / 1000);

    if (body['stream'] === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
      const chunk = (delta: Record<string, unknown>, finish: string | null) => {
        const event = {
          id: completionId,
          object: 'chat.completion.chunk',
          created,
          model: opts.servedModelName,
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        };
        return `data: ${JSON.stringify(event)}\n\n`;
      };
      res.write(chunk({ role: 'assistant', content: '' }, null));
      const pieces = answer.split(/(?<=\s)/);
      const step = pieces.length > 0 ? delay / pieces.length : delay;
      for (const piece of pieces) {
        if (step > 0) await sleep(step);
        if (res.destroyed) return;
        res.write(chunk({ content: piece }, null));
      }
      res.write(chunk({}, 'stop'));
      const streamOptions = body['stream_options'];
      if (isRecord(streamOptions) && streamOptions['include_usage'] === true) {
        res.write(
          `data: ${JSON.stringify({ id: completionId, object: 'chat.completion.chunk', created, model: opts.servedModelName, choices: [], usage })}\n\n`,
        );
      }
      res.end('data: [DONE]\n\n');
      return;
    }

    if (delay > 0) await sleep(delay);
    sendJson(res, 200, {
      id: completionId,
      object: 'chat.completion',
      created,
      model: opts.servedModelName,
      choices: [{ index: 0, message: { role: 'assistant', content: answer, tool_calls: [] }, logprobs: null, finish_reason: 'stop', stop_reason: null }],
      usage,
      // Not in OpenAI's shape: when the serve answered, so a test can order a stop after the
      // serve's last answer without trusting the client's clock of when it read the body.
      sim_answered_at_ms: Date.now(),
    });
  }

  async function embeddings(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await parseJsonBody(req);
    checkModel(body);
    const input = body['input'];
    let texts: string[];
    if (typeof input === 'string') texts = [input];
    else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'string')) texts = input.map(String);
    else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'number')) texts = [JSON.stringify(input)];
    else if (Array.isArray(input) && input.length > 0 && input.every((x) => Array.isArray(x))) texts = input.map((x) => JSON.stringify(x));
    else throw new HttpError(400, 'BadRequestError', 'input must be a string, a list of strings or token ids');
    const delay = requestDelay(body);
    if (delay > 0) await sleep(delay);
    const tokens = texts.reduce((n, t) => n + Math.max(1, words(t).length), 0);
    sendJson(res, 200, {
      id: `embd-sim-${++seq}`,
      object: 'list',
      created: Math.floor(Date.now() / 1000),
      model: opts.servedModelName,
      data: texts.map((t, index) => ({ index, object: 'embedding', embedding: simEmbedding(t) })),
      usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
    });
  }

  function metrics(res: ServerResponse): void {
    const label = `model_name="${id.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running{${label}} ${inFlight}`,
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting{${label}} 0`,
      '',
    ].join('\n');
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** Sleep mode's endpoints: undefined when the path is none of them (or they are not served). */
  async function sleepEndpoint(path: string, method: string, url: URL, req: IncomingMessage, res: ServerResponse): Promise<true | undefined> {
    if (!sleepMode?.endpoints) return undefined;
    const routes: Record<string, string> = { '/sleep': 'POST', '/wake_up': 'POST', '/is_sleeping': 'GET', '/collective_rpc': 'POST' };
    const allowed = routes[path];
    if (allowed === undefined) return undefined;
    if (method !== allowed) {
      sendJson(res, 405, { detail: 'Method Not Allowed' });
      return true;
    }
    try {
      if (path === '/is_sleeping') {
        sendJson(res, 200, { is_sleeping: sleepMode.sleeping() });
        return true;
      }
      if (path === '/sleep') {
        // As vLLM's: a sleep aborts what is in flight; a drain must come first.
        const aborted = inFlight;
        await sleepMode.sleep(url.searchParams.get('level'));
        for (const r of running) r.destroy();
        log(`sleeping at level ${sleepMode.draw().level}${aborted ? `; ${aborted} request(s) in flight aborted` : ''}`);
      } else if (path === '/wake_up') {
        await sleepMode.wakeUp(url.searchParams.getAll('tags'));
        log(sleepMode.sleeping() ? `partly awake (${url.searchParams.getAll('tags').join(', ')})` : 'awake');
      } else {
        const body = await parseJsonBody(req);
        if (body['method'] !== 'reload_weights') throw new HttpError(400, 'BadRequestError', 'the simulation runs only collective_rpc reload_weights');
        await sleepMode.reloadWeights();
        log('weights reloaded');
      }
      res.writeHead(200, { 'content-length': 0 });
      res.end();
    } catch (err) {
      if (!(err instanceof SleepModeError)) throw err;
      sendError(res, err.status, err.status === 400 ? 'BadRequestError' : 'InternalServerError', err.message);
    }
    return true;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const path = url.pathname;
    const method = req.method ?? 'GET';
    if (await sleepEndpoint(path, method, url, req, res)) return;
    if (path === '/health') {
      res.writeHead(isReady() && !draining ? 200 : 503, { 'content-length': 0 });
      res.end();
      return;
    }
    if (path === '/metrics' && method === 'GET') return metrics(res);
    // vLLM's check: every /v1 path, the header compared whole.
    if (opts.apiKey !== undefined && path.startsWith('/v1') && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      return sendJson(res, 401, { error: 'Unauthorized' });
    }
    const routes: Record<string, string> = { '/v1/models': 'GET', '/v1/chat/completions': 'POST', '/v1/embeddings': 'POST' };
    const allowed = routes[path];
    if (allowed === undefined) return sendJson(res, 404, { detail: 'Not Found' });
    if (method !== allowed) return sendJson(res, 405, { detail: 'Method Not Allowed' });
    if (!isReady()) return sendError(res, 503, 'ServiceUnavailableError', 'model is loading');
    if (path !== '/v1/models' && sleepMode && !sleepMode.serving()) {
      return sendError(
        res,
        503,
        'ServiceUnavailableError',
        sleepMode.sleeping() ? 'the engine is sleeping: POST /wake_up first' : 'the weights are not loaded: reload them',
      );
    }
    if (path === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: [
          { id, object: 'model', created: Math.floor(startedAt / 1000), owned_by: 'vllm', root: opts.model, parent: null, max_model_len: 4096, permission: [] },
        ],
      });
    }
    track(res);
    if (path === '/v1/chat/completions') return chatCompletions(req, res);
    return embeddings(req, res);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HttpError) sendError(res, err.status, err.type, err.message);
      else sendError(res, 500, 'InternalServerError', err instanceof Error ? err.message : String(err));
    });
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      const port = (server.address() as AddressInfo).port;
      log(
        `serving model=${opts.model} revision=${opts.revision ?? '<none>'} served-model-name=${opts.servedModelName} ` +
          `id=${id} on ${opts.host}:${port}, start delay ${String(opts.startDelayMs)} ms`,
      );
      resolve({
        host: opts.host,
        port,
        inFlight: () => inFlight,
        ready: isReady,
        shutdown(drainTimeoutMs = opts.drainTimeoutMs): Promise<boolean> {
          draining = true;
          readyAt = Infinity;
          server.close();
          server.closeIdleConnections();
          const drained = new Promise<boolean>((done) => {
            if (inFlight === 0) done(true);
            else idleWaiters.push(() => done(true));
          });
          let timer: NodeJS.Timeout | undefined;
          const timeout = new Promise<boolean>((done) => {
            timer = setTimeout(() => done(false), drainTimeoutMs);
          });
          return Promise.race([drained, timeout]).then((ok) => {
            clearTimeout(timer);
            server.closeAllConnections();
            return ok;
          });
        },
      });
    });
  });
}
