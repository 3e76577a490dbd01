package doctor

import (
	"fmt"
	"time"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Every certificate kubeadm issued on a node, and the kubelet's, with the
// time it has left: kubeadm's leaves last a year and a homelab that runs
// quietly goes dark on the anniversary.

// expiryVerdict judges one certificate against the inventory's renewal
// window.
func expiryVerdict(e nodefacts.Expiry, now time.Time, renewBefore time.Duration) (Status, string) {
	left := e.NotAfter.Sub(now)
	until := e.NotAfter.UTC().Format("2006-01-02 15:04 MST")
	switch {
	case left <= 0:
		return Fail, fmt.Sprintf("%s expired %s ago (%s)", e.Subject, roundLeft(-left), until)
	case e.Path == nodefacts.KubeletConf:
		// The kubelet rotates the file it names, never what it embeds.
		return Warn, fmt.Sprintf("%s, %s left (%s), embedded in kubelet.conf, where nothing rotates it: the next homelab up points kubelet.conf at %s",
			e.Subject, roundLeft(left), until, nodefacts.KubeletClientCert)
	case left <= renewBefore:
		next := "the next homelab up renews it"
		if _, ok := nodefacts.RenewableOf(e.Path); !ok {
			next = "the kubelet rotates it"
		}
		return Warn, fmt.Sprintf("%s expires in %s (%s), inside cluster.certificates.renewBefore %s: %s", e.Subject, roundLeft(left), until, renewBefore, next)
	}
	return OK, fmt.Sprintf("%s, %s left (%s)", e.Subject, roundLeft(left), until)
}

// roundLeft says a duration in days once it is more than two.
func roundLeft(d time.Duration) string {
	if d > 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.Round(time.Second).String()
}

// checkExpiry adds a node's cert expiry rows.
func (d *doctor) checkExpiry(n inventory.Node, f *nodeFacts) {
	renew := d.t.Inventory.Cluster.Certificates.Renewal()
	for _, e := range f.expiry {
		st, detail := expiryVerdict(e, time.Now(), renew)
		d.r.add("cert expiry", n.Name+":"+e.Path, st, "%s", detail)
		if st != Fail {
			continue
		}
		if e.Path == nodefacts.KubeletConf {
			d.r.cause("%s's kubelet.conf embeds a client certificate that expired on %s: homelab up points kubelet.conf at %s if that one is valid; otherwise the node needs new kubelet credentials (kubeadm's troubleshooting: kubelet client certificate rotation fails)",
				n.Name, e.NotAfter.UTC().Format(time.RFC3339), nodefacts.KubeletClientCert)
			continue
		}
		if _, ok := nodefacts.RenewableOf(e.Path); !ok {
			d.r.cause("%s's %s expired on %s: the kubelet rotates it before it expires and cannot once it has; the node needs a new kubelet.conf (kubeadm's troubleshooting: kubelet client certificate rotation fails)",
				n.Name, e.Path, e.NotAfter.UTC().Format(time.RFC3339))
			continue
		}
		d.r.cause("%s's %s expired on %s: whatever authenticates with it fails TLS; homelab up renews it over SSH, with the inventory's SANs, and no API needed: one node at a time while the rest of the control plane serves, or, when the expiry left nothing serving (etcd without quorum, no apiserver able to serve), every control-plane node at once, then restarts them and waits for etcd's quorum and /readyz (homelab preview shows which)",
			n.Name, e.Path, e.NotAfter.UTC().Format(time.RFC3339))
	}
}
