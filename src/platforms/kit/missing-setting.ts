/**
 * The settings a platform cannot start without. A missing one fails the platform, not retrying,
 * with a status that names it as the config and the environment do.
 */

/**
 * The first of `needed` that `options` lacks, as `needed` names it ("platforms.email.smtp
 * (EMAIL_SMTP_HOST, EMAIL_SMTP_PORT)"), or null when all are set. Checked in `needed`'s order.
 */
export function missingSetting<Options extends object>(
  options: Options,
  needed: { [Key in keyof Options]?: string },
): string | null {
  for (const [key, name] of Object.entries(needed) as [keyof Options, string][]) {
    if (!options[key]) return name;
  }
  return null;
}
