package provider

import (
	"context"
	"net"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/keepalived"
)

// keepalivedBackBound bounds starting keepalived again after a hand-over.
const keepalivedBackBound = time.Minute

// withVIPHandedOver runs f, which restarts the node's apiserver, with the
// VIP handed over (handOverVIP), then starts keepalived again whatever f
// did. The start ignores cancellation: a Ctrl-C during f must not leave
// the node out of VRRP until the next up, one failure away from an
// endpoint nobody holds. why says what f does, for the log.
func withVIPHandedOver(ctx context.Context, ex ssh.Executor, node, endpoint, nodeHost, why string, f func() error) error {
	handedOver, err := handOverVIP(ctx, ex, node, endpoint, nodeHost, why)
	if err != nil {
		return err
	}
	if handedOver {
		defer func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepalivedBackBound)
			defer cancel()
			if _, err := must(bctx, ex, node, "starting keepalived again", unitScript("start", keepalived.Unit)); err != nil {
				p.GetLogger(ctx).Warningf("%v: the node takes no part in holding the VIP until keepalived runs again (systemctl start keepalived, or the next up)", err)
			}
		}()
	}
	return f()
}

// handOverVIP stops keepalived on the node when it holds the endpoint's
// address (the vip layout), so another node takes the address over at
// once (keepalived's drop-in takes it off as it stops) instead of the
// endpoint answering nothing until the health check moves it, seconds
// after the node's apiserver stopped; it reports whether it did.
func handOverVIP(ctx context.Context, ex ssh.Executor, node, endpoint, nodeHost, why string) (bool, error) {
	vip, _, err := net.SplitHostPort(endpoint)
	if err != nil || net.ParseIP(vip) == nil || vip == nodeHost {
		return false, nil // a DNS name, or the node's own address (single-ip)
	}
	out, _, err := query(ctx, ex, scripts.Render("vip/holds", struct{ VIP string }{vip}))
	if err != nil || strings.TrimSpace(out) != "holds" {
		return false, err
	}
	if _, err := must(ctx, ex, node, "handing the VIP over (stopping keepalived)", unitScript("stop", keepalived.Unit)); err != nil {
		return false, err
	}
	p.GetLogger(ctx).Infof("%s: holds the VIP %s: keepalived stopped while %s, so another node serves the endpoint", node, vip, why)
	return true, nil
}
