// ABI version of the core. Bump it on any change to an export's signature or
// to a documented memory layout; the bindings refuse a module whose version
// they were not written for.
export function abiVersion(): u32 {
  return 2;
}
