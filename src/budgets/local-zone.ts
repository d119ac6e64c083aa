/** The gateway's time zone: the process's (TZ, else the machine's). */
export function localTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}
