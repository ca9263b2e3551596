// Imported first by the fault worker: shifts this process's `Date` before anything else loads.
import { installClockSkew } from '@nestjs-mongo-lock/process-harness';

installClockSkew(Number(process.env.FAULT_CLOCK_SKEW_MS ?? 0));
