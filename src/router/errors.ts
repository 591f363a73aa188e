// The router's error answers: OpenAI's `{ error: { message, type, … } }` shape on every route.

export function errorBody(message: string, type: string, extra: Record<string, unknown> = {}) {
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
