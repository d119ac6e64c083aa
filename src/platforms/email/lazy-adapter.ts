/**
 * Email behind a dynamic import (platforms/kit/lazy-adapter.ts): imapflow, nodemailer and
 * mailparser load only when the gateway starts email.
 */
import { lazyAdapter } from "../kit/lazy-adapter.js";
import type { EmailAdapterOptions } from "./adapter.js";

export const LazyEmailAdapter = lazyAdapter<EmailAdapterOptions>({
  name: "email",
  label: "Email",
  load: async (options) => new (await import("./adapter.js")).EmailAdapter(options),
  calls: ["fetchFile"],
});
