import { describe, expect, it } from "vitest";
import { canonicalJson, credentialScope, requestHash } from "./idempotency.js";

describe("idempotency key scope and request hash", () => {
  it("scopes keys by a hash of the bearer value, never the value itself", () => {
    const a = credentialScope("Bearer secret-one");
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(a).not.toContain("secret-one");
    expect(credentialScope("bearer secret-one")).toBe(a);
    expect(credentialScope("Bearer secret-two")).not.toBe(a);
    // Callers without a credential share one scope, apart from every credential's.
    expect(credentialScope(undefined)).toBe(credentialScope("Basic xyz"));
    expect(credentialScope(undefined)).not.toBe(a);
  });

  it("hashes the request canonically: key order and delivery fields do not matter", () => {
    const body = { model: "m", messages: [{ role: "user", content: "hi" }] };
    const same = { messages: [{ content: "hi", role: "user" }], model: "m", stream: true };
    expect(requestHash(same, undefined)).toBe(requestHash(body, undefined));
    expect(requestHash({ ...body, stream_options: { include_usage: true } }, undefined)).toBe(
      requestHash(body, undefined),
    );
    expect(requestHash({ ...body, model: "other" }, undefined)).not.toBe(
      requestHash(body, undefined),
    );
    expect(requestHash(body, "session-1")).not.toBe(requestHash(body, undefined));
    expect(canonicalJson({ b: [1, { d: 2, c: null }], a: "x" })).toBe(
      '{"a":"x","b":[1,{"c":null,"d":2}]}',
    );
  });
});
