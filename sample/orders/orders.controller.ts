import { Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { type LockHandle, LockHandleParam, Locked } from '../../lib';
import { type Order, OrdersService } from './orders.service';

@ApiTags('orders')
@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Get(':id')
  find(@Param('id') id: string): Order {
    return this.orders.find(id);
  }

  /** One payment per order at a time; a concurrent one gets 423 Locked with Retry-After. */
  @ApiOperation({ summary: 'Pay an order (one payment per order at a time)' })
  @ApiResponse({ status: 423, description: 'Another payment of this order is in progress' })
  @Post(':id/pay')
  @HttpCode(200)
  @Locked('order:{params.id}', { timeoutMs: 0 })
  pay(@Param('id') id: string, @LockHandleParam() lock: LockHandle): Promise<Order> {
    return this.orders.charge(id, lock.fence);
  }

  @Post(':id/ship')
  @HttpCode(200)
  ship(@Param('id') id: string): Promise<Order> {
    return this.orders.ship(id);
  }
}
