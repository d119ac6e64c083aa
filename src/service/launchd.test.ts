import { describe, expect, it } from "vitest";
import { escapeXml, LAUNCHD_LABEL, renderLaunchdPlist } from "./launchd.js";
import type { ServiceSpec } from "./service-spec.js";

const spec: ServiceSpec = {
  nodePath: "/opt/homebrew/bin/node",
  keelEntry: "/opt/keel/bin/keel.js",
  home: "/Users/ada/.keel",
  env: { PATH: "/opt/homebrew/bin:/usr/bin" },
  drainTimeoutSeconds: 0,
  system: false,
};

type PlistValue = string | number | boolean | PlistValue[] | { [key: string]: PlistValue };

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function unescapeXml(text: string): string {
  return text.replace(/&(#\d+|#x[0-9a-f]+|[a-z]+);/gi, (whole, name: string) => {
    if (name.startsWith("#x")) return String.fromCodePoint(Number.parseInt(name.slice(2), 16));
    if (name.startsWith("#")) return String.fromCodePoint(Number(name.slice(1)));
    const value = ENTITIES[name];
    if (value === undefined) throw new Error(`unknown entity ${whole}`);
    return value;
  });
}

/**
 * A strict reader for the plist subset launchd uses: checks the prolog, that every tag is balanced
 * and that no stray markup or unescaped `&`/`<` appears in text, and returns the parsed value.
 */
