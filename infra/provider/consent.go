package provider

import (
	"context"
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// EnvAllowDestroy is the user's consent to destructive steps: the nodes
// (comma-separated, or * for every node) whose reset, etcd member removal,
// key deletion or forgetting-while-unreachable may go ahead in this run.
// It is read from the environment, not from stack config, so consent never
// outlives the command it was given to: `homelab up --allow-destroy NODE`
// sets it for that up alone, and with the Pulumi CLI it is
// HOMELAB_ALLOW_DESTROY=NODE pulumi up.
const EnvAllowDestroy = envvars.AllowDestroy

// RefusedMarker starts every refusal of a destructive step, so the
// homelab CLI can list them after the engine's run.
const RefusedMarker = "DESTRUCTIVE, refused:"

// consented reports whether the user allowed destructive steps on node in
// this run; consented(ctx, "*") whether they allowed them on every node.
func consented(ctx context.Context, node string) bool { return configOf(ctx).allowDestroy.has(node) }

// refused is the error of a destructive step without consent: what it
// would destroy and the exact way to allow it, for this node only.
func refused(node, step, loses string) error {
	return fmt.Errorf("%s %s on %s would %s. Nothing was changed for it. If that is what you want, allow it for this node alone: "+
		"homelab up --allow-destroy %s (or %s=%s pulumi up)", RefusedMarker, step, node, loses, node, EnvAllowDestroy, node)
}

// forgetUnreachable is a delete on a node that cannot be reached: the
// state would forget what stays on the node (kept names it), so it needs
// the user's consent for that node.
func forgetUnreachable(ctx context.Context, node, step, kept string, err error) error {
	if !consented(ctx, node) {
		return refused(node, step, fmt.Sprintf("forget it while the node cannot be reached (%v): the node would keep %s. Power it on so up can remove it, or wipe its disk", err, kept))
	}
	p.GetLogger(ctx).Warningf("%s unreachable: forgetting %s as allowed; the node keeps %s", node, step, kept)
	return nil
}
