import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module.js';

export const platform = 'express';

export async function createApp(): Promise<INestApplication> {
  return NestFactory.create<NestExpressApplication>(AppModule, { logger: ['error', 'warn'] });
}