function parsePlist(xml: string): PlistValue {
  const prolog =
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" ' +
    '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n';
  if (!xml.startsWith(prolog)) throw new Error("missing prolog");
  const tokens = [...xml.slice(prolog.length).matchAll(/<(\/?)([A-Za-z]+)([^>]*?)(\/?)>|([^<]+)/g)];
  let pos = 0;
  const next = () => {
    const token = tokens[pos++];
    if (!token) throw new Error("unexpected end");
    return token;
  };
  const skipSpace = () => {
    while (tokens[pos]?.[5] !== undefined && tokens[pos]?.[5]?.trim() === "") pos++;
  };
  const text = (tag: string): string => {
    let out = "";
    if (tokens[pos]?.[5] !== undefined) out = next()[5] as string;
    if (/[<>]|&(?!(#\d+|#x[0-9a-f]+|[a-z]+);)/i.test(out))
      throw new Error(`raw markup in <${tag}>`);
    const close = next();
    if (close[1] !== "/" || close[2] !== tag)
      throw new Error(`<${tag}> not closed, got ${close[0]}`);
    return unescapeXml(out);
  };
  const value = (): PlistValue => {
    skipSpace();
    const open = next();
    const [, slash, tag, , selfClose] = open;
    if (slash === "/" || tag === undefined) throw new Error(`unexpected ${open[0]}`);
    if (selfClose === "/") {
      if (tag === "true") return true;
      if (tag === "false") return false;
      throw new Error(`unexpected <${tag}/>`);
    }
    if (tag === "string") return text("string");
    if (tag === "integer") {
      const digits = text("integer");
      if (!/^-?\d+$/.test(digits)) throw new Error(`bad integer ${digits}`);
      return Number(digits);
    }
    if (tag === "array") {
      const items: PlistValue[] = [];
      for (skipSpace(); tokens[pos]?.[1] !== "/"; skipSpace()) items.push(value());
      if (next()[2] !== "array") throw new Error("<array> not closed");
      return items;
    }
    if (tag === "dict") {
      const dict: { [key: string]: PlistValue } = {};
      for (skipSpace(); tokens[pos]?.[1] !== "/"; skipSpace()) {
        const keyTag = next();
        if (keyTag[2] !== "key" || keyTag[1] === "/")
          throw new Error(`expected <key>, got ${keyTag[0]}`);
        const key = text("key");
        if (key in dict) throw new Error(`duplicate key ${key}`);
        dict[key] = value();
      }
      if (next()[2] !== "dict") throw new Error("<dict> not closed");
      return dict;
    }
    throw new Error(`unknown tag <${tag}>`);
  };
  skipSpace();
  const root = next();
  if (root[0] !== '<plist version="1.0">') throw new Error("missing <plist>");
  const result = value();
  skipSpace();
  if (next()[0] !== "</plist>") throw new Error("</plist> not where expected");
  skipSpace();
  if (pos !== tokens.length) throw new Error("content after </plist>");
  return result;
}

describe("renderLaunchdPlist", () => {
  it("renders the agent line by line", () => {
    expect(renderLaunchdPlist(spec).split("\n")).toEqual([
      '<?xml version="1.0" encoding="UTF-8"?>',
      '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
      '<plist version="1.0">',
      "<dict>",
      "  <key>Label</key>",
      "  <string>ai.keel.gateway</string>",
      "  <key>ProgramArguments</key>",
      "  <array>",
      "    <string>/opt/homebrew/bin/node</string>",
      "    <string>/opt/keel/bin/keel.js</string>",
      "    <string>gateway</string>",
      "    <string>run</string>",
      "    <string>--home</string>",
      "    <string>/Users/ada/.keel</string>",
      "  </array>",
      "  <key>EnvironmentVariables</key>",
      "  <dict>",
      "    <key>KEEL_HOME</key>",
      "    <string>/Users/ada/.keel</string>",
      "    <key>PATH</key>",
      "    <string>/opt/homebrew/bin:/usr/bin</string>",
      "  </dict>",
      "  <key>RunAtLoad</key>",
      "  <true/>",
      "  <key>KeepAlive</key>",
      "  <dict>",
      "    <key>SuccessfulExit</key>",
      "    <false/>",
      "  </dict>",
      "  <key>ThrottleInterval</key>",
      "  <integer>10</integer>",
      "  <key>ExitTimeOut</key>",
      "  <integer>60</integer>",
      "  <key>StandardOutPath</key>",
      "  <string>/Users/ada/.keel/logs/gateway.out.log</string>",
      "  <key>StandardErrorPath</key>",
      "  <string>/Users/ada/.keel/logs/gateway.err.log</string>",
      "</dict>",
      "</plist>",
      "",
    ]);
  });

  it("is a well-formed plist that parses back to the intended values", () => {
    expect(parsePlist(renderLaunchdPlist(spec))).toEqual({
      Label: LAUNCHD_LABEL,
      ProgramArguments: [
        "/opt/homebrew/bin/node",
        "/opt/keel/bin/keel.js",
        "gateway",
        "run",
        "--home",
        "/Users/ada/.keel",
      ],
      EnvironmentVariables: { KEEL_HOME: "/Users/ada/.keel", PATH: "/opt/homebrew/bin:/usr/bin" },
      RunAtLoad: true,
      KeepAlive: { SuccessfulExit: false },
      ThrottleInterval: 10,
      ExitTimeOut: 60,
      StandardOutPath: "/Users/ada/.keel/logs/gateway.out.log",
      StandardErrorPath: "/Users/ada/.keel/logs/gateway.err.log",
    });
  });

  it.each([
    [0, 60],
    [45, 75],
    [600, 630],
  ])("derives ExitTimeOut from a drain of %i s: %i s", (drain, expected) => {
    const plist = parsePlist(renderLaunchdPlist({ ...spec, drainTimeoutSeconds: drain })) as Record<
      string,
      PlistValue
    >;
    expect(plist.ExitTimeOut).toBe(expected);
  });

  it("escapes every value, including spaces, markup and quotes, and round-trips them", () => {
    const home = "/Users/Ada Lovelace/<keel> & \"co\" 'x'";
    const secret = "sk-a&b<c>d\r\ne";
    const plist = parsePlist(
      renderLaunchdPlist({
        ...spec,
        home,
        keelEntry: "/opt/my keel/bin/keel.js",
        env: { OPENAI_API_KEY: secret },
      }),
    ) as Record<string, PlistValue>;
    expect(plist.ProgramArguments).toEqual([
      "/opt/homebrew/bin/node",
      "/opt/my keel/bin/keel.js",
      "gateway",
      "run",
      "--home",
      home,
    ]);
    expect(plist.EnvironmentVariables).toEqual({ KEEL_HOME: home, OPENAI_API_KEY: secret });
    expect(plist.StandardOutPath).toBe(`${home}/logs/gateway.out.log`);
  });

  it("refuses values XML cannot carry and relative paths", () => {
    expect(() => renderLaunchdPlist({ ...spec, env: { KEEL_X: "a\u0000b" } })).toThrow(/U\+0000/);
    expect(() => renderLaunchdPlist({ ...spec, home: "keel" })).toThrow(/absolute/);
  });

  it("the test parser rejects unbalanced or unescaped input", () => {
    const good = renderLaunchdPlist(spec);
    expect(() => parsePlist(good.replace("</array>", ""))).toThrow();
    expect(() =>
      parsePlist(good.replace("<string>run</string>", "<string>a&b</string>")),
    ).toThrow();
    expect(() => parsePlist(good.replace("<string>run</string>", "<string>run</key>"))).toThrow();
  });
});

describe("escapeXml", () => {
  it("escapes the five XML specials and carriage returns", () => {
    expect(escapeXml(`&<>"'\r`)).toBe("&amp;&lt;&gt;&quot;&apos;&#13;");
    expect(escapeXml("tab\tnewline\n")).toBe("tab\tnewline\n");
  });
});
