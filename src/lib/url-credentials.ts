/**
 * Credentials written into URLs (`https://user:password@host/…`, `postgres://keel:pw@db/keel`)
 * masked wherever Keel shows text it did not write itself: `keel doctor`, `keel gateway status`,
 * `/api/status` and the logs. An endpoint's error message, or a setting printed back, would
 * otherwise carry the password to whoever reads them.
 */

/**
 * A URL's scheme and user information. The user information runs to the last `@` before the
 * host's end (`/ ? #` or whitespace): a password with an unencoded `@` is masked whole.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"'<>`]*)@/gi;

/** `text` with the password (or, without one, the whole user part) of every URL in it masked. */
export function maskUrlCredentials(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(URL_USERINFO, (_match, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(":");
    // A user name alone may itself be the secret (`https://<token>@host`).
    const masked = colon < 0 ? "***" : `${userinfo.slice(0, colon)}:***`;
    return `${scheme}${masked}@`;
  });
}
