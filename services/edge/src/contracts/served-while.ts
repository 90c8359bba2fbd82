/**
 * Makes an SDK registration's `enabled` (which the SDK reads at each listing and dispatch) also
 * depend on the guard: `served()` false leaves it out of its listing. What the registration
 * itself sets (`enable()` / `disable()`) still holds.
 */
export function servedWhile(registered: { enabled: boolean }, served: () => boolean): void {
  let enabled = registered.enabled;
  Object.defineProperty(registered, "enabled", {
    configurable: true,
    get: () => enabled && served(),
    set: (v: boolean) => {
      enabled = v;
    },
  });
}
