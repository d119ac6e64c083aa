/** Budget periods are calendar days and months in the gateway's time zone. */
import { describe, expect, it } from "vitest";
import { localTimeText, periodBounds } from "./periods.js";

const iso = (ms: number) => new Date(ms).toISOString();

describe("budget periods", () => {
  it("a day is local midnight to local midnight", () => {
    const at = Date.parse("2026-03-10T22:30:00Z");
    const utc = periodBounds(at, "day", "UTC");
    expect([iso(utc.start), iso(utc.end)]).toEqual([
      "2026-03-10T00:00:00.000Z",
      "2026-03-11T00:00:00.000Z",
    ]);
    // 22:30 UTC is 23:30 on the 10th in Berlin (UTC+1 in winter), 04:00 on the 11th in Kolkata.
    const berlin = periodBounds(at, "day", "Europe/Berlin");
    expect([iso(berlin.start), iso(berlin.end)]).toEqual([
      "2026-03-09T23:00:00.000Z",
      "2026-03-10T23:00:00.000Z",
    ]);
    const kolkata = periodBounds(at, "day", "Asia/Kolkata");
    expect(iso(kolkata.start)).toBe("2026-03-10T18:30:00.000Z");
    // Still the 10th in New York (UTC-4 after 8 March).
    const ny = periodBounds(at, "day", "America/New_York");
    expect([iso(ny.start), iso(ny.end)]).toEqual([
      "2026-03-10T04:00:00.000Z",
      "2026-03-11T04:00:00.000Z",
    ]);
  });

  it("a day across a daylight-saving change is 23 or 25 hours", () => {
    const spring = periodBounds(Date.parse("2026-03-29T12:00:00Z"), "day", "Europe/Berlin");
    expect(spring.end - spring.start).toBe(23 * 3600_000);
    expect(iso(spring.start)).toBe("2026-03-28T23:00:00.000Z");
    const autumn = periodBounds(Date.parse("2026-10-25T12:00:00Z"), "day", "Europe/Berlin");
    expect(autumn.end - autumn.start).toBe(25 * 3600_000);
    expect(iso(autumn.end)).toBe("2026-10-25T23:00:00.000Z");
  });

  it("a month runs from the 1st to the 1st, the year's end included", () => {
    const dec = periodBounds(Date.parse("2026-12-31T23:59:59Z"), "month", "UTC");
    expect([iso(dec.start), iso(dec.end)]).toEqual([
      "2026-12-01T00:00:00.000Z",
      "2027-01-01T00:00:00.000Z",
    ]);
    // The same instant is already January in Tokyo.
    const tokyo = periodBounds(Date.parse("2026-12-31T23:59:59Z"), "month", "Asia/Tokyo");
    expect([iso(tokyo.start), iso(tokyo.end)]).toEqual([
      "2026-12-31T15:00:00.000Z",
      "2027-01-31T15:00:00.000Z",
    ]);
    // The instant a period ends is the next one's start.
    const next = periodBounds(dec.end, "month", "UTC");
    expect(next.start).toBe(dec.end);
    expect(localTimeText(tokyo.end, "Asia/Tokyo")).toBe("2027-02-01 00:00");
  });
});
