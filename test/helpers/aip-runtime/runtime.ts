/**
 * One AIP runtime double: the gateway's key and principal, the control plane, the callback
 * ingress and the dispatcher that share them. Hosts launched against it register the DIDs
 * the control plane and the ingress trust.
 */
import { startCallbackIngress, type CallbackIngress } from './callback-ingress.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { gatewayParty, type Party } from './deployment.js';
import { createDispatcher, type Dispatcher } from './dispatcher.js';

export interface AipRuntime {
  readonly gateway: Party;
  readonly control: ControlPlane;
  readonly ingress: CallbackIngress;
  readonly dispatcher: Dispatcher;
  /** The lease lifetime the control plane grants (the hosts get the same LEASE_TTL_MS). */
  readonly leaseTtlMs: number;
  /** Host DIDs the control plane accepts signatures from. */
  readonly hostDids: string[];
  close(): Promise<void>;
}

export async function startAipRuntime(options: { leaseTtlMs?: number } = {}): Promise<AipRuntime> {
  const leaseTtlMs = options.leaseTtlMs ?? 30_000;
  const hostDids: string[] = [];
  const gateway = gatewayParty();
  const control = await startControlPlane({ hostDids: () => hostDids, leaseTtlMs });
  const ingress = await startCallbackIngress(gateway);
  return {
    gateway,
    control,
    ingress,
    dispatcher: createDispatcher(gateway, ingress),
    leaseTtlMs,
    hostDids,
    close: async () => {
      await Promise.all([control.close(), ingress.close()]);
    },
  };
}
