/**
 * A backup's copy of config.yaml without its secrets (unless `--with-secrets`): every value under
 * a key that names a credential is dropped, comments and the rest kept. A value that only
 * references the environment (`${TELEGRAM_BOT_TOKEN}`) is no secret and stays.
 */
import { isMap, isPair, isScalar, parseDocument, visit } from "yaml";

const SECRET_KEY = /(token|key|password|secret|headers)$/i;
const ENV_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;

export function withoutSecrets(text: string): { text: string; removed: string[] } {
  const doc = parseDocument(text);
  const removed: string[] = [];
  visit(doc, {
    Pair(_key, pair, path) {
      if (!isPair(pair) || !isScalar(pair.key)) return;
      const name = String(pair.key.value);
      const where = [
        ...path.filter(isPair).map((p) => String((p.key as { value?: unknown })?.value)),
        name,
      ];
      const value = pair.value;
      if (isScalar(value) && typeof value.value === "string" && ENV_REFERENCE.test(value.value)) {
        return;
      }
      const inEnv = where.length >= 2 && where[where.length - 2] === "env";
      if (SECRET_KEY.test(name) || inEnv) {
        removed.push(where.join("."));
        return visit.REMOVE;
      }
      if (name === "url" && isScalar(value) && typeof value.value === "string") {
        // store.url: the database password is a secret, the rest is not.
        const stripped = value.value.replace(/^(postgres(?:ql)?:\/\/[^:/@]+):[^@]*@/, "$1@");
        if (stripped !== value.value) {
          value.value = stripped;
          removed.push(`${where.join(".")} (password)`);
        }
      }
      return undefined;
    },
  });
  if (isMap(doc.contents) && doc.contents.items.length === 0) return { text: "", removed };
  return { text: doc.toString(), removed };
}
