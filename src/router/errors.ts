// The router's error answers: OpenAI's `{ error: { message, type, code, … } }` shape on every route.

/**
 * Every error carries a `code`, as OpenAI's do: clients branch on error.code (openai-python's
 * `e.code`), and an answer without one (the 404 for an unknown model, the 502 of an unreachable
 * backend once had none) left them only the message to parse.
 */
export function errorBody(message: string, type: string, extra: { code: string } & Record<string, unknown>) {
  return { error: { message, type, ...extra } };
}

/** An error's message with its cause's, as the router reports a failed backend call. */
export function errText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
