import { describe, expect, it } from "vitest";
import { maskUrlCredentials } from "./url-credentials.js";

describe("maskUrlCredentials", () => {
  it("masks the password of every URL in a text, and a user part that stands alone", () => {
    expect(maskUrlCredentials("model at http://keel:s3cret@127.0.0.1:9/v1 answers")).toBe(
      "model at http://keel:***@127.0.0.1:9/v1 answers",
    );
    expect(maskUrlCredentials("postgres://a:b@db/x and https://tok3n@github.com/r")).toBe(
      "postgres://a:***@db/x and https://***@github.com/r",
    );
    expect(maskUrlCredentials('{"url":"https://u:p@ss@host/a@b"}')).toBe(
      '{"url":"https://u:***@host/a@b"}',
    );
  });

  it("leaves URLs without credentials and other text alone", () => {
    for (const text of [
      "postgres://postgres@127.0.0.1:5432/test",
      "http://127.0.0.1:8642/v1",
      "mailto:someone@example.com",
      "https://host/path@version",
      "no url here",
    ]) {
      expect(maskUrlCredentials(text)).toBe(text);
    }
  });
});
