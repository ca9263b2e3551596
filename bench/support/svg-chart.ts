export interface Distribution {
  name: string;
  samples: number[];
}

export interface CdfChartOptions {
  title: string;
  /** A reference drawn as a dashed vertical line (the ping round trip). */
  reference?: { label: string; valueMs: number };
}

const width = 760;
const height = 420;
const margin = { top: 48, right: 24, bottom: 56, left: 64 };
const colors = ['#1b7837', '#2166ac', '#b2182b', '#e08214', '#762a83', '#4d4d4d'];

/**
 * Cumulative distributions of latency on a log-scaled time axis: one line per variant, so
 * medians and tails of very different magnitudes read off one picture.
 */
export function renderCdfChart(distributions: Distribution[], options: CdfChartOptions): string {
  const all = distributions.flatMap((d) => d.samples).filter((x) => x > 0);
  const minMs = 10 ** Math.floor(Math.log10(Math.min(...all, options.reference?.valueMs ?? 1)));
  const maxMs = 10 ** Math.ceil(Math.log10(Math.max(...all)));
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const x = (ms: number) =>
    margin.left +
    ((Math.log10(Math.max(ms, minMs)) - Math.log10(minMs)) / Math.log10(maxMs / minMs)) * plotW;
  const y = (fraction: number) => margin.top + (1 - fraction) * plotH;

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="15">${escapeXml(options.title)}</text>`,
  ];
  for (let decade = minMs; decade <= maxMs; decade *= 10) {
    const gx = x(decade).toFixed(1);
    parts.push(
      `<line x1="${gx}" y1="${margin.top}" x2="${gx}" y2="${margin.top + plotH}" stroke="#ddd"/>`,
    );
    parts.push(
      `<text x="${gx}" y="${margin.top + plotH + 18}" text-anchor="middle">${formatMs(decade)}</text>`,
    );
  }
  for (const fraction of [0, 0.25, 0.5, 0.75, 0.99, 1]) {
    const gy = y(fraction).toFixed(1);
    parts.push(
      `<line x1="${margin.left}" y1="${gy}" x2="${margin.left + plotW}" y2="${gy}" stroke="#eee"/>`,
    );
    parts.push(
      `<text x="${margin.left - 8}" y="${gy}" text-anchor="end" dy="4">${fraction === 0.99 ? 'p99' : fraction}</text>`,
    );
  }
  parts.push(
    `<text x="${margin.left + plotW / 2}" y="${height - 14}" text-anchor="middle">hand-off latency (ms, log scale)</text>`,
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">fraction of hand-offs at or below</text>`,
  );
  if (options.reference) {
    const rx = x(options.reference.valueMs).toFixed(1);
    parts.push(
      `<line x1="${rx}" y1="${margin.top}" x2="${rx}" y2="${margin.top + plotH}" stroke="#555" stroke-dasharray="4 4"/>`,
      `<text x="${Number(rx) + 4}" y="${margin.top + 12}" fill="#555">${escapeXml(options.reference.label)}</text>`,
    );
  }
  distributions.forEach((distribution, index) => {
    const color = colors[index % colors.length];
    parts.push(cdfPath(distribution.samples, x, y, color));
    const ly = margin.top + plotH - 12 - (distributions.length - 1 - index) * 16;
    const lx = margin.left + plotW - 210;
    parts.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 18}" y2="${ly - 4}" stroke="${color}" stroke-width="2.5"/>`,
      `<text x="${lx + 24}" y="${ly}">${escapeXml(distribution.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

function cdfPath(
  samples: number[],
  x: (ms: number) => number,
  y: (fraction: number) => number,
  color: string,
): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const points: string[] = [`${x(sorted[0]).toFixed(1)},${y(0).toFixed(1)}`];
  sorted.forEach((ms, i) => {
    // A step: the fraction jumps at each sample.
    points.push(`${x(ms).toFixed(1)},${y(i / sorted.length).toFixed(1)}`);
    points.push(`${x(ms).toFixed(1)},${y((i + 1) / sorted.length).toFixed(1)}`);
  });
  return `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.join(' ')}"/>`;
}

function formatMs(ms: number): string {
  return ms >= 1 ? `${ms}` : ms.toPrecision(1);
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
