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

/** Schemes where a user name alone is a common way to pass a token (`https://<token>@host`). */
const TOKEN_AS_USER = /^(https?|wss?):\/\/$/i;

/**
 * `text` with the password of every URL in it masked (`user:***@`); a web URL's user part with no
 * password is masked whole (`https://***@host`), another scheme's is a plain user name and kept
 * (`postgres://keel@db`).
 */
export function maskUrlCredentials(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(URL_USERINFO, (match, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(":");
    if (colon >= 0) return `${scheme}${userinfo.slice(0, colon)}:***@`;
    return TOKEN_AS_USER.test(scheme) ? `${scheme}***@` : match;
  });
}
