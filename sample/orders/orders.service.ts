import { ConflictException, Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Locked } from '../../lib';

export interface Order {
  id: string;
  status: 'open' | 'paid' | 'shipped';
  /** Fence of the lock the last change was made under, as a string (JSON has no bigint). */
  lastFence: string | null;
}

/** How long a payment takes, so that a second request finds the order locked. */
const PAYMENT_MS = Number(process.env.SAMPLE_PAYMENT_MS ?? 1500);

/** An in-memory order book standing in for a database. */
@Injectable()
export class OrdersService {
  private readonly orders = new Map<string, Order>();

  find(id: string): Order {
    const order = this.orders.get(id) ?? { id, status: 'open', lastFence: null };
    this.orders.set(id, order);
    return order;
  }

  /**
   * Called from the `@Locked('order:{params.id}')` handler: the same key in the same call
   * chain, so this re-enters the handler's lock instead of waiting for it.
   */
  @Locked('order:{args.0}')
  async charge(id: string, fence: bigint): Promise<Order> {
    const order = this.find(id);
    if (order.status !== 'open')
      throw new ConflictException(`Order ${id} is already ${order.status}`);
    await sleep(PAYMENT_MS);
    order.status = 'paid';
    order.lastFence = fence.toString();
    return order;
  }

  /** A provider method locked on its own (called by a handler that is not locked). */
  @Locked('order:{args.0}', { timeoutMs: 5_000 })
  async ship(id: string): Promise<Order> {
    const order = this.find(id);
    if (order.status !== 'paid') throw new ConflictException(`Order ${id} is not paid`);
    order.status = 'shipped';
    return order;
  }
}
