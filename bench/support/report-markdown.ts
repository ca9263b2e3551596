import type { BenchResults } from './report';
import { variantLabels } from './report';
import type { ThroughputResult } from '../suites/throughput';
import { commandsPerSection } from './stats';
import { commandKinds } from '../suites/command-sizes';
import { shapeLabel } from '../suites/contention';
import { checkTargets, compareShapes, largestCommands, targets } from './targets';

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '—');
const verdict = (met: boolean) => (met ? 'met' : '**not met**');

function table(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * The report of one `npm run bench` (bench/results/latest.md), in BENCHMARKS.md's shape: the
 * maintainer copies from it; the prose around the numbers is fixed.
 */
export function renderMarkdown(r: BenchResults): string {
  const m = r.machine;
  const sections: string[] = [
    '# Benchmarks',
    '',
    `Produced by \`${r.command}\` on ${r.startedAt} in ${Math.round(r.durationMs / 1000)} s.`,
    '',
    `- Machine: ${m.cpuCount} × ${m.cpuModel}, ${m.totalMemoryGiB} GiB, load average at the start ${m.loadAverageAtStart.join(' / ')}, at the end ${m.loadAverage.join(' / ')}, ${m.platform}`,
    `- Node.js ${m.node}; every process runs compiled JS (\`.bench-build/\`, tsconfig.bench.json), not ts-node`,
    `- Server: ${r.server.description}${r.server.cpuCounted ? '; its CPU time is counted' : ''}`,
    `- Reference round trip (\`ping\`, from a worker process, ${r.ping.count} samples taken between the hand-off rounds): p50 ${ms(r.ping.p50)} ms, p99 ${ms(r.ping.p99)} ms; p50 ${ms(r.pingAtStart.p50)} ms before the variants and ${ms(r.pingAtEnd.p50)} ms after`,
    `- The same after an idle wait drawn as a hand-off's (20–120 ms; ${r.pingAfterIdle.count} samples, half from each of the two hand-off processes): p50 ${ms(r.pingAfterIdle.p50)} ms, p99 ${ms(r.pingAfterIdle.p99)} ms. Every hand-off starts on processes that sat idle that long, so this is the round trip it compares with; back-to-back pings keep the processes awake`,
    ...(r.eventFloor
      ? [
          `- The change-event floor: one small majority update in one hand-off process, from just before it is sent to its change event in the other, after the same idle wait (${r.eventFloor.count} samples): p50 ${ms(r.eventFloor.p50)} ms (${(r.eventFloor.p50 / r.ping.p50).toFixed(1)} back-to-back pings), p99 ${ms(r.eventFloor.p99)} ms. No hand-off that travels by a change stream can be faster on this machine and server`,
        ]
      : []),
    '',
    'Every variant runs in the same run, on the same server, in the same worker processes. The',
    `variants take turns: ${r.settings.rounds} hand-off rounds and ${r.settings.throughputSlices} throughput slices, each`,
    'running every variant once in an order rotated by one per round (A B C D, B C D A, ...), so',
    'load on the machine falls on all of them alike. Latencies are also given as multiples of the',
    'ping round trip so that they compare across machines. The numbers come from',
    '`bench/results/latest.json`.',
    '',
    '## Where we stand',
    '',
    table(
      ['measure', 'target', 'measured', ''],
      checkTargets(r).map((c) => [c.what, c.target, c.measured, verdict(c.met)]),
    ),
    '',
    '### How the targets were set',
    '',
    '- **Round trips**: the physical limit, one command per acquire and one per release, is the',
    '  target; we are at it.',
    '- **Hand-off p50 ≤ 5 pings, p99 ≤ 40 pings**: a hand-off is one write (the holder leaves',
    "  the key's line, and the next entry holds by its place) and the change event that tells",
    "  the waiter. 5 pings is the hand-off issue's target. Where the change-event floor (above)",
    '  is itself over 5 back-to-back pings, no hand-off by a change stream can meet the target',
    '  against that ping: the floor and the ping after an idle wait are then the references that',
    '  say how much the lock adds. The tail allows for garbage collection and the machine being',
    "  shared, but not for a waiter missing the event and sleeping on a timer (the stream's 1 s",
    "  `maxAwaitTimeMS`, or its entry's renewal a third of its lease in), which is what a p99",
    '  near 1 000 ms or more shows.',
    "- **Against the peers**: a change-stream wait must beat polling at 100 ms and mongodash's",
    '  backoff (first retry after 50 ms, doubling) at the median, and should match polling at',
    '  10 ms while sending far fewer commands per waiter.',
    '- **Contended throughput ≥ mongodash**: a hand-off costs one write and one change event,',
    '  and callers of one process take over their entry without a write, so ours should lead,',
    '  not trail.',
    '- **Shape matrix, command sizes, the lock document, the change-event floor** (the',
    "  issue's targets): at every shape, 1.5× mongodash's sections/s, at most 2.5 commands per",
    '  section, the busiest process at most 1.5× the least busy one, no failed wait, and 8 × 1',
    '  within 1.3× of 2 × 1 in commands per section; every command of a mutex at most 1 KiB, of',
    '  a shared lock or semaphore 2 KiB (each attempt sends one); at most 8 top-level fields in a',
    '  mutex document after a hand-off; a hand-off at most 1.2× the change-event floor at p50',
    '  and 1.5× at p99: what the lock adds to the event that carries it.',
    '- **Scale**: one change stream per process and at most one command per release per process',
    "  are the design (docs/engine-v2.md); a parked key's entry sends only its renewal. Heap per",
    "  parked waiter: the call's promises, a deadline timer, a queue entry, abort listeners, its",
    '  owner token; 6 KiB is the ceiling that catches a regression. It caught one: 7.0–7.5 KB in',
    '  every run from the compiled harness on, until owner tokens became flat strings and a wait',
    '  kept fewer async frames and closures.',
    '- **`@Locked` ≤ 6 pings**: one acquire and one release write, each about 2–3 pings, counted',
    '  in pings from the process the app runs in, taken between its requests (runs before',
    "  25 November 2026, 17:08 UTC, divided by a worker process's pings).",
    '',
    '## Round trips (commands on the wire, counted with `monitorCommands`)',
    '',
    table(
      [
        'variant',
        'acquire, new key',
        'acquire, free key',
        'release',
        'commands (free key / release)',
      ],
      r.variants.map((v) => [
        variantLabels[v.variant],
        v.roundTrips.acquireNewKey,
        v.roundTrips.acquireFreeKey,
        v.roundTrips.release,
        `${JSON.stringify(v.roundTrips.breakdown.acquire)} / ${JSON.stringify(v.roundTrips.breakdown.release)}`,
      ]),
    ),
    '',
    'The physical limit is one command to acquire and one to release.',
    '',
    '## Hand-off latency between processes',
    '',
    'A holder in one process releases; a waiter in another process, waiting for 20–120 ms',
    'beforehand, acquires. Latency is from just before the release is sent to the moment the',
    "waiter's acquire resolves, on a clock shared by the processes.",
    '',
    table(
      [
        'variant',
        'samples',
        'p50 ms',
        'p95 ms',
        'p99 ms',
        'max ms',
        'p50 / ping',
        'p99 / ping',
        'p50 / ping after idle',
        'p50 / change-event floor p50',
        'p99 / change-event floor p99',
        `stalls > ${r.settings.stallMs} ms`,
      ],
      r.variants.map((v) => [
        variantLabels[v.variant],
        v.handoff.count,
        ms(v.handoff.p50),
        ms(v.handoff.p95),
        ms(v.handoff.p99),
        ms(v.handoff.max),
        v.handoff.ratioP50ToPing,
        v.handoff.ratioP99ToPing,
        v.handoff.ratioP50ToPingAfterIdle,
        v.handoff.ratioP50ToEventFloor ?? '—',
        v.handoff.ratioP99ToEventFloor ?? '—',
        v.handoff.stalls,
      ]),
    ),
    '',
    '![Hand-off latency distributions](bench/results/handoff-latency.svg)',
    '',
    '## Contended throughput',
    '',
    `${r.settings.processes} processes × ${r.settings.workersPerProcess} workers loop on one key: acquire, a ${r.settings.criticalSectionMs} ms critical section, release, for ${r.settings.throughputMs / 1000} s per variant in ${r.settings.throughputSlices} interleaved slices, each after a warm-up of ${r.settings.warmupMs} ms that is not counted.`,
    'CPU per section is the user + system time of the worker processes (`process.cpuUsage()`)',
    `${r.server.cpuCounted ? 'plus that of the server process (/proc)' : '(the server is not ours, so not counted)'} over the sections counted.`,
    'Throughput alone rewards a lock that stays in one process while others back off: read it',
    'with the sections per process and the waits that gave up after 3 s.',
    '',
    table(
      [
        'variant',
        'critical sections / s',
        'sections',
        'sections per process',
        'failed waits (3 s)',
        'commands / section',
        'CPU µs / section (workers + server)',
      ],
      r.variants.map((v) => [
        variantLabels[v.variant],
        v.throughput.sectionsPerSecond,
        v.throughput.sections,
        v.throughput.sectionsByProcess.join(' / '),
        v.throughput.failures,
        commandsPerSection(v.throughput.commands, v.throughput.sections),
        cpuPerSection(v.throughput),
      ]),
    ),
    '',
    ...contentionNote(r),
    '## Shape matrix: P processes × W callers on one key',
    '',
    contentionSection(r.contention, r),
    '',
    '## Command sizes and the lock document',
    '',
    commandSizesSection(r.commandSizes),
    '',
    '## Scale of waiting (one process)',
    '',
    scaleSection(r.scale),
    '',
    '## `@Locked` HTTP overhead',
    '',
    httpSection(r),
    '',
  ];
  return sections.join('\n');
}

/** Said only while it holds: why the change-stream variant trails under contention. */
function contentionNote(r: BenchResults): string[] {
  const ours = r.variants.find((v) => v.variant === 'ours');
  const dash = r.variants.find((v) => v.variant === 'mongodash');
  if (!ours || !dash || ours.throughput.sectionsPerSecond >= dash.throughput.sectionsPerSecond) {
    return [];
  }
  return [
    "A release hands the lock to the next entry of the key's line: the holder's leave is the",
    "one write, and the next entry's process hears of it on its change stream; callers of one",
    'process queued behind its entry take it over without a write (`localHandOff`), so a',
    'section costs about the same number of commands whatever the number of processes. What is',
    'left is the serial chain of a hand-off between processes: the leave, its change event and',
    "the next holder's section (see docs/engine-v2.md).",
    '',
  ];
}

function cpuPerSection(t: ThroughputResult): string {
  const c = t.cpuPerSection;
  if (!Number.isFinite(c.total)) return '—';
  return c.server === null
    ? `${c.workers.toFixed(0)} (workers only)`
    : `${c.total.toFixed(0)} (${c.workers.toFixed(0)} + ${c.server.toFixed(0)})`;
}

function contentionSection(scan: BenchResults['contention'], r: BenchResults): string {
  if ('error' in scan) return `Not measured: ${scan.error}`;
  const rows = scan;
  if (rows.length === 0) return 'Not measured.';
  const shapes = compareShapes(rows);
  const mark = (value: string | number, met: boolean) => (met ? value : `**${value}**`);
  const flat = checkTargets(r).find((c) => c.what.startsWith('commands per section flat in P'));
  return [
    `P processes × W callers per process loop on one key: acquire, a ${r.settings.criticalSectionMs} ms critical section, release (fresh processes for each shape, nothing else connected), ${r.settings.contentionRounds} interleaved slices of ${r.settings.contentionSliceMs / 1000} s per variant, each after a warm-up of ${r.settings.warmupMs} ms that is not counted. With W = 1, a process's next call takes over the entry its last one released, for up to a run (\`localHandOff\`; with \`localHandOff: false\`, every section is a hand-off between processes); 4 × 4 is the contended throughput above in fresh processes. Ours against the targets (in bold where missed):`,
    '',
    table(
      [
        'P × W',
        'ours sections / s',
        'mongodash sections / s',
        `ours / mongodash (≥ ${targets.shapeVsMongodash}×)`,
        `commands / section (≤ ${targets.shapeCommandsPerSection})`,
        `busiest / least busy process (≤ ${targets.shapeShareMaxOverMin})`,
        'failed waits (0)',
      ],
      shapes.map((s) => [
        s.shape,
        s.ours.sectionsPerSecond,
        s.mongodash?.sectionsPerSecond ?? '—',
        s.ratio === undefined
          ? '—'
          : mark(`${s.ratio.toFixed(2)}×`, s.ratio >= targets.shapeVsMongodash),
        mark(
          s.ours.commandsPerSection,
          s.ours.commandsPerSection <= targets.shapeCommandsPerSection,
        ),
        mark(
          s.ours.shareMaxOverMin ?? 'one did none',
          s.ours.shareMaxOverMin !== null && s.ours.shareMaxOverMin <= targets.shapeShareMaxOverMin,
        ),
        mark(s.ours.failures, s.ours.failures === 0),
      ]),
    ),
    '',
    flat
      ? `Commands per section at 8 × 1 against 2 × 1 (within ${targets.commandsAt8x1Over2x1}×): ${flat.measured}, ${verdict(flat.met)}.`
      : `Commands per section at 8 × 1 against 2 × 1: not both measured.`,
    '',
    'Every variant:',
    '',
    table(
      [
        'P × W',
        'variant',
        'sections / s',
        'sections per process',
        'busiest / least busy',
        'failed waits',
        'commands / section',
        'CPU µs / section (workers + server)',
      ],
      rows.map((row) => [
        shapeLabel(row),
        variantLabels[row.variant],
        row.throughput.sectionsPerSecond,
        row.throughput.sectionsByProcess.join(' / '),
        row.throughput.shareMaxOverMin ?? 'one did none',
        row.throughput.failures,
        commandsPerSection(row.throughput.commands, row.throughput.sections),
        cpuPerSection(row.throughput),
      ]),
    ),
  ].join('\n');
}

function commandSizesSection(sizes: BenchResults['commandSizes']): string {
  if ('error' in sizes) return `Not measured: ${sizes.error}`;
  const largest = largestCommands(sizes);
  const cell = (lockType: string, kind: string) => {
    const row = sizes.rows.find((x) => x.lockType === lockType && x.kind === kind);
    return row?.bytes == null ? '—' : `${row.bytes} B (${row.command}, ${row.commands} seen)`;
  };
  const doc = sizes.documentAfterHandoff;
  return [
    'The largest command of each kind our library sent (BSON size of the command document, from',
    "the driver's `commandStarted` events), two `LockService`s in one process standing for two",
    'processes: B acquires a free key (new, then known), renews it (`extend`) and releases it;',
    'then, while A holds the key, B waits 300 ms and times out (its contended attempts, and',
    'its withdrawal from the line), and waits again while A renews and releases, so that the',
    "key is handed to B. A shared lock's B asks for `mode: 'shared'` against an exclusive A",
    "(A's commands, a mutex's, not counted there); a semaphore's (`permits: 3`) takes 1 permit",
    'against an A holding all 3. Change-stream traffic is left out.',
    '',
    table(
      ['kind', 'mutex', 'shared lock', 'semaphore'],
      [
        ...commandKinds.map((kind) => [
          kind,
          ...largest.map(({ lockType }) => cell(lockType, kind)),
        ]),
        [
          'largest, against the target',
          ...largest.map(({ largest: top, limit }) =>
            top ? `${top.bytes} B of ≤ ${limit} B: ${verdict(top.bytes! <= limit)}` : '—',
          ),
        ],
      ],
    ),
    '',
    `The mutex key's document after A handed it to B and B released: ${doc.fields.length} top-level fields (target ≤ ${targets.lockDocumentFields}: ${verdict(doc.fields.length <= targets.lockDocumentFields)}), ${doc.bytes} B: ${doc.fields.map((f) => `\`${f}\``).join(', ')}.`,
  ].join('\n');
}

function scaleSection(scale: BenchResults['scale']): string {
  if ('error' in scale) return `Not measured: ${scale.error}`;
  return [
    `${scale.waiters} waiters on ${scale.keys} keys in one \`LockService\`, the keys held by another instance (without a change stream of its own). An attempt is any \`findAndModify\`: each key's first waiter joins the line once and then only renews its entry, a third of its lease (the default 30 s) in; the other waiters of the key queue behind that entry in the process (\`localHandOff\`). The parked window is one renewal period, so it holds one renewal of every key's entry.`,
    '',
    table(
      ['measure', 'measured', 'ideal'],
      [
        ['attempts until every waiter is in line', scale.initialAttempts, '1 per key'],
        ['attempts per second while all are parked', scale.parkedAttemptsPerSecond, '—'],
        [
          `bytes per second and key while parked (${scale.parkedWindowMs} ms)`,
          `${scale.parkedBytesPerSecondPerKey} B`,
          `≤ ${targets.parkedBytesPerSecondPerKey} B`,
        ],
        [
          'joins sent again while parked (a reply later than operationTimeoutMs)',
          scale.parkedJoins,
          0,
        ],
        [
          'change streams opened / open at peak',
          `${scale.changeStreamsOpened} / ${scale.changeStreamsOpenAtPeak}`,
          '1 / 1',
        ],
        ['server cursors open at peak (serverStatus)', scale.serverCursorsOpenAtPeak ?? 'n/a', 1],
        [
          'attempts per release (by the waiting service)',
          scale.attemptsPerRelease.toFixed(2),
          '≤ 1',
        ],
        ['waits that failed before they were cancelled', scale.failedWaits, 0],
        ['heap per waiter', `${scale.heapBytesPerWaiter} B`, `≤ ${targets.heapBytesPerWaiter} B`],
        ['RSS per waiter', `${scale.rssBytesPerWaiter} B`, '—'],
        ['cancelling every remaining waiter', `${scale.cancelMs} ms`, '—'],
      ],
    ),
  ].join('\n');
}

function httpSection(r: BenchResults): string {
  if ('error' in r.httpOverhead) return `Not measured: ${r.httpOverhead.error}`;
  const h = r.httpOverhead;
  return [
    `The same Express handler with and without \`@Locked('bench-http:{params.id}')\`, ${h.requests} sequential keep-alive requests each, interleaved with as many \`ping\`s from the same process (the reference the added latency is counted in).`,
    '',
    table(
      ['endpoint', 'p50 ms', 'p90 ms', 'p99 ms'],
      [
        ['without `@Locked`', ms(h.plain.p50), ms(h.plain.p90), ms(h.plain.p99)],
        ['with `@Locked`', ms(h.locked.p50), ms(h.locked.p90), ms(h.locked.p99)],
        ['added', ms(h.addedP50Ms), '', ms(h.addedP99Ms)],
        ['`ping` (reference)', ms(h.ping.p50), ms(h.ping.p90), ms(h.ping.p99)],
      ],
    ),
  ].join('\n');
}
