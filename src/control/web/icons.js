/**
 * The page's few icons as inline SVG (stroked with the text colour), so they look the same on
 * every system: emoji and symbol glyphs depend on the fonts a machine happens to have.
 */

const SVG_NS = "http://www.w3.org/2000/svg";

/** Path data on a 24-unit grid. */
const PATHS = {
  paperclip:
    "M21 11.5l-8.5 8.5a5.5 5.5 0 0 1-7.8-7.8l8.5-8.5a3.7 3.7 0 0 1 5.2 5.2l-8.5 8.5a1.8 1.8 0 0 1-2.6-2.6L15 7",
  menu: "M4 6h16M4 12h16M4 18h16",
};

/** An `<svg>` element for `name` (decorative: hidden from screen readers). */
export function icon(name) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", `icon icon-${name}`);
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", PATHS[name]);
  svg.append(path);
  return svg;
}
