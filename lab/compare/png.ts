// SVG -> PNG through @resvg/resvg-js (a Rust rasterizer shipped as a prebuilt N-API binary inside
// its npm package: no browser, no system library). The only module that loads it, so it can be
// replaced. Text needs a font: the system's fonts, DejaVu Sans preferred (Debian's default).
import { Resvg } from '@resvg/resvg-js';

/** Rasterizes an SVG document at `scale` (1: its own pixel size); throws when the SVG does not parse. */
export function renderPng(svg: string, scale = 1): Buffer {
  const resvg = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: scale },
    background: '#ffffff',
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
  });
  return resvg.render().asPng();
}

/** Width and height from a PNG's IHDR chunk; undefined when `buf` is not a PNG. */
export function pngSize(buf: Buffer): { width: number; height: number } | undefined {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (buf.length < 24 || !buf.subarray(0, 8).equals(sig) || buf.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}
