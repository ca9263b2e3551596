/** `task`'s value, or undefined if it takes longer than `ms`. */
export async function withinMs<T>(task: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>(
    (resolve) => (timer = setTimeout(() => resolve(undefined), ms)),
  );
  try {
    return await Promise.race([task, late]);
  } finally {
    clearTimeout(timer);
  }
}
