/**
 * The "typing…" indicator's schedule, shared by the platforms that have one: nothing for a turn
 * answered within `delayMs` (both Telegram and Discord count every call against the bot's request
 * limits, and Telegram advises the action only for a noticeable wait), then at once and every
 * `intervalMs` (each platform shows it for a few seconds) until the returned function is called.
 */
export function typingSchedule(send: () => void, delayMs: number, intervalMs: number): () => void {
  let interval: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    send();
    interval = setInterval(send, intervalMs);
  }, delayMs);
  return () => {
    clearTimeout(first);
    clearInterval(interval);
  };
}
