import * as os from 'node:os';

export interface MachineInfo {
  cpuCount: number;
  cpuModel: string;
  loadAverage: number[];
  totalMemoryGiB: number;
  node: string;
  platform: string;
}

/** What the numbers were measured on: they mean little without it. */
export function describeMachine(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpuCount: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
    totalMemoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}
