import type { ModesResults } from '../suites/modes';
import type { PhaseResult, WaitSummary } from './modes-analysis';

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');

function commands(p: PhaseResult): string {
  const parts = Object.entries(p.stream.commandsPerSectionByName)
    .filter(([, n]) => n >= 0.01)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
  return `${p.stream.commandsPerSection} (${parts})`;
}

function streamRow(label: string, p: PhaseResult): string {
  const w = p.stream.acquireWait;
  return (
    `| ${label} | ${p.stream.sectionsPerSecond} | ${p.stream.sections} | ` +
    `${p.stream.sectionsByProcess.join(' / ')} | ${p.concurrency.maxHolders} | ` +
    `${Math.round(p.concurrency.sharedTimeShare * 100)} % | ` +
    `${ms(w.p50)} / ${ms(w.p95)} / ${ms(w.max)} | ${p.stream.failures} | ${commands(p)} |`
  );
}

const streamHeader = [
  '| run | sections / s | sections | per process | most holders at once | time with ≥ 2 holders | wait p50 / p95 / max ms | failed | commands / section |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];

function waitRow(label: string, w: WaitSummary): string {
  return (
    `| ${label} | ${w.count} | ${ms(w.p50)} | ${ms(w.p95)} | ${ms(w.p99)} | ${ms(w.max)} | ${w.over1s} | ` +
    `${w.longest.join(', ')} | ${w.overtakes.p50} / ${w.overtakes.max} (${w.overtakes.total} in all) | ` +
    `${w.grantsWhileWaiting} | ${w.endedAfterWindow} |`
  );
}

function quarters(label: string, w: WaitSummary): string {
  return (
    `${label} waits by quarter of the window (count, p50 / max ms): ` +
    w.byQuarter.map((q) => `${q.count}, ${ms(q.p50)} / ${ms(q.max)}`).join('; ') +
    `. Each wait split at the last release by the others before its grant: until then ` +
    `(holders in its way draining) p50 ${ms(w.drainMs.p50)}, p95 ${ms(w.drainMs.p95)}, ` +
    `max ${ms(w.drainMs.max)} ms; from then to its grant (hand-off) p50 ${ms(w.handoffMs.p50)}, ` +
    `p95 ${ms(w.handoffMs.p95)}, max ${ms(w.handoffMs.max)} ms.`
  );
}

const waitHeader = [
  '| requester | waits | p50 ms | p95 ms | p99 ms | max ms | over 1 s | longest ms | grants to others in its way after its join replied, per wait p50 / max | grants to others during its waits | waits that ended after the window |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];

export function renderModesMarkdown(r: ModesResults): string {
  const s = r.settings;
  const m = r.machine;
  const stream = `${s.processes} processes × ${s.workersPerProcess} workers`;
  const lines = [
    `# Lock modes under load (\`${r.command}\`)`,
    '',
    `Run ${r.startedAt}, ${Math.round(r.durationMs / 1000)} s. ${m.cpuCount} × ${m.cpuModel}, ` +
      `load average ${r.machine.loadAverageAtStart.join(' / ')} at the start, ` +
      `${m.loadAverage.join(' / ')} at the end; Node.js ${m.node}; ${r.server}. ` +
      `Ping p50 ${r.ping.start.p50} ms at the start, ${r.ping.end.p50} ms at the end.`,
    '',
    `Every worker process has one \`LockService\` (change streams on, default timings) on its own ` +
      `client. The stream: ${stream}, each worker looping acquire → ${s.holdMs} ms hold → release ` +
      `on one key. Times are taken in the processes on a shared clock; "holders at once" lays the ` +
      `sections (acquire resolved → release sent, which lie inside the leases on the server) side by side.`,
    '',
    `## Shared against exclusive on one key`,
    '',
    `${stream}, ${s.throughputSlices} interleaved slices of ${s.throughputSliceMs / 1000} s per mode.`,
    '',
    ...streamHeader,
    streamRow("`mode: 'shared'`", r.sharedVsExclusive.shared),
    streamRow('exclusive', r.sharedVsExclusive.exclusive),
    '',
    `Shared / exclusive: ${(
      r.sharedVsExclusive.shared.stream.sectionsPerSecond /
      Math.max(r.sharedVsExclusive.exclusive.stream.sectionsPerSecond, 0.1)
    ).toFixed(1)}×.`,
    '',
    `## A writer amid a steady stream of readers`,
    '',
    `Readers: ${stream} taking \`mode: 'shared'\` back to back (${s.readersAloneMs / 1000} s alone, ` +
      `then ${s.writerPhaseMs / 1000} s with the writer). Writer: one more process asking for the ` +
      `exclusive lock (timeout ${s.requesterTimeoutMs / 1000} s), holding ${s.holdMs} ms, asking again ` +
      `${s.requesterGapMinMs}–${s.requesterGapMaxMs} ms later. Its wait is from asking to holding.`,
    '',
    ...streamHeader,
    streamRow('readers alone', r.writer.readersAlone),
    streamRow('readers with the writer', r.writer.readersWithWriter),
    '',
    ...waitHeader,
    waitRow('writer (exclusive)', r.writer.writerWaits),
    '',
    quarters('Writer', r.writer.writerWaits),
    '',
    `Writer sections ${r.writer.writerSections}, failed ${r.writer.writerFailures}, ` +
      `${r.writer.writerCommandsPerSection} commands per section; reader sections ` +
      `overlapping a writer section: ${r.writer.exclusion.count}.`,
    '',
    `## A semaphore of ${s.permits} permits`,
    '',
    `Narrow holders: ${stream} taking weight 1 back to back (${s.narrowAloneMs / 1000} s alone, then ` +
      `${s.widePhaseMs / 1000} s with the wide request). Wide request: one more process asking for ` +
      `weight ${s.wideWeight} (timeout ${s.requesterTimeoutMs / 1000} s), holding ${s.holdMs} ms, ` +
      `asking again ${s.requesterGapMinMs}–${s.requesterGapMaxMs} ms later.`,
    '',
    ...streamHeader,
    streamRow('narrow (weight 1) alone', r.permits.narrowAlone),
    streamRow('narrow with the wide request', r.permits.narrowWithWide),
    '',
    `Permits held at once, at most: ${r.permits.narrowAlone.concurrency.maxWeight} alone, ` +
      `${r.permits.narrowWithWide.concurrency.maxWeight} with the wide request (limit ${s.permits}).`,
    '',
    ...waitHeader,
    waitRow(`wide request (weight ${s.wideWeight})`, r.permits.wideWaits),
    '',
    quarters('Wide request', r.permits.wideWaits),
    '',
    `Wide sections ${r.permits.wideSections}, failed ${r.permits.wideFailures}, ` +
      `${r.permits.wideCommandsPerSection} commands per section.`,
    '',
    '## Checks',
    '',
    `Live entries left in each key's line after its phase (holding / waiting): ` +
      Object.entries(r.leftovers)
        .map(([key, left]) => `${key} ${left.liveHolders} / ${left.liveWaiting}`)
        .join(', ') +
      '.',
    '',
    r.problems.length ? `**Problems:** ${r.problems.join('; ')}` : 'No problems found.',
    '',
  ];
  const errors = [
    ...r.sharedVsExclusive.shared.stream.errors,
    ...r.sharedVsExclusive.exclusive.stream.errors,
    ...r.writer.readersWithWriter.stream.errors,
    ...r.writer.writerErrors,
    ...r.permits.narrowWithWide.stream.errors,
    ...r.permits.wideErrors,
  ];
  if (errors.length) lines.push('Errors seen:', '', ...errors.map((e) => `- ${e}`), '');
  return lines.join('\n');
}
