/** Metadata key under which `@Locked` stores its compiled keys and options on the method. */
export const LOCKED_METADATA = 'MONGO_LOCK:LOCKED';

/** Nest's marker on `@Controller()` classes (`CONTROLLER_WATERMARK` in `@nestjs/common`). */
export const NEST_CONTROLLER_WATERMARK = '__controller__';
