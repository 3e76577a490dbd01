package provider

import "context"

// holdingEndpoint runs f holding the run's endpoint lock, which is taken by every step that changes which nodes can
// hold the endpoint's address (the vip layout's keepalived): the
// upgrade's control-plane steps, which hand the VIP over and take it back,
// and keepalived's starts, restarts and stops. Held one at a time, no
// restart can take the VIP's last holder away while the upgrade has
// stopped keepalived on another node (the seed's second incident: etcd
// kept quorum, the endpoint answered nothing).
//
// A lock in the provider process rather than an order in the graph: an up
// runs one provider process for all its resources, and ordering
// keepalived's Service after the upgrade would make every control-plane
// node's keepalived, and so the bootstrap, wait for every node's Host.
func holdingEndpoint(ctx context.Context, f func() error) error {
	l := configOf(ctx).endpoint
	l.Lock()
	defer l.Unlock()
	return f()
}
